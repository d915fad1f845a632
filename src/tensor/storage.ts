/**
 * TensorData: a strided view on a storage array. This is all a backend ever sees of a tensor
 * (no autograd, no graph), so views (permute, expand, slice, reshape) are pure stride arithmetic.
 */
import {
  allocArray, decoder, encoder, isHalf, type DType, type TypedArray,
} from "./dtype.ts";
import { contiguousStrides, isContiguous, numel, type Shape } from "./shape.ts";

export interface TensorData {
  readonly dtype: DType;
  readonly shape: readonly number[];
  /** Element strides (0 for broadcast dims). */
  readonly strides: readonly number[];
  /** Element offset into `data`. */
  readonly offset: number;
  readonly data: TypedArray;
}

/** A new zero-filled contiguous TensorData. */
export function allocData(dtype: DType, shape: Shape): TensorData {
  return { dtype, shape: [...shape], strides: contiguousStrides(shape), offset: 0, data: allocArray(dtype, numel(shape)) };
}

export function isDense(t: TensorData): boolean {
  return isContiguous(t.shape, t.strides);
}

/** Same storage, other shape/strides/offset. */
export function viewOf(t: TensorData, shape: readonly number[], strides: readonly number[], offset: number): TensorData {
  return { dtype: t.dtype, shape, strides, offset, data: t.data };
}

/**
 * Visit every element of `shape` in row-major order, tracking one storage index per operand.
 * `fn(outIndex, idx)` gets the linear output index and the operands' current storage indices.
 * The odometer runs over all but the last dim; the last dim is a tight loop (why: the callback
 * cost dominates, so keep index math out of it).
 */
export function forEachStrided(
  shape: readonly number[],
  operands: readonly { strides: readonly number[]; offset: number }[],
  fn: (i: number, idx: Int32Array | number[]) => void,
): void {
  const n = numel(shape);
  if (n === 0) return;
  const k = operands.length;
  const nd = shape.length;
  const idx = new Array<number>(k);
  for (let j = 0; j < k; j++) idx[j] = operands[j]!.offset;
  if (nd === 0) {
    fn(0, idx);
    return;
  }
  const last = shape[nd - 1]!;
  const lastStride = operands.map((o) => o.strides[nd - 1]!);
  const counter = new Array<number>(nd).fill(0);
  const base = idx.slice();
  let out = 0;
  for (;;) {
    for (let j = 0; j < k; j++) idx[j] = base[j]!;
    for (let t = 0; t < last; t++) {
      fn(out++, idx);
      for (let j = 0; j < k; j++) idx[j]! += lastStride[j]!;
    }
    // advance the odometer over dims nd-2 .. 0
    let d = nd - 2;
    for (; d >= 0; d--) {
      counter[d]!++;
      for (let j = 0; j < k; j++) base[j]! += operands[j]!.strides[d]!;
      if (counter[d]! < shape[d]!) break;
      for (let j = 0; j < k; j++) base[j]! -= operands[j]!.strides[d]! * shape[d]!;
      counter[d] = 0;
    }
    if (d < 0) return;
  }
}

/** Read a TensorData into a new contiguous array of JS numbers (half types decoded). */
export function toFloat64(t: TensorData): Float64Array {
  const n = numel(t.shape);
  const dec = decoder(t.dtype);
  const src = t.data;
  // the whole buffer, dense: one converting construction (no zero fill first)
  if (!dec && t.offset === 0 && src.length === n && isDense(t)) return new Float64Array(src);
  const out = new Float64Array(n);
  if (dec) forEachStrided(t.shape, [t], (i, idx) => { out[i] = dec(src, idx[0]!); });
  else if (isDense(t)) {
    out.set(src.subarray(t.offset, t.offset + n)); // one native converting copy
  }
  else forEachStrided(t.shape, [t], (i, idx) => { out[i] = src[idx[0]!]!; });
  return out;
}

/** A contiguous TensorData of `dtype` holding the values of `t` (converted, half-encoded). */
export function toContiguous(t: TensorData, dtype: DType = t.dtype): TensorData {
  if (dtype === t.dtype && t.offset === 0 && isDense(t) && t.data.length === numel(t.shape)) return t;
  const out = allocData(dtype, t.shape);
  const dst = out.data;
  const dec = decoder(t.dtype);
  const enc = encoder(dtype);
  const src = t.data;
  if (!dec && !enc && (isHalf(dtype) === isHalf(t.dtype))) {
    forEachStrided(t.shape, [t], (i, idx) => { dst[i] = src[idx[0]!]!; });
  } else {
    forEachStrided(t.shape, [t], (i, idx) => {
      const v = dec ? dec(src, idx[0]!) : src[idx[0]!]!;
      dst[i] = enc ? enc(v) : v;
    });
  }
  return out;
}

/** Build a TensorData from a flat list of numbers (encoded for the dtype). */
/** A 0-d TensorData holding `v` (a wrapped scalar: made once per scalar operand, so without the general path's copies). */
export function scalarData(dtype: DType, v: number): TensorData {
  const data = allocArray(dtype, 1);
  const enc = encoder(dtype);
  data[0] = enc ? enc(v) : v;
  return { dtype, shape: [], strides: [], offset: 0, data };
}

export function fromValues(dtype: DType, shape: readonly number[], values: ArrayLike<number>): TensorData {
  const out = allocData(dtype, shape);
  const enc = encoder(dtype);
  const dst = out.data;
  for (let i = 0; i < values.length; i++) dst[i] = enc ? enc(values[i]!) : values[i]!;
  return out;
}
