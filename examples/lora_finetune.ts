/**
 * The main job: LoRA fine-tuning of a GPT on real text.
 *
 *   npm start            (= bun examples/lora_finetune.ts)
 *   bun examples/lora_finetune.ts --steps 300 --rank 8 --lr 5e-3 --batch-size 16 --block-size 32 --eager
 *   npm start -- --model llama   (the same pipeline on a Llama with GPT-2's BPE: examples/llama_pipeline.ts)
 *
 * 1. If there is no checkpoint, pretrain the char GPT-2 on Moby-Dick first (examples/pretrain_char_gpt.ts)
 *    and save it in the Hugging Face layout.
 * 2. Load it with GPT2LMHeadModel.from_pretrained, inject LoRA into attn.c_attn and attn.c_proj
 *    (PEFT names: r, lora_alpha, target_modules; base weights frozen).
 * 3. Fine-tune on a different real corpus (English female first names, or State of the Union
 *    addresses with --corpus sotu), printing train and validation loss, with a progress bar.
 * 4. Print samples before and after, save the adapter in PEFT's format, reload it into a fresh
 *    base model, and check merged vs unmerged logits.
 * 5. Draw the loss curves (train and validation) as SVG next to the adapter (and next to the
 *    pretrained checkpoint when step 1 ran): `<out>/loss_curve.svg`.
 *
 * Data-parallel (docs/DISTRIBUTED.md): `mpirun -np 2 bun examples/lora_finetune.ts --ddp` (as root:
 * `bun src/distributed/launch.ts -np 2 examples/lora_finetune.ts --ddp`). Every rank draws the
 * same batch and trains on its 1/N slice; DistributedDataParallel averages the gradients, so the
 * run equals the single-process one with the same --batch-size. Rank 0 alone logs and writes.
 * `--quantize nf4|q8_0|q4_0` makes it QLoRA: the base's linear layers are compressed first
 * (loom.compress; the tied embedding/head stays float32), the adapter trains through the fused
 * dequantize-matmul, and the saved adapter is also evaluated on the float32 base.
 */
import { Command } from "commander";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { init_webgpu } from "../src/backends/webgpu/index.ts";
import { set_default_backend } from "../src/lazy/device.ts";
import { LoraConfig } from "../src/lora/config.ts";
import { merge_adapter, unmerge_adapter } from "../src/lora/model.ts";
import { get_peft_model } from "../src/lora/peft_model.ts";
import { load_adapter, save_adapter } from "../src/lora/save_load.ts";
import { CharTokenizer } from "../src/models/char_tokenizer.ts";
import { GPT2LMHeadModel } from "../src/models/gpt2.ts";
import { manual_seed } from "../src/tensor/rng.ts";
import { set_execution_mode } from "../src/nn/execution.ts";
import { barrier, DistributedDataParallel, get_rank, get_world_size, init_process_group, is_initialized } from "../src/distributed/index.ts";
import { compress } from "../src/weights/compress.ts";
import { write_loss_curve } from "./plot.ts";
import { Batcher, corpusOf, eval_batches, maxAbsDiff, type Batch } from "./data.ts";
import { PRETRAIN_DEFAULTS, pretrain } from "./pretrain_char_gpt.ts";
import { evaluate, sample_text, train } from "./training.ts";

export interface FinetuneOptions {
  steps: number;
  rank: number;
  lora_alpha: number;
  lora_dropout: number;
  lr: number;
  batch_size: number;
  block_size: number;
  corpus: "names" | "sotu";
  checkpoint: string;
  out: string;
  pretrain_steps: number;
  eval_every: number;
  eval_batches: number;
  seed: number;
  /** Device to train on ("cpu", or "webgpu" after init_webgpu()). */
  device: string;
  /** Print progress, samples and checks (default true). */
  verbose: boolean;
  /** Data-parallel over the MPI ranks (started by mpirun): rank r trains on slice r of each batch. */
  ddp: boolean;
  /** QLoRA: compress the base's linear layers to this format before fine-tuning (null: float32 base). */
  quantize?: "nf4" | "q8_0" | "q4_0" | null;
}

export const FINETUNE_DEFAULTS: FinetuneOptions = {
  steps: 200, rank: 8, lora_alpha: 16, lora_dropout: 0, lr: 5e-3, batch_size: 16, block_size: 32, corpus: "names",
  checkpoint: "checkpoints/char-gpt", out: "checkpoints/char-gpt-lora-names", pretrain_steps: PRETRAIN_DEFAULTS.steps,
  eval_every: 50, eval_batches: 4, seed: 7, device: "cpu", verbose: true, ddp: false,
};

