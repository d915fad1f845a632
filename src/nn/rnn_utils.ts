/**
 * torch.nn.utils.rnn helpers for batches of variable-length sequences: pad_sequence.
 * (PackedSequence is not provided: Loom has no RNN layers; pad and mask instead.)
 */
import { stack } from "../lazy/functional.ts";
import { pad } from "../lazy/shape_ops.ts";
import type { TensorOps } from "../lazy/surface.ts";
import { LoomDtypeError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";

export interface PadSequenceOptions {
  /** Output [B, T, *] instead of [T, B, *] (default false, as torch). */
  batch_first?: boolean;
  /** Value of the padded positions (default 0). */
  padding_value?: number;
  /** Pad after each sequence ("right", default) or before it ("left"; torch 2.5's padding_side). */
  padding_side?: "right" | "left";
}

/**
 * Stack sequences of different lengths into one tensor, padding each to the longest
 * (torch.nn.utils.rnn.pad_sequence). Differentiable: the gradient of each sequence is its slice
 * of the output's gradient (a constant pad and a stack).
 * @param sequences - B tensors [L_i, *], same trailing dims * and dtype
 * @returns [T, B, *] (batch_first: [B, T, *]) with T = max L_i, dtype of the sequences
 * @throws LoomValueError for an empty list or an unknown padding_side; LoomShapeError for a 0-d
 *   sequence or trailing dims that differ; LoomDtypeError for mixed dtypes
 * Source: torch/nn/utils/rnn.py pad_sequence
 */
export function pad_sequence<S extends TensorOps<S>>(sequences: readonly S[], opts: PadSequenceOptions = {}): S {
  const side = opts.padding_side ?? "right";
  if (side !== "right" && side !== "left") throw new LoomValueError(`[pad_sequence] padding_side must be "left" or "right", got ${String(side)}`);
  if (sequences.length === 0) throw new LoomValueError("[pad_sequence] received an empty list of sequences");
  const first = sequences[0]!;
  const trailing = first.shape.slice(1);
  sequences.forEach((s, i) => {
    if (s.ndim === 0) throw new LoomShapeError(`[pad_sequence] sequence ${i} is 0-d: expected [L, *]`);
    if (s.ndim !== first.ndim || s.shape.slice(1).some((d, k) => d !== trailing[k])) {
      throw new LoomShapeError(`[pad_sequence] sequences must share their trailing dims: ${fmtShape(first.shape)} at entry 0 and ${fmtShape(s.shape)} at entry ${i}`);
    }
    if (s.dtype !== first.dtype) throw new LoomDtypeError(`[pad_sequence] sequences must share one dtype: ${first.dtype} at entry 0 and ${s.dtype} at entry ${i}`);
  });
  const T = Math.max(...sequences.map((s) => s.shape[0]!));
  const padded = sequences.map((s) => {
    const extra = T - s.shape[0]!;
    if (extra === 0) return s;
    // F.pad lists the last dim first: zeros for the trailing dims, then dim 0's [before, after]
    const p = [...new Array<number>(2 * trailing.length).fill(0), side === "left" ? extra : 0, side === "left" ? 0 : extra];
    return pad(s, p, { value: opts.padding_value ?? 0 });
  });
  return stack(padded, opts.batch_first ? 0 : 1); // [B, T, *] or [T, B, *]
}
