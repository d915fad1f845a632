/**
 * spmm: y = x Wᵀ with W [N, K] a sparse matrix in CSR form (a pruned Linear weight,
 * src/weights/sparse.ts), never materializing W. One output element is a dot product over one
 * row's non-zeros: y[m, n] = Σ_{p ∈ [crow[n], crow[n+1])} values[p] · x[m, col[p]], summed in
 * float64 in p order and rounded once to the output dtype (the native kernel, k_spmm in
 * native/kernels/sparse.c, does the same, so the two agree bit for bit).
 * Source: the CSR format of torch.sparse_csr_tensor (crow_indices, col_indices, values);
 * torch.sparse.mm(W, x.T).T is the same product.
 *
 * `row_indices` (the row of each non-zero, CSR order) is not read by the product: the gradient
 * rule needs it (dx scatters g[:, row[p]]·values[p] to column col[p]), and computing it from
 * crow inside a graph would take a data-dependent op.
 */
import { LoomDtypeError, LoomIndexError, LoomShapeError, fmtShape } from "../../tensor/errors.ts";
import { toFloat64 } from "../../tensor/storage.ts";
import { isFloating, isIntegral } from "../../tensor/dtype.ts";
import { defineOp, type KernelOp } from "../op.ts";
import { index_add, index_select } from "./linalg_index.ts";

/** No attributes: N is crow's length - 1, K is x's last dim. */
export type SpmmAttrs = Record<string, never>;

/** Index value at position i of a 1-D index TensorData. */
function at(t: { data: ArrayLike<number>; offset: number; strides: readonly number[] }, i: number): number {
  return Number(t.data[t.offset + i * (t.strides[0] ?? 1)]!);
}

/**
 * @param x - [..., K] float; crow_indices - [N + 1] int32|int64; col_indices, row_indices - [nnz]
 *   int32|int64; values - [nnz], x's dtype
 * @returns [..., N], x's dtype
 * @throws LoomShapeError / LoomDtypeError at record time; LoomIndexError when run on a malformed
 *   CSR (crow not non-decreasing from 0 to nnz, or a column outside [0, K))
 */
export const spmm: KernelOp<SpmmAttrs> = defineOp<SpmmAttrs, KernelOp<SpmmAttrs>>({
  kind: "kernel", arity: 5, name: "spmm",
  shape: ([x, crow, col, values, row]) => {
    const nnz = col!.shape[0];
    const ok = x!.shape.length >= 1 && crow!.shape.length === 1 && crow!.shape[0]! >= 1 && col!.shape.length === 1 &&
      values!.shape.length === 1 && values!.shape[0] === nnz && row!.shape.length === 1 && row!.shape[0] === nnz;
    if (!ok) {
      throw new LoomShapeError(`[spmm] shapes x ${fmtShape(x!.shape)}, crow_indices ${fmtShape(crow!.shape)}, col_indices ${fmtShape(col!.shape)}, values ${fmtShape(values!.shape)}, row_indices ${fmtShape(row!.shape)} do not fit x [..., K], crow [N + 1], col/values/row [nnz]`);
    }
    return [...x!.shape.slice(0, -1), crow!.shape[0]! - 1];
  },
  dtype: ([x, crow, col, values, row]) => {
    if (!isFloating(x!.dtype) || values!.dtype !== x!.dtype) throw new LoomDtypeError(`[spmm] x (${x!.dtype}) and values (${values!.dtype}) must share a floating dtype`);
    for (const [n, t] of [["crow_indices", crow], ["col_indices", col], ["row_indices", row]] as const) {
      if (!isIntegral(t!.dtype)) throw new LoomDtypeError(`[spmm] ${n} must be int32 or int64, got ${t!.dtype}`);
    }
    return x!.dtype;
  },
  ref: ([x, crow, col, values], _a, out) => {
    const K = x!.shape[x!.shape.length - 1]!, N = crow!.shape[0]! - 1, nnz = col!.shape[0]!;
    const M = N === 0 ? 0 : out.data.length / N;
    const xv = toFloat64(x!), v = toFloat64(values!);
    const cp = new Int32Array(N + 1), cc = new Int32Array(nnz);
    for (let n = 0; n <= N; n++) {
      cp[n] = at(crow!, n);
      if ((n === 0 && cp[0] !== 0) || (n > 0 && cp[n]! < cp[n - 1]!) || cp[n]! > nnz || (n === N && cp[N] !== nnz)) {
        throw new LoomIndexError(`[spmm] crow_indices[${n}] = ${cp[n]} is out of bounds: crow_indices must rise from 0 to nnz = ${nnz}`);
      }
    }
    for (let p = 0; p < nnz; p++) {
      cc[p] = at(col!, p);
      if (cc[p]! < 0 || cc[p]! >= K) throw new LoomIndexError(`[spmm] col_indices[${p}] = ${cc[p]} is out of bounds for K = ${K}`);
    }
    for (let m = 0; m < M; m++) {
      const xo = m * K;
      for (let n = 0; n < N; n++) {
        let s = 0;
        for (let p = cp[n]!; p < cp[n + 1]!; p++) s += v[p]! * xv[xo + cc[p]!]!;
        out.data[m * N + n] = s;
      }
    }
  },
  grad: (g, [x, _crow, col, values, row], _o, _a, needs) => {
    const gr = g._apply(index_select, [row!], { dim: g.shape.length - 1 }); // [..., nnz]: g[..., row[p]]
    return [
      needs[0] ? x!.zeros_like()._apply(index_add, [col!, gr.mul(values!)], { dim: x!.shape.length - 1 }) : null,
      null, null,
      needs[3] ? gr.mul(x!._apply(index_select, [col!], { dim: x!.shape.length - 1 })).reshape([-1, col!.shape[0]!]).sum(0) : null,
      null,
    ];
  },
});
