/**
 * Shapes, strides, dims and broadcasting, with PyTorch's rules and error messages.
 */
import { LoomIndexError, LoomShapeError, LoomValueError, fmtShape } from "./errors.ts";

export type Shape = readonly number[];

/** Number of elements of a shape (1 for a 0-d tensor). */
export function numel(shape: Shape): number {
  let n = 1;
  for (const s of shape) n *= s;
  return n;
}

/** Row-major (C-contiguous) strides in elements. */
export function contiguousStrides(shape: Shape): number[] {
  const st = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    st[i] = acc;
    acc *= shape[i]!;
  }
  return st;
}

/** True when `strides` describe a dense row-major layout of `shape` (size-1 dims ignored). */
export function isContiguous(shape: Shape, strides: readonly number[]): boolean {
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    if (shape[i] === 1) continue;
    if (strides[i] !== acc) return false;
    acc *= shape[i]!;
  }
  return true;
}

export function shapesEqual(a: Shape, b: Shape): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Normalize a possibly negative dim into [0, ndim). 0-d tensors accept -1 and 0 (as PyTorch).
 * @throws LoomIndexError `[op] dim 3 is out of range for a tensor of 2 dims (expected [-2, 1])`
 */
export function normalizeDim(op: string, dim: number, ndim: number): number {
  const n = Math.max(ndim, 1);
  if (!Number.isInteger(dim) || dim < -n || dim >= n) {
    throw new LoomIndexError(
      `[${op}] dim ${dim} is out of range for a tensor of ${ndim} dims (expected to be in range of [${-n}, ${n - 1}])`,
    );
  }
  return dim < 0 ? dim + n : dim;
}

/**
 * Normalize `dim` (int, list or undefined = all dims) into a sorted list of unique dims.
 * @throws LoomIndexError on an out-of-range or repeated dim
 */
export function normalizeDims(op: string, dim: number | readonly number[] | null | undefined, ndim: number): number[] {
  if (dim === undefined || dim === null) return Array.from({ length: ndim }, (_, i) => i);
  if (typeof dim === "number") return ndim === 0 ? (normalizeDim(op, dim, ndim), []) : [normalizeDim(op, dim, ndim)]; // the common case, no Set
  const list = dim;
  if (list.length === 0) return Array.from({ length: ndim }, (_, i) => i); // torch: sum(dim=[]) reduces all
  if (list.length === 1) return ndim === 0 ? (normalizeDim(op, list[0]!, ndim), []) : [normalizeDim(op, list[0]!, ndim)]; // layer_norm's [-1]: no Set, no sort
  const out = list.map((d) => normalizeDim(op, d, ndim));
  if (ndim === 0) return []; // a 0-d tensor accepts dim 0 / -1 but has no dim to reduce (torch)
  out.sort((a, b) => a - b);
  for (let i = 1; i < out.length; i++) {
    if (out[i] === out[i - 1]) throw new LoomIndexError(`[${op}] dim ${out[i]} appears multiple times in the list of dims`);
  }
  return out;
}

/**
 * Broadcast two shapes by PyTorch's rules (align right; each pair equal or one of them 1).
 * @throws LoomShapeError `[add] shapes [2, 3] and [4]: cannot broadcast (dim -1: 3 vs 4)`
 */
export function broadcastShapes(op: string, a: Shape, b: Shape): number[] {
  const n = Math.max(a.length, b.length), da = n - a.length, db = n - b.length;
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    // no negative indices: an array read below 0 is a property lookup (a slow path per op recorded)
    const x = i < da ? 1 : a[i - da]!;
    const y = i < db ? 1 : b[i - db]!;
    if (x !== y && x !== 1 && y !== 1) {
      throw new LoomShapeError(
        `[${op}] shapes ${fmtShape(a)} and ${fmtShape(b)} cannot be broadcast together (dim ${i - n}: ${x} vs ${y})`,
      );
    }
    out[i] = x === 1 ? y : x;
  }
  return out;
}

/** Strides for reading a tensor of `shape`/`strides` broadcast to `target` (0 where broadcast). */
export function broadcastStrides(shape: Shape, strides: readonly number[], target: Shape): number[] {
  const n = target.length;
  const out = new Array<number>(n).fill(0);
  const off = n - shape.length;
  for (let i = 0; i < shape.length; i++) {
    out[off + i] = shape[i] === 1 && target[off + i] !== 1 ? 0 : strides[i]!;
  }
  return out;
}

/**
 * Resolve a reshape target with at most one -1.
 * @throws LoomShapeError `[view] shape '[5, -1]' is invalid for input of size 12`
 */
export function inferShape(op: string, target: readonly number[], size: number): number[] {
  let infer = -1;
  let known = 1;
  for (let i = 0; i < target.length; i++) {
    const s = target[i]!;
    if (s === -1) {
      if (infer >= 0) throw new LoomShapeError(`[${op}] only one dimension can be inferred`);
      infer = i;
    } else if (!Number.isInteger(s) || s < 0) {
      throw new LoomShapeError(`[${op}] invalid shape dimension ${s} in ${fmtShape(target)}`);
    } else known *= s;
  }
  const out = [...target];
  if (infer >= 0) {
    if (known === 0 || size % known !== 0) {
      throw new LoomShapeError(`[${op}] shape '${fmtShape(target)}' is invalid for input of size ${size}`);
    }
    out[infer] = size / known;
  } else if (known !== size) {
    throw new LoomShapeError(`[${op}] shape '${fmtShape(target)}' is invalid for input of size ${size}`);
  }
  return out;
}

/**
 * Strides that view a tensor of (shape, strides) as `newShape` without copying, or null when
 * impossible (the same algorithm as PyTorch's `computeStride` in TensorUtils.cpp).
 */
export function viewStrides(shape: Shape, strides: readonly number[], newShape: Shape): number[] | null {
  if (numel(shape) === 0 || shape.length === 0) return contiguousStrides(newShape);
  const out = new Array<number>(newShape.length);
  let viewD = newShape.length - 1;
  let chunkBase = strides[strides.length - 1] ?? 1;
  let tensorNumel = 1;
  let viewNumel = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    tensorNumel *= shape[d]!;
    if (d === 0 || (shape[d - 1] !== 1 && strides[d - 1] !== tensorNumel * chunkBase)) {
      while (viewD >= 0 && (viewNumel < tensorNumel || newShape[viewD] === 1)) {
        out[viewD] = viewNumel * chunkBase;
        viewNumel *= newShape[viewD]!;
        viewD--;
      }
      if (viewNumel !== tensorNumel) return null;
      if (d > 0) {
        chunkBase = strides[d - 1]!;
        tensorNumel = 1;
        viewNumel = 1;
      }
    }
  }
  if (viewD !== -1) return null;
  return out;
}

/** Validate that every entry of a user-given shape is a non-negative integer. */
export function checkShape(op: string, shape: readonly number[]): number[] {
  for (const s of shape) {
    if (!Number.isInteger(s) || s < 0) throw new LoomValueError(`[${op}] invalid shape ${fmtShape(shape)}: sizes must be non-negative integers`);
  }
  return [...shape];
}
