/**
 * matmul (batched, broadcast batch dims), indexing (gather/scatter_add, index_select/index_add)
 * and triangular masks (tril/triu).
 */
import type { DType } from "../../tensor/dtype.ts";
import { LoomDtypeError, LoomIndexError, LoomShapeError, LoomValueError, fmtShape } from "../../tensor/errors.ts";
import { broadcastShapes, broadcastStrides, numel, shapesEqual } from "../../tensor/shape.ts";
import { forEachStrided, type TensorData } from "../../tensor/storage.ts";
import { requireIndex, requireInt64Index, sameDtype, sameShape } from "../infer.ts";
import { defineOp, type Diff, type KernelOp } from "../op.ts";
import { slice_backward, type DimAttrs } from "./movement.ts";

/**
 * matmul of a [..., M, K] and b [..., K, N] -> [..., M, N], batch dims broadcast.
 * The surface maps 1-D operands onto this (torch.matmul's rules).
 */
export const matmul = defineOp<{}, KernelOp<{}>>({
  kind: "kernel", arity: 2, name: "matmul",
  shape: ([a, b]) => {
    const as = a!.shape, bs = b!.shape;
    if (as.length < 2 || bs.length < 2) throw new LoomShapeError(`[matmul] expected 2-D or batched operands, got ${fmtShape(as)} and ${fmtShape(bs)}`);
    const k1 = as[as.length - 1]!, k2 = bs[bs.length - 2]!;
    if (k1 !== k2) throw new LoomShapeError(`[matmul] shapes ${fmtShape(as)} and ${fmtShape(bs)}: ${k1} != ${k2}`);
    const batch = broadcastShapes("matmul", as.slice(0, -2), bs.slice(0, -2));
    return [...batch, as[as.length - 2]!, bs[bs.length - 1]!];
  },
  dtype: ([a, b]) => {
    if (a!.dtype !== b!.dtype) throw new LoomDtypeError(`[matmul] expected both operands to have the same dtype, but got ${a!.dtype} and ${b!.dtype}`);
    if (a!.dtype === "bool") throw new LoomDtypeError("[matmul] is not implemented for bool");
    return a!.dtype;
  },
  ref: ([a, b], _attrs, out) => {
    const M = out.shape[out.shape.length - 2]!, N = out.shape[out.shape.length - 1]!;
    const K = a!.shape[a!.shape.length - 1]!;
    const batch = out.shape.slice(0, -2);
    const sa = broadcastStrides(a!.shape.slice(0, -2), a!.strides.slice(0, -2), batch);
    const sb = broadcastStrides(b!.shape.slice(0, -2), b!.strides.slice(0, -2), batch);
    const [am, ak] = a!.strides.slice(-2) as [number, number];
    const [bk, bn] = b!.strides.slice(-2) as [number, number];
    // Pack each operand's matrix densely (row-major, float64) so the inner loop is a unit-stride
    // axpy over a row of B; accumulate in float64 and round once when storing.
    const Ap = new Float64Array(M * K), Bp = new Float64Array(K * N), Cp = new Float64Array(M * N);
    const C = out.data;
    forEachStrided(batch, [{ strides: sa, offset: a!.offset }, { strides: sb, offset: b!.offset }], (bi, idx) => {
      pack(a!.data, idx[0]!, M, K, am, ak, Ap);
      pack(b!.data, idx[1]!, K, N, bk, bn, Bp);
      gemm(Ap, Bp, Cp, M, N, K);
      C.set(Cp, bi * M * N);
    });
  },
  grad: (g, [a, b], _o, _a, needs) => [
    needs[0] ? g.matmul(b!.transpose(-2, -1)).sum_to_size(a!.shape) : null,
    needs[1] ? a!.transpose(-2, -1).matmul(g).sum_to_size(b!.shape) : null,
  ],
});

