/**
 * matmul.c splits every large product into blocks of C run as single-threaded GEMM calls on
 * Loom's own pool threads (no OpenBLAS threads: one pool). The split depends on the shape and the
 * pool's thread count only, so the bits are the same run to run; column and row blocks keep each
 * element's K loop, so they also equal the one-thread result. Checked in fresh processes.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { NATIVE } from "./helpers.ts";

interface Run {
  products: { shape: unknown[]; checksums: number[]; worst: number }[];
  loomThreads: number;
  poolThreads: number;
  blas: string;
}

function run(threads: string, blas?: string): Run {
  const env: Record<string, string | undefined> = { ...process.env, LOOM_NATIVE_THREADS: threads };
  if (blas !== undefined) env.LOOM_BLAS = blas;
  const r = Bun.spawnSync([process.execPath, join(import.meta.dir, "gemm_split.ts")], { stdout: "pipe", stderr: "pipe", env });
  const line = r.stdout.toString().trim().split("\n").pop() ?? "";
  if (!line.startsWith("{")) throw new Error(`gemm_split.ts failed (${threads} threads): ${r.stderr.toString().slice(-2000)}`);
  return JSON.parse(line) as Run;
}

describe.skipIf(!NATIVE)("large products split over Loom's pool", () => {
  for (const [label, blas] of [["BLAS as loaded", undefined], ["built-in GEMM (LOOM_BLAS=0)", "0"]] as const) {
    test(`${label}: within the float32 GEMM bound, identical run to run and for 1, 2, 3 threads`, () => {
      const runs = ["1", "2", "3", "2"].map((t) => run(t, blas));
      for (const r of runs) {
        for (const p of r.products) {
          // |err| <= K·2⁻²³·Σ|a·b| is the worst-case bound of a float32 dot product in any order
          expect(p.worst).toBeLessThan(1);
          expect(new Set(p.checksums).size).toBe(1); // three runs in one process
        }
      }
      // every thread count and a second fresh 2-thread process give the same bits
      const sums = runs.map((r) => r.products.map((p) => p.checksums[0]).join(","));
      expect(new Set(sums).size).toBe(1);
    }, 120000);
  }

  test("no thread is started by the products (OpenBLAS runs single-threaded inside the pool)", () => {
    // the pool's threads are nthreads - 1 workers and the executor; a libgomp team started from a
    // worker would carry the worker's name
    for (const t of ["2", "3"]) {
      const r = run(t);
      expect(r.poolThreads).toBe(Number(t));
      expect(r.loomThreads).toBe(r.poolThreads);
    }
  }, 60000);
});
