/**
 * Reductions: sum, amax, amin (folds over `dim` with `keepdim`), argmax/argmin and cumsum.
 * mean, var, std, logsumexp and max/min with indices are composites on the surface.
 */
import { isFloating, isIntegral, type DType } from "../../tensor/dtype.ts";
import { LoomIndexError, fmtShape } from "../../tensor/errors.ts";
import { normalizeDim } from "../../tensor/shape.ts";
import { forEachStrided, type TensorData } from "../../tensor/storage.ts";
import { requireFloat } from "../infer.ts";
import { defineOp, type Diff, type KernelOp, type Meta, type ReduceAttrs, type ReduceOp } from "../op.ts";

/** Output shape of reducing `shape` over `dim` (already normalized and sorted). */
export function reducedShape(shape: readonly number[], dim: readonly number[], keepdim: boolean): number[] {
  const out: number[] = [];
  for (let i = 0; i < shape.length; i++) {
    if (dim.includes(i)) {
      if (keepdim) out.push(1);
    } else out.push(shape[i]!);
  }
  return out;
}

/** Re-insert reduced dims as size 1 so `g` broadcasts against the input. */
function keepdimView<T extends Diff<T>>(g: T, inShape: readonly number[], a: ReduceAttrs): T {
  return a.keepdim ? g : g.reshape(reducedShape(inShape, a.dim, true));
}

const reduceShape = (i: readonly Meta[], a: ReduceAttrs) => reducedShape(i[0]!.shape, a.dim, a.keepdim);

/** amax/amin have no identity: reducing a dim of size 0 is an error (torch), raised at record time. */
function extremeShape(name: string) {
  return (i: readonly Meta[], a: ReduceAttrs): number[] => {
    const x = i[0]!.shape;
    const d = a.dim.find((k) => x[k] === 0);
    if (d !== undefined) throw new LoomIndexError(`[${name}] expected reduction dim ${d} to have non-zero size (input shape ${fmtShape(x)})`);
    return reducedShape(x, a.dim, a.keepdim);
  };
}
const describe = (a: ReduceAttrs) => `dim=[${a.dim.join(",")}]${a.keepdim ? " keepdim" : ""}`;

/** torch.sum: integer and bool inputs accumulate in int64. */
export const sum = defineOp<ReduceAttrs, ReduceOp>({
  kind: "reduce", arity: 1, name: "sum", init: 0, step: (acc, x) => acc + x,
  shape: reduceShape,
  dtype: (i) => (isFloating(i[0]!.dtype) ? i[0]!.dtype : "int64"),
  grad: (g, [x], _o, a) => [keepdimView(g, x!.shape, a).expand(x!.shape)],
  describe,
});

/** Gradient of amax/amin: split evenly among the elements equal to the extreme (torch). */
function extremeGrad<T extends Diff<T>>(g: T, x: T, out: T, a: ReduceAttrs): T {
  const hit = x.eq(keepdimView(out, x.shape, a)).to(g.dtype);
  return hit.div(hit.sum(a.dim, true)).mul(keepdimView(g, x.shape, a));
}

const nanMax = (acc: number, x: number) => (x > acc || Number.isNaN(x) ? x : acc);
const nanMin = (acc: number, x: number) => (x < acc || Number.isNaN(x) ? x : acc);

export const amax = defineOp<ReduceAttrs, ReduceOp>({
  kind: "reduce", arity: 1, name: "amax", init: -Infinity, step: nanMax,
  shape: extremeShape("amax"), dtype: (i) => i[0]!.dtype,
  grad: (g, [x], out, a) => [extremeGrad(g, x!, out, a)],
  describe,
});
export const amin = defineOp<ReduceAttrs, ReduceOp>({
  kind: "reduce", arity: 1, name: "amin", init: Infinity, step: nanMin,
  shape: extremeShape("amin"), dtype: (i) => i[0]!.dtype,
  grad: (g, [x], out, a) => [extremeGrad(g, x!, out, a)],
  describe,
});

/** Iterate `x` as [outer, n, inner] around `dim`, calling fn(base, stride) once per lane. */
function lanes(x: TensorData, dim: number, fn: (lane: number, base: number, stride: number) => void): void {
  const outerShape = x.shape.filter((_, i) => i !== dim);
  const outerStrides = x.strides.filter((_, i) => i !== dim);
  const stride = x.strides[dim] ?? 0;
  forEachStrided(outerShape, [{ strides: outerStrides, offset: x.offset }], (lane, idx) => fn(lane, idx[0]!, stride));
}

