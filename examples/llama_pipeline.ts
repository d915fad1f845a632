/**
 * The main job on a Llama-architecture model with a real BPE tokenizer (GPT-2's r50k, 50257 ids):
 *
 *   npm start -- --model llama              (examples/lora_finetune.ts hands over to this file)
 *   npm run example:llama -- --pretrain-steps 200 --steps 100 --corpus sotu --target-modules all-linear
 *
 * 1. If `<checkpoint>/config.json` is missing, pretrain a small LlamaForCausalLM (grouped-query
 *    attention, RoPE, SwiGLU, RMSNorm, tied embeddings) on Moby-Dick (first 90% train, last 10%
 *    validation) and save it in the Hugging Face layout: config.json, model.safetensors,
 *    tokenizer.json, tokenizer_config.json (and loss_curve.svg).
 * 2. Load it back as a user would: `AutoModelForCausalLM.from_pretrained(dir)` (dispatching on
 *    config.json's model_type "llama") and `AutoTokenizer.from_pretrained(dir)`.
 * 3. LoRA-fine-tune it with PEFT's names (`target_modules: ["q_proj", "v_proj"]` or "all-linear")
 *    on another corpus: English female first names or State of the Union addresses 2000-.
 * 4. Sample before and after with HF's `generate` options (do_sample, top_p, temperature), save
 *    the adapter in PEFT's format, reload it into a fresh base model (logits must match) and
 *    check merged vs unmerged logits.
 *
 * Why these sizes. With a 50257-token vocabulary the embedding is most of the model and the
 * output head most of the compute: at hidden_size 128 the table has 6.4 M parameters while the
 * four decoder layers have 0.8 M, and the head's [tokens, 128] x [128, 50257] product (forward
 * and backward) costs ~7x more than the four layers together. So: a narrow model (hidden 128, 4 layers,
 * 4 query heads sharing 2 KV heads, SwiGLU width 384 ≈ 8/3·hidden as Llama), a short context (64
 * tokens), and `tie_word_embeddings` (as SmolLM and Llama-3.2-1B): an untied head would double
 * the parameters and the AdamW state to 13 M for no gain at this scale, and tying lets the
 * head's gradient train the rows of the many tokens the input side sees rarely.
 * The tokenizer's ids of each corpus are cached on disk (data.ts encode_cached).
 */
import { Command } from "commander";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { tensor } from "../src/lazy/creation.ts";
import type { Tensor } from "../src/lazy/tensor.ts";
import { LoraConfig } from "../src/lora/config.ts";
import { merge_adapter, unmerge_adapter } from "../src/lora/model.ts";
import { get_peft_model } from "../src/lora/peft_model.ts";
import { load_adapter, save_adapter } from "../src/lora/save_load.ts";
import { AutoModelForCausalLM } from "../src/models/auto.ts";
import { LlamaForCausalLM } from "../src/models/llama.ts";
import { LlamaConfig } from "../src/models/llama_config.ts";
import { set_execution_mode } from "../src/nn/execution.ts";
import { Generator } from "../src/tensor/rng.ts";
import { AutoTokenizer } from "../src/tokenizers/auto.ts";
import { gpt2_tokenizer } from "../src/tokenizers/gpt2_bpe.ts";
import type { PreTrainedTokenizer } from "../src/tokenizers/pretrained_tokenizer.ts";
import { Batcher, corpusOf, encode_cached, eval_batches, maxAbsDiff, moby_dick_text, tail_split } from "./data.ts";
import { write_loss_curve } from "./plot.ts";
import { evaluate, train } from "./training.ts";

export interface LlamaPipelineOptions {
  // the model pretrained when the checkpoint is missing (LlamaConfig names)
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads: number;
  /** Context length in tokens (also max_position_embeddings). */
  block_size: number;
  batch_size: number;
  pretrain_steps: number;
  pretrain_lr: number;
  // LoRA fine-tuning (PEFT names)
  steps: number;
  lr: number;
  rank: number;
  lora_alpha: number;
  lora_dropout: number;
  target_modules: string[] | "all-linear";
  corpus: "names" | "sotu";
  checkpoint: string;
  out: string;
  eval_every: number;
  eval_batches: number;
  /** New tokens sampled before and after each run. */
  sample_tokens: number;
  seed: number;
  /** Device to train on ("cpu", or "webgpu" after init_webgpu()). */
  device: string;
  verbose: boolean;
}

