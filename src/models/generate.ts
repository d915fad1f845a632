/**
 * Autoregressive generation for any causal LM (Hugging Face `generate`: greedy search and
 * multinomial sampling with HF's options and names), written against the `GenerationModel`
 * interface below: GPT2LMHeadModel satisfies it, and any decoder whose forward takes HF's
 * keyword inputs (LlamaForCausalLM) can use `generate(model, input_ids, config)` as it is.
 *
 * The loop (HF `GenerationMixin._sample`):
 * 1. forward: with the KV cache (default when the whole sequence fits the model's positions) one
 *    prefill call over the prompt, then one call per new token feeding only that token ([B, 1])
 *    at the next cache slot; without it the whole context is recomputed for every token, cropped
 *    to the last max_position_embeddings tokens (nanoGPT).
 * 2. scores = logits[:, -1, :] in float32, then the logits processors (logits_process.ts) in HF's
 *    order: repetition_penalty, the user's `logits_processor`, and when sampling temperature,
 *    top_k, top_p.
 * 3. next token: argmax (do_sample false) or multinomial(softmax(scores), 1) with `generator`.
 * 4. rows that produced an eos_token_id are finished: their later tokens are pad_token_id; the
 *    loop stops when every row is finished or after max_new_tokens.
 *
 * Batched prompts of different lengths are left-padded with an `attention_mask` (HF 2-D, 1 =
 * token, 0 = padding). Then, as HF's `prepare_inputs_for_generation`: position_ids =
 * cumsum(attention_mask) - 1 with padded positions set to 1, the mask grows by a 1 per new
 * token, and the model combines it with its causal mask, so each row generates what it would
 * alone. With the cache the mask is given over all T_max slots (zeros past the sequence), so
 * every decode step has the same shapes (one lazy plan for all of them).
 * Source: https://github.com/huggingface/transformers/blob/main/src/transformers/generation/utils.py
 * (`_sample`, `_update_model_kwargs_for_generation`, `_get_logits_processor`); nanoGPT generate.
 */