/**
 * C = A·B for dense row-major float64 A [M, K], B [K, N] (C is overwritten). Four rows of C are
 * updated per pass over a row of B, so each B element loaded feeds four multiply-adds; k is
 * blocked so the block of B stays in cache across rows.
 */
export function gemm(A: Float64Array, B: Float64Array, C: Float64Array, M: number, N: number, K: number): void {
  C.fill(0);
  const KB = 128;
  for (let k0 = 0; k0 < K; k0 += KB) {
    const k1 = k0 + KB < K ? k0 + KB : K;
    let i = 0;
    for (; i + 4 <= M; i += 4) {
      const c0 = i * N, c1 = c0 + N, c2 = c1 + N, c3 = c2 + N;
      for (let k = k0; k < k1; k++) {
        const a0 = A[i * K + k]!, a1 = A[(i + 1) * K + k]!, a2 = A[(i + 2) * K + k]!, a3 = A[(i + 3) * K + k]!;
        const bo = k * N;
        for (let j = 0; j < N; j++) {
          const b = B[bo + j]!;
          C[c0 + j]! += a0 * b;
          C[c1 + j]! += a1 * b;
          C[c2 + j]! += a2 * b;
          C[c3 + j]! += a3 * b;
        }
      }
    }
    for (; i < M; i++) {
      const ci = i * N;
      for (let k = k0; k < k1; k++) {
        const av = A[i * K + k]!;
        const bo = k * N;
        for (let j = 0; j < N; j++) C[ci + j]! += av * B[bo + j]!;
      }
    }
  }
}

/** Copy a strided [R, C] matrix starting at `off` into dense row-major `dst`. */
export function pack(src: TensorData["data"], off: number, R: number, Cn: number, sr: number, sc: number, dst: Float64Array): void {
  if (sc === 1) {
    for (let r = 0; r < R; r++) {
      const o = off + r * sr, d = r * Cn;
      for (let c = 0; c < Cn; c++) dst[d + c] = src[o + c]!;
    }
    return;
  }
  for (let r = 0; r < R; r++) for (let c = 0; c < Cn; c++) dst[r * Cn + c] = src[off + r * sr + c * sc]!;
}

/**
 * Composites whose indices go through these ops and whose bounds errors PyTorch words in their own
 * terms; `IndexAttrs.caller` selects the wording (the native kernels number them in this order,
 * from 1).
 */
export const INDEX_CALLERS = ["embedding", "cross_entropy", "one_hot", "nll_loss"] as const;
export type IndexCaller = (typeof INDEX_CALLERS)[number];

/** gather/scatter_add/index_select/index_add attributes: `dim` normalized; see INDEX_CALLERS. */
export interface IndexAttrs extends DimAttrs { readonly caller?: IndexCaller }

/**
 * The error for index `v` outside [0, size) at `dim`. PyTorch rejects negative indices in these
 * ops (gather: "index -1 is out of bounds for dimension 0 with size 3"; index_select, index_add
 * and embedding: "index out of range in self"), so they do not wrap.
 */
export function indexError(op: string, v: number, size: number, dim: number, caller?: IndexCaller): Error {
  if (caller === "cross_entropy" || caller === "nll_loss") return new LoomIndexError(`[${caller}] Target ${v} is out of bounds.`);
  if (caller === "one_hot") {
    return new LoomValueError(v < 0 ? "[one_hot] class values must be non-negative" : `[one_hot] class values must be smaller than num_classes (${size}), got ${v}`);
  }
  return new LoomIndexError(`[${caller ?? op}] index ${v} is out of bounds for dimension ${dim} with size ${size}`);
}

function checkIndex(op: string, v: number, size: number, dim: number, caller?: IndexCaller): number {
  if (!(v >= 0 && v < size)) throw indexError(op, v, size, dim, caller);
  return v;
}