export const LLAMA_DEFAULTS: LlamaPipelineOptions = {
  hidden_size: 128, intermediate_size: 384, num_hidden_layers: 4, num_attention_heads: 4, num_key_value_heads: 2,
  block_size: 64, batch_size: 16, pretrain_steps: 200, pretrain_lr: 3e-3,
  steps: 100, lr: 1e-2, rank: 8, lora_alpha: 16, lora_dropout: 0, target_modules: ["q_proj", "v_proj"], corpus: "names",
  checkpoint: "checkpoints/llama-bpe", out: "checkpoints/llama-bpe-lora-names", eval_every: 50, eval_batches: 4, sample_tokens: 40, seed: 7,
  device: "cpu", verbose: true,
};

/** A training run's curves (examples/training.ts TrainResult without the timing). */
export interface Curves {
  train_losses: number[];
  val_history: [number, number][];
}

export interface LlamaPipelineResult extends Curves {
  /** Validation loss of the base model before fine-tuning, and after. */
  val_before: number;
  val_after: number;
  sample_before: string;
  sample_after: string;
  /** max |logits of the adapter reloaded into a fresh base - logits of the trained model|. */
  reload_max_abs_diff: number;
  /** max |merged logits - unmerged logits|. */
  merge_max_abs_diff: number;
  /** The pretraining run, when step 1 ran. */
  pretrain?: Curves & { seconds: number; sample: string };
  num_parameters: number;
  seconds: number;
}

/** The prompt each corpus is sampled after. */
const PROMPTS: Record<string, string> = { names: "Mary\n", sotu: "My fellow Americans,", moby: "The whale" };

/**
 * Text sampled after `prompt` with HF's generate: nucleus sampling (top_p 0.9, top_k off) at
 * temperature 0.8, up to `n` new tokens within the model's context.
 */
export function sample_bpe(model: LlamaForCausalLM, tok: PreTrainedTokenizer, prompt: string, n: number, seed: number): string {
  const ids = tok.encode(prompt, { add_special_tokens: false });
  const max_new_tokens = Math.max(0, Math.min(n, model.max_position_embeddings - ids.length));
  const out = model.generate(tensor([ids], { dtype: "int64" }), {
    max_new_tokens, do_sample: true, top_p: 0.9, top_k: 0, temperature: 0.8, generator: new Generator(seed),
  });
  return tok.decode((out.tolist() as number[][])[0]!.slice(ids.length));
}

/**
 * Step 1: pretrain a Llama with GPT-2's tokenizer on Moby-Dick and save model + tokenizer in the
 * HF layout in `o.checkpoint`.
 */
