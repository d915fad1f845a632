/**
 * Run in fresh processes by gemm_split.test.ts with different LOOM_NATIVE_THREADS: large float32
 * products that matmul.c splits into blocks of C over Loom's pool threads (each block one
 * single-threaded GEMM call). For each product it prints the bits' checksum of three runs in this
 * process, the largest error against a float64 reference in units of the float32 GEMM bound,
 * and the threads the pool's threads have (OpenBLAS must not start threads of its own: its OpenMP
 * build did, one team per pool worker, before blas.c set every thread's OpenMP count to 1).
 * Last line: {"products": [{checksums, worst}], "loomThreads", "poolThreads", "blas"}.
 */
import { readdirSync, readFileSync } from "node:fs";
import { nativeBackend } from "../../src/backends/native/backend.ts";
import { OPS } from "../../src/graph/registry.ts";
import { fromValues } from "../../src/tensor/storage.ts";

const nb = nativeBackend();
if (!nb) throw new Error("native backend unavailable");
/** Threads named by the shim (loom-worker, loom-exec); a thread they start inherits the name. */
const loomThreads = () =>
  readdirSync("/proc/self/task").filter((t) => {
    try { return readFileSync(`/proc/self/task/${t}/comm`, "utf8").startsWith("loom-"); } catch { return false; }
  }).length;

/** Deterministic values of both signs and several magnitudes (no generator state). */
const values = (n: number, seed: number) =>
  Array.from({ length: n }, (_, i) => Math.sin(i * 0.618 + seed) * (1 + ((i * 7 + seed) % 5)) * (i % 11 === 0 ? 30 : 1));

/**
 * a [M,K] @ b, b given as [K,N] or, with `bt`, as the transposed view of a dense [N,K] (strides
 * [1, K]: BLAS's transposed operand, no packing). Returns the checksums of 3 runs and the worst
 * |err| / bound where bound = K·2⁻²³·Σ|a_ik·b_kj| + tiny (float32 dot-product rounding, any order).
 */
function product(M: number, K: number, N: number, bt: boolean) {
  const av = values(M * K, 1), bv = values(K * N, 2);
  const a = fromValues("float32", [M, K], av);
  const b = bt ? { ...fromValues("float32", [N, K], bv), shape: [K, N], strides: [1, K] } : fromValues("float32", [K, N], bv);
  const A = a.data as Float32Array, B = b.data as Float32Array;
  const bAt = (k: number, j: number) => (bt ? B[j * K + k]! : B[k * N + j]!);
  const checksums: number[] = [];
  let out: Float32Array | null = null;
  for (let r = 0; r < 3; r++) {
    out = nb!.run(OPS.matmul, [a, b as typeof a], {}, [M, N], "float32").data as Float32Array;
    const u = new Uint32Array(out.buffer, out.byteOffset, out.length);
    let h = 0;
    for (let i = 0; i < u.length; i++) h = (Math.imul(h, 31) + u[i]!) | 0;
    checksums.push(h);
  }
  // float64 reference on a sample of rows and every column (the whole product takes too long in JS)
  let worst = 0;
  const gamma = K * 2 ** -23;
  for (let i = 0; i < M; i += Math.max(1, Math.floor(M / 37))) {
    for (let j = 0; j < N; j++) {
      let s = 0, sa = 0;
      for (let k = 0; k < K; k++) { const p = A[i * K + k]! * bAt(k, j); s += p; sa += Math.abs(p); }
      const e = Math.abs(out![i * N + j]! - s) / (gamma * sa + 1e-30);
      if (e > worst) worst = e;
    }
  }
  return { shape: [M, K, N, bt ? "bT" : "b"], checksums, worst };
}

// warm-up: the pool and OpenBLAS are loaded and every pool thread has run a GEMM
nb.run(OPS.matmul, [fromValues("float32", [512, 512], values(512 * 512, 3)), fromValues("float32", [512, 512], values(512 * 512, 4))], {}, [512, 512], "float32");
const products = [
  product(64, 2048, 1000, false), // 2.6e8 flops, column blocks, N not a multiple of 16
  product(1000, 300, 200, false), // 1.2e8 flops, M > N: row blocks
  product(333, 517, 771, true), // 2.7e8 flops, odd sizes, transposed b
  // 4.4e6 flops, 33 columns: cut in blocks of 32 and 1 before matmul.c kept blocks of 16 columns
  // or more (the 1-column block went to BLAS's gemv, the rest to sgemm.c: other bits)
  product(33, 2000, 33, false),
  // 4.2e6 flops, 33 rows times a transposed b: row blocks of 32 and 1 before matmul.c kept row
  // blocks of 16 or more too (one row times a transposed b goes to BLAS's gemv, 32 to sgemm.c)
  product(33, 4000, 16, true),
];
console.log(JSON.stringify({ products, loomThreads: loomThreads(), poolThreads: nb.lib.threads, blas: nb.blas() }));
