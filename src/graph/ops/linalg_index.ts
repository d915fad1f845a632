/**
 * matmul (batched, broadcast batch dims), indexing (gather/scatter_add, index_select/index_add)
 * and triangular masks (tril/triu).
 */
import { LoomDtypeError, LoomIndexError, LoomShapeError, fmtShape } from "../../tensor/errors.ts";
import { broadcastShapes, broadcastStrides, numel } from "../../tensor/shape.ts";
import type { DType } from "../../tensor/dtype.ts";
import { forEachStrided, type TensorData } from "../../tensor/storage.ts";
import { requireIndex, sameDtype, sameShape } from "../infer.ts";
import { defineOp, type KernelOp } from "../op.ts";
import type { DimAttrs } from "./movement.ts";

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
          C[c0 + j] += a0 * b;
          C[c1 + j] += a1 * b;
          C[c2 + j] += a2 * b;
          C[c3 + j] += a3 * b;
        }
      }
    }
    for (; i < M; i++) {
      const ci = i * N;
      for (let k = k0; k < k1; k++) {
        const av = A[i * K + k]!;
        const bo = k * N;
        for (let j = 0; j < N; j++) C[ci + j] += av * B[bo + j]!;
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

function checkIndex(op: string, v: number, size: number, dim: number): number {
  if (v < -size || v >= size) throw new LoomIndexError(`[${op}] index ${v} is out of bounds for dimension ${dim} with size ${size}`);
  return v < 0 ? v + size : v;
}

/** Visit (outputIndex, sourceStorageIndex) pairs of gather semantics: out[..i..] = x[.. index[..i..] at dim ..]. */
function gatherPairs(op: string, x: TensorData, index: TensorData, dim: number, fn: (i: number, xi: number, ii: number) => void) {
  const size = x.shape[dim]!;
  const xs = x.strides.map((s, d) => (d === dim ? 0 : s));
  forEachStrided(index.shape, [{ strides: xs, offset: x.offset }, index], (i, idx) => {
    const k = checkIndex(op, index.data[idx[1]!]!, size, dim);
    fn(i, idx[0]! + k * x.strides[dim]!, idx[1]!);
  });
}

function checkGatherShapes(op: string, x: readonly number[], index: readonly number[], dim: number) {
  const bad = index.length !== x.length || index.some((s, d) => d !== dim && s > x[d]!);
  if (bad) throw new LoomShapeError(`[${op}] index ${fmtShape(index)} does not fit input ${fmtShape(x)} at dim ${dim}: sizes must be <= except at dim`);
}

/** torch.gather(input, dim, index): out[i][j] = input[index[i][j]][j] for dim 0. */
export const gather: KernelOp<DimAttrs> = defineOp<DimAttrs, KernelOp<DimAttrs>>({
  kind: "kernel", arity: 2, name: "gather",
  shape: ([x, index], a) => {
    requireIndex("gather", index!.dtype);
    checkGatherShapes("gather", x!.shape, index!.shape, a.dim);
    return [...index!.shape];
  },
  dtype: sameDtype,
  ref: ([x, index], a, out) => gatherPairs("gather", x!, index!, a.dim, (i, xi) => { out.data[i] = x!.data[xi]!; }),
  grad: (g, [x, index], _o, a) => [x!.zeros_like()._apply(scatter_add, [index!, g], a), null],
  describe: (a) => `dim=${a.dim}`,
});

/** self and the added source must share a dtype, as torch requires (no silent cast of src). */
function sameSourceDtype(op: string, [x, _index, src]: readonly { dtype: DType }[]): DType {
  if (x!.dtype !== src!.dtype) throw new LoomDtypeError(`[${op}] self (${x!.dtype}) and source (${src!.dtype}) must have the same dtype`);
  return x!.dtype;
}

/** torch.scatter_add(input, dim, index, src): out = input; out[index[i][j]][j] += src[i][j]. */
export const scatter_add: KernelOp<DimAttrs> = defineOp<DimAttrs, KernelOp<DimAttrs>>({
  kind: "kernel", arity: 3, name: "scatter_add",
  shape: ([x, index, src], a) => {
    requireIndex("scatter_add", index!.dtype);
    checkGatherShapes("scatter_add", x!.shape, index!.shape, a.dim);
    if (index!.shape.some((s, d) => s > src!.shape[d]!)) throw new LoomShapeError(`[scatter_add] index ${fmtShape(index!.shape)} is larger than src ${fmtShape(src!.shape)}`);
    return [...x!.shape];
  },
  dtype: (ms) => sameSourceDtype("scatter_add", ms),
  ref: ([x, index, src], a, out) => {
    forEachStrided(x!.shape, [x!], (i, idx) => { out.data[i] = x!.data[idx[0]!]!; });
    const srcView = { strides: src!.strides, offset: src!.offset };
    const so: number[] = [];
    forEachStrided(index!.shape, [srcView], (_i, idx) => { so.push(idx[0]!); });
    gatherPairs("scatter_add", out, index!, a.dim, (i, oi) => { out.data[oi] += src!.data[so[i]!]!; });
  },
  grad: (g, [_x, index], _o, a, needs) => [needs[0] ? g : null, null, needs[2] ? g._apply(gather, [index!], a) : null],
  describe: (a) => `dim=${a.dim}`,
});

/** torch.index_select(input, dim, index) with a 1-D index. */
export const index_select: KernelOp<DimAttrs> = defineOp<DimAttrs, KernelOp<DimAttrs>>({
  kind: "kernel", arity: 2, name: "index_select",
  shape: ([x, index], a) => {
    requireIndex("index_select", index!.dtype);
    if (index!.shape.length > 1) throw new LoomShapeError(`[index_select] index must be 1-D, got ${fmtShape(index!.shape)}`);
    const s = [...x!.shape];
    s[a.dim] = numel(index!.shape);
    return s;
  },
  dtype: sameDtype,
  ref: ([x, index], a, out) => {
    const n = numel(index!.shape);
    const ks = Array.from({ length: n }, (_, j) => checkIndex("index_select", index!.data[index!.offset + j * (index!.strides[0] ?? 0)]!, x!.shape[a.dim]!, a.dim));
    const xs = x!.strides.map((s, d) => (d === a.dim ? 0 : s));
    const dimOut = out.shape.map((_, d) => d);
    forEachStrided(out.shape, [{ strides: xs, offset: x!.offset }], (i, idx) => {
      // the position along `dim` of output element i
      let rem = i;
      let pos = 0;
      for (let d = dimOut.length - 1; d >= 0; d--) {
        const s = out.shape[d]!;
        if (d === a.dim) { pos = rem % s; break; }
        rem = Math.floor(rem / s);
      }
      out.data[i] = x!.data[idx[0]! + ks[pos]! * x!.strides[a.dim]!]!;
    });
  },
  grad: (g, [x, index], _o, a) => [x!.zeros_like()._apply(index_add, [index!, g], a), null],
  describe: (a) => `dim=${a.dim}`,
});

/** torch.index_add(input, dim, index, source): out = input; out[index[j]] += source[j] along dim. */
export const index_add: KernelOp<DimAttrs> = defineOp<DimAttrs, KernelOp<DimAttrs>>({
  kind: "kernel", arity: 3, name: "index_add",
  shape: ([x, index, src], a) => {
    requireIndex("index_add", index!.dtype);
    const want = [...x!.shape];
    want[a.dim] = numel(index!.shape);
    if (src!.shape.length !== want.length || src!.shape.some((s, d) => s !== want[d])) {
      throw new LoomShapeError(`[index_add] source ${fmtShape(src!.shape)} does not match input ${fmtShape(x!.shape)} with ${numel(index!.shape)} indices at dim ${a.dim}`);
    }
    return [...x!.shape];
  },
  dtype: (ms) => sameSourceDtype("index_add", ms),
  ref: ([x, index, src], a, out) => {
    forEachStrided(x!.shape, [x!], (i, idx) => { out.data[i] = x!.data[idx[0]!]!; });
    const n = numel(index!.shape);
    const size = x!.shape[a.dim]!;
    const ks = Array.from({ length: n }, (_, j) => checkIndex("index_add", index!.data[index!.offset + j * (index!.strides[0] ?? 0)]!, size, a.dim));
    const os = out.strides.map((s, d) => (d === a.dim ? 0 : s));
    const posStride = src!.strides[a.dim]!;
    const srcShape = [...src!.shape];
    for (let j = 0; j < n; j++) {
      const one = { strides: src!.strides, offset: src!.offset + j * posStride };
      srcShape[a.dim] = 1;
      forEachStrided(srcShape, [{ strides: os, offset: ks[j]! * out.strides[a.dim]! }, one], (_i, idx) => {
        out.data[idx[0]!] += src!.data[idx[1]!]!;
      });
    }
  },
  grad: (g, [_x, index], _o, a, needs) => [needs[0] ? g : null, null, needs[2] ? g._apply(index_select, [index!], a) : null],
  describe: (a) => `dim=${a.dim}`,
});

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