/** With --ddp: every rank draws the same batch (one seed) and keeps its slice of batch_size / world. */
class ShardedBatcher extends Batcher {
  constructor(ids: ArrayLike<number>, block: number, batch_size: number, seed: number, device: string, readonly rank: number, readonly world: number) {
    super(ids, block, batch_size, seed, device);
  }
  override next(): Batch {
    const b = super.next(), n = this.batch_size / this.world;
    return { ...b, x: b.x.narrow(0, this.rank * n, n), y: b.y.narrow(0, this.rank * n, n) };
  }
}

export interface FinetuneResult {
  train_losses: number[];
  val_history: [number, number][];
  /** Validation loss of the base model with the adapter disabled, i.e. before fine-tuning. */
  val_before: number;
  val_after: number;
  sample_before: string;
  sample_after: string;
  /** max |merged logits - unmerged logits| on a validation batch. */
  merge_max_abs_diff: number;
  /** max |logits of the reloaded adapter - logits of the trained one|. */
  reload_max_abs_diff: number;
  /** The pretraining run's losses, when step 1 pretrained the base model. */
  pretrain?: { train_losses: number[]; val_history: [number, number][] };
  seconds: number;
  /** With `quantize`: the saved adapter's validation loss on the float32 base, and the compressed layers' bytes. */
  float_base_val_after?: number;
  quantized_bytes?: { before: number; after: number };
}

