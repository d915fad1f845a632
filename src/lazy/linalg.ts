/**
 * torch.linalg's decompositions that Loom takes from LAPACK: `svd`, `svdvals`, and the norms
 * built on them (`matrix_norm` with ord "nuc"; `norm(x, "nuc")` in free_functions.ts).
 *
 * The factorization is LAPACK's divide-and-conquer ?gesdd (OpenBLAS, through the native shim:
 * src/backends/native/lapack.ts) on the host, like torch's CPU path (torch.linalg.svd's default
 * driver is gesdd). A lazy input is realized for it (only it, as nonzero does); the results are
 * tensors of the input's kind. Loom writes no SVD of its own: without OpenBLAS these throw.
 *
 * Gradients: S carries the singular-value gradient dA = U·diag(gS)·Vh (Giles 2008, "An extended
 * collection of matrix derivative results", eq. for dσ; torch's svd_backward with gU = gV = 0),
 * which is exact for distinct singular values; U and Vh have no gradient rule: a gradient that
 * reaches them throws instead of being dropped.
 */
import { is_grad_enabled } from "../autograd/grad_mode.ts";
import { gesdd } from "../backends/native/lapack.ts";
import { LoomAutogradError, LoomDtypeError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { allocData, toFloat64, type TensorData } from "../tensor/storage.ts";
import type { TensorOps } from "./surface.ts";

/** torch.return_types.linalg_svd: `[U, S, Vh]` that also answers `.U`, `.S`, `.Vh`. */
export type SVDResult<S> = [S, S, S] & { readonly U: S; readonly S: S; readonly Vh: S };

type Recordable<S> = { _record(out: S, name: string, inputs: readonly S[], apply: (g: S) => (S | null)[]): void };

/** Check A for svd: [..., m, n], float32|float64, finite. */
function checkInput<S extends TensorOps<S>>(op: string, A: S): void {
  if (A.ndim < 2) throw new LoomShapeError(`[${op}] A must have at least 2 dimensions, got ${fmtShape(A.shape)}`);
  if (A.dtype !== "float32" && A.dtype !== "float64") {
    throw new LoomDtypeError(`[${op}] expected a float32 or float64 input (LAPACK sgesdd/dgesdd), got ${A.dtype} for A ${fmtShape(A.shape)}`);
  }
}

/**
 * Run ?gesdd on every matrix of the batch.
 * @returns the results as TensorData: S [..., k], U [..., m, m|k], Vh [..., n|k, n]
 */
function factor<S extends TensorOps<S>>(op: string, A: S, job: "N" | "S" | "A"): { S: TensorData; U: TensorData; Vh: TensorData } {
  checkInput(op, A);
  const shape = A.shape;
  const m = shape[shape.length - 2]!, n = shape[shape.length - 1]!, k = Math.min(m, n);
  const batch = shape.slice(0, -2);
  const count = batch.reduce((p, q) => p * q, 1);
  const uc = job === "A" ? m : k, vr = job === "A" ? n : k;
  const dt = A.dtype;
  const S = allocData(dt, [...batch, k]);
  const U = allocData(dt, job === "N" ? [0] : [...batch, m, uc]);
  const Vh = allocData(dt, job === "N" ? [0] : [...batch, vr, n]);
  const v = toFloat64(A._data()); // contiguous row-major values of A
  for (let b = 0; b < count; b++) {
    const rows = v.subarray(b * m * n, (b + 1) * m * n);
    const a = dt === "float64" ? rows : new Float32Array(rows); // gesdd factors a copy: no second one for float64
    for (let i = 0; i < a.length; i++) {
      if (!Number.isFinite(a[i]!)) {
        throw new LoomValueError(`[${op}] the input matrix ${b} of A ${fmtShape(shape)} contains a non-finite value (${a[i]}); the SVD is undefined`);
      }
    }
    if (k === 0) { // nothing to factor: full matrices are identities
      if (job === "A") {
        for (let i = 0; i < m; i++) U.data[b * m * m + i * m + i] = 1;
        for (let i = 0; i < n; i++) Vh.data[b * n * n + i * n + i] = 1;
      }
      continue;
    }
    let r;
    try {
      r = gesdd(a, m, n, job);
    } catch (e) {
      throw new LoomValueError(`[${op}] LAPACK ${dt === "float64" ? "dgesdd" : "sgesdd"} failed on A ${fmtShape(shape)}: ${(e as Error).message}`);
    }
    if (r.info > 0) throw new LoomValueError(`[${op}] the SVD of matrix ${b} of A ${fmtShape(shape)} did not converge (LAPACK info = ${r.info})`);
    (S.data as Float32Array).set(r.S, b * k);
    if (job !== "N") {
      (U.data as Float32Array).set(r.U, b * m * uc);
      (Vh.data as Float32Array).set(r.Vh, b * vr * n);
    }
  }
  return { S, U, Vh };
}

/** S as a tensor with the singular-value gradient of A (U, Vh reduced, constants). */
function withValueGrad<S extends TensorOps<S>>(A: S, Sv: S, U: S, Vh: S, k: number): S {
  if (!(A.requires_grad && is_grad_enabled())) return Sv;
  const out = Sv.detach();
  (out as unknown as Recordable<S>)._record(out, "linalg_svd", [A], (g) => {
    const u = U.shape[U.ndim - 1] === k ? U : U.narrow(-1, 0, k); // [..., m, k]
    const vh = Vh.shape[Vh.ndim - 2] === k ? Vh : Vh.narrow(-2, 0, k); // [..., k, n]
    return [u.mul(g.unsqueeze(-2)).matmul(vh)]; // U·diag(g)·Vh
  });
  return out;
}

/** U or Vh: a gradient reaching it throws (no rule), so none is silently dropped. */
function noGrad<S extends TensorOps<S>>(A: S, t: S, name: string): S {
  if (!(A.requires_grad && is_grad_enabled())) return t;
  (t as unknown as Recordable<S>)._record(t, `linalg_svd.${name}`, [A], () => {
    throw new LoomAutogradError(`[linalg.svd] the gradient through ${name} is not implemented (only S has a gradient rule); use linalg.svdvals or detach ${name}`);
  });
  return t;
}

/**
 * Singular value decomposition A = U·diag(S)·Vh (torch.linalg.svd), by LAPACK's gesdd.
 * @param A - [..., m, n] float32|float64 (lazy inputs are realized)
 * @param opts.full_matrices - true (torch's default): U [..., m, m], Vh [..., n, n]; false: U [..., m, k],
 *   Vh [..., k, n], k = min(m, n)
 * @returns [U, S, Vh] (also `.U`, `.S`, `.Vh`), A's dtype and kind; S [..., k] descending, ≥ 0.
 *   Singular vectors are unique only up to sign (LAPACK's choice is kept).
 * @throws LoomShapeError for fewer than 2 dims; LoomDtypeError for other dtypes; LoomValueError
 *   for non-finite entries, no convergence, or no LAPACK (OpenBLAS) available
 */
export function svd<S extends TensorOps<S>>(A: S, opts: { full_matrices?: boolean } = {}): SVDResult<S> {
  const full = opts.full_matrices ?? true;
  const r = factor("linalg.svd", A, full ? "A" : "S");
  const k = r.S.shape[r.S.shape.length - 1]!;
  const U = A._constant(r.U), Vh = A._constant(r.Vh);
  const Sv = withValueGrad(A, A._constant(r.S), U, Vh, k);
  const Uo = noGrad(A, U, "U"), Vo = noGrad(A, Vh, "Vh");
  return Object.assign([Uo, Sv, Vo] as [S, S, S], { U: Uo, S: Sv, Vh: Vo });
}

/**
 * The singular values of A (torch.linalg.svdvals), descending, with their gradient.
 * @param A - [..., m, n] float32|float64
 * @returns [..., min(m, n)], A's dtype
 * @throws as svd
 */
export function svdvals<S extends TensorOps<S>>(A: S): S {
  if (!(A.requires_grad && is_grad_enabled())) return A._constant(factor("linalg.svdvals", A, "N").S);
  return svd(A, { full_matrices: false }).S; // the gradient needs U and Vh
}

/**
 * Matrix norm over two dims (torch.linalg.matrix_norm): "fro" (√Σ a²) or "nuc" (Σ σ, the
 * nuclear norm, from svdvals).
 * @param A - [..., m, n] (dims `dim` are the matrix), float32|float64 for "nuc"
 * @param opts.dim - the two matrix dims (default [-2, -1])
 * @returns the batch dims (with size-1 matrix dims when keepdim)
 * @throws LoomValueError for another ord; LoomShapeError for a bad dim pair
 */
export function matrix_norm<S extends TensorOps<S>>(A: S, ord: "fro" | "nuc" = "fro", opts: { dim?: readonly [number, number]; keepdim?: boolean } = {}): S {
  const dim = opts.dim ?? [-2, -1];
  const keepdim = opts.keepdim ?? false;
  if (A.ndim < 2) throw new LoomShapeError(`[linalg.matrix_norm] A must have at least 2 dimensions, got ${fmtShape(A.shape)}`);
  const d0 = dim[0] < 0 ? dim[0] + A.ndim : dim[0], d1 = dim[1] < 0 ? dim[1] + A.ndim : dim[1];
  if (dim.length !== 2 || d0 === d1 || d0 < 0 || d1 < 0 || d0 >= A.ndim || d1 >= A.ndim) {
    throw new LoomShapeError(`[linalg.matrix_norm] dim must be two different dims of A ${fmtShape(A.shape)}, got [${dim.join(", ")}]`);
  }
  if (ord === "fro") return A.norm(2, [d0, d1], keepdim);
  if (ord !== "nuc") throw new LoomValueError(`[linalg.matrix_norm] ord='${String(ord)}' is not supported; use 'fro' or 'nuc'`);
  // move the matrix dims last (d0 then d1), sum the singular values
  const rest = [...Array(A.ndim).keys()].filter((d) => d !== d0 && d !== d1);
  const s = svdvals(A.permute([...rest, d0, d1])).sum(-1);
  if (!keepdim) return s;
  const shape = [...A.shape];
  shape[d0] = 1;
  shape[d1] = 1;
  return s.reshape(shape);
}