/** PyTorch treats a 0-d operand of these ops as 1-D of size 1 (ensure_nonempty_dim/size). */
function nd1(shape: readonly number[]): readonly number[] {
  return shape.length ? shape : [1];
}
function as1d(t: TensorData): TensorData {
  return t.shape.length ? t : { ...t, shape: [1], strides: [1] };
}

/** Visit (outputIndex, sourceStorageIndex) pairs of gather semantics: out[..i..] = x[.. index[..i..] at dim ..]. */
function gatherPairs(op: string, x0: TensorData, index0: TensorData, a: IndexAttrs, fn: (i: number, xi: number, ii: number) => void) {
  const x = as1d(x0), index = as1d(index0), dim = a.dim;
  const size = x.shape[dim]!;
  const xs = x.strides.map((s, d) => (d === dim ? 0 : s));
  forEachStrided(index.shape, [{ strides: xs, offset: x.offset }, index], (i, idx) => {
    const k = checkIndex(op, index.data[idx[1]!]!, size, dim, a.caller);
    fn(i, idx[0]! + k * x.strides[dim]!, idx[1]!);
  });
}

function checkGatherShapes(op: string, x: readonly number[], index: readonly number[], dim: number) {
  const xs = nd1(x), is = nd1(index);
  const bad = is.length !== xs.length || is.some((s, d) => d !== dim && s > xs[d]!);
  if (bad) throw new LoomShapeError(`[${op}] index ${fmtShape(index)} does not fit input ${fmtShape(x)} at dim ${dim}: same number of dims, sizes must be <= except at dim`);
}

/** The gradient `g` (shaped like `index`) for a `src` of shape `want` >= index: zeros where src was not read. */
function padTo<T extends Diff<T>>(g: T, want: readonly number[]): T {
  if (shapesEqual(g.shape, want)) return g;
  let r = g.reshape(nd1(g.shape));
  const ws = nd1(want);
  ws.forEach((s, d) => {
    const have = r.shape[d]!;
    if (have !== s) r = r._apply(slice_backward, [], { dim: d, start: 0, end: have, step: 1, input_shape: [...r.shape.slice(0, d), s, ...r.shape.slice(d + 1)] });
  });
  return r.reshape(want);
}

/**
 * torch.gather(input, dim, index): out[i][j] = input[index[i][j]][j] for dim 0.
 * @param x - any shape (0-d counts as [1]); index - int64|int32, same number of dims as x
 * @returns shaped as index, dtype of x
 * @throws LoomIndexError for an index outside [0, size) (negative indices do not wrap)
 */
export const gather: KernelOp<IndexAttrs> = defineOp<IndexAttrs, KernelOp<IndexAttrs>>({
  kind: "kernel", arity: 2, name: "gather",
  shape: ([x, index], a) => {
    requireInt64Index("gather", index!.dtype);
    checkGatherShapes("gather", x!.shape, index!.shape, a.dim);
    return [...index!.shape];
  },
  dtype: sameDtype,
  ref: ([x, index], a, out) => gatherPairs("gather", x!, index!, a, (i, xi) => { out.data[i] = x!.data[xi]!; }),
  grad: (g, [x, index], _o, a) => [x!.zeros_like()._apply(scatter_add, [index!, g], { dim: a.dim }), null],
  describe: describeIndex,
});

/** self and the added source must share a dtype, as torch requires (no silent cast of src). */
function sameSourceDtype(op: string, [x, _index, src]: readonly { dtype: DType }[]): DType {
  if (x!.dtype !== src!.dtype) throw new LoomDtypeError(`[${op}] self (${x!.dtype}) and source (${src!.dtype}) must have the same dtype`);
  return x!.dtype;
}

/**
 * torch.scatter_add(input, dim, index, src): out = input; out[index[i][j]][j] += src[i][j].
 * @param index - same number of dims as input and src (0-d counts as [1]), sizes <= src's
 * @returns shaped as input
 */
