/**
 * Movement ops. reshape, permute, expand and slice are views (stride arithmetic, no copy; reshape
 * copies only when the strides cannot express the new shape, as torch.reshape). cat and
 * slice_backward (the adjoint of slice) write new buffers.
 */
import { LoomIndexError, LoomShapeError, fmtShape } from "../../tensor/errors.ts";
import { numel, viewStrides } from "../../tensor/shape.ts";
import { forEachStrided, viewOf, type TensorData } from "../../tensor/storage.ts";
import { resultType, sameDtype } from "../infer.ts";
import { defineOp, type KernelOp, type ViewOp } from "../op.ts";

export interface ShapeAttrs { readonly shape: readonly number[] }

export const reshape: ViewOp<ShapeAttrs> = defineOp<ShapeAttrs, ViewOp<ShapeAttrs>>({
  kind: "view", arity: 1, name: "reshape",
  shape: ([x], a) => {
    if (numel(x!.shape) !== numel(a.shape)) {
      throw new LoomShapeError(`[reshape] shape '${fmtShape(a.shape)}' is invalid for input of size ${numel(x!.shape)}`);
    }
    return [...a.shape];
  },
  dtype: sameDtype,
  ref: (x, a) => {
    const st = viewStrides(x.shape, x.strides, a.shape);
    return st ? viewOf(x, a.shape, st, x.offset) : null;
  },
  grad: (g, [x]) => [g.reshape(x!.shape)],
  describe: (a) => fmtShape(a.shape),
});

export interface PermuteAttrs { readonly dims: readonly number[] }

export const permute: ViewOp<PermuteAttrs> = defineOp<PermuteAttrs, ViewOp<PermuteAttrs>>({
  kind: "view", arity: 1, name: "permute",
  shape: ([x], a) => {
    const n = x!.shape.length;
    // a permutation: n dims, each in [0, n) once (flags in an array, not a Set: this runs per view recorded)
    const seen = new Uint8Array(n);
    let ok = a.dims.length === n;
    const out = new Array<number>(n);
    for (let i = 0; ok && i < n; i++) {
      const d = a.dims[i]!;
      if (!(d >= 0 && d < n) || seen[d] !== 0) ok = false;
      else { seen[d] = 1; out[i] = x!.shape[d]!; }
    }
    if (!ok) throw new LoomShapeError(`[permute] dims ${fmtShape(a.dims)} are not a permutation of the ${n} dims of a tensor of shape ${fmtShape(x!.shape)}`);
    return out;
  },
  dtype: sameDtype,
  ref: (x, a) => viewOf(x, a.dims.map((d) => x.shape[d]!), a.dims.map((d) => x.strides[d]!), x.offset),
  grad: (g, _x, _o, a) => {
    const inv = new Array<number>(a.dims.length);
    a.dims.forEach((d, i) => { inv[d] = i; });
    return [g.permute(inv)];
  },
  describe: (a) => fmtShape(a.dims),
});

/** Broadcast view: size-1 dims (and new leading dims) get stride 0. `attrs.shape` is resolved (no -1). */
export const expand: ViewOp<ShapeAttrs> = defineOp<ShapeAttrs, ViewOp<ShapeAttrs>>({
  kind: "view", arity: 1, name: "expand",
  shape: ([x], a) => {
    const xs = x!.shape;
    const off = a.shape.length - xs.length;
    const neg = a.shape.findIndex((s) => !Number.isInteger(s) || s < 0);
    if (neg >= 0) {
      const where = neg < off ? "in a leading, non-existing dimension" : "at dimension";
      throw new LoomShapeError(`[expand] the expanded size of the tensor (${a.shape[neg]}) isn't allowed ${where} ${neg}. Target sizes: ${fmtShape(a.shape)}. Tensor sizes: ${fmtShape(xs)}`);
    }
    const bad = off < 0 ? 0 : xs.findIndex((s, i) => s !== 1 && s !== a.shape[off + i]);
    if (off < 0 || bad >= 0) {
      const why = off < 0
        ? `the number of sizes provided (${a.shape.length}) must be greater or equal to the number of dimensions in the tensor (${xs.length})`
        : `the expanded size of the tensor (${a.shape[off + bad]}) must match the existing size (${xs[bad]}) at non-singleton dimension ${off + bad}`;
      throw new LoomShapeError(`[expand] ${why}. Target sizes: ${fmtShape(a.shape)}. Tensor sizes: ${fmtShape(xs)}`);
    }
    return [...a.shape];
  },
  dtype: sameDtype,
  ref: (x, a) => {
    const off = a.shape.length - x.shape.length;
    const st = a.shape.map((s, i) => (i < off ? 0 : x.shape[i - off] === 1 && s !== 1 ? 0 : x.strides[i - off]!));
    return viewOf(x, a.shape, st, x.offset);
  },
  grad: (g, [x]) => [g.sum_to_size(x!.shape)],
  describe: (a) => fmtShape(a.shape),
});

