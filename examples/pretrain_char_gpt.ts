/**
 * Pretrain a small character-level GPT-2 on Moby-Dick and save it in the Hugging Face GPT-2
 * layout (config.json + model.safetensors) with its character vocabulary (vocab.json), and its
 * loss curves as loss_curve.svg beside them.
 *
 *   bun examples/pretrain_char_gpt.ts [--steps 300] [--out checkpoints/char-gpt] [--eager]
 *
 * The checkpoint loads with `GPT2LMHeadModel.from_pretrained(dir)` here, and with transformers'
 * `GPT2LMHeadModel.from_pretrained(dir)` in Python.
 */
import { Command } from "commander";
import { GPT2Config } from "../src/models/gpt2_config.ts";
import { GPT2LMHeadModel } from "../src/models/gpt2.ts";
import { CharTokenizer } from "../src/models/char_tokenizer.ts";
import { set_execution_mode } from "../src/nn/execution.ts";
import { Generator } from "../src/tensor/rng.ts";
import { Batcher, eval_batches, moby_dick_text, tail_split } from "./data.ts";
import { write_loss_curve } from "./plot.ts";
import { sample_text, train, type TrainResult } from "./training.ts";

export interface PretrainOptions {
  steps: number;
  batch_size: number;
  /** Context length in characters (also the model's n_positions). */
  block_size: number;
  lr: number;
  n_embd: number;
  n_layer: number;
  n_head: number;
  eval_every: number;
  eval_batches: number;
  seed: number;
  /** Where to save the checkpoint; null: do not save. */
  out: string | null;
  /** Device to train on ("cpu", or "webgpu" after init_webgpu()). */
  device: string;
  verbose: boolean;
}

export const PRETRAIN_DEFAULTS: PretrainOptions = {
  steps: 300, batch_size: 16, block_size: 32, lr: 3e-3, n_embd: 64, n_layer: 2, n_head: 4,
  eval_every: 100, eval_batches: 4, seed: 1337, out: "checkpoints/char-gpt", device: "cpu", verbose: true,
};

export interface PretrainResult extends TrainResult {
  model: GPT2LMHeadModel;
  tokenizer: CharTokenizer;
}

/** Train the char GPT on Moby-Dick (first 90% train, last 10% validation) and save it. */
export function pretrain(opts: Partial<PretrainOptions> = {}): PretrainResult {
  const o = { ...PRETRAIN_DEFAULTS, ...opts };
  const log = (s: string) => o.verbose && console.log(s);
  const text = moby_dick_text();
  const tokenizer = CharTokenizer.from_text(text);
  const split = tail_split("Moby-Dick", text, 0.1);
  const train_ids = tokenizer.encode(split.train), val_ids = tokenizer.encode(split.val);
  const config = GPT2Config.char_small(tokenizer.vocab_size, {
    n_positions: o.block_size, n_embd: o.n_embd, n_layer: o.n_layer, n_head: o.n_head,
  });
  const model = new GPT2LMHeadModel(config, { generator: new Generator(o.seed) });
  if (o.device !== "cpu") model.to(o.device);
  log(`pretraining a char GPT-2 (${model.num_parameters().toLocaleString("en-US")} parameters: n_embd ${o.n_embd}, n_layer ${o.n_layer}, n_head ${o.n_head}, context ${o.block_size}) on Moby-Dick: ${train_ids.length.toLocaleString("en-US")} train / ${val_ids.length.toLocaleString("en-US")} val characters, vocab ${tokenizer.vocab_size}`);
  const batcher = new Batcher(train_ids, o.block_size, o.batch_size, o.seed, o.device);
  const result = train(model, model.parameters(), batcher, eval_batches(val_ids, o.block_size, o.batch_size, o.eval_batches, o.device), {
    steps: o.steps, lr: o.lr, warmup: Math.min(30, Math.floor(o.steps / 10)), weight_decay: 0.01, grad_clip: 1,
    eval_every: o.eval_every, label: "pretrain", verbose: o.verbose,
  });
  model.eval();
  if (o.out) {
    model.save_pretrained(o.out);
    tokenizer.save_pretrained(o.out);
    log(`saved ${o.out}/{config.json, model.safetensors, vocab.json}`);
  }
  return { ...result, model, tokenizer };
}

if (import.meta.main) {
  const d = PRETRAIN_DEFAULTS;
  const cmd = new Command()
    .name("pretrain_char_gpt")
    .description("Pretrain a character-level GPT-2 on Moby-Dick; save it in the Hugging Face layout")
    .option("--steps <n>", "training steps", String(d.steps))
    .option("--batch-size <n>", "sequences per step", String(d.batch_size))
    .option("--block-size <n>", "context length (characters)", String(d.block_size))
    .option("--lr <x>", "peak learning rate", String(d.lr))
    .option("--n-embd <n>", "model width", String(d.n_embd))
    .option("--n-layer <n>", "transformer blocks", String(d.n_layer))
    .option("--n-head <n>", "attention heads", String(d.n_head))
    .option("--eval-every <n>", "validate every n steps", String(d.eval_every))
    .option("--seed <n>", "random seed", String(d.seed))
    .option("--out <dir>", "checkpoint directory", d.out!)
    .option("--eager", "run op by op instead of lazily (to compare)")
    .parse();
  const a = cmd.opts();
  if (a.eager) set_execution_mode("eager");
  const t0 = performance.now();
  const r = pretrain({
    steps: +a.steps, batch_size: +a.batchSize, block_size: +a.blockSize, lr: +a.lr, n_embd: +a.nEmbd, n_layer: +a.nLayer,
    n_head: +a.nHead, eval_every: +a.evalEvery, seed: +a.seed, out: a.out,
  });
  if (a.out) await write_loss_curve(`${a.out}/loss_curve.svg`, r.train_losses, r.val_history, { title: "char GPT-2 pretraining on Moby-Dick" });
  console.log(`sample: ${JSON.stringify(sample_text(r.model, r.tokenizer, "The whale", 120))}`);
  console.log(`val loss ${r.val_history[0]![1].toFixed(4)} -> ${r.val_history.at(-1)![1].toFixed(4)}; wall time ${((performance.now() - t0) / 1000).toFixed(1)} s (${a.eager ? "eager" : "lazy"})`);
}
