/**
 * Products with one row or one column (decoding's x·W, a matrix times a vector) go to a gemv
 * instead of gemm: float32 x·W with a row-major W to the row-streaming kernel split over blocks
 * of 64 rows (matmul.c gemv_krows; K = 300 here is 5 blocks, the last of 44 rows; N = 257 ends
 * in a masked tail), the others to BLAS gemv (blas.c GEMV_FORWARD): OpenBLAS's gemm packs the whole matrix even then. Every
 * operand layout the product can hand over (a row or a transposed column for the vector, a
 * row-major or transposed matrix) is checked against a float64 reference within the float32
 * dot-product bound, eager and lazy (the same kernel: bit-equal), float32 and float64.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { NATIVE, nativeOrSkip } from "./helpers.ts";

/** y = a @ b in float64 from the tensors' values; a [M, K], b [K, N]. */
function reference(a: loom.Tensor, b: loom.Tensor): { y: Float64Array; scale: Float64Array } {
  const [M, K] = a.shape as [number, number], N = b.shape[1]!;
  const av = a.dataSync(), bv = b.dataSync();
  const y = new Float64Array(M * N), scale = new Float64Array(M * N);
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let s = 0, m = 0;
      for (let k = 0; k < K; k++) {
        const p = av[i * K + k]! * bv[k * N + j]!;
        s += p;
        m += Math.abs(p);
      }
      y[i * N + j] = s;
      scale[i * N + j] = m;
    }
  }
  return { y, scale };
}

describe.skipIf(!NATIVE)("one-row and one-column products (gemv)", () => {
  nativeOrSkip();
  const K = 300, N = 257, M = 129;
  const layouts: [string, () => [loom.Tensor, loom.Tensor]][] = [
    ["row · matrix", () => [loom.randn([1, K]), loom.randn([K, N])]],
    ["row · transposed matrix (x Wᵀ, nn.Linear)", () => [loom.randn([1, K]), loom.randn([N, K]).t()]],
    ["strided row · matrix", () => [loom.randn([K, 3]).t().narrow(0, 1, 1), loom.randn([K, N])]],
    ["matrix · column", () => [loom.randn([M, K]), loom.randn([K, 1])]],
    ["transposed matrix · column", () => [loom.randn([K, M]).t(), loom.randn([K, 1])]],
    ["matrix · strided column", () => [loom.randn([M, K]), loom.randn([3, K]).t().narrow(1, 2, 1)]],
    ["batched rows · shared matrix", () => [loom.randn([4, 1, K]).index(2), loom.randn([K, N])]],
  ];
  for (const dtype of ["float32", "float64"] as const) {
    for (const [name, make] of layouts) {
      test(`${dtype}: ${name}`, () => {
        loom.manual_seed(7);
        const [a0, b0] = make();
        const a = a0.to(dtype), b = b0.to(dtype);
        const eager = a.matmul(b);
        const lazy = a.lazy().matmul(b.lazy()).eval();
        expect(Array.from(lazy.dataSync())).toEqual(Array.from(eager.dataSync()));
        const { y, scale } = reference(a.contiguous(), b.contiguous());
        const got = eager.dataSync();
        const u = dtype === "float32" ? 2 ** -24 : 2 ** -53;
        for (let i = 0; i < y.length; i++) {
          // |Σ fl(a·b) − Σ a·b| ≤ K·u·Σ|a·b| (Higham, Accuracy and Stability, eq. 3.5)
          expect(Math.abs(got[i]! - y[i]!)).toBeLessThanOrEqual(K * u * scale[i]! + 1e-300);
        }
      });
    }
  }
});
