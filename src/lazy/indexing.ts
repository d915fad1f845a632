/**
 * Python-style basic indexing for `Tensor.index(...)`: integers, slices ("1:5:2", ":" or
 * {start, stop, step}), null (a new axis) and "..." (the remaining dims), as torch's __getitem__
 * for basic indices. The result is a chain of views.
 */
import { LoomIndexError, LoomValueError } from "../tensor/errors.ts";

export interface Slice {
  start?: number | null;
  stop?: number | null;
  step?: number | null;
}
export type IndexItem = number | null | "..." | string | Slice;

interface Sliceable<T> {
  _slice(dim: number, start: number, end: number, step: number): T;
  reshape(shape: readonly number[]): T;
  readonly shape: readonly number[];
}

/** `loom.slice(start, stop, step)`, Python's slice object. */
export function slice(start?: number | null, stop?: number | null, step?: number | null): Slice {
  return { start, stop, step };
}

function parseSliceString(s: string): Slice {
  const parts = s.split(":");
  if (parts.length < 2 || parts.length > 3) throw new LoomValueError(`[index] cannot parse '${s}' as a slice; use "start:stop:step"`);
  const num = (p: string | undefined) => {
    if (p === undefined || p.trim() === "") return null;
    const v = Number(p);
    if (!Number.isInteger(v)) throw new LoomValueError(`[index] slice bound '${p}' in '${s}' is not an integer`);
    return v;
  };
  return { start: num(parts[0]), stop: num(parts[1]), step: num(parts[2]) };
}

/** Clamp Python slice bounds for a positive step into [0, size] (as PySlice_AdjustIndices). */
function adjust(sl: Slice, size: number): [number, number, number] {
  const step = sl.step ?? 1;
  if (step <= 0) throw new LoomValueError(`[index] step must be greater than zero, got ${step}`);
  const clamp = (v: number | null | undefined, dflt: number) => {
    if (v === null || v === undefined) return dflt;
    const x = v < 0 ? v + size : v;
    return Math.min(Math.max(x, 0), size);
  };
  const start = clamp(sl.start, 0);
  const stop = Math.max(start, clamp(sl.stop, size));
  return [start, stop, step];
}

export function parseIndex(shape: readonly number[], items: readonly IndexItem[]) {
  const ellipses = items.filter((i) => i === "...").length;
  if (ellipses > 1) throw new LoomIndexError("[index] an index can only have a single ellipsis ('...')");
  const consuming = items.filter((i) => i !== null && i !== "...").length;
  if (consuming > shape.length) {
    throw new LoomIndexError(`[index] too many indices for tensor of dimension ${shape.length}`);
  }
  return {
    apply<T extends Sliceable<T>>(x: T): T {
      let r = x;
      let dim = 0; // dim of r being addressed
      const finalShape: number[] = [];
      for (const it of items) {
        if (it === "...") {
          const skip = shape.length - consuming; // the dims no other item consumes
          for (let k = 0; k < skip; k++) finalShape.push(r.shape[dim++]!);
          continue;
        }
        if (it === null) {
          finalShape.push(-1); // placeholder for a new axis of size 1
          continue;
        }
        const size = r.shape[dim]!;
        if (typeof it === "number") {
          if (!Number.isInteger(it) || it < -size || it >= size) {
            throw new LoomIndexError(`[index] index ${it} is out of bounds for dimension ${dim} with size ${size}`);
          }
          const k = it < 0 ? it + size : it;
          r = r._slice(dim, k, k + 1, 1);
          dim++;
          continue;
        }
        const [start, stop, step] = adjust(typeof it === "string" ? parseSliceString(it) : it, size);
        r = r._slice(dim, start, stop, step);
        finalShape.push(r.shape[dim]!);
        dim++;
      }
      for (; dim < r.shape.length; dim++) finalShape.push(r.shape[dim]!);
      return r.reshape(finalShape.map((s) => (s === -1 ? 1 : s)));
    },
  };
}
