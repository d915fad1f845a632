/**
 * Autoregressive generation for GPT2LMHeadModel (HF `generate` with greedy or multinomial
 * sampling, nanoGPT's `generate` options). With the KV cache (default when the whole sequence
 * fits in n_positions): one prefill call over the prompt, then one call per new token feeding
 * only that token ([B, 1]) and attending over the StaticCache. Without it: the whole context is
 * recomputed for every token, cropped to the last n_positions tokens (nanoGPT).
 * Source: https://github.com/huggingface/transformers/blob/main/src/transformers/generation/utils.py
 * (`_sample`: prefill, then `input_ids[:, -1:]` with `cache_position + 1`); nanoGPT model.py generate.
 */
import { no_grad } from "../autograd/grad_mode.ts";
import { tensor } from "../lazy/creation.ts";
import { carry_dynamic } from "../lazy/dynamic_shapes.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { LoomIndexError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { default_generator, type Generator } from "../tensor/rng.ts";
import type { GPT2LMHeadModel } from "./gpt2.ts";
import type { StaticCache } from "./kv_cache.ts";

export interface GenerateOptions {
  /** Divide logits by this before sampling (> 0, default 1); 0 picks the argmax (greedy). */
  temperature?: number;
  /** Sample only among the k most likely tokens (default: all). */
  top_k?: number | null;
  /** Source of the sampling draws (default generator when omitted). */
  generator?: Generator;
  /**
   * Decode with a StaticCache (prefill + one [B, 1] call per token). Default: true when the
   * prompt and the new tokens fit in n_positions, false otherwise (the context is then cropped
   * to its last n_positions tokens and recomputed per token). true with a sequence longer than
   * n_positions (or than a given cache) raises LoomIndexError before any call.
   */
  use_cache?: boolean;
  /** The cache to decode into (reset first); default a new one of T_max = n_positions. */
  past_key_values?: StaticCache | null;
  /** Called after every forward with the new token ids of each row (timing, streaming). */
  on_token?: (step: number, tokens: number[]) => void;
}

/** One token from a row of logits under temperature/top-k, by inverse-CDF on one uniform draw. */
export function sample_logits(row: ArrayLike<number>, temperature: number, top_k: number | null, u: () => number): number {
  const V = row.length;
  let best = 0;
  for (let j = 1; j < V; j++) if (row[j]! > row[best]!) best = j;
  if (temperature === 0) return best;
  let cutoff = -Infinity;
  if (top_k !== null && top_k < V) {
    const sorted = Array.from(row).sort((a, b) => b - a);
    cutoff = sorted[top_k - 1]!; // keep logits >= the k-th largest (ties kept, as torch.topk + mask)
  }
  const p = new Float64Array(V);
  let sum = 0;
  for (let j = 0; j < V; j++) {
    if (row[j]! < cutoff) continue;
    p[j] = Math.exp((row[j]! - row[best]!) / temperature); // shifted by the max: no overflow
    sum += p[j]!;
  }
  let r = u() * sum;
  for (let j = 0; j < V; j++) {
    if (p[j]! === 0) continue;
    r -= p[j]!;
    if (r < 0) return j;
  }
  return best;
}

/**
 * GPT2LMHeadModel.generate: see there. Runs under no_grad in eval() mode, restoring the
 * training flag afterwards.
 * @param idx - int64 [B, T] prompt ids (T >= 1)
 * @returns int64 [B, T + max_new_tokens] on the cpu
 * @throws LoomValueError for a bad temperature, top_k or max_new_tokens; LoomShapeError for a
 *   non-2-D prompt; LoomIndexError when use_cache is true and T + max_new_tokens - 1 positions do
 *   not fit in the cache (checked before the first call)
 */
export function generate_tokens(model: GPT2LMHeadModel, idx: Tensor, max_new_tokens: number, opts: GenerateOptions): Tensor {
  const { temperature = 1, top_k = null, generator = default_generator, on_token } = opts;
  if (!(temperature >= 0) || !Number.isFinite(temperature)) throw new LoomValueError(`[generate] temperature must be a finite number >= 0, got ${temperature}`);
  if (top_k !== null && (!Number.isInteger(top_k) || top_k < 1)) throw new LoomValueError(`[generate] top_k must be a positive integer, got ${top_k}`);
  if (!Number.isInteger(max_new_tokens) || max_new_tokens < 0) throw new LoomValueError(`[generate] max_new_tokens must be an integer >= 0, got ${max_new_tokens}`);
  if (idx.ndim !== 2 || idx.shape[1] === 0) throw new LoomShapeError(`[generate] idx must be [B, T] with T >= 1, got ${fmtShape(idx.shape)}`);
  const [B, T0] = idx.shape as [number, number];
  // the last new token is never fed: positions 0 .. T0 + max_new_tokens - 2 go through the model
  const fed = T0 + max_new_tokens - 1;
  const T_max = Math.min(opts.past_key_values?.max_cache_len ?? Infinity, model.config.n_positions);
  const use_cache = opts.use_cache ?? (opts.past_key_values ? true : fed <= T_max);
  if (use_cache && fed > T_max) {
    throw new LoomIndexError(`[generate] a prompt of ${T0} and ${max_new_tokens} new tokens need positions up to ${fed - 1}, past T_max=${T_max}; use_cache: false crops the context instead`);
  }
  const rows: number[][] = idx.tolist() as number[][];
  const device = model.transformer.wte.weight.device; // feed the model on its own device
  const u = () => generator.uniform53();
  const pick = (logits: Tensor, step: number) => {
    const T = logits.shape[1]!, V = logits.shape[2]!;
    const last = logits.narrow(1, T - 1, 1).contiguous().dataSync(); // [B, 1, V]
    const next = rows.map((_, b) => sample_logits(last.subarray(b * V, (b + 1) * V), temperature, top_k, u));
    next.forEach((t, b) => rows[b]!.push(t));
    on_token?.(step, next);
  };
  const was_training = model.training;
  model.eval();
  try {
    no_grad(() => {
      if (max_new_tokens === 0) return;
      if (!use_cache) {
        const ctx = model.config.n_positions;
        for (let s = 0; s < max_new_tokens; s++) {
          const cond = rows.map((r) => r.slice(-ctx));
          // a length marked dynamic on the prompt (mark_dynamic) makes every context length share a plan
          pick(model.forward(carry_dynamic(idx, tensor(cond, { dtype: "int64", device }))).logits, s); // [B, Tc, V]
        }
        return;
      }
      const cache = opts.past_key_values ?? model.make_cache({ shape: [B, T0], device });
      if (opts.past_key_values) cache.reset(); // a new one is zeros already
      // prefill: the prompt at cache positions 0..T0-1, in one call
      pick(model.forward(carry_dynamic(idx, tensor(rows, { dtype: "int64", device })), { past_key_values: cache }).logits, 0);
      for (let s = 1; s < max_new_tokens; s++) {
        // decode: the last token alone, at position get_seq_length() (derived inside as a tensor)
        const last = tensor(rows.map((r) => [r[r.length - 1]!]), { dtype: "int64", device }); // [B, 1]
        pick(model.forward(last, { past_key_values: cache }).logits, s);
      }
    });
  } finally {
    model.train(was_training);
  }
  return tensor(rows, { dtype: "int64" });
}
