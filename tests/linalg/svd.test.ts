/**
 * linalg.svd / svdvals / matrix_norm and norm(p="nuc") (src/lazy/linalg.ts, LAPACK sgesdd through
 * native/kernels/lapack.c) against torch 1.13 goldens (gen_svd_goldens.py -> svd_goldens.json):
 * singular values, singular vectors up to the sign of each pair, reconstruction, orthonormality,
 * a rank-deficient matrix, the nuclear norm and its gradient; eager == lazy; the errors.
 * The factorization is LAPACK's on the host; the products around it run on each backend.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { describeWithLapack } from "../lapack.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { expectClose, fromArr, readGolden, type Arr } from "../nn/helpers.ts";
import { thrown } from "../thrown.ts";

interface Case { A: Arr; U: Arr; S: Arr; Vh: Arr; U_full: Arr; Vh_full: Arr; S64: Arr; nuc: Arr; nuc_grad: Arr }
const golden = readGolden<Record<string, Case> & { norm_nuc_2d: { A: Arr; value: Arr } }>(new URL("./svd_goldens.json", import.meta.url));
const NAMES = ["tall", "wide", "square", "rank2", "batched"] as const;
const maybe = describeWithLapack("LAPACK");

const vals = (t: loom.Tensor) => Array.from(t.dataSync());
/** max |x| of a golden array (the scale float32 errors are relative to). */
const scale = (a: Arr) => Math.max(...a.data.map(Math.abs));

/** Row-major [..., r, c] matrices of a flat list. */
function mats(data: number[], shape: readonly number[]): number[][][] {
  const r = shape[shape.length - 2]!, c = shape[shape.length - 1]!;
  const out: number[][][] = [];
  for (let b = 0; b < data.length / (r * c); b++) out.push(Array.from({ length: r }, (_, i) => data.slice(b * r * c + i * c, b * r * c + (i + 1) * c)));
  return out;
}

/** Compare singular vectors up to one sign per singular pair (LAPACK builds may choose either). */
function expectVectorsUpToSign(U: loom.Tensor, Vh: loom.Tensor, g: Case, k: number): void {
  const Ua = mats(vals(U), U.shape), Ue = mats(g.U.data, g.U.shape);
  const Va = mats(vals(Vh), Vh.shape), Ve = mats(g.Vh.data, g.Vh.shape);
  for (let b = 0; b < Ua.length; b++) {
    for (let j = 0; j < k; j++) {
      let dot = 0;
      for (let i = 0; i < Ua[b]!.length; i++) dot += Ua[b]![i]![j]! * Ue[b]![i]![j]!;
      const s = Math.sign(dot);
      for (let i = 0; i < Ua[b]!.length; i++) expect(Math.abs(Ua[b]![i]![j]! * s - Ue[b]![i]![j]!)).toBeLessThan(2e-5);
      for (let i = 0; i < Va[b]![j]!.length; i++) expect(Math.abs(Va[b]![j]![i]! * s - Ve[b]![j]![i]!)).toBeLessThan(2e-5);
    }
  }
}