import { no_grad } from "../autograd/grad_mode.ts";
import { tensor } from "../lazy/creation.ts";
import { carry_dynamic } from "../lazy/dynamic_shapes.ts";
import type { LazyTensor } from "../lazy/lazy_tensor.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { isFloating } from "../tensor/dtype.ts";
import { LoomDtypeError, LoomIndexError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { default_generator, type Generator } from "../tensor/rng.ts";
import type { StaticCache } from "./kv_cache.ts";
import {
  LogitsProcessorList, RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper, type LogitsProcessor,
} from "./logits_process.ts";

/** The keyword inputs generate passes to the model's forward (HF names; see GPT2CacheInputs). */
export interface GenerationInputs {
  /** The KV cache to read and write in place at cache_position. */
  past_key_values?: StaticCache | null;
  /** 2-D padding mask: [B, T] without a cache, [B, T_max] over the cache slots with one. */
  attention_mask?: Tensor | null;
  /** int64 [B, T]: positions of the new tokens (given only with an attention_mask). */
  position_ids?: Tensor | null;
  /** int64 [T]: cache slots of the new tokens (left out: the model uses get_seq_length() + 0..T-1). */
  cache_position?: Tensor | null;
  use_cache?: boolean;
}

/**
 * What `generate` needs of a model (GPT2LMHeadModel; LlamaForCausalLM implements the same):
 * - `forward(input_ids [B, T] int64, inputs)` -> `{ logits [B, T, V] }`, eager or lazy, where
 *   inputs are HF's keywords (GenerationInputs). With `past_key_values` the model writes the
 *   new keys/values at `cache_position` (default: the cache's next slots) and attends over all
 *   T_max slots; `attention_mask` is HF's 2-D 0/1 mask combined with the causal one (covering
 *   the cache slots when there is a cache); `position_ids` are used as given (not derived).
 * - `make_cache(input_ids, max_cache_len)` -> a StaticCache for that batch on input_ids' device.
 * - `max_position_embeddings`: the most positions the model embeds (GPT-2 n_positions, Llama
 *   config.max_position_embeddings), the cache length and the no-cache cropping window.
 * - `training` / `train(mode)`: generate runs in eval mode and restores the flag.
 * - `parameters()`: their device is where the inputs are made.
 */
export interface GenerationModel {
  forward(input_ids: Tensor, inputs?: GenerationInputs): { logits: Tensor };
  make_cache(input_ids: { shape: readonly number[]; device: string }, max_cache_len?: number): StaticCache;
  readonly max_position_embeddings: number;
  readonly training: boolean;
  train(mode?: boolean): unknown;
  parameters(): readonly { device: string }[];
}

/** HF `TextStreamer`-style receiver: the prompt first, then each step's tokens, then end(). */
export interface Streamer {
  /** int64 [B, T] (the prompt) on the first call, then int64 [B] (one token per row). */
  put(value: Tensor): void;
  end(): void;
}

/**
 * HF GenerationConfig options (HF names and defaults) plus Loom's `generator`, `on_token` and
 * `past_key_values`. Defaults as HF: greedy (do_sample false); when sampling top_k 50,
 * temperature 1, top_p 1.
 */
export interface GenerationConfig {
  /** New tokens to generate at most (integer >= 0; fewer when every row hits eos). */
  max_new_tokens: number;
  /** Sample (multinomial over the warped softmax) instead of greedy argmax. Default false. */
  do_sample?: boolean;
  /** Sampling only: divide scores by this (> 0). Default 1. */
  temperature?: number;
  /** Sampling only: keep the top_k most likely tokens (ties kept); 0 or null: all. Default 50 (HF). */
  top_k?: number | null;
  /** Sampling only: nucleus, keep the most likely tokens up to probability mass top_p in (0, 1]. Default 1 (off). */
  top_p?: number | null;
  /** Divide positive / multiply negative scores of tokens already in the row (> 0; 1 = off). Also applies to greedy. */
  repetition_penalty?: number | null;
  /** Token id(s) that end a row; that row then gets pad_token_id. */
  eos_token_id?: number | number[] | null;
  /** Fills finished rows. Default: the first eos_token_id (HF). */
  pad_token_id?: number | null;
  /**
   * HF 2-D mask [B, T] of the prompt: 1 = token, 0 = left padding. Default (HF): 0 where the
   * prompt holds pad_token_id when that is given and is not an eos id, else all tokens.
   */
  attention_mask?: Tensor | null;
  /** Extra processors, applied after repetition_penalty and before the sampling warpers (HF). */
  logits_processor?: LogitsProcessor[] | LogitsProcessorList | null;
  /** Source of the sampling draws (default generator when omitted). */
  generator?: Generator;
  /**
   * Decode with a StaticCache (prefill + one [B, 1] call per token). Default: true when the
   * prompt and the new tokens fit in max_position_embeddings, false otherwise (the context is
   * then cropped to its last max_position_embeddings tokens and recomputed per token). true with
   * a sequence longer than that (or than a given cache) raises LoomIndexError before any call.
   */
  use_cache?: boolean;
  /** The cache to decode into (reset first); default a new one of T_max = max_position_embeddings. */
  past_key_values?: StaticCache | null;
  /** HF streamer: put(prompt), put(tokens [B]) per step, end(). */
  streamer?: Streamer | null;
  /** Called after every step with the new token ids of each row (timing, streaming). */
  on_token?: (step: number, tokens: number[]) => void;
}

/**
 * Options of the nanoGPT-style call `model.generate(idx, max_new_tokens, opts)`: the same
 * options, with that call's defaults: sampling from all tokens at temperature 1; temperature 0
 * means greedy (do_sample false); top_k null means all tokens (0 is an error there).
 */
export type GenerateOptions = Partial<Omit<GenerationConfig, "max_new_tokens">>;

/** One token from a row of logits under temperature/top-k, by inverse-CDF on one uniform draw (host helper). */
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
 * The nanoGPT-style options as a GenerationConfig: temperature 0 is greedy, top_k null all tokens.
 * @throws LoomValueError for a temperature < 0 or not finite, a top_k that is not a positive integer
 */
export function legacy_generation_config(max_new_tokens: number, opts: GenerateOptions): GenerationConfig {
  const { temperature = 1, top_k = null } = opts;
  if (!(temperature >= 0) || !Number.isFinite(temperature)) throw new LoomValueError(`[generate] temperature must be a finite number >= 0, got ${temperature}`);
  if (top_k !== null && (!Number.isInteger(top_k) || top_k < 1)) throw new LoomValueError(`[generate] top_k must be a positive integer, got ${top_k}`);
  const do_sample = opts.do_sample ?? temperature !== 0;
  // temperature 0 means greedy here; with do_sample: true it stays 0 and TemperatureLogitsWarper rejects it
  return { ...opts, max_new_tokens, do_sample, temperature: temperature === 0 && !do_sample ? 1 : temperature, top_k: top_k ?? 0 };
}

/** The eos ids as a list, checked. */
function eosList(eos: number | number[] | null | undefined): number[] {
  const list = eos === null || eos === undefined ? [] : Array.isArray(eos) ? eos : [eos];
  for (const e of list) if (!Number.isInteger(e) || e < 0) throw new LoomValueError(`[generate] eos_token_id must be non-negative integers, got ${JSON.stringify(eos)}`);
  return list;
}

/**
 * HF's processor list for a config (`_get_logits_processor`): repetition penalty, the user's
 * processors, then (do_sample) temperature, top_k, top_p; each added only where it changes scores.
 * @throws LoomValueError from the processors' constructors for invalid values
 */
export function get_logits_processor(config: GenerationConfig): LogitsProcessorList {
  const list = new LogitsProcessorList();
  const { do_sample = false, temperature = 1, top_k = 50, top_p = 1, repetition_penalty = 1 } = config;
  if (repetition_penalty !== null && repetition_penalty !== 1) list.push(new RepetitionPenaltyLogitsProcessor(repetition_penalty));
  const custom = config.logits_processor;
  if (custom) list.push(...(custom instanceof LogitsProcessorList ? custom.processors : custom));
  if (top_k !== null && !(Number.isInteger(top_k) && top_k >= 0)) throw new LoomValueError(`[generate] top_k must be an integer >= 0 (0: off), got ${top_k}`);
  if (top_p !== null) new TopPLogitsWarper(top_p); // validated even when greedy ignores it
  if (do_sample) {
    if (temperature !== 1) list.push(new TemperatureLogitsWarper(temperature));
    if (top_k !== null && top_k !== 0) list.push(new TopKLogitsWarper(top_k));
    if (top_p !== null && top_p < 1) list.push(new TopPLogitsWarper(top_p));
  }
  return list;
}

/** HF position_ids from a 2-D mask row: cumsum - 1, padded positions 1. */
function positionsFromMask(mask: readonly number[]): number[] {
  let n = 0;
  return mask.map((m) => (m ? n++ : 1));
}

/**
 * Generate up to max_new_tokens tokens after each prompt (HF `generate`, see the file comment).
 * Runs under no_grad in eval() mode, restoring the training flag afterwards.
 * @param input_ids - int64/int32 [B, T] prompt ids (T >= 1), left-padded where attention_mask says so
 * @returns int64 [B, T + n] on the cpu, n <= max_new_tokens (smaller when every row finished at eos)
 * @throws LoomValueError for an invalid option (max_new_tokens, temperature with do_sample,
 *   top_k, top_p outside (0, 1], repetition_penalty <= 0, eos/pad ids, an attention_mask with
 *   values other than 0/1, a row without tokens or right padding); LoomShapeError for a non-2-D
 *   prompt or a mask of another shape; LoomDtypeError for non-integer ids; LoomIndexError when
 *   use_cache is true and T + max_new_tokens - 1 positions do not fit the cache (before any call)
 */
export function generate(model: GenerationModel, input_ids: Tensor, config: GenerationConfig): Tensor {
  const { max_new_tokens, do_sample = false, generator = default_generator, on_token, streamer } = config;
  if (!Number.isInteger(max_new_tokens) || max_new_tokens < 0) throw new LoomValueError(`[generate] max_new_tokens must be an integer >= 0, got ${max_new_tokens}`);
  if (input_ids.ndim !== 2 || input_ids.shape[1] === 0) throw new LoomShapeError(`[generate] input_ids must be [B, T] with T >= 1, got ${fmtShape(input_ids.shape)}`);
  if (isFloating(input_ids.dtype) || input_ids.dtype === "bool") throw new LoomDtypeError(`[generate] input_ids must be integer token ids, got ${input_ids.dtype}`);
  const processors = get_logits_processor(config);
  const eos = new Set(eosList(config.eos_token_id));
  const pad = config.pad_token_id ?? (eos.size ? [...eos][0]! : null);
  if (pad !== null && (!Number.isInteger(pad) || pad < 0)) throw new LoomValueError(`[generate] pad_token_id must be a non-negative integer, got ${pad}`);
  const [B, T0] = input_ids.shape as [number, number];
  const rows: number[][] = input_ids.tolist() as number[][];
  // HF `_prepare_attention_mask_for_generation`: without a mask, a pad_token_id (not an eos) found
  // in the prompt marks padding; otherwise every token counts
  const infer = !config.attention_mask && pad !== null && !eos.has(pad) && rows.some((r) => r.includes(pad));
  const mask = config.attention_mask ?? (infer ? tensor(rows.map((r) => r.map((t) => (t === pad ? 0 : 1))), { dtype: "int64" }) : null);
  const masks = mask ? checkMask(mask, B, T0) : null;

  // the last new token is never fed: positions 0 .. T0 + max_new_tokens - 2 go through the model
  const fed = T0 + max_new_tokens - 1;
  const n_pos = model.max_position_embeddings;
  const T_max = Math.min(config.past_key_values?.max_cache_len ?? Infinity, n_pos);
  const use_cache = config.use_cache ?? (config.past_key_values ? true : fed <= T_max);
  if (use_cache && fed > T_max) {
    throw new LoomIndexError(`[generate] a prompt of ${T0} and ${max_new_tokens} new tokens need positions up to ${fed - 1}, past T_max=${T_max}; use_cache: false crops the context instead`);
  }
  const device = model.parameters()[0]?.device ?? "cpu"; // feed the model on its own device
  const int64 = { dtype: "int64" as const, device };
  const unfinished = new Array<boolean>(B).fill(true);
  streamer?.put(tensor(rows, { dtype: "int64" }));

  /** Pick each row's next token from the logits of the last position; false once all rows are done. */
  const pick = (logits: Tensor, step: number): boolean => {
    let last = logits.narrow(1, logits.shape[1]! - 1, 1).squeeze(1); // [B, V]
    if (last.isLazy) last = (last as unknown as LazyTensor).eval(); // the forward's plan runs here
    let scores = last.float(); // HF: next_token_logits.float()
    if (processors.length) scores = processors.call(tensor(rows, int64), scores);
    const chosen = do_sample ? scores.softmax(-1).multinomial(1, { generator }).squeeze(1) : scores.argmax(-1); // [B]
    const next = (chosen.tolist() as number[]).map((t, b) => (unfinished[b] ? t : pad!));
    next.forEach((t, b) => {
      rows[b]!.push(t);
      masks?.[b]!.push(1);
      if (eos.has(t)) unfinished[b] = false;
    });
    streamer?.put(tensor(next, { dtype: "int64" }));
    on_token?.(step, next);
    return unfinished.some((u) => u);
  };
  const was_training = model.training;
  model.train(false);
  try {
    no_grad(() => {
      if (max_new_tokens === 0) return;
      if (!use_cache) {
        for (let s = 0; s < max_new_tokens; s++) {
          const cond = rows.map((r) => r.slice(-n_pos));
          // a length marked dynamic on the prompt (mark_dynamic) makes every context length share a plan
          const ids = carry_dynamic(input_ids, tensor(cond, int64));
          const m = masks?.map((r) => r.slice(-n_pos));
          const inputs = m ? { attention_mask: tensor(m, int64), position_ids: tensor(m.map(positionsFromMask), int64) } : {};
          if (!pick(model.forward(ids, inputs).logits, s)) return; // [B, Tc, V]
        }
        return;
      }
      // HF sizes a generate cache to the sequence; a model with at most 4096 positions gets all of
      // them instead, so every generate call (and its lazy decode plan) shares one cache shape
      const L_new = n_pos <= 4096 ? n_pos : Math.min(n_pos, Math.ceil((fed + 1) / 256) * 256);
      const cache = config.past_key_values ?? model.make_cache({ shape: [B, T0], device }, L_new);
      if (config.past_key_values) cache.reset(); // a new one is zeros already
      const L = cache.max_cache_len;
      // with padding: the mask over all L slots (zeros past the sequence), so every step has one shape
      const slotMask = () => tensor(masks!.map((r) => [...r, ...new Array<number>(L - r.length).fill(0)]), int64);
      // prefill: the prompt at cache positions 0..T0-1, in one call
      const prompt = carry_dynamic(input_ids, tensor(rows, int64));
      const first = masks ? { past_key_values: cache, attention_mask: slotMask(), position_ids: tensor(masks.map(positionsFromMask), int64) } : { past_key_values: cache };
      if (!pick(model.forward(prompt, first).logits, 0)) return;
      for (let s = 1; s < max_new_tokens; s++) {
        // decode: the last token alone, at slot get_seq_length() (derived inside as a tensor)
        const last = tensor(rows.map((r) => [r[r.length - 1]!]), int64); // [B, 1]
        // its position: the row's token count so far - 1 (HF: cumsum(mask)[-1] - 1)
        const inputs = masks ? { past_key_values: cache, attention_mask: slotMask(), position_ids: tensor(masks.map((r) => [r.reduce((a, v) => a + v, 0) - 1]), int64) } : { past_key_values: cache };
        if (!pick(model.forward(last, inputs).logits, s)) return;
      }
    });
  } finally {
    model.train(was_training);
    streamer?.end();
  }
  return tensor(rows, { dtype: "int64" });
}

/**
 * The prompt's attention_mask as rows of 0/1, checked: [B, T], only 0 and 1, every row with a
 * token, and the last column all 1 (left padding; with right padding the first new token would
 * be predicted from a padding position, HF's "right-padding was detected" warning).
 */
function checkMask(attention_mask: Tensor, B: number, T: number): number[][] {
  if (attention_mask.ndim !== 2 || attention_mask.shape[0] !== B || attention_mask.shape[1] !== T) {
    throw new LoomShapeError(`[generate] attention_mask ${fmtShape(attention_mask.shape)} must be [${B}, ${T}] like input_ids`);
  }
  const m = attention_mask.tolist() as (number | boolean)[][];
  return m.map((row, b) => {
    const r = row.map(Number);
    if (r.some((v) => v !== 0 && v !== 1)) throw new LoomValueError(`[generate] attention_mask must hold 0 (padding) and 1 (token), row ${b} is [${r.join(", ")}]`);
    if (r[T - 1] !== 1) throw new LoomValueError(`[generate] attention_mask row ${b} ends in padding: decoder-only generation needs left padding (tokenizer padding_side="left")`);
    return r;
  });
}
