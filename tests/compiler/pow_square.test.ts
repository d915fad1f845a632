/**
 * simplify rewrites float32 x^2 as x·x (the same bits: x² of a float32 is exact in double, so
 * pow returns it exactly), which lets the norm patterns see RMSNorm written with pow (W4).
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { BACKENDS, useBackend } from "../backends.ts";

for (const be of BACKENDS) describe(be, () => {
  useBackend(be);
  test("x * rsqrt(mean(x^2) + eps) * w is one fused_rms_norm, and bit-equal to eager in exact mode", () => {
    const x = loom.randn([16, 40]).mul(3), w = loom.randn([40]);
    const f = (t: any, ww: any) => t.mul(t.pow(2).mean(-1, true).add(1e-5).rsqrt()).mul(ww);
    const plan = f(x.lazy(), w.lazy()).plan();
    expect(plan.instructions.map((i: any) => i.op.name)).toEqual(["fused_rms_norm"]);
    const e = f(x, w), l = loom.with_compiler_options({ tolerance: "exact" }, () => f(x.lazy(), w.lazy()).eval());
    expect(Array.from(l.dataSync())).toEqual(Array.from(e.dataSync()));
    // x^2 itself equals x·x bit for bit, on values whose squares round in float32
    const v = loom.tensor([1.1, -3.3e-20, 7e18, 0.1, -0, Infinity, NaN]);
    expect(Array.from(v.pow(2).dataSync())).toEqual(Array.from(v.mul(v).dataSync()));
  });
});

test("float64 x^2 is left alone (float64 pow need not round like x·x)", () => {
  const x = loom.randn([8, 8], { dtype: "float64" }).lazy();
  const plan = loom.with_compiler_options({ fuse: false, patterns: false }, () => x.pow(2).plan());
  expect(plan.instructions.map((i: any) => i.op.name)).toEqual(["pow"]);
});
