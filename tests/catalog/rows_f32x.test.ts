/**
 * native.fused_softmax.f32x (softmax with float32-lane exponentials, rows_f32.c expf_row) against
 * a float64 reference of the decomposition, within its stated contract SOFTMAX_X_CONTRACT
 * (rows.ts derives it: atol 2^-125, rtol 5e-7): odd row lengths (1, 7, 17, 1000, 4097) and the
 * longest row it takes (MAX_SOFTMAX_ROW), large/negative/tiny values, differences v − max that
 * float32 subtraction would round (the kernel's TwoSum keeps them), the exponential over its
 * whole range and past the cut-off at −87, a large [2048, 1024] output, -inf masks (a fully masked row is NaN, as the
 * decomposition), NaN/+inf inputs, scale prologues. Selection: the default tolerance takes it; a
 * tolerance tighter than its contract takes native.fused_softmax.f32; "exact" takes neither and
 * equals eager bit for bit. The references are computed here in float64 from the input values;
 * prologue values are rounded to float32 after each op as the graph rounds them.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { MAX_SOFTMAX_ROW, SOFTMAX_CONTRACT, SOFTMAX_X_CONTRACT } from "../../src/backends/native/rows.ts";
import { NATIVE } from "../native/helpers.ts";
import { expectWithinContract as within, impls, runWith, softmaxRef, t, useNative, values } from "./helpers.ts";

type L = any;
const f32 = Math.fround;
const IMPL = "fused_softmax:native.fused_softmax.f32x";
const F32 = "fused_softmax:native.fused_softmax.f32";
const EXACT = "fused_softmax:native.fused_softmax.exact";

describe.skipIf(!NATIVE)("native.fused_softmax.f32x (float32 exp)", () => {
  useNative();

  /** Realize `f` lazily: the values, and checks the plan ran `impl`. */
  const run = (f: () => L, impl = IMPL) => runWith(f, impl);

  test("the contract is within the default tolerance and looser than fused_softmax.f32's", () => {
    if (SOFTMAX_X_CONTRACT.kind !== "bound" || SOFTMAX_CONTRACT.kind !== "bound") throw new Error("bounds expected");
    expect(SOFTMAX_X_CONTRACT.rtol).toBeLessThanOrEqual(1.3e-6);
    expect(SOFTMAX_X_CONTRACT.atol).toBeLessThanOrEqual(1e-5);
    expect(SOFTMAX_X_CONTRACT.rtol).toBeGreaterThan(SOFTMAX_CONTRACT.rtol);
  });

  for (const n of [1, 7, 17, 1000, 4097]) {
    test(`rows of ${n}: moderate, large, negative, tiny and offset values`, () => {
      let worst = 0;
      for (const [scale, shift] of [[3, 0], [30, 0], [1e4, 0], [40, -1e3], [1e-3, 5], [1e-30, 0], [8, 3000]] as const) {
        const v = values(3 * n, scale, shift, n);
        worst = Math.max(worst, within(run(() => loom.softmax(t(v, [3, n]).lazy(), -1)), softmaxRef(v, n), SOFTMAX_X_CONTRACT));
      }
      expect(worst).toBeLessThan(5e-7);
    });
  }

  test(`the longest row taken (${MAX_SOFTMAX_ROW}); one longer runs the exact kernel`, () => {
    const n = MAX_SOFTMAX_ROW, v = values(n, 4, 0, 3);
    within(run(() => loom.softmax(t(v, [1, n]).lazy(), -1)), softmaxRef(v, n), SOFTMAX_X_CONTRACT);
    expect(impls(loom.softmax(t(values(n + 1, 1), [1, n + 1]).lazy(), -1))).toContain(EXACT);
  });

  test("a large output [2048, 1024], plain and scaled with masked entries", () => {
    const r = 2048, n = 1024, v = values(r * n, 5, 0, 11);
    within(run(() => loom.softmax(t(v, [r, n]).lazy(), -1)), softmaxRef(v, n), SOFTMAX_X_CONTRACT);
    const w = values(r * n, 2, 0, 12).map((x, k) => (k % 37 === 5 ? -Infinity : x)); // with masked entries
    within(run(() => loom.softmax(t(w, [r, n]).lazy().mul(3), -1)), softmaxRef(Float64Array.from(w, (x) => f32(x * 3)), n), SOFTMAX_X_CONTRACT);
  });

  test("v − max not representable in float32 (opposite signs): the TwoSum argument keeps it", () => {
    // row 0: max 2^-20, others −(16 + j·2^-18): fl32(v − max) rounds off 2^-20, a relative error
    // 9.5e-7 of exp (and of those outputs) that a plain float subtraction would leave; row 1:
    // max 2^-18, others −(64 + j·2^-16): 2^-18 off, 3.8e-6
    const n = 64, v = new Float32Array(2 * n);
    for (let j = 0; j < n; j++) {
      v[j] = j === 0 ? 2 ** -20 : -(16 + j * 2 ** -18);
      v[n + j] = j === 0 ? 2 ** -18 : -(64 + j * 2 ** -16);
    }
    for (let j = 1; j < n; j++) expect(f32(v[j]! - v[0]!)).not.toBe(v[j]! - v[0]!); // the subtraction does round
    within(run(() => loom.softmax(t(v, [2, n]).lazy(), -1)), softmaxRef(v, n), SOFTMAX_X_CONTRACT);
  });

  test("the exponential over its whole range and past the cut-off: rows [0, d] for d in [-110, 0] by 1/64", () => {
    const rows = 110 * 64 + 1, v = new Float32Array(2 * rows);
    for (let i = 0; i < rows; i++) v[2 * i + 1] = -i / 64;
    within(run(() => loom.softmax(t(v, [rows, 2]).lazy(), -1)), softmaxRef(v, 2), SOFTMAX_X_CONTRACT);
  });

  test("scale prologue (x·s, x/s) is rounded as the graph rounds it", () => {
    const n = 1000, v = values(4 * n, 6);
    const scaled = Float64Array.from(v, (x) => f32(x * f32(0.125)));
    within(run(() => loom.softmax(t(v, [4, n]).lazy().mul(0.125), -1)), softmaxRef(scaled, n), SOFTMAX_X_CONTRACT);
    const divided = Float64Array.from(v, (x) => f32(x / 3));
    within(run(() => loom.softmax(t(v, [4, n]).lazy().div(3), -1)), softmaxRef(divided, n), SOFTMAX_X_CONTRACT);
  });

  test("-inf masks (masked_fill, additive); a fully masked row is NaN", () => {
    const n = 17, r = 4, v = values(r * n, 2);
    const mask = new Uint8Array(r * n);
    for (let i = 0; i < r; i++) for (let j = 0; j < n; j++) mask[i * n + j] = i === 3 || j > i * 5 ? 1 : 0; // row 3: all masked
    const masked = Float64Array.from(v, (x, k) => (mask[k] ? -Infinity : f32(x * f32(0.5))));
    const y = run(() => loom.softmax(t(v, [r, n]).lazy().mul(0.5).masked_fill(t(mask, [r, n], "bool").lazy(), -Infinity), -1));
    within(y, softmaxRef(masked, n), SOFTMAX_X_CONTRACT);
    for (let j = 0; j < n; j++) expect(Number.isNaN(y[3 * n + j]!)).toBe(true);
    const add = new Float32Array(n).map((_, j) => (j % 2 ? -Infinity : -j));
    const summed = Float64Array.from(v, (x, k) => f32(x + add[k % n]!));
    within(run(() => loom.softmax(t(v, [r, n]).lazy().add(t(add, [1, n]).lazy()), -1)), softmaxRef(summed, n), SOFTMAX_X_CONTRACT);
  });

  test("NaN and +inf inputs give the decomposition's NaN rows; other rows are unaffected", () => {
    const v = values(3 * 7, 1);
    v[2] = NaN;
    v[7 + 4] = Infinity;
    const y = run(() => loom.softmax(t(v, [3, 7]).lazy(), -1));
    within(y, softmaxRef(v, 7), SOFTMAX_X_CONTRACT);
    expect(Array.from(y.slice(0, 14)).every(Number.isNaN)).toBe(true);
    expect(Array.from(y.slice(14)).some(Number.isNaN)).toBe(false);
  });

  test("selection: a tolerance tighter than the contract takes fused_softmax.f32; \"exact\" neither (eager's bits)", () => {
    const n = 1000, x = values(3 * n, 4);
    const f = (lz: boolean) => loom.softmax((lz ? t(x, [3, n]).lazy() : t(x, [3, n])).mul(0.25) as L, -1);
    try {
      loom.set_compiler_options({ tolerance: { atol: 1e-5, rtol: 4e-7 } });
      within(run(() => f(true), F32), softmaxRef(Float64Array.from(x, (a) => f32(a * 0.25)), n), SOFTMAX_CONTRACT);
      loom.set_compiler_options({ tolerance: { atol: 2 ** -140, rtol: 1e-6 } }); // atol below 2^-125
      expect(impls(f(true))).toContain(F32);
      loom.set_compiler_options({ tolerance: "exact" });
      const y = f(true);
      expect(impls(y)).toContain(EXACT);
      expect(Array.from(y.eval().dataSync())).toEqual(Array.from(f(false).dataSync()));
    } finally {
      loom.set_compiler_options({}, true);
    }
    expect(impls(f(true))).toContain(IMPL);
  });
});