export async function pretrain_llama(opts: Partial<LlamaPipelineOptions> = {}): Promise<NonNullable<LlamaPipelineResult["pretrain"]> & { model: LlamaForCausalLM }> {
  const o = { ...LLAMA_DEFAULTS, ...opts };
  const log = (s: string) => o.verbose && console.log(s);
  const t0 = performance.now();
  const tok = await gpt2_tokenizer();
  const split = tail_split("Moby-Dick", moby_dick_text(), 0.1);
  const train_ids = encode_cached(split.train, tok), val_ids = encode_cached(split.val, tok);
  const config = new LlamaConfig({
    vocab_size: tok.vocab_size, hidden_size: o.hidden_size, intermediate_size: o.intermediate_size, num_hidden_layers: o.num_hidden_layers,
    num_attention_heads: o.num_attention_heads, num_key_value_heads: o.num_key_value_heads, max_position_embeddings: o.block_size,
    rope_theta: 10000, rms_norm_eps: 1e-5, tie_word_embeddings: true, bos_token_id: tok.eos_token_id, eos_token_id: tok.eos_token_id,
    architectures: ["LlamaForCausalLM"],
  });
  const model = new LlamaForCausalLM(config, { generator: new Generator(o.seed) });
  if (o.device !== "cpu") model.to(o.device);
  log(`pretraining a Llama (${model.num_parameters().toLocaleString("en-US")} parameters: hidden ${o.hidden_size}, ${o.num_hidden_layers} layers, `
    + `${o.num_attention_heads} heads / ${o.num_key_value_heads} KV heads, SwiGLU ${o.intermediate_size}, tied embeddings, context ${o.block_size}) `
    + `with GPT-2's BPE (vocab ${tok.vocab_size}) on Moby-Dick: ${train_ids.length.toLocaleString("en-US")} train / ${val_ids.length.toLocaleString("en-US")} val tokens`);
  const val = eval_batches(val_ids, o.block_size, o.batch_size, o.eval_batches, o.device);
  const r = train(model, model.parameters(), new Batcher(train_ids, o.block_size, o.batch_size, o.seed, o.device), val, {
    steps: o.pretrain_steps, lr: o.pretrain_lr, warmup: Math.min(30, Math.floor(o.pretrain_steps / 10)), weight_decay: 0.01, grad_clip: 1,
    eval_every: o.eval_every, label: "pretrain", verbose: o.verbose,
  });
  model.eval();
  model.save_pretrained(o.checkpoint);
  const files = tok.save_pretrained(o.checkpoint);
  log(`saved ${o.checkpoint}/{config.json, model.safetensors, ${files.map((f) => f.split("/").pop()).join(", ")}}`);
  const sample = sample_bpe(model, tok, PROMPTS.moby!, o.sample_tokens, o.seed);
  log(`sample: ${JSON.stringify(PROMPTS.moby + sample)}`);
  return { train_losses: r.train_losses, val_history: r.val_history, seconds: (performance.now() - t0) / 1000, sample, model };
}

