/**
 * Whether the cuda suites run here: a CUDA device that Loom's library (native/cuda/) can open.
 * Unavailable (no nvcc and no cached build, no driver, no GPU): the suites are skipped with the
 * reason printed, and LOOM_REQUIRE_CUDA=1 (set on a machine with a GPU) makes that a failure.
 * `NVCC`: whether this machine can build the library (the build test runs wherever it can).
 */
import { cudaStatus } from "../../src/backends/cuda/index.ts";
import { nvcc } from "../../src/backends/cuda/build.ts";

export const CUDA: boolean = (() => {
  const s = cudaStatus();
  if (s.available) {
    console.warn(`[cuda] ${s.device}; matmul: ${s.cublas}`);
    return true;
  }
  if (process.env.LOOM_REQUIRE_CUDA === "1") throw new Error(`LOOM_REQUIRE_CUDA=1 but the cuda device is unavailable: ${s.reason}`);
  console.warn(`[skip] cuda device: ${s.reason}`);
  return false;
})();

export const NVCC: string | null = nvcc();

/** |got − want| ≤ atol + rtol·|want| elementwise (NaN matches NaN, infinities exactly); the first mismatch or null. */
export function mismatch(got: ArrayLike<number>, want: ArrayLike<number>, atol: number, rtol: number): string | null {
  if (got.length !== want.length) return `length ${got.length} vs ${want.length}`;
  for (let i = 0; i < got.length; i++) {
    const g = got[i]!, w = want[i]!;
    const ok = Number.isNaN(w) ? Number.isNaN(g) : !Number.isFinite(w) ? g === w : Math.abs(g - w) <= atol + rtol * Math.abs(w);
    if (!ok) return `[${i}] ${g} vs ${w}`;
  }
  return null;
}