export interface ArgAttrs { readonly dim: number | null; readonly keepdim: boolean }

/** argmax/argmin: first index of the extreme (as torch on CPU); dim null = flattened input. */
function argOp(name: "argmax" | "argmin", largest: boolean): KernelOp<ArgAttrs> {
  return defineOp<ArgAttrs, KernelOp<ArgAttrs>>({
    kind: "kernel", arity: 1, name,
    shape: ([x], a) => {
      const s = x!.shape;
      if (a.dim === null) {
        if (s.includes(0)) throw new LoomIndexError(`[${name}] expected reduction dim to be specified for input.numel() == 0 (input shape ${fmtShape(s)})`);
        return a.keepdim ? s.map(() => 1) : [];
      }
      const d = normalizeDim(name, a.dim, s.length);
      if (s[d] === 0) throw new LoomIndexError(`[${name}] expected reduction dim ${d} to have non-zero size (input shape ${fmtShape(s)})`);
      if (x!.shape.length === 0) return [];
      return reducedShape(x!.shape, [d], a.keepdim);
    },
    dtype: () => "int64",
    ref: ([x], a, out) => {
      const flat = a.dim === null || x!.shape.length === 0;
      const n0 = x!.shape.reduce((p, s) => p * s, 1);
      const src: TensorData = flat ? { dtype: x!.dtype, shape: [n0], strides: [1], offset: 0, data: contig(x!) } : x!;
      const dim = flat ? 0 : normalizeDim(name, a.dim!, x!.shape.length);
      const n = src.shape[dim]!;
      if (n === 0) throw new LoomIndexError(`[${name}] expected reduction dim ${dim} to have non-zero size`);
      const d = src.data;
      lanes(src, dim, (lane, base, stride) => {
        let best = 0;
        let bv = d[base]!;
        for (let k = 1; k < n && !Number.isNaN(bv); k++) {
          const v = d[base + k * stride]!;
          if (Number.isNaN(v) || (largest ? v > bv : v < bv)) { bv = v; best = k; }
        }
        out.data[lane] = best;
      });
    },
    describe: (a) => `dim=${a.dim}${a.keepdim ? " keepdim" : ""}`,
  });
}
export const argmax = argOp("argmax", true);
export const argmin = argOp("argmin", false);

function contig(x: TensorData): TensorData["data"] {
  const n = x.shape.reduce((p, s) => p * s, 1);
  const out = new Float64Array(n);
  forEachStrided(x.shape, [x], (i, idx) => { out[i] = x.data[idx[0]!]!; });
  return out;
}

export interface CumsumAttrs { readonly dim: number; readonly reverse: boolean }

/** torch.cumsum along `dim` (integers accumulate in int64); `reverse` sums from the end (its adjoint). */
export const cumsum: KernelOp<CumsumAttrs> = defineOp<CumsumAttrs, KernelOp<CumsumAttrs>>({
  kind: "kernel", arity: 1, name: "cumsum",
  shape: ([x], a) => { normalizeDim("cumsum", a.dim, x!.shape.length); return [...x!.shape]; },
  dtype: ([x]) => (isIntegral(x!.dtype) || x!.dtype === "bool" ? "int64" : requireFloat("cumsum", x!.dtype) as DType),
  ref: ([x], a, out) => {
    if (x!.shape.length === 0) { out.data[0] = x!.data[x!.offset]!; return; }
    const dim = normalizeDim("cumsum", a.dim, x!.shape.length);
    const n = x!.shape[dim]!;
    const ostride = out.strides[dim]!;
    // out is contiguous: lane base in out follows the same outer odometer as x
    const outer = out.shape.filter((_, i) => i !== dim);
    const outerStrides = out.strides.filter((_, i) => i !== dim);
    const bases: number[] = [];
    forEachStrided(outer, [{ strides: outerStrides, offset: 0 }], (_l, idx) => { bases.push(idx[0]!); });
    lanes(x!, dim, (lane, base, stride) => {
      const ob = bases[lane]!;
      let acc = 0;
      for (let s = 0; s < n; s++) {
        const k = a.reverse ? n - 1 - s : s;
        acc += x!.data[base + k * stride]!;
        out.data[ob + k * ostride] = acc;
      }
    });
  },
  grad: (g, _x, _o, a) => [g._apply(cumsum, [], { dim: a.dim, reverse: !a.reverse })],
  describe: (a) => `dim=${a.dim}${a.reverse ? " reverse" : ""}`,
});
