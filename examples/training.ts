/**
 * The training loop shared by the examples: AdamW with linear warmup + cosine decay, periodic
 * validation on fixed batches, and a progress bar (examples/progress.ts: a cli-progress bar on a
 * terminal, throttled plain lines when piped).
 */
import { no_grad } from "../src/autograd/grad_mode.ts";
import { tensor } from "../src/lazy/creation.ts";
import type { Tensor } from "../src/lazy/tensor.ts";
import type { CharTokenizer } from "../src/models/char_tokenizer.ts";
import type { GenerationConfig } from "../src/models/generate.ts";
import { clip_grad_norm_ } from "../src/nn/clip_grad.ts";
import { AdamW } from "../src/optim/adam.ts";
import { get_cosine_schedule_with_warmup } from "../src/optim/lr_scheduler.ts";
import { Generator } from "../src/tensor/rng.ts";
import type { Batch, Batcher } from "./data.ts";
import { Progress } from "./progress.ts";

/**
 * What the loop needs of a causal LM: nanoGPT's `call(x, { targets })` with already shifted
 * targets, the training flag, and (for sample_text) HF's generate. GPT2LMHeadModel and
 * LlamaForCausalLM (examples/llama_pipeline.ts) both are one.
 */
export interface CausalLM {
  call(x: Tensor, inputs: { targets: Tensor }): { loss: Tensor | null };
  generate(input_ids: Tensor, config: GenerationConfig): Tensor;
  readonly training: boolean;
  train(mode?: boolean): unknown;
  eval(): unknown;
}

/** Mean loss over fixed batches, in eval mode (no dropout) and without gradients. */
export function evaluate(model: CausalLM, batches: readonly Batch[]): number {
  const was = model.training;
  model.eval();
  try {
    return no_grad(() => batches.reduce((s, b) => s + model.call(b.x, { targets: b.y }).loss!.item(), 0) / batches.length);
  } finally {
    model.train(was);
  }
}

/** `n` characters sampled after `prompt` (temperature 0.8, top-k 10 unless given). */
export function sample_text(model: CausalLM, tok: CharTokenizer, prompt: string, n: number, opts: { seed?: number; temperature?: number; top_k?: number } = {}): string {
  const idx = tensor([tok.encode(prompt, { unknown: "skip" })], { dtype: "int64" });
  const out = model.generate(idx, { max_new_tokens: n, do_sample: true, temperature: opts.temperature ?? 0.8, top_k: opts.top_k ?? 10, generator: new Generator(opts.seed ?? 42) });
  return tok.decode((out.tolist() as number[][])[0]!.slice(idx.shape[1]!));
}

export interface TrainOptions {
  steps: number;
  /** Peak learning rate (per step), reached after `warmup` steps, then cosine decay to 0. */
  lr: number;
  warmup: number;
  weight_decay: number;
  /** Clip the global gradient norm to this (0: no clipping). */
  grad_clip: number;
  /** Validate every this many steps (and at the end). */
  eval_every: number;
  label: string;
  /** Print progress (default true). */
  verbose?: boolean;
}

export interface TrainResult {
  /** Training loss of every step. */
  train_losses: number[];
  /** [step, validation loss], including step 0 (before training) and the last step. */
  val_history: [number, number][];
  seconds: number;
}

/**
 * Train `params` of `model` on batches from `batcher` with AdamW (PyTorch's update, decoupled
 * weight decay), warmup + cosine schedule, optional gradient clipping.
 */
export function train(model: CausalLM, params: Tensor[], batcher: Batcher, val: readonly Batch[], o: TrainOptions): TrainResult {
  const opt = new AdamW(params, { lr: o.lr, weight_decay: o.weight_decay, betas: [0.9, 0.99] });
  const sched = get_cosine_schedule_with_warmup(opt, o.warmup, o.steps);
  const progress = new Progress(o.label, { enabled: o.verbose ?? true, unit: "tok" });
  const train_losses: number[] = [];
  const val_history: [number, number][] = [[0, evaluate(model, val)]];
  progress.log(`${o.label}: step 0/${o.steps}  val loss ${val_history[0]![1].toFixed(4)}`);
  model.train();
  const t0 = performance.now();
  progress.start(o.steps);
  let recent = 0;
  for (let step = 1; step <= o.steps; step++) {
    const { x, y } = batcher.next();
    const { loss } = model.call(x, { targets: y });
    opt.zero_grad();
    loss!.backward();
    if (o.grad_clip > 0) clip_grad_norm_(params, o.grad_clip);
    opt.step();
    sched.step();
    const l = loss!.item();
    train_losses.push(l);
    recent = step === 1 ? l : 0.9 * recent + 0.1 * l;
    const secs = (performance.now() - t0) / 1000;
    progress.tick(step, recent, x.numel());
    if (step % o.eval_every === 0 || step === o.steps) {
      const v = evaluate(model, val);
      val_history.push([step, v]);
      progress.log(`${o.label}: step ${step}/${o.steps}  train loss ${recent.toFixed(4)} (smoothed)  val loss ${v.toFixed(4)}  lr ${sched.get_last_lr()[0]!.toExponential(2)}  ${secs.toFixed(1)} s`);
    }
  }
  progress.stop();
  return { train_losses, val_history, seconds: (performance.now() - t0) / 1000 };
}