/** Steps 1–4 above. */
export async function llama_finetune(opts: Partial<LlamaPipelineOptions> = {}): Promise<LlamaPipelineResult> {
  const o = { ...LLAMA_DEFAULTS, ...opts };
  const log = (s: string) => o.verbose && console.log(s);
  const t0 = performance.now();
  let pretrain: LlamaPipelineResult["pretrain"];
  if (!existsSync(join(o.checkpoint, "config.json"))) {
    log(`no checkpoint in ${o.checkpoint}: pretraining one first (${o.pretrain_steps} steps)`);
    const { model: _, ...p } = await pretrain_llama(o);
    pretrain = p;
  }

  // step 2: the checkpoint as a user would load it
  const loaded = AutoModelForCausalLM.from_pretrained(o.checkpoint);
  if (!(loaded instanceof LlamaForCausalLM)) throw new Error(`${o.checkpoint} holds a ${loaded.constructor.name}, not a Llama-family model`);
  const model = loaded.to(o.device);
  const tok = AutoTokenizer.from_pretrained(o.checkpoint);
  const block = Math.min(o.block_size, model.config.max_position_embeddings);
  const corpus = corpusOf(o.corpus);
  const train_ids = encode_cached(corpus.train, tok), val_ids = encode_cached(corpus.val, tok);
  log(`\nloaded ${o.checkpoint} with AutoModelForCausalLM (${model.constructor.name}, ${model.num_parameters().toLocaleString("en-US")} parameters) and AutoTokenizer `
    + `(vocab ${tok.vocab_size}); fine-tuning on ${corpus.name}: ${train_ids.length.toLocaleString("en-US")} train / ${val_ids.length.toLocaleString("en-US")} val tokens`);
  const prompt = PROMPTS[o.corpus]!;
  const sample_before = sample_bpe(model, tok, prompt, o.sample_tokens, o.seed);
  log(`sample before: ${JSON.stringify(prompt + sample_before)}`);

  // step 3: LoRA with PEFT's names; the base weights (embedding included) stay frozen
  const config = new LoraConfig({
    r: o.rank, lora_alpha: o.lora_alpha, lora_dropout: o.lora_dropout, target_modules: o.target_modules, bias: "none",
    task_type: "CAUSAL_LM", base_model_name_or_path: o.checkpoint,
  });
  const peft = get_peft_model(model, config);
  if (o.verbose) peft.print_trainable_parameters();
  const trainable = model.parameters().filter((p) => p.requires_grad);
  const val = eval_batches(val_ids, block, o.batch_size, o.eval_batches, o.device);
  const r = train(model, trainable, new Batcher(train_ids, block, o.batch_size, o.seed, o.device), val, {
    steps: o.steps, lr: o.lr, warmup: Math.min(10, Math.floor(o.steps / 10)), weight_decay: 0, grad_clip: 1,
    eval_every: o.eval_every, label: "lora", verbose: o.verbose,
  });
  model.eval();
  const val_before = r.val_history[0]![1], val_after = r.val_history.at(-1)![1];
  const sample_after = sample_bpe(model, tok, prompt, o.sample_tokens, o.seed);
  log(`sample after:  ${JSON.stringify(prompt + sample_after)}`);

  // step 4: the adapter in PEFT's format, reloaded into a fresh base model
  save_adapter(peft, o.out, { base_model_name_or_path: o.checkpoint });
  log(`saved the adapter (PEFT format) to ${o.out}/{adapter_model.safetensors, adapter_config.json}`);
  const x: Tensor = val[0]!.x;
  const trained = model.call(x).logits.dataSync();
  const fresh = (AutoModelForCausalLM.from_pretrained(o.checkpoint) as LlamaForCausalLM).to(o.device);
  load_adapter(fresh, o.out);
  const reload_max_abs_diff = maxAbsDiff(fresh.call(x).logits.dataSync(), trained);
  log(`reloaded adapter vs trained model: max |Δlogits| = ${reload_max_abs_diff}`);
  merge_adapter(model);
  const merge_max_abs_diff = maxAbsDiff(model.call(x).logits.dataSync(), trained);
  unmerge_adapter(model);
  log(`merged vs unmerged logits: max |Δ| = ${merge_max_abs_diff.toExponential(3)}`);
  const check = evaluate(model, val);
  if (Math.abs(check - val_after) > 1e-4) throw new Error(`unmerge did not restore the model: val loss ${check} != ${val_after}`);

  const seconds = (performance.now() - t0) / 1000;
  if (pretrain) log(`\nvalidation loss on Moby-Dick (pretraining, ${o.pretrain_steps} steps): ${pretrain.val_history[0]![1].toFixed(4)} -> ${pretrain.val_history.at(-1)![1].toFixed(4)}`);
  log(`validation loss on ${corpus.name}: ${val_before.toFixed(4)} (base) -> ${val_after.toFixed(4)} (LoRA, ${o.steps} steps, r=${o.rank}, ${JSON.stringify(o.target_modules)})`);
  return {
    train_losses: r.train_losses, val_history: r.val_history, val_before, val_after, sample_before, sample_after,
    reload_max_abs_diff, merge_max_abs_diff, pretrain, num_parameters: model.num_parameters(), seconds,
  };
}

/** The loss curves as SVG: `<out>/loss_curve.svg`, and `<checkpoint>/loss_curve.svg` when step 1 ran. @returns the paths */
export async function write_llama_plots(r: LlamaPipelineResult, opts: Partial<LlamaPipelineOptions> = {}): Promise<string[]> {
  const o = { ...LLAMA_DEFAULTS, ...opts };
  const paths = [join(o.out, "loss_curve.svg")];
  await write_loss_curve(paths[0]!, r.train_losses, r.val_history, { title: `LoRA fine-tuning (r=${o.rank}) of a Llama on ${corpusOf(o.corpus).name}` });
  if (r.pretrain) {
    paths.push(join(o.checkpoint, "loss_curve.svg"));
    await write_loss_curve(paths[1]!, r.pretrain.train_losses, r.pretrain.val_history, { title: "Llama (GPT-2 BPE) pretraining on Moby-Dick" });
  }
  if (o.verbose) console.log(`loss curves: ${paths.join(", ")}`);
  return paths;
}

/** Runs the pipeline and prints the wall time (used by lora_finetune.ts --model llama and by this file's CLI). */
export async function run_llama_pipeline(opts: Partial<LlamaPipelineOptions>): Promise<LlamaPipelineResult> {
  const r = await llama_finetune(opts);
  await write_llama_plots(r, opts);
  console.log(`wall time ${r.seconds.toFixed(1)} s${r.pretrain ? ` (pretraining ${r.pretrain.seconds.toFixed(1)} s)` : ""}`);
  return r;
}

