/**
 * Measures loom_erff's (src/backends/native/jit_fast.ts) maximum absolute error against glibc's
 * double erf (< 1 double ulp) over every float32 in [0, 4] (`--step k`: every k-th one), and
 * checks that it is odd (f(−x) == −f(x) bit for bit) and ±1 beyond 4 (where |erf − 1| = erfc(x)
 * ≤ erfc(4) < 1.6e-8). The C is ERF_F32_C itself, compiled with the JIT's float flags.
 * Run: `bun bench/erf_bound.ts` (about 20 s; output in bench/erf_bound.txt).
 * The test tests/catalog/jit_erf.test.ts calls measureErfBound with a stride.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ERF_F32_C } from "../src/backends/native/jit_fast.ts";

export interface ErfBound { max: number; at: number; checked: number; oddFailures: number; tailFailures: number }

const MAIN = `
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static float fbits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
int main(int argc, char **argv) {
  const uint32_t step = (uint32_t)atoi(argv[1]), lo = (uint32_t)strtoul(argv[2], 0, 10), top = (uint32_t)strtoul(argv[3], 0, 10);
  double max = 0; float at = 0; unsigned long n = 0, odd = 0, tail = 0;
  for (uint32_t u = lo; u <= top; u += (u + step > top && u != top) ? top - u : step) {
    const float x = fbits(u), y = loom_erff(x);
    const double e = fabs((double)y - erf((double)x));
    if (e > max) { max = e; at = x; }
    if (loom_erff(-x) != -y) odd++;
    n++;
    if (u == top) break;
  }
  /* beyond 4: exactly ±1, sampled every 4096th float up to the largest finite one, and ±inf */
  for (uint32_t u = 0x40800000u; u < 0x7f800000u; u += 4096) if (loom_erff(fbits(u)) != 1.0f || loom_erff(-fbits(u)) != -1.0f) tail++;
  if (loom_erff(INFINITY) != 1.0f || loom_erff(-INFINITY) != -1.0f || !isnan(loom_erff(NAN))) tail++;
  printf("%.17g %.9g %lu %lu %lu\\n", max, at, n, odd, tail);
  return 0;
}
`;

/** The float32 bit pattern of x (non-negative x: its order among the floats). */
export const floatBits = (x: number): number => new Uint32Array(new Float32Array([x]).buffer)[0]!;

/** Compiles ERF_F32_C with the harness and runs it over every `step`-th float32 in [lo, hi] (hi included; 0 ≤ lo ≤ hi ≤ 4). */
export function measureErfBound(step = 1, lo = 0, hi = 4): ErfBound {
  const dir = mkdtempSync(join(tmpdir(), "loom-erf-"));
  try {
    const c = join(dir, "erf_bound.c"), exe = join(dir, "erf_bound");
    writeFileSync(c, ERF_F32_C + MAIN);
    const cc = process.env.LOOM_JIT_CC || process.env.CC || "cc";
    const b = Bun.spawnSync([cc, "-O2", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off", "-o", exe, c, "-lm"], { stderr: "pipe" });
    if (!b.success) throw new Error(`erf_bound: ${cc} failed: ${b.stderr.toString()}`);
    const r = Bun.spawnSync([exe, String(step), String(floatBits(lo)), String(floatBits(hi))], { stdout: "pipe", stderr: "pipe" });
    if (!r.success) throw new Error(`erf_bound: harness failed: ${r.stderr.toString()}`);
    const [max, at, checked, oddFailures, tailFailures] = r.stdout.toString().trim().split(" ").map(Number) as [number, number, number, number, number];
    return { max, at, checked, oddFailures, tailFailures };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const i = process.argv.indexOf("--step");
  const step = i > 0 ? Number(process.argv[i + 1]) : 1;
  const t0 = performance.now();
  const r = measureErfBound(step);
  console.log(`loom_erff vs glibc double erf, every ${step === 1 ? "" : `${step}-th `}float32 in [0, 4] (${r.checked} inputs): max |error| = ${r.max.toExponential(4)} at x = ${r.at}`);
  console.log(`odd (f(-x) == -f(x)) failures: ${r.oddFailures}; ±1 beyond 4 / ±inf / NaN failures: ${r.tailFailures}; ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}
