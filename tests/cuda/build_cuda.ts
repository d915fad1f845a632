/**
 * Build Loom's CUDA library now and fail (exit 1, the compiler's message) if it does not compile:
 * .ci/run calls this where nvcc exists, so a compile error fails CI. Without nvcc: exit 0 with
 * the reason (nothing to check).
 *   bun tests/cuda/build_cuda.ts
 */
import { buildCuda, nvcc } from "../../src/backends/cuda/build.ts";

if (!nvcc()) {
  console.warn("[loom] CUDA library not built: nvcc not found");
} else {
  const r = buildCuda();
  if (!r.ok) {
    console.error(`[loom] ${r.reason}`);
    process.exit(1);
  }
  console.log(`[loom] CUDA library ${r.cached ? "up to date" : "built"}: ${r.path}`);
}
