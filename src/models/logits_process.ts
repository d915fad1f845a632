/**
 * Logits processors and warpers of Hugging Face `generate` (transformers
 * generation/logits_process.py), with HF's names, arguments and formulas. Each maps
 * `(input_ids [B, T] int64, scores [B, V] float) -> scores [B, V]` and is written with tensor ops,
 * so it runs on any device, eagerly or lazily (generate calls them eagerly on the float32 scores
 * of the last position, as HF does).
 *
 * Order in generate (HF `_get_logits_processor`): the processors that change the distribution
 * for every decoding mode first (RepetitionPenaltyLogitsProcessor, then the user's
 * `logits_processor`), then, only when sampling, the warpers Temperature -> TopK -> TopP.
 * Removed tokens get `filter_value` (-inf), so softmax gives them probability exactly 0.
 * Source: https://github.com/huggingface/transformers/blob/main/src/transformers/generation/logits_process.py
 */
import { fromValues, type TensorData } from "../tensor/storage.ts";
import type { TensorOps } from "../lazy/surface.ts";
import { LoomDtypeError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { isFloating } from "../tensor/dtype.ts";

/** HF LogitsProcessor: scores of the next token, changed given the sequence so far. */
export interface LogitsProcessor {
  /**
   * @param input_ids - int64 [B, T]: every token of each row so far (prompt and padding included)
   * @param scores - float [B, V]: next-token logits (or already processed scores)
   * @returns float [B, V], scores' dtype
   */
  call<S extends TensorOps<S>>(input_ids: S, scores: S): S;
}

/** Shapes and dtypes every processor needs: int ids [B, T], float scores [B, V]. */
function checkInputs(op: string, input_ids: { shape: readonly number[]; dtype: string }, scores: { shape: readonly number[]; dtype: string }): void {
  if (scores.shape.length !== 2) throw new LoomShapeError(`[${op}] scores must be [B, V], got ${fmtShape(scores.shape)}`);
  if (!isFloating(scores.dtype as never)) throw new LoomDtypeError(`[${op}] scores must be floating, got ${scores.dtype}`);
  if (input_ids.shape.length !== 2 || input_ids.shape[0] !== scores.shape[0]) {
    throw new LoomShapeError(`[${op}] input_ids ${fmtShape(input_ids.shape)} must be [B, T] with the batch of scores ${fmtShape(scores.shape)}`);
  }
  if (input_ids.dtype !== "int64" && input_ids.dtype !== "int32") throw new LoomDtypeError(`[${op}] input_ids must be int64, got ${input_ids.dtype}`);
}

/**
 * HF RepetitionPenaltyLogitsProcessor (Keskar et al. 2019, CTRL, eq. 3 with HF's sign fix): the
 * score of every token already in input_ids is divided by `penalty` when positive and multiplied
 * by it when negative, so penalty > 1 makes repeats less likely. A token that occurs several
 * times is penalized once.
 * `score = gather(scores, 1, input_ids); score = where(score < 0, score * penalty, score / penalty);
 * scores.scatter(1, input_ids, score)`.
 */
export class RepetitionPenaltyLogitsProcessor implements LogitsProcessor {
  readonly penalty: number;
  /** @throws LoomValueError unless penalty is a finite number > 0 */
  constructor(penalty: number) {
    if (typeof penalty !== "number" || !(penalty > 0) || !Number.isFinite(penalty)) {
      throw new LoomValueError(`[RepetitionPenaltyLogitsProcessor] \`penalty\` has to be a strictly positive float, but is ${penalty}`);
    }
    this.penalty = penalty;
  }
  call<S extends TensorOps<S>>(input_ids: S, scores: S): S {
    checkInputs("RepetitionPenaltyLogitsProcessor", input_ids, scores);
    if (input_ids.shape[1] === 0) return scores;
    const ids = input_ids.to("int64");
    const score = scores.gather(1, ids); // [B, T]: duplicates read the same original score
    const penalized = score.mul(this.penalty).where(score.lt(0), score.div(this.penalty));
    return scores.scatter(1, ids, penalized);
  }
}

/**
 * HF TemperatureLogitsWarper: scores / temperature (temperature < 1 sharpens, > 1 flattens).
 * generate adds it only when sampling and temperature != 1.
 */
export class TemperatureLogitsWarper implements LogitsProcessor {
  readonly temperature: number;
  /** @throws LoomValueError unless temperature is a finite number > 0 (greedy is do_sample: false, not temperature 0) */
  constructor(temperature: number) {
    if (typeof temperature !== "number" || !(temperature > 0) || !Number.isFinite(temperature)) {
      throw new LoomValueError(`[TemperatureLogitsWarper] \`temperature\` (=${temperature}) has to be a strictly positive float, otherwise your next token scores will be invalid. If you're looking for greedy decoding strategies, set \`do_sample=False\`.`);
    }
    this.temperature = temperature;
  }
  call<S extends TensorOps<S>>(input_ids: S, scores: S): S {
    checkInputs("TemperatureLogitsWarper", input_ids, scores);
    return scores.div(this.temperature);
  }
}

/**
 * HF TopKLogitsWarper: keep the tokens whose score is >= the k-th largest (ties with it are
 * kept, so more than k may remain), set the others to filter_value.
 * `scores.masked_fill(scores < topk(scores, k).values[..., -1, None], filter_value)` with
 * k = min(max(top_k, min_tokens_to_keep), V).
 */
export class TopKLogitsWarper implements LogitsProcessor {
  readonly top_k: number;
  readonly filter_value: number;
  /** @throws LoomValueError unless top_k is a positive integer */
  constructor(top_k: number, opts: { filter_value?: number; min_tokens_to_keep?: number } = {}) {
    if (!Number.isInteger(top_k) || top_k <= 0) throw new LoomValueError(`[TopKLogitsWarper] \`top_k\` has to be a strictly positive integer, but is ${top_k}`);
    this.top_k = Math.max(top_k, opts.min_tokens_to_keep ?? 1);
    this.filter_value = opts.filter_value ?? -Infinity;
  }
  call<S extends TensorOps<S>>(input_ids: S, scores: S): S {
    checkInputs("TopKLogitsWarper", input_ids, scores);
    const V = scores.shape[1]!;
    const k = Math.min(this.top_k, V); // HF's safety check
    const kth = scores.topk(k, -1).values.narrow(1, k - 1, 1); // [B, 1]
    return scores.masked_fill(scores.lt(kth), this.filter_value);
  }
}

/**
 * HF TopPLogitsWarper (nucleus sampling, Holtzman et al. 2019): keep the smallest set of most
 * likely tokens whose probabilities add up to at least top_p, and always min_tokens_to_keep.
 * HF's formula: sort ascending, `cum = softmax(sorted).cumsum(-1)`, remove where
 * `cum <= 1 - top_p`, never the last min_tokens_to_keep; then back to vocabulary order. Among
 * equal scores the sort is stable (lowest index first ascending), so at a cut through a tie the
 * lower indices go first (torch's sort leaves this order open). top_p = 1 keeps every token.
 * Back to vocabulary order without HF's scatter (or a second sort): cum is nondecreasing, so
 * the removed tokens are the first r of the sorted order, r = their count; token i is removed iff
 * (score_i, i) comes before (sorted_logits[r], sorted_indices[r]) in the (value, index) order
 * of the stable sort. The same set as HF's scatter, in O(V) after the one sort.
 */
export class TopPLogitsWarper implements LogitsProcessor {
  readonly top_p: number;
  readonly filter_value: number;
  readonly min_tokens_to_keep: number;
  /** @throws LoomValueError unless top_p is in (0, 1] and min_tokens_to_keep a positive integer */
  constructor(top_p: number, opts: { filter_value?: number; min_tokens_to_keep?: number } = {}) {
    if (typeof top_p !== "number" || !(top_p > 0 && top_p <= 1)) throw new LoomValueError(`[TopPLogitsWarper] \`top_p\` has to be a float in (0, 1], but is ${top_p}`);
    const keep = opts.min_tokens_to_keep ?? 1;
    if (!Number.isInteger(keep) || keep < 1) throw new LoomValueError(`[TopPLogitsWarper] \`min_tokens_to_keep\` has to be a positive integer, but is ${keep}`);
    this.top_p = top_p;
    this.filter_value = opts.filter_value ?? -Infinity;
    this.min_tokens_to_keep = keep;
  }
  call<S extends TensorOps<S>>(input_ids: S, scores: S): S {
    checkInputs("TopPLogitsWarper", input_ids, scores);
    const V = scores.shape[1]!;
    const [sorted_logits, sorted_indices] = scores.sort(-1, false); // ascending, [B, V]
    const cumulative_probs = sorted_logits.softmax(-1).cumsum(-1);
    // the removed ones are a prefix (cum nondecreasing); the last min_tokens_to_keep (the most
    // likely) are never removed, so the count is capped at V - keep
    const cap = V - Math.min(this.min_tokens_to_keep, V);
    const count = cumulative_probs.le(1 - this.top_p).to("int64").sum(-1, true);
    const r = count.where(count.le(cap), cap); // [B, 1]: removed count
    const value = sorted_logits.gather(1, r), index = sorted_indices.gather(1, r); // first kept token, [B, 1]
    const vocab = scores._constant(this.vocabIndex(V));
    const remove = scores.lt(value).logical_or(scores.eq(value).logical_and(vocab.lt(index))); // [B, V]
    return scores.masked_fill(remove, this.filter_value);
  }

  private vocab: TensorData | null = null;
  /** int64 [1, V] holding 0..V-1, made once per vocabulary size (generate calls this per token). */
  private vocabIndex(V: number): TensorData {
    if (this.vocab?.shape[1] !== V) this.vocab = fromValues("int64", [1, V], Array.from({ length: V }, (_, j) => j));
    return this.vocab;
  }
}

/** HF LogitsProcessorList: the processors applied in order. */
export class LogitsProcessorList implements LogitsProcessor {
  readonly processors: LogitsProcessor[];
  constructor(processors: Iterable<LogitsProcessor> = []) {
    this.processors = [...processors];
  }
  get length(): number {
    return this.processors.length;
  }
  push(...p: LogitsProcessor[]): void {
    this.processors.push(...p);
  }
  call<S extends TensorOps<S>>(input_ids: S, scores: S): S {
    let s = scores;
    for (const p of this.processors) s = p.call(input_ids, s);
    return s;
  }
}
