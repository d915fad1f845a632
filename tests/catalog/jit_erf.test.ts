/**
 * Loom's float32 erf in the fast generated kernel (loom_erff, src/backends/native/jit_fast.ts):
 * its measured absolute bound ERF_ABS_BOUND re-measured on a dense subset of float32 (every 61st
 * float in [0, 4], and every float near 0.94, where the error peaks, and the clamp at 3.92) against glibc's
 * double erf, with oddness and the ±1 / NaN tail; then erf programs and gelu(x·a + b) through
 * native.fused_elementwise.jit_f32 against the float64 reference of their decomposition (the js
 * backend, Cody's erf) within FAST_CONTRACT on inputs that stress it: 0, ±tiny, subnormals, the
 * error peak, the clamp, ±3.9..±10, ±inf, NaN.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as loom from "../../src/index.ts";
import { FAST_CONTRACT, jitEnabled, jitStats } from "../../src/backends/native/jit.ts";
import { ERF_ABS_BOUND } from "../../src/backends/native/jit_fast.ts";
import { FLOAT32_TOLERANCE } from "../../src/backends/catalog.ts";
import { set_default_backend } from "../../src/lazy/device.ts";
import { NATIVE } from "../native/helpers.ts";
import { expectWithinContract } from "./helpers.ts";
import { measureErfBound } from "../../bench/erf_bound.ts";

type T = loom.Tensor;
type Fn = (...xs: any[]) => any;
const ENABLED = NATIVE !== null && jitEnabled();
const FAST = "native.fused_elementwise.jit_f32";
const F = Math.fround;

/** Inputs that stress erf: zeros, tiny, subnormal, around the error peak, the clamp region and beyond, ±inf, NaN. */
function erfInputs(): Float32Array {
  const up = (x: number, k: number) => { const b = new Float32Array([x]); const u = new Uint32Array(b.buffer); u[0]! += k; return b[0]!; };
  const v = [0, -0, 1e-30, -1e-30, 1e-38, 1.4e-45, -1.4e-45, 3e-39, -3e-39, 1e-7, -1e-7, 1e-3, 0.5, NaN, Infinity, -Infinity];
  for (const p of [0.94381976, 2.125, 3.92, 4]) for (let k = -3; k <= 3; k++) v.push(up(p, k), -up(p, k));
  for (let x = 3.9; x <= 10; x += 0.05) v.push(x, -x);
  for (let x = -3.5; x <= 3.5; x += 0.01) v.push(x);
  return Float32Array.from(v);
}

/** fn lazily on native under the default tolerance: the plan must use the float32 kernel; values within its contract. */
function checkFast(name: string, fn: Fn, xs: readonly T[]): void {
  const opts = { tolerance: FLOAT32_TOLERANCE };
  const y = loom.with_compiler_options(opts, () => fn(...xs.map((x) => x.lazy())));
  const used = loom.with_compiler_options(opts, () => y.plan()).instructions.map((i: { impl: string }) => i.impl);
  expect(used).toContain(FAST);
  const got = loom.with_compiler_options(opts, () => y.eval() as T).dataSync() as ArrayLike<number>;
  expect(jitStats.failures).toBe(0);
  const prev = set_default_backend("js");
  try {
    const ref = (fn(...xs.map((x) => x.to("float64"))) as T).dataSync() as ArrayLike<number>;
    expectWithinContract(got, ref, FAST_CONTRACT, { what: name });
  } finally {
    set_default_backend(prev as "js" | "native");
  }
}

describe.skipIf(!ENABLED)("loom_erff in the float32 generated kernel", () => {
  let prev = "", dir = "";
  const saved: Record<string, string | undefined> = {};
  const ENV: Record<string, string> = { LOOM_CACHE_DIR: "", LOOM_JIT_MIN_ELEMENTS: "0" };
  beforeAll(() => {
    prev = set_default_backend("native");
    ENV.LOOM_CACHE_DIR = dir = mkdtempSync(join(tmpdir(), "loom-jit-erf-"));
    for (const [k, v] of Object.entries(ENV)) { saved[k] = process.env[k]; process.env[k] = v; }
  });
  afterAll(() => {
    set_default_backend(prev as "js" | "native");
    for (const [k, v] of Object.entries(saved)) { if (v === undefined) delete process.env[k]; else process.env[k] = v; }
    rmSync(dir, { recursive: true, force: true });
  });

  test("measured bound: every 61st float32 in [0, 4] and every float near the error peak and the clamp, odd, ±1 beyond 4", () => {
    for (const [step, lo, hi] of [[61, 0, 4], [1, 0.93, 0.96], [1, 3.9, 3.94]] as const) {
      const r = measureErfBound(step, lo, hi);
      expect(r.checked).toBeGreaterThan(100000);
      expect(r.max).toBeLessThanOrEqual(ERF_ABS_BOUND);
      expect(r.oddFailures).toBe(0);
      expect(r.tailFailures).toBe(0);
    }
  }, 30000);

  test("erf(x·c) and erf(x)·x on stressed inputs, odd sizes", () => {
    const x = loom.tensor(erfInputs());
    checkFast("erf(x·1)", (t) => t.mul(1).erf(), [x]); // exact input: the bound is ERF_ABS_BOUND alone
    checkFast("erf(x·0.75)", (t) => t.mul(0.75).erf(), [x]);
    checkFast("erf(x·√½)·x", (t) => t.mul(F(Math.SQRT1_2)).erf().mul(t), [x]);
    checkFast("erf(x + 1e-3) - erf(x)", (t) => t.add(1e-3).erf().sub(t.erf()), [x]); // cancellation: recomputed where uncertified
  });

  test("gelu(x·a + b) on stressed and random inputs (a tail off the vector width)", () => {
    const v = erfInputs();
    const n = v.length + 4099;
    loom.manual_seed(7);
    const r = loom.randn([3, n]).dataSync();
    const xs = new Float32Array(n), as = new Float32Array(n), bs = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      xs[i] = i < v.length ? v[i]! : r[i]! * [1, 3, 1e-3, 10][i % 4]!;
      as[i] = i < v.length ? 1 : r[n + i]!;
      bs[i] = i < v.length ? 0 : r[2 * n + i]!;
    }
    // loom.gelu's decomposition (lazy/surface.ts) with √½ rounded to float32 as its float32 graph holds it (jit.test.ts checks they agree bit for bit)
    const gelu = (x: any, a: any, b: any) => { const t = x.mul(a).add(b); return t.mul(0.5).mul(t.mul(F(Math.SQRT1_2)).erf().add(1)); };
    checkFast("gelu(x·a + b)", gelu, [loom.tensor(xs), loom.tensor(as), loom.tensor(bs)]);
  });
});