export const scatter_add: KernelOp<IndexAttrs> = defineOp<IndexAttrs, KernelOp<IndexAttrs>>({
  kind: "kernel", arity: 3, name: "scatter_add",
  shape: ([x, index, src], a) => {
    requireInt64Index("scatter_add", index!.dtype);
    checkGatherShapes("scatter_add", x!.shape, index!.shape, a.dim);
    const is = nd1(index!.shape), ss = nd1(src!.shape);
    if (ss.length !== is.length || is.some((s, d) => s > ss[d]!)) throw new LoomShapeError(`[scatter_add] index ${fmtShape(index!.shape)} is larger than src ${fmtShape(src!.shape)}`);
    return [...x!.shape];
  },
  dtype: (ms) => sameSourceDtype("scatter_add", ms),
  ref: ([x, index, src], a, out0) => {
    const out = as1d(out0);
    forEachStrided(x!.shape, [x!], (i, idx) => { out.data[i] = x!.data[idx[0]!]!; });
    const srcView = as1d(src!);
    const so: number[] = [];
    forEachStrided(nd1(index!.shape), [srcView], (_i, idx) => { so.push(idx[0]!); });
    gatherPairs("scatter_add", out, index!, a, (i, oi) => { out.data[oi]! += src!.data[so[i]!]!; });
  },
  // src elements outside index's extent are not read: zero gradient (PyTorch's backward raises there)
  grad: (g, [_x, index, src], _o, a, needs) => [needs[0] ? g : null, null, needs[2] ? padTo(g._apply(gather, [index!], { dim: a.dim }), src!.shape) : null],
  describe: describeIndex,
});

/**
 * torch.index_select(input, dim, index) with a 1-D (or 0-d) index.
 * @returns input's shape with dim's size = numel(index); 0-d for a 0-d input (one index only)
 * @throws LoomIndexError for an index outside [0, size) (negative indices do not wrap)
 */
export const index_select: KernelOp<IndexAttrs> = defineOp<IndexAttrs, KernelOp<IndexAttrs>>({
  kind: "kernel", arity: 2, name: "index_select",
  shape: ([x, index], a) => {
    requireIndex("index_select", index!.dtype);
    if (index!.shape.length > 1) throw new LoomShapeError(`[index_select] index must be 1-D, got ${fmtShape(index!.shape)}`);
    const n = numel(index!.shape);
    if (x!.shape.length === 0) {
      // torch 1.13 returns the 0-d input for any n and its backward then fails; torch 2 rejects it
      if (n !== 1) throw new LoomIndexError(`[index_select] index to a 0-d tensor can have only 1 value, got ${n}`);
      return [];
    }
    const s = [...x!.shape];
    s[a.dim] = n;
    return s;
  },
  dtype: sameDtype,
  ref: ([x0, index], a, out0) => {
    const x = as1d(x0!), out = as1d(out0);
    const n = numel(index!.shape);
    const ks = Array.from({ length: n }, (_, j) => checkIndex("index_select", index!.data[index!.offset + j * (index!.strides[0] ?? 0)]!, x.shape[a.dim]!, a.dim, a.caller));
    const xs = x.strides.map((s, d) => (d === a.dim ? 0 : s));
    forEachStrided(out.shape, [{ strides: xs, offset: x.offset }], (i, idx) => {
      // the position along `dim` of output element i
      let rem = i;
      let pos = 0;
      for (let d = out.shape.length - 1; d >= 0; d--) {
        const s = out.shape[d]!;
        if (d === a.dim) { pos = rem % s; break; }
        rem = Math.floor(rem / s);
      }
      out.data[i] = x.data[idx[0]! + ks[pos]! * x.strides[a.dim]!]!;
    });
  },
  grad: (g, [x, index], _o, a) => [x!.zeros_like()._apply(index_add, [index!, g], { dim: a.dim }), null],
  describe: describeIndex,
});

/**
 * torch.index_add(input, dim, index, source): out = input; out[index[j]] += source[j] along dim.
 * @param index - 1-D or 0-d; source - input's shape with dim's size = numel(index) (0-d counts as [1])
 */
