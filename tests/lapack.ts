/**
 * `describe` when LAPACK (OpenBLAS's ?gesdd, src/backends/native/lapack.ts) loads, else
 * `describe.skip` with the reason printed; with LOOM_REQUIRE_LAPACK=1 (CI) a missing LAPACK is an
 * error instead, so a broken OpenBLAS cannot pass CI by skipping the SVD tests.
 */
import { describe } from "bun:test";
import { loadLapack } from "../src/backends/native/lapack.ts";

export function describeWithLapack(what: string): typeof describe {
  const lapack = loadLapack();
  if (!("error" in lapack)) return describe;
  if (process.env.LOOM_REQUIRE_LAPACK === "1") throw new Error(`[${what}] LOOM_REQUIRE_LAPACK=1 but LAPACK is unavailable: ${lapack.error}`);
  console.warn(`[skip] ${what}: ${lapack.error}`);
  return describe.skip as typeof describe;
}
