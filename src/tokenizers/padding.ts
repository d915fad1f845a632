/**
 * Truncation and padding of token id lists, with transformers' option names and rules
 * (PreTrainedTokenizerBase._get_padding_truncation_strategies, _pad, truncate_sequences).
 * Pure functions over number[]: the tokenizer class wraps them.
 */
import { LoomValueError } from "../tensor/errors.ts";

/** `true`/"longest": to the longest sequence of the batch; "max_length": to max_length; false: none. */
export type PaddingStrategy = boolean | "longest" | "max_length" | "do_not_pad";
/** `true`/"longest_first"/"only_first" truncate the (single) sequence to max_length. */
export type TruncationStrategy = boolean | "longest_first" | "only_first" | "do_not_truncate";
export type Side = "left" | "right";

/** transformers' VERY_LARGE_INTEGER: a model_max_length that means "no limit". */
export const NO_MAX_LENGTH = 1e30;

export interface ResolvedLengths {
  /** Truncate to this many ids (specials included), or null. */
  truncate_to: number | null;
  /** "longest", "max_length" or null. */
  pad: "longest" | "max_length" | null;
  /** The length "max_length" padding pads to. */
  pad_to: number | null;
}

/**
 * Resolves HF's padding/truncation arguments: a missing max_length falls back to
 * model_max_length for truncation and for "max_length" padding.
 * @throws LoomValueError for a strategy name HF does not know, a max_length that is not a
 *   positive integer, or "max_length" padding / truncation with no max_length and no
 *   model_max_length
 */
export function resolve_lengths(padding: PaddingStrategy | undefined, truncation: TruncationStrategy | undefined, max_length: number | undefined, model_max_length: number, tag: string): ResolvedLengths {
  if (max_length !== undefined && !(Number.isInteger(max_length) && max_length > 0)) throw new LoomValueError(`${tag} max_length must be a positive integer, got ${max_length}`);
  const limit = max_length ?? (model_max_length < NO_MAX_LENGTH ? model_max_length : undefined);
  let pad: ResolvedLengths["pad"];
  if (padding === undefined || padding === false || padding === "do_not_pad") pad = null;
  else if (padding === true || padding === "longest") pad = "longest";
  else if (padding === "max_length") pad = "max_length";
  else throw new LoomValueError(`${tag} padding must be true, false, "longest", "max_length" or "do_not_pad", got ${JSON.stringify(padding)}`);
  let truncate: boolean;
  if (truncation === undefined || truncation === false || truncation === "do_not_truncate") truncate = false;
  else if (truncation === true || truncation === "longest_first" || truncation === "only_first") truncate = true;
  else throw new LoomValueError(`${tag} truncation must be true, false, "longest_first", "only_first" or "do_not_truncate", got ${JSON.stringify(truncation)}`);
  if (pad === "max_length" && limit === undefined) throw new LoomValueError(`${tag} padding="max_length" needs max_length (the tokenizer has no model_max_length)`);
  if (truncate && limit === undefined) throw new LoomValueError(`${tag} truncation needs max_length (the tokenizer has no model_max_length)`);
  return { truncate_to: truncate ? limit! : null, pad, pad_to: pad === "max_length" ? limit! : null };
}

/**
 * Cuts `ids` to at most `keep` ids from the given side (HF truncation_side).
 * @returns a new array
 */
export function truncate_ids(ids: readonly number[], keep: number, side: Side): number[] {
  if (ids.length <= keep) return ids.slice();
  return side === "right" ? ids.slice(0, Math.max(keep, 0)) : ids.slice(ids.length - Math.max(keep, 0));
}

export interface PaddedBatch {
  input_ids: number[][];
  attention_mask: number[][];
}

/**
 * Pads every sequence to one length with `pad_id` (attention_mask 0 there, 1 on real tokens).
 * A sequence longer than a "max_length" target is left as it is (HF pads, it does not cut).
 * @param pad_to_multiple_of - round the target length up to a multiple of this
 * @throws LoomValueError if padding is asked for and pad_id is null (no pad_token: HF's "Asking
 *   to pad but the tokenizer does not have a padding token")
 */
export function pad_batch(seqs: readonly (readonly number[])[], pad: "longest" | "max_length" | null, pad_to: number | null, side: Side, pad_id: number | null, pad_to_multiple_of: number | undefined, tag: string): PaddedBatch {
  const mask = (n: number) => new Array<number>(n).fill(1);
  if (pad === null) return { input_ids: seqs.map((s) => s.slice()), attention_mask: seqs.map((s) => mask(s.length)) };
  let target = pad === "longest" ? Math.max(0, ...seqs.map((s) => s.length)) : pad_to!;
  if (pad_to_multiple_of !== undefined) {
    if (!(Number.isInteger(pad_to_multiple_of) && pad_to_multiple_of > 0)) throw new LoomValueError(`${tag} pad_to_multiple_of must be a positive integer, got ${pad_to_multiple_of}`);
    target = Math.ceil(target / pad_to_multiple_of) * pad_to_multiple_of;
  }
  const needs = seqs.some((s) => s.length < target);
  if (needs && pad_id === null) {
    throw new LoomValueError(`${tag} asked to pad but the tokenizer has no pad_token; set one first (e.g. tokenizer.pad_token = tokenizer.eos_token)`);
  }
  const input_ids: number[][] = [];
  const attention_mask: number[][] = [];
  for (const s of seqs) {
    const n = Math.max(target - s.length, 0);
    const fill = new Array<number>(n).fill(pad_id ?? 0);
    const zeros = new Array<number>(n).fill(0);
    input_ids.push(side === "right" ? [...s, ...fill] : [...fill, ...s]);
    attention_mask.push(side === "right" ? [...mask(s.length), ...zeros] : [...zeros, ...mask(s.length)]);
  }
  return { input_ids, attention_mask };
}