export const index_add: KernelOp<IndexAttrs> = defineOp<IndexAttrs, KernelOp<IndexAttrs>>({
  kind: "kernel", arity: 3, name: "index_add",
  shape: ([x, index, src], a) => {
    requireIndex("index_add", index!.dtype);
    if (index!.shape.length > 1) throw new LoomShapeError(`[index_add] index must be 1-D, got ${fmtShape(index!.shape)}`);
    const n = numel(index!.shape);
    const want = [...nd1(x!.shape)];
    want[a.dim] = n;
    const ss = nd1(src!.shape);
    if (ss.length !== want.length || ss.some((s, d) => s !== want[d])) {
      throw new LoomShapeError(`[index_add] source ${fmtShape(src!.shape)} does not match input ${fmtShape(x!.shape)} with ${n} indices at dim ${a.dim}`);
    }
    return [...x!.shape];
  },
  dtype: (ms) => sameSourceDtype("index_add", ms),
  ref: ([x, index, src0], a, out0) => {
    const out = as1d(out0), src = as1d(src0!);
    forEachStrided(x!.shape, [x!], (i, idx) => { out.data[i] = x!.data[idx[0]!]!; });
    const n = numel(index!.shape);
    const size = out.shape[a.dim]!;
    const ks = Array.from({ length: n }, (_, j) => checkIndex("index_add", index!.data[index!.offset + j * (index!.strides[0] ?? 0)]!, size, a.dim, a.caller));
    const os = out.strides.map((s, d) => (d === a.dim ? 0 : s));
    const posStride = src.strides[a.dim]!;
    const srcShape = [...src.shape];
    for (let j = 0; j < n; j++) {
      const one = { strides: src.strides, offset: src.offset + j * posStride };
      srcShape[a.dim] = 1;
      forEachStrided(srcShape, [{ strides: os, offset: ks[j]! * out.strides[a.dim]! }, one], (_i, idx) => {
        out.data[idx[0]!]! += src.data[idx[1]!]!;
      });
    }
  },
  // index_select of a 0-d g takes one index only: select from g as [1] (n may exceed 1 here)
  grad: (g, [_x, index, src], _o, a, needs) => [
    needs[0] ? g : null,
    null,
    needs[2] ? g.reshape(nd1(g.shape))._apply(index_select, [index!], { dim: a.dim }).reshape(src!.shape) : null,
  ],
  describe: describeIndex,
});

function describeIndex(a: IndexAttrs): string {
  return a.caller ? `dim=${a.dim} (${a.caller})` : `dim=${a.dim}`;
}

export interface TriAttrs { readonly diagonal: number; readonly upper: boolean }

/** torch.tril / triu over the last two dims (upper selects triu). */
export const tri: KernelOp<TriAttrs> = defineOp<TriAttrs, KernelOp<TriAttrs>>({
  kind: "kernel", arity: 1, name: "tri",
  shape: ([x], a) => {
    if (x!.shape.length < 2) throw new LoomShapeError(`[${a.upper ? "triu" : "tril"}] input tensor must have at least 2 dimensions, got ${fmtShape(x!.shape)}`);
    return sameShape([x!]);
  },
  dtype: sameDtype,
  ref: ([x], a, out) => {
    const R = x!.shape[x!.shape.length - 2]!, C = x!.shape[x!.shape.length - 1]!;
    forEachStrided(x!.shape, [x!], (i, idx) => {
      const c = i % C, r = Math.floor(i / C) % R;
      const keep = a.upper ? c - r >= a.diagonal : c - r <= a.diagonal;
      out.data[i] = keep ? x!.data[idx[0]!]! : 0;
    });
  },
  grad: (g, _x, _o, a) => [g._apply(tri, [], a)],
  describe: (a) => `${a.upper ? "triu" : "tril"} diagonal=${a.diagonal}`,
});