/** The command-line flags of this file as options (only those given, so the defaults above apply). */
export function llama_options_from_cli(cmd: Command): Partial<LlamaPipelineOptions> {
  const a = cmd.opts(), out: Record<string, unknown> = {};
  const given = (k: string) => a[k] !== undefined && cmd.getOptionValueSource(k) === "cli";
  const nums: [string, keyof LlamaPipelineOptions][] = [
    ["hiddenSize", "hidden_size"], ["intermediateSize", "intermediate_size"], ["numHiddenLayers", "num_hidden_layers"],
    ["numAttentionHeads", "num_attention_heads"], ["numKeyValueHeads", "num_key_value_heads"], ["blockSize", "block_size"],
    ["batchSize", "batch_size"], ["pretrainSteps", "pretrain_steps"], ["pretrainLr", "pretrain_lr"], ["steps", "steps"], ["lr", "lr"],
    ["rank", "rank"], ["alpha", "lora_alpha"], ["loraDropout", "lora_dropout"], ["evalEvery", "eval_every"], ["seed", "seed"],
  ];
  for (const [k, name] of nums) if (given(k)) out[name] = Number(a[k]);
  for (const [k, name] of [["corpus", "corpus"], ["checkpoint", "checkpoint"], ["out", "out"]] as const) if (given(k)) out[name] = a[k];
  if (given("targetModules")) out.target_modules = a.targetModules === "all-linear" ? "all-linear" : String(a.targetModules).split(",");
  if (given("corpus") && !given("out")) out.out = `checkpoints/llama-bpe-lora-${a.corpus}`;
  return out as Partial<LlamaPipelineOptions>;
}

if (import.meta.main) {
  const d = LLAMA_DEFAULTS;
  const cmd = new Command()
    .name("llama_pipeline")
    .description("Pretrain a small Llama with GPT-2's BPE on Moby-Dick (HF layout + tokenizer.json), then LoRA-fine-tune it; PEFT adapter")
    .option("--hidden-size <n>", "hidden_size", String(d.hidden_size))
    .option("--intermediate-size <n>", "SwiGLU width", String(d.intermediate_size))
    .option("--num-hidden-layers <n>", "decoder layers", String(d.num_hidden_layers))
    .option("--num-attention-heads <n>", "query heads", String(d.num_attention_heads))
    .option("--num-key-value-heads <n>", "KV heads (grouped-query attention)", String(d.num_key_value_heads))
    .option("--block-size <n>", "context length (tokens)", String(d.block_size))
    .option("--batch-size <n>", "sequences per step", String(d.batch_size))
    .option("--pretrain-steps <n>", "pretraining steps when there is no checkpoint", String(d.pretrain_steps))
    .option("--pretrain-lr <x>", "pretraining peak learning rate", String(d.pretrain_lr))
    .option("--steps <n>", "fine-tuning steps", String(d.steps))
    .option("--lr <x>", "fine-tuning peak learning rate", String(d.lr))
    .option("--rank <n>", "LoRA rank r", String(d.rank))
    .option("--alpha <x>", "lora_alpha (scaling = alpha / r)", String(d.lora_alpha))
    .option("--lora-dropout <p>", "dropout on the LoRA branch", String(d.lora_dropout))
    .option("--target-modules <list>", "PEFT target_modules: comma-separated names or all-linear", (d.target_modules as string[]).join(","))
    .option("--corpus <name>", "names (female first names) or sotu (State of the Union 2000-)", d.corpus)
    .option("--checkpoint <dir>", "base model (pretrained first when missing)", d.checkpoint)
    .option("--out <dir>", "where to save the adapter", d.out)
    .option("--eval-every <n>", "validate every n steps", String(d.eval_every))
    .option("--seed <n>", "random seed", String(d.seed))
    .option("--eager", "run op by op instead of lazily (to compare)")
    .parse();
  if (cmd.opts().eager) set_execution_mode("eager");
  await run_llama_pipeline(llama_options_from_cli(cmd));
}