/** Steps 1–4 above. */
export function finetune(opts: Partial<FinetuneOptions> = {}): FinetuneResult {
  const o = { ...FINETUNE_DEFAULTS, ...opts };
  // --ddp: the timeout covers rank 0 pretraining the base model while the others wait
  if (o.ddp && !is_initialized()) init_process_group({ backend: "mpi", timeout: 3_600_000 });
  const rank = o.ddp ? get_rank() : 0, world = o.ddp ? get_world_size() : 1;
  if (o.batch_size % world !== 0) throw new Error(`--batch-size ${o.batch_size} does not split over ${world} ranks`);
  const log = (s: string) => o.verbose && rank === 0 && console.log(s);
  const t0 = performance.now();
  let pretrain_curve: FinetuneResult["pretrain"];

  if (!existsSync(join(o.checkpoint, "config.json"))) {
    log(`no checkpoint in ${o.checkpoint}: pretraining one first (${o.pretrain_steps} steps)`);
    if (rank === 0) {
      const p = pretrain({ steps: o.pretrain_steps, out: o.checkpoint, device: o.device, verbose: o.verbose });
      pretrain_curve = { train_losses: p.train_losses, val_history: p.val_history };
    }
    if (o.ddp) barrier();
  }
  const model = GPT2LMHeadModel.from_pretrained(o.checkpoint).to(o.device);
  const quantize = (m: GPT2LMHeadModel) => (o.quantize ? compress(m, { method: o.quantize }) : null);
  const qrep = quantize(model);
  if (qrep) log(`QLoRA: ${qrep.layers.length} linear layers in ${o.quantize}: ${qrep.bytes_before.toLocaleString("en-US")} -> ${qrep.bytes_after.toLocaleString("en-US")} bytes (tied embedding/head stays float32)`);
  const tok = CharTokenizer.from_pretrained(o.checkpoint);
  const block = Math.min(o.block_size, model.config.n_positions);
  const corpus = corpusOf(o.corpus);
  const train_ids = tok.encode(corpus.train, { unknown: "skip" }), val_ids = tok.encode(corpus.val, { unknown: "skip" });
  log(`\nloaded ${o.checkpoint} (${model.num_parameters().toLocaleString("en-US")} parameters); fine-tuning on ${corpus.name}: ${train_ids.length.toLocaleString("en-US")} train / ${val_ids.length.toLocaleString("en-US")} val characters`);

  const prompt = "\n";
  const sample_before = rank === 0 ? sample_text(model, tok, prompt, 120, { seed: o.seed }) : "";
  log(`sample before: ${JSON.stringify(sample_before)}`);

  const config = new LoraConfig({
    r: o.rank, lora_alpha: o.lora_alpha, lora_dropout: o.lora_dropout, target_modules: ["attn.c_attn", "attn.c_proj"],
    fan_in_fan_out: true, bias: "none", task_type: "CAUSAL_LM", base_model_name_or_path: o.checkpoint,
  });
  // the fine-tuning's random draws (LoRA's initialization) do not depend on whether this process
  // pretrained the base model first: the same seed gives the same run either way
  manual_seed(o.seed);
  const peft = get_peft_model(model, config);
  if (o.verbose && rank === 0) peft.print_trainable_parameters();
  const trainable = model.parameters().filter((p) => p.requires_grad);
  const val = eval_batches(val_ids, block, o.batch_size, o.eval_batches, o.device);
  // DDP: rank 0's weights broadcast; gradients averaged over ranks by hooks during backward
  if (o.ddp) new DistributedDataParallel(model);
  const batcher = o.ddp ? new ShardedBatcher(train_ids, block, o.batch_size, o.seed, o.device, rank, world) : new Batcher(train_ids, block, o.batch_size, o.seed, o.device);
  const r = train(model, trainable, batcher, val, {
    steps: o.steps, lr: o.lr, warmup: Math.min(20, Math.floor(o.steps / 10)), weight_decay: 0, grad_clip: 1,
    eval_every: o.eval_every, label: "lora", verbose: o.verbose && rank === 0,
  });
  model.eval();
  if (rank !== 0) {
    // the other ranks hold the same weights; rank 0 alone samples, saves and checks
    const v = r.val_history;
    return { train_losses: r.train_losses, val_history: v, val_before: v[0]![1], val_after: v.at(-1)![1], sample_before, sample_after: "", merge_max_abs_diff: NaN, reload_max_abs_diff: NaN, seconds: (performance.now() - t0) / 1000 };
  }
  const val_before = r.val_history[0]![1], val_after = r.val_history.at(-1)![1];
  const sample_after = sample_text(model, tok, prompt, 120, { seed: o.seed });
  log(`sample after:  ${JSON.stringify(sample_after)}`);

  save_adapter(peft, o.out, { base_model_name_or_path: o.checkpoint });
  log(`saved the adapter (PEFT format) to ${o.out}/{adapter_model.safetensors, adapter_config.json}`);

  // the saved adapter, loaded into a fresh copy of the base model, reproduces the trained one
  const x = val[0]!.x;
  const trained = model.call(x).logits.dataSync();
  const fresh = GPT2LMHeadModel.from_pretrained(o.checkpoint).to(o.device);
  quantize(fresh);
  load_adapter(fresh, o.out);
  const reload_max_abs_diff = maxAbsDiff(fresh.call(x).logits.dataSync(), trained);
  log(`reloaded adapter vs trained model: max |Δlogits| = ${reload_max_abs_diff}`);

  // merged (W + s·B·A in the base weights) vs unmerged (base + LoRA branch, the fused op)
  merge_adapter(model);
  const merged = model.call(x).logits.dataSync();
  unmerge_adapter(model);
  const merge_max_abs_diff = maxAbsDiff(merged, trained);
  log(`merged vs unmerged logits: max |Δ| = ${merge_max_abs_diff.toExponential(3)}`);
  const check = evaluate(model, val);
  if (Math.abs(check - val_after) > 1e-4) throw new Error(`unmerge did not restore the model: val loss ${check} != ${val_after}`);

  let float_base_val_after: number | undefined;
  if (o.quantize) { // the QLoRA adapter on the float32 base it was quantized from
    const float = GPT2LMHeadModel.from_pretrained(o.checkpoint).to(o.device);
    load_adapter(float, o.out);
    float_base_val_after = evaluate(float, val);
    log(`adapter on the float32 base: val loss ${float_base_val_after.toFixed(4)}`);
  }
  const seconds = (performance.now() - t0) / 1000;
  log(`\nvalidation loss on ${corpus.name}: ${val_before.toFixed(4)} (base) -> ${val_after.toFixed(4)} (LoRA, ${o.steps} steps, r=${o.rank})`);
  return {
    train_losses: r.train_losses, val_history: r.val_history, val_before, val_after, sample_before, sample_after,
    merge_max_abs_diff, reload_max_abs_diff, pretrain: pretrain_curve, seconds,
    ...(qrep ? { float_base_val_after, quantized_bytes: { before: qrep.bytes_before, after: qrep.bytes_after } } : {}),
  };
}

/**
 * Step 5: the loss curves as SVG, `<out>/loss_curve.svg` for the fine-tuning run and
 * `<checkpoint>/loss_curve.svg` when this run pretrained the base model.
 * @returns the paths written
 */