maybe.each(BACKENDS)("linalg.svd matches torch 1.13 on %s", (backend) => {
  useBackend(backend);
  for (const name of NAMES) {
    const g = golden[name]!;
    test(`${name}: values, vectors up to sign, reconstruction, orthonormal factors`, () => {
      const A = fromArr(g.A);
      const [U, S, Vh] = loom.linalg.svd(A, { full_matrices: false });
      expect(U.dtype).toBe("float32");
      expect([...U.shape]).toEqual(g.U.shape);
      expect([...Vh.shape]).toEqual(g.Vh.shape);
      const tol = 4e-6 * scale(g.S64);
      expectClose(S, g.S64, { rtol: 0, atol: tol, what: `${name} S` });
      const k = S.shape[S.ndim - 1]!;
      // distinct singular values fix the vectors up to sign; rank2's null space does not
      if (name !== "rank2") expectVectorsUpToSign(U, Vh, g, k);
      // U·diag(S)·Vh = A, UᵀU = I, Vh·Vhᵀ = I
      expectClose(U.mul(S.unsqueeze(-2)).matmul(Vh), g.A, { rtol: 0, atol: 4e-6 * scale(g.A) * Math.sqrt(k), what: `${name} reconstruction` });
      const eye = loom.eye(k).expand([...S.shape.slice(0, -1), k, k]).contiguous();
      expectClose(U.mT.matmul(U), { shape: [...eye.shape], dtype: "float32", data: vals(eye) }, { rtol: 0, atol: 2e-6, what: "UᵀU" });
      expectClose(Vh.matmul(Vh.mT), { shape: [...eye.shape], dtype: "float32", data: vals(eye) }, { rtol: 0, atol: 2e-6, what: "VhVhᵀ" });
    });
    test(`${name}: full_matrices shapes and orthogonality`, () => {
      const { U, S, Vh } = loom.linalg.svd(fromArr(g.A));
      expect([...U.shape]).toEqual(g.U_full.shape);
      expect([...Vh.shape]).toEqual(g.Vh_full.shape);
      const m = U.shape[U.ndim - 1]!, n = Vh.shape[Vh.ndim - 1]!;
      expectClose(U.mT.matmul(U), { shape: [...U.shape.slice(0, -2), m, m], dtype: "float32", data: vals(loom.eye(m).expand([...U.shape.slice(0, -2), m, m]).contiguous()) }, { rtol: 0, atol: 2e-6 });
      expectClose(Vh.matmul(Vh.mT), { shape: [...Vh.shape.slice(0, -2), n, n], dtype: "float32", data: vals(loom.eye(n).expand([...Vh.shape.slice(0, -2), n, n]).contiguous()) }, { rtol: 0, atol: 2e-6 });
      expectClose(S, g.S64, { rtol: 0, atol: 4e-6 * scale(g.S64) });
    });
    test(`${name}: nuclear norm and its gradient`, () => {
      const A = fromArr(g.A).requires_grad_(true);
      const nuc = loom.linalg.matrix_norm(A, "nuc");
      expectClose(nuc, g.nuc, { rtol: 1e-5, atol: 1e-6, what: `${name} nuc` });
      if (name === "rank2") return; // the subgradient at a rank-deficient matrix is not unique
      nuc.sum().backward();
      expectClose(A.grad!, g.nuc_grad, { rtol: 0, atol: 2e-5, what: `${name} d nuc / dA` });
    });
  }
  test("rank-deficient: trailing singular values vanish, rank-2 truncation is exact", () => {
    const g = golden.rank2;
    const { U, S, Vh } = loom.linalg.svd(fromArr(g.A), { full_matrices: false });
    const s = vals(S);
    expect(s[2]!).toBeLessThan(1e-5 * s[0]!);
    expect(s[3]!).toBeLessThan(1e-5 * s[0]!);
    const r2 = U.narrow(1, 0, 2).mul(S.narrow(0, 0, 2)).matmul(Vh.narrow(0, 0, 2));
    expectClose(r2, g.A, { rtol: 0, atol: 1e-5 * scale(g.A) });
  });
  test("norm(A, 'nuc') and svdvals", () => {
    const g = golden.norm_nuc_2d;
    expectClose(loom.norm(fromArr(g.A), "nuc"), g.value, { rtol: 1e-5, atol: 1e-6 });
    expectClose(loom.norm(fromArr(g.A).unsqueeze(0), { p: "nuc", dim: [1, 2] }), { ...g.value, shape: [1] }, { rtol: 1e-5, atol: 1e-6 });
    expectClose(loom.linalg.svdvals(fromArr(golden.tall.A)), golden.tall.S64, { rtol: 0, atol: 4e-6 * scale(golden.tall.S64) });
  });
  test("eager == lazy (bit-equal: the same LAPACK call)", () => {
    const A = fromArr(golden.square.A);
    const e = loom.linalg.svd(A);
    const l = loom.linalg.svd(A.lazy());
    for (let i = 0; i < 3; i++) expect(vals((l[i] as loom.LazyTensor).eval())).toEqual(vals(e[i]!));
    expect(vals(loom.norm(A.lazy(), "nuc").eval())).toEqual(vals(loom.norm(A, "nuc")));
  });
});

maybe("linalg.svd errors", () => {
  test("bad input gets typed errors naming the op, shape and dtype", () => {
    const e1 = thrown(() => loom.linalg.svd(loom.ones([3])));
    expect(e1).toBeInstanceOf(loom.LoomShapeError);
    expect(e1.message).toContain("[linalg.svd] A must have at least 2 dimensions, got [3]");
    const e2 = thrown(() => loom.linalg.svd(loom.ones([2, 2], { dtype: "int32" })));
    expect(e2).toBeInstanceOf(loom.LoomDtypeError);
    expect(e2.message).toContain("int32");
    const e3 = thrown(() => loom.linalg.svd(loom.tensor([[1, NaN], [0, 1]])));
    expect(e3).toBeInstanceOf(loom.LoomValueError);
    expect(e3.message).toContain("non-finite");
    const e4 = thrown(() => loom.norm(loom.ones([2, 2, 2]), "nuc"));
    expect(e4).toBeInstanceOf(loom.LoomShapeError);
    const e5 = thrown(() => loom.norm(loom.ones([2, 2]), "bogus" as "nuc"));
    expect(e5).toBeInstanceOf(loom.LoomValueError);
  });
  test("a gradient reaching U throws instead of being dropped", () => {
    const A = loom.tensor([[2, 1], [1, 3]], { dtype: "float32" }).requires_grad_(true);
    const { U } = loom.linalg.svd(A);
    const e = thrown(() => U.sum().backward());
    expect(e).toBeInstanceOf(loom.LoomAutogradError);
    expect(e.message).toContain("gradient through U");
  });
  test("float64 uses dgesdd", () => {
    const S = loom.linalg.svdvals(loom.tensor([[3, 0], [0, 4]], { dtype: "float64" }));
    expect(S.dtype).toBe("float64");
    expect(vals(S)).toEqual([4, 3]);
  });
});
