/**
 * Shape and indexing ops with PyTorch's names and semantics: repeat, repeat_interleave, tile,
 * flip/fliplr/flipud, roll, select, outer, diag, diagonal, masked_select, nonzero and
 * torch.nn.functional.pad. Each is a composite of registry ops (reshape/expand, index_select,
 * slice, cat, index_add, where), so gradients come from their rules and lazy tensors record (and
 * fuse) them like any other op; eager and lazy tensors share the code.
 *
 * How the methods are attached: the functions here are the free functions (`loom.flip(x, dims)`),
 * and the methods (`x.flip(dims)`) are added to `TensorOps.prototype` at the end, with an
 * interface merge into the module "./surface.ts" that declares them on `TensorOps<Self>`, so tsc
 * checks both spellings and Tensor and LazyTensor inherit them. surface.ts stays the core; this
 * file is imported for its side effect by tensor.ts (which every tensor kind loads after surface.ts).
 *
 * Data-dependent shapes (masked_select, nonzero, repeat_interleave with a tensor of repeats): the
 * values that decide the shape are read on the host when the op is recorded; a lazy operand is
 * realized for that (only it), as indexing with a lazy mask does.
 */
import { OPS } from "../graph/registry.ts";
import type { DType } from "../tensor/dtype.ts";
import { LoomDtypeError, LoomIndexError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { broadcastShapes, normalizeDim, normalizeDims } from "../tensor/shape.ts";
import { fromValues, scalarData, toFloat64 } from "../tensor/storage.ts";
import { TensorOps } from "./surface.ts";

/** An int64 index tensor of the same kind (eager or lazy) as `x`. */
function int64<S extends TensorOps<S>>(x: S, values: ArrayLike<number>): S {
  return x._constant(fromValues("int64", [values.length], values));
}
/** A tensor of `value` shaped `shape`, dtype `dtype`, same kind as `x` (a broadcast view). */
function filled<S extends TensorOps<S>>(x: S, shape: readonly number[], value: number, dtype: DType = x.dtype): S {
  return x._constant(scalarData(dtype, value)).expand(shape as number[]);
}
function catDim<S extends TensorOps<S>>(ts: readonly S[], dim: number): S {
  return ts.length === 1 ? ts[0]! : ts[0]!._apply(OPS.cat, ts.slice(1), { dim });
}
function dimList(dims: number | readonly number[]): readonly number[] {
  return typeof dims === "number" ? [dims] : dims;
}

/**
 * The tensor repeated `sizes[i]` times along each dim (torch.Tensor.repeat); extra leading sizes
 * add dims. out[i0, ..] = x[i0 % s0, ..]. Written as reshape [1, s0, 1, s1, ..] -> expand -> reshape.
 * @param sizes - one per dim of the result, at least x.ndim, non-negative
 * @returns [s0·r0, s1·r1, ...], dtype of x
 * @throws LoomValueError for fewer sizes than dims or a negative size
 */
export function repeat<S extends TensorOps<S>>(x: S, ...sizes: (number | readonly number[])[]): S {
  const reps = sizes.length === 1 && Array.isArray(sizes[0]) ? [...(sizes[0] as number[])] : (sizes as number[]);
  if (reps.length < x.ndim) {
    throw new LoomValueError(`[repeat] Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor (repeats ${fmtShape(reps)}, tensor ${fmtShape(x.shape)})`);
  }
  if (reps.some((r) => !Number.isInteger(r) || r < 0)) throw new LoomValueError(`[repeat] Trying to create tensor with negative dimension: repeats ${fmtShape(reps)}`);
  const xs = [...new Array<number>(reps.length - x.ndim).fill(1), ...x.shape];
  return x.reshape(xs.flatMap((s) => [1, s])).expand(xs.flatMap((s, i) => [reps[i]!, s])).reshape(xs.map((s, i) => s * reps[i]!));
}

/**
 * torch.tile: repeat with `dims` left-padded with ones to x.ndim.
 * @throws LoomValueError for a negative entry
 */
export function tile<S extends TensorOps<S>>(x: S, dims: readonly number[]): S {
  const reps = [...new Array<number>(Math.max(0, x.ndim - dims.length)).fill(1), ...dims];
  return repeat(x, reps);
}

/**
 * Each element repeated `repeats` times along `dim` (flattened first when `dim` is omitted)
 * (torch.repeat_interleave). A tensor of repeats (or a list) gives one count per element of `dim`
 * (or one for all); its values are read on the host (a lazy one is realized) since they decide the
 * result's size. Called with the repeats alone (`repeat_interleave(repeats)`), it gives each index i
 * repeated repeats[i] times, as torch.
 * @param repeats - a non-negative integer, or an int tensor/list of shape [] | [1] | [x.shape[dim]]
 * @returns x's shape with dim resized to the total count (1-D when dim is omitted), dtype of x
 * @throws LoomValueError for negative repeats; LoomShapeError when the repeats' size does not fit dim;
 *   LoomDtypeError for float repeats tensors
 */
export function repeat_interleave<S extends TensorOps<S>>(x: S, repeats?: number | readonly number[] | S, dim?: number | null): S {
  if (repeats === undefined) {
    // torch.repeat_interleave(repeats): each index i repeated repeats[i] times
    if (x.ndim > 1 || (x.dtype !== "int64" && x.dtype !== "int32")) {
      throw new LoomValueError(`[repeat_interleave] repeat_interleave(repeats) expects a 0-d or 1-D int tensor of repeats, got ${x.dtype} ${fmtShape(x.shape)}`);
    }
    const n = x.numel();
    return repeat_interleave(x._constant(fromValues("int64", [n], Array.from({ length: n }, (_, i) => i))), x);
  }
  let v = x;
  let d: number;
  if (dim === undefined || dim === null) {
    v = x.reshape([x.numel()]);
    d = 0;
  } else d = normalizeDim("repeat_interleave", dim, x.ndim);
  if (v.ndim === 0) v = v.reshape([1]);
  const n = v.shape[d]!;
  if (typeof repeats === "number") {
    if (!Number.isInteger(repeats) || repeats < 0) throw new LoomValueError(`[repeat_interleave] repeats can not be negative, got ${repeats}`);
    const e = [...v.shape.slice(0, d + 1), repeats, ...v.shape.slice(d + 1)];
    return v.unsqueeze(d + 1).expand(e).reshape([...v.shape.slice(0, d), n * repeats, ...v.shape.slice(d + 1)]);
  }
  let counts: number[];
  if (repeats instanceof TensorOps) {
    const r = repeats as S;
    if (r.dtype !== "int64" && r.dtype !== "int32") throw new LoomDtypeError(`[repeat_interleave] repeats has to be Long or Int tensor, got ${r.dtype}`);
    if (r.ndim > 1) throw new LoomShapeError(`[repeat_interleave] repeats must be 0-dim or 1-dim tensor, got ${fmtShape(r.shape)}`);
    counts = [...toFloat64(r._data())];
  } else counts = [...(repeats as readonly number[])];
  if (counts.length === 1 && n !== 1) return repeat_interleave(v, counts[0]!, d);
  if (counts.length !== n) {
    throw new LoomShapeError(`[repeat_interleave] repeats must have the same size as input along dim, but got repeats.size(0) = ${counts.length} and input.size(${d}) = ${n}`);
  }
  const idx: number[] = [];
  counts.forEach((c, i) => {
    if (!Number.isInteger(c) || c < 0) throw new LoomValueError(`[repeat_interleave] repeats can not be negative, got ${c}`);
    for (let k = 0; k < c; k++) idx.push(i);
  });
  return v.index_select(d, int64(v, idx));
}

/**
 * Reverse the order of elements along each of `dims` (torch.flip): one index_select per dim.
 * @throws LoomIndexError for a dim out of range or repeated
 */
export function flip<S extends TensorOps<S>>(x: S, dims: number | readonly number[]): S {
  if (typeof dims !== "number" && dims.length === 0) return x.clone();
  const ds = normalizeDims("flip", dimList(dims), x.ndim);
  let r = x;
  for (const d of ds) {
    const n = r.shape[d]!;
    if (n > 1) r = r.index_select(d, int64(r, Array.from({ length: n }, (_, i) => n - 1 - i)));
  }
  return r === x ? x.clone() : r;
}
/** flip(x, [1]) (torch.fliplr). @throws LoomShapeError for fewer than 2 dims */
export function fliplr<S extends TensorOps<S>>(x: S): S {
  if (x.ndim < 2) throw new LoomShapeError(`[fliplr] Input must be >= 2-d, got ${fmtShape(x.shape)}`);
  return flip(x, [1]);
}
/** flip(x, [0]) (torch.flipud). @throws LoomShapeError for a 0-d input */
export function flipud<S extends TensorOps<S>>(x: S): S {
  if (x.ndim < 1) throw new LoomShapeError(`[flipud] Input must be >= 1-d, got ${fmtShape(x.shape)}`);
  return flip(x, [0]);
}

/**
 * Shift elements circularly by `shifts` along `dims`; without dims the flattened tensor is rolled
 * and the shape restored (torch.roll). out[(i + s) mod n] = x[i]; written as narrow + cat.
 * @throws LoomValueError when shifts and dims differ in length
 */
export function roll<S extends TensorOps<S>>(x: S, shifts: number | readonly number[], dims?: number | readonly number[] | null): S {
  const sh = dimList(shifts);
  if (dims === undefined || dims === null || (typeof dims !== "number" && dims.length === 0)) {
    if (sh.length !== 1) throw new LoomValueError(`[roll] shifts and dimensions must align. shifts: ${sh.length}, dims: 0`);
    return roll(x.reshape([x.numel()]), sh[0]!, 0).reshape(x.shape as number[]);
  }
  const ds = dimList(dims);
  if (sh.length !== ds.length) throw new LoomValueError(`[roll] shifts and dimensions must align. shifts: ${sh.length}, dims: ${ds.length}`);
  let r = x;
  sh.forEach((s, i) => {
    const d = normalizeDim("roll", ds[i]!, x.ndim);
    const n = r.shape[d]!;
    if (n === 0) return;
    const k = ((s % n) + n) % n;
    if (k !== 0) r = catDim([r._slice(d, n - k, n, 1), r._slice(d, 0, n - k, 1)], d);
  });
  return r === x ? x.clone() : r;
}

/**
 * x[..., index, ...] at `dim`, that dim removed (torch.select): a view.
 * @throws LoomIndexError for an index outside [-size, size)
 */
export function select<S extends TensorOps<S>>(x: S, dim: number, index: number): S {
  if (x.ndim === 0) throw new LoomIndexError("[select] select() cannot be applied to a 0-dim tensor.");
  const d = normalizeDim("select", dim, x.ndim);
  const n = x.shape[d]!;
  if (!Number.isInteger(index) || index < -n || index >= n) {
    throw new LoomIndexError(`[select] select(): index ${index} out of range for tensor of size ${fmtShape(x.shape)} at dimension ${d}`);
  }
  const i = index < 0 ? index + n : index;
  return x._slice(d, i, i + 1, 1).squeeze(d);
}

/**
 * Outer product out[i, j] = x[i]·v[j] (torch.outer / torch.ger), dtypes promoted as mul.
 * @param x - [n]; v - [m]
 * @returns [n, m]
 * @throws LoomShapeError unless both are 1-D
 */
export function outer<S extends TensorOps<S>>(x: S, v: S): S {
  if (x.ndim !== 1 || v.ndim !== 1) {
    throw new LoomShapeError(`[outer] expected 1-D arguments, got self ${fmtShape(x.shape)} and vec2 ${fmtShape(v.shape)}`);
  }
  return x.unsqueeze(1).mul(v.unsqueeze(0));
}

/**
 * The diagonal with `offset` (> 0 above, < 0 below the main one) of the (dim1, dim2) planes,
 * as the last dim (torch.diagonal). Written as permute + reshape + strided slice, so it is a copy,
 * not a view: writes to it do not reach x.
 * @returns x's shape without dim1/dim2, plus [L] with L = max(0, min(n1, n2 - offset)) (offset >= 0)
 * @throws LoomValueError when dim1 == dim2
 */
export function diagonal<S extends TensorOps<S>>(x: S, offset = 0, dim1 = 0, dim2 = 1): S {
  const d1 = normalizeDim("diagonal", dim1, x.ndim), d2 = normalizeDim("diagonal", dim2, x.ndim);
  if (d1 === d2) throw new LoomValueError(`[diagonal] diagonal dimensions cannot be identical ${dim1}, ${dim2}`);
  const rest = x.shape.map((_, i) => i).filter((i) => i !== d1 && i !== d2);
  const a = x.shape[d1]!, b = x.shape[d2]!;
  const L = Math.max(0, offset >= 0 ? Math.min(a, b - offset) : Math.min(a + offset, b));
  const lead = rest.map((i) => x.shape[i]!);
  const flat = x.permute([...rest, d1, d2]).reshape([...lead, a * b]); // [..., a·b]
  const last = lead.length;
  if (L === 0) return flat._slice(last, 0, 0, 1);
  const start = offset >= 0 ? offset : -offset * b;
  return flat._slice(last, start, start + (L - 1) * (b + 1) + 1, b + 1);
}

/**
 * torch.diag: a 1-D input becomes the square matrix with it on diagonal `diagonal`; a 2-D input
 * gives that diagonal as 1-D.
 * @param x - [n] or [r, c]
 * @returns [n + |k|, n + |k|] or [L]
 * @throws LoomShapeError for other ranks
 */
export function diag<S extends TensorOps<S>>(x: S, diagonal_ = 0): S {
  if (x.ndim === 2) return diagonal(x, diagonal_, 0, 1);
  if (x.ndim !== 1) throw new LoomShapeError(`[diag] diag(): Supports 1D or 2D tensors. Got ${x.ndim}D (shape ${fmtShape(x.shape)})`);
  const n = x.shape[0]!, k = diagonal_, m = n + Math.abs(k);
  const pos = Array.from({ length: n }, (_, i) => (k >= 0 ? i * m + i + k : (i - k) * m + i));
  const covered = new Uint8Array(m * m);
  for (const p of pos) covered[p] = 1;
  // -0 is the additive identity, so each value lands bit for bit; the rest is +0 as in torch
  const placed = filled(x, [m * m], -0).index_add(0, int64(x, pos), x);
  const mask = x._constant(fromValues("bool", [m * m], covered));
  return placed.where(mask, filled(x, [m * m], 0)).reshape([m, m]);
}

/**
 * The elements of x where the bool `mask` is true, x and mask broadcast together, in row-major
 * order (torch.masked_select). The mask is read on the host (a lazy mask is realized).
 * @returns 1-D, dtype of x
 * @throws LoomDtypeError for a non-bool mask; LoomShapeError when the shapes do not broadcast
 */
export function masked_select<S extends TensorOps<S>>(x: S, mask: S): S {
  if (mask.dtype !== "bool") throw new LoomDtypeError(`[masked_select] masked_select: expected BoolTensor for mask, got ${mask.dtype}`);
  const shape = broadcastShapes("masked_select", x.shape, mask.shape);
  if (shape.length === 0) return masked_select(x.reshape([1]), mask.reshape([1]));
  return x.expand(shape).index(mask.expand(shape));
}

/**
 * The indices of the non-zero elements (torch.nonzero), read on the host (a lazy input is
 * realized). No gradient (integer output).
 * @returns int64 [count, x.ndim]; with `as_tuple`, x.ndim (1 for a 0-d x) int64 tensors [count]
 */
export function nonzero<S extends TensorOps<S>>(x: S, opts: { as_tuple: true }): S[];
export function nonzero<S extends TensorOps<S>>(x: S, opts?: { as_tuple?: false }): S;
export function nonzero<S extends TensorOps<S>>(x: S, opts?: { as_tuple?: boolean }): S | S[] {
  const v = toFloat64(x._data());
  const nd = x.ndim;
  const coords: number[][] = Array.from({ length: nd }, () => []);
  let count = 0;
  const idx = new Array<number>(nd).fill(0);
  for (let e = 0; e < v.length; e++) {
    if (v[e] !== 0) { // NaN is non-zero, as in torch
      for (let d = 0; d < nd; d++) coords[d]!.push(idx[d]!);
      count++;
    }
    for (let d = nd - 1; d >= 0; d--) {
      if (++idx[d]! < x.shape[d]!) break;
      idx[d] = 0;
    }
  }
  if (opts?.as_tuple) {
    if (nd === 0) return [int64(x, new Array<number>(count).fill(0))];
    return coords.map((c) => int64(x, c));
  }
  const flat = new Float64Array(count * nd);
  for (let i = 0; i < count; i++) for (let d = 0; d < nd; d++) flat[i * nd + d] = coords[d]![i]!;
  return x._constant(fromValues("int64", [count, nd], flat));
}

export type PadMode = "constant" | "reflect" | "replicate" | "circular";

/**
 * The input position that position `j` of a dim of `n` elements, padded by `mode`, reads (torch
 * F.pad's modes; conv's padding_mode too): `j` itself inside [0, n); outside, the edge
 * ("replicate"), the wrapped position ("circular"), or the mirror without repeating the edge
 * ("reflect").
 */
export function padIndex(j: number, n: number, mode: Exclude<PadMode, "constant">): number {
  if (j >= 0 && j < n) return j;
  if (mode === "replicate") return j < 0 ? 0 : n - 1;
  if (mode === "circular") return ((j % n) + n) % n;
  return j < 0 ? -j : 2 * (n - 1) - j; // reflect
}

/**
 * torch.nn.functional.pad: `pad` = [left, right] for the last dim, then [top, bottom] for the one
 * before, ... A negative pad crops. Modes: "constant" (`value`), "reflect" (mirror without the
 * edge: pad < size), "replicate" (edge value), "circular" (wrap around: pad <= size). Constant is
 * narrow + cat with a filled block; the others one index_select per padded dim. torch limits the
 * non-constant modes to padding the last 1–3 dims of 2-D to 5-D inputs; Loom pads any trailing
 * dims and gives the same values where torch accepts the input.
 * @param pad - even length, at most 2·x.ndim integers
 * @returns x's shape with dim d grown by its two pads
 * @throws LoomValueError for an odd or too long pad, an unknown mode, a value with a non-constant
 *   mode, or a pad the mode cannot fill (reflect: pad >= size; circular: pad > size)
 */
export function pad<S extends TensorOps<S>>(x: S, pad: readonly number[], opts: { mode?: PadMode; value?: number | null } = {}): S {
  const mode = opts.mode ?? "constant";
  if (pad.length % 2 !== 0) throw new LoomValueError(`[pad] Padding length must be divisible by 2, got ${pad.length}`);
  if (pad.length / 2 > x.ndim) throw new LoomValueError(`[pad] Padding length too large: ${pad.length} for a tensor of shape ${fmtShape(x.shape)}`);
  if (pad.some((p) => !Number.isInteger(p))) throw new LoomValueError(`[pad] pad must be integers, got ${fmtShape(pad)}`);
  if (!["constant", "reflect", "replicate", "circular"].includes(mode)) {
    throw new LoomValueError(`[pad] Unrecognised padding mode ${mode}; expected constant, reflect, replicate or circular`);
  }
  if (mode !== "constant" && opts.value !== undefined && opts.value !== null && opts.value !== 0) {
    throw new LoomValueError(`[pad] Padding mode "${mode}" doesn't take in value argument`);
  }
  let r = x;
  for (let k = 0; k < pad.length / 2; k++) {
    const d = x.ndim - 1 - k;
    const lo = pad[2 * k]!, hi = pad[2 * k + 1]!;
    const n = r.shape[d]!;
    if (mode === "constant") {
      // negative pads crop
      const s = Math.max(0, -lo), e = n - Math.max(0, -hi);
      if (e < s) throw new LoomValueError(`[pad] The input size ${n}, plus negative padding ${lo} and ${hi} resulted in a negative output size, which is invalid. Check dimension ${d} of your input.`);
      r = r._slice(d, s, e, 1);
      const parts: S[] = [];
      const blk = (w: number) => filled(r, r.shape.map((z, i) => (i === d ? w : z)), opts.value ?? 0);
      if (lo > 0) parts.push(blk(lo));
      parts.push(r);
      if (hi > 0) parts.push(blk(hi));
      r = catDim(parts, d);
      continue;
    }
    if (lo === 0 && hi === 0) continue;
    if (n + lo + hi < 0) throw new LoomValueError(`[pad] The input size ${n}, plus negative padding ${lo} and ${hi} resulted in a negative output size, which is invalid. Check dimension ${d} of your input.`);
    if (mode === "reflect" && (lo >= n || hi >= n)) {
      throw new LoomValueError(`[pad] Argument #4: Padding size should be less than the corresponding input dimension, but got: padding (${lo}, ${hi}) at dimension ${d} of input ${fmtShape(x.shape)}`);
    }
    if (mode === "circular" && (lo > n || hi > n)) {
      throw new LoomValueError(`[pad] Padding value causes wrapping around more than once: padding (${lo}, ${hi}) at dimension ${d} of input ${fmtShape(x.shape)}`);
    }
    if (mode === "circular" && (lo < 0 || hi < 0)) {
      // torch crops first and wraps the positive pads around the cropped tensor (_pad_circular)
      r = r._slice(d, Math.max(0, -lo), n - Math.max(0, -hi), 1);
      const m = r.shape[d]!, a = Math.max(0, lo), b = Math.max(0, hi);
      if (a || b) r = r.index_select(d, int64(r, Array.from({ length: m + a + b }, (_, i) => (((i - a) % m) + m) % m)));
      continue;
    }
    if (mode === "replicate" && n === 0) throw new LoomValueError(`[pad] cannot replicate-pad an empty dimension ${d} of input ${fmtShape(x.shape)}`);
    // output position i reads input position i - lo through the mode's map (a negative pad crops)
    r = r.index_select(d, int64(r, Array.from({ length: n + lo + hi }, (_, i) => padIndex(i - lo, n, mode))));
  }
  return r === x ? x.clone() : r;
}

declare module "./surface.ts" {
  interface TensorOps<Self extends TensorOps<Self>> {
    /** torch.Tensor.repeat; see {@link repeat}. */
    repeat(...sizes: (number | readonly number[])[]): Self;
    /** torch.Tensor.tile; see {@link tile}. */
    tile(dims: readonly number[]): Self;
    /** torch.Tensor.repeat_interleave; see {@link repeat_interleave}. */
    repeat_interleave(repeats?: number | readonly number[] | Self, dim?: number | null): Self;
    /** torch.Tensor.flip; see {@link flip}. */
    flip(dims: number | readonly number[]): Self;
    fliplr(): Self;
    flipud(): Self;
    /** torch.Tensor.roll; see {@link roll}. */
    roll(shifts: number | readonly number[], dims?: number | readonly number[] | null): Self;
    /** torch.Tensor.select; see {@link select}. */
    select(dim: number, index: number): Self;
    /** torch.Tensor.outer; see {@link outer}. */
    outer(v: Self): Self;
    /** torch.Tensor.diag; see {@link diag}. */
    diag(diagonal?: number): Self;
    /** torch.Tensor.diagonal; see {@link diagonal}. */
    diagonal(offset?: number, dim1?: number, dim2?: number): Self;
    /** torch.Tensor.masked_select; see {@link masked_select}. */
    masked_select(mask: Self): Self;
    /** torch.Tensor.nonzero; see {@link nonzero}. */
    nonzero(opts: { as_tuple: true }): Self[];
    nonzero(opts?: { as_tuple?: false }): Self;
  }
}

const proto = TensorOps.prototype as TensorOps<any>;
proto.repeat = function (...sizes) { return repeat(this, ...sizes); };
proto.tile = function (dims) { return tile(this, dims); };
proto.repeat_interleave = function (repeats, dim) { return repeat_interleave(this, repeats, dim); };
proto.flip = function (dims) { return flip(this, dims); };
proto.fliplr = function () { return fliplr(this); };
proto.flipud = function () { return flipud(this); };
proto.roll = function (shifts, dims) { return roll(this, shifts, dims); };
proto.select = function (dim, index) { return select(this, dim, index); };
proto.outer = function (v) { return outer(this, v); };
proto.diag = function (d = 0) { return diag(this, d); };
proto.diagonal = function (offset = 0, dim1 = 0, dim2 = 1) { return diagonal(this, offset, dim1, dim2); };
proto.masked_select = function (mask) { return masked_select(this, mask); };
proto.nonzero = function (this: TensorOps<any>, opts?: { as_tuple?: boolean }) {
  return nonzero(this, opts as { as_tuple?: false });
} as TensorOps<any>["nonzero"];