export async function write_plots(r: FinetuneResult, opts: Partial<FinetuneOptions> = {}): Promise<string[]> {
  const o = { ...FINETUNE_DEFAULTS, ...opts };
  const paths = [join(o.out, "loss_curve.svg")];
  await write_loss_curve(paths[0]!, r.train_losses, r.val_history, { title: `LoRA fine-tuning (r=${o.rank}) on ${corpusOf(o.corpus).name}` });
  if (r.pretrain) {
    paths.push(join(o.checkpoint, "loss_curve.svg"));
    await write_loss_curve(paths[1]!, r.pretrain.train_losses, r.pretrain.val_history, { title: "char GPT-2 pretraining on Moby-Dick" });
  }
  if (o.verbose) console.log(`loss curves: ${paths.join(", ")}`);
  return paths;
}

if (import.meta.main) {
  const d = FINETUNE_DEFAULTS;
  const cmd = new Command()
    .name("lora_finetune")
    .description("LoRA fine-tuning of a char GPT-2 (pretrained on Moby-Dick) on another real corpus; PEFT-format adapter")
    .option("--steps <n>", "fine-tuning steps", String(d.steps))
    .option("--rank <n>", "LoRA rank r", String(d.rank))
    .option("--alpha <x>", "lora_alpha (scaling = alpha / r)", String(d.lora_alpha))
    .option("--lora-dropout <p>", "dropout on the LoRA branch", String(d.lora_dropout))
    .option("--lr <x>", "peak learning rate", String(d.lr))
    .option("--batch-size <n>", "sequences per step", String(d.batch_size))
    .option("--block-size <n>", "context length (characters)", String(d.block_size))
    .option("--corpus <name>", "names (female first names) or sotu (State of the Union)", d.corpus)
    .option("--checkpoint <dir>", "base model (pretrained first when missing)", d.checkpoint)
    .option("--out <dir>", "where to save the adapter", d.out)
    .option("--pretrain-steps <n>", "steps of the pretraining run when there is no checkpoint", String(d.pretrain_steps))
    .option("--eval-every <n>", "validate every n steps", String(d.eval_every))
    .option("--seed <n>", "random seed", String(d.seed))
    .option("--device <name>", "cpu (native backend if it builds, else js), js, native, or webgpu", "cpu")
    .option("--eager", "run op by op instead of lazily (to compare)")
    .option("--ddp", "data-parallel over mpirun's ranks (mpirun -np 2 bun examples/lora_finetune.ts --ddp)")
    .option("--quantize <fmt>", "QLoRA: nf4, q8_0 or q4_0 base (default float32)")
    .option("--model <arch>", "char-gpt2 (char GPT-2), or llama (a Llama with GPT-2's BPE tokenizer, examples/llama_pipeline.ts: its own defaults; the flags above given explicitly apply)", "char-gpt2")
    .parse();
  const a = cmd.opts();
  if (a.model !== "char-gpt2" && a.model !== "llama") throw new Error(`--model ${a.model}: expected char-gpt2 or llama`);
  if (a.model === "llama" && (a.ddp || a.quantize)) throw new Error("--model llama: --ddp and --quantize apply to the char GPT-2 pipeline only");
  let device = "cpu";
  if (a.device === "js" || a.device === "native") set_default_backend(a.device);
  else if (a.device === "webgpu") {
    const s = await init_webgpu();
    if (!s.available) throw new Error(`--device webgpu: ${s.reason}`);
    console.log(`webgpu device: ${s.device}`);
    device = "webgpu";
  } else if (a.device !== "cpu") throw new Error(`--device ${a.device}: expected cpu, js, native or webgpu`);
  if (a.eager) set_execution_mode("eager");
  if (a.model === "llama") {
    const { llama_options_from_cli, run_llama_pipeline } = await import("./llama_pipeline.ts");
    await run_llama_pipeline({ ...llama_options_from_cli(cmd), device });
    process.exit(0);
  }
  const opts: Partial<FinetuneOptions> = {
    steps: +a.steps, rank: +a.rank, lora_alpha: +a.alpha, lora_dropout: +a.loraDropout, lr: +a.lr, batch_size: +a.batchSize,
    block_size: +a.blockSize, corpus: a.corpus, checkpoint: a.checkpoint, out: a.out, pretrain_steps: +a.pretrainSteps,
    eval_every: +a.evalEvery, seed: +a.seed, device, ddp: !!a.ddp,
  };
  if (a.quantize) opts.quantize = a.quantize;
  const r = finetune(opts);
  if (!a.ddp || get_rank() === 0) {
    await write_plots(r, opts);
    console.log(`wall time ${r.seconds.toFixed(1)} s (${a.eager ? "eager" : "lazy"}, device ${a.device}${a.ddp ? `, ${get_world_size()} ranks` : ""})`);
  }
}