/** One-dim slice `x[..., start:end:step, ...]`; start/end are clamped and normalized, step > 0. */
export interface SliceAttrs { readonly dim: number; readonly start: number; readonly end: number; readonly step: number }

function sliceLen(a: SliceAttrs): number {
  return Math.max(0, Math.ceil((a.end - a.start) / a.step));
}

function sliceView(x: TensorData, a: SliceAttrs): TensorData {
  const shape = [...x.shape];
  shape[a.dim] = sliceLen(a);
  const strides = [...x.strides];
  strides[a.dim] = x.strides[a.dim]! * a.step;
  return viewOf(x, shape, strides, x.offset + a.start * x.strides[a.dim]!);
}

export const slice: ViewOp<SliceAttrs> = defineOp<SliceAttrs, ViewOp<SliceAttrs>>({
  kind: "view", arity: 1, name: "slice",
  shape: ([x], a) => {
    const s = [...x!.shape];
    // the surface clamps and normalizes; attrs made elsewhere (a plan template) are checked
    if (!(a.dim >= 0 && a.dim < s.length && a.step > 0 && a.start >= 0 && (a.start >= a.end || a.end <= s[a.dim]!))) {
      throw new LoomIndexError(`[slice] dim ${a.dim} ${a.start}:${a.end}:${a.step} is out of range for shape ${fmtShape(x!.shape)}`);
    }
    s[a.dim] = sliceLen(a);
    return s;
  },
  dtype: sameDtype,
  ref: sliceView,
  grad: (g, [x], _o, a) => [g._apply(slice_backward, [], { ...a, input_shape: x!.shape })],
  describe: (a) => `dim=${a.dim} ${a.start}:${a.end}:${a.step}`,
});

export interface SliceBackwardAttrs extends SliceAttrs { readonly input_shape: readonly number[] }

/** Zeros of `input_shape` with `g` written at the sliced positions (aten::slice_backward). */
export const slice_backward: KernelOp<SliceBackwardAttrs> = defineOp<SliceBackwardAttrs, KernelOp<SliceBackwardAttrs>>({
  kind: "kernel", arity: 1, name: "slice_backward",
  shape: (_i, a) => [...a.input_shape],
  dtype: sameDtype,
  ref: ([g], a, out) => {
    const dst = sliceView(out, a);
    forEachStrided(dst.shape, [dst, g!], (_i, idx) => { out.data[idx[0]!] = g!.data[idx[1]!]!; });
  },
  grad: (gg, _i, _o, a) => [gg._apply(slice, [], { dim: a.dim, start: a.start, end: a.end, step: a.step })],
  describe: (a) => `${fmtShape(a.input_shape)} dim=${a.dim} ${a.start}:${a.end}:${a.step}`,
});

export interface DimAttrs { readonly dim: number }

/** torch.cat along a normalized `dim`; dtypes promote; sizes must match off `dim`. */
export const cat: KernelOp<DimAttrs> = defineOp<DimAttrs, KernelOp<DimAttrs>>({
  kind: "kernel", arity: "variadic", name: "cat",
  shape: (ins, a) => {
    if (ins.length === 0) throw new LoomShapeError("[cat] expected a non-empty list of tensors");
    const first = ins[0]!.shape;
    let total = 0;
    for (const m of ins) {
      const bad = m.shape.length !== first.length || m.shape.some((s, i) => i !== a.dim && s !== first[i]);
      if (bad) {
        throw new LoomShapeError(`[cat] sizes of tensors must match except in dimension ${a.dim}: got ${fmtShape(first)} and ${fmtShape(m.shape)}`);
      }
      total += m.shape[a.dim]!;
    }
    const out = [...first];
    out[a.dim] = total;
    return out;
  },
  dtype: (ins) => resultType(ins.map((m) => ({ shape: [1], dtype: m.dtype }))),
  ref: (ins, a, out) => {
    let start = 0;
    for (const x of ins) {
      const len = x.shape[a.dim]!;
      const dst = sliceView(out, { dim: a.dim, start, end: start + len, step: 1 });
      forEachStrided(dst.shape, [dst, x], (_i, idx) => { out.data[idx[0]!] = x.data[idx[1]!]!; });
      start += len;
    }
  },
  grad: (g, ins, _o, a, needs) => {
    let start = 0;
    return ins.map((x, i) => {
      const len = x.shape[a.dim]!;
      const r = needs[i] ? g.narrow(a.dim, start, len) : null;
      start += len;
      return r;
    });
  },
  describe: (a) => `dim=${a.dim}`,
});
