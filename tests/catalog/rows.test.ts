/**
 * The native float32 row kernels (src/backends/native/rows.ts) against a float64 reference of
 * each pattern's decomposition, within their stated contracts: odd row lengths (1, 7, 17, 1000,
 * 4097: not multiples of the vector width), large and negative values, -inf masks (a fully
 * masked softmax row is NaN, as the decomposition), scale and mask prologues, batched leading
 * dims, strided rows. Lazy plans at the default tolerance choose them (the instruction's
 * `impl`); at tolerance "exact" they do not, and the plan equals eager bit for bit.
 * The references are computed here in float64, sequentially, from the input values; the
 * softmax prologue's values are rounded to float32 after each op as the graph rounds them.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { LAYER_NORM_CONTRACT, RMS_NORM_CONTRACT, SOFTMAX_CONTRACT } from "../../src/backends/native/rows.ts";
import { NATIVE } from "../native/helpers.ts";
import { expectWithinContract as within, impls, rmsRef, runWith, softmaxRef, t, useNative, values } from "./helpers.ts";

type L = any;
const f32 = Math.fround;
const LENGTHS = [1, 7, 17, 1000, 4097];
/** Norm rows: of length 1 the simplifier folds the reductions, so no norm pattern is left to match. */
const NORM_LENGTHS = [2, 7, 17, 1000, 4097];

function layerNormRef(x: ArrayLike<number>, n: number, eps: number, w: ArrayLike<number> | null, b: ArrayLike<number> | null): Float64Array {
  const out = new Float64Array(x.length);
  const d = new Float64Array(n);
  for (let o = 0; o < x.length; o += n) {
    let s = 0;
    for (let j = 0; j < n; j++) s += x[o + j]!;
    const m0 = s / n;
    let s2 = 0;
    for (let j = 0; j < n; j++) { d[j] = x[o + j]! - m0; s2 += d[j]!; }
    let s3 = 0;
    for (let j = 0; j < n; j++) { d[j] = d[j]! - s2 / n; s3 += d[j]! * d[j]!; }
    const rs = 1 / Math.sqrt(s3 / n + eps);
    for (let j = 0; j < n; j++) out[o + j] = d[j]! * rs * (w ? w[j]! : 1) + (b ? b[j]! : 0);
  }
  return out;
}

/** Admits these kernels' contracts (rtol 2.4e-7) but not fused_softmax.f32x's (tests/catalog/rows_f32x.test.ts). */
const TIGHT = { tolerance: { atol: 1e-5, rtol: 2.4e-7 } };

describe.skipIf(!NATIVE)("native float32 row kernels (rows.ts)", () => {
  useNative(TIGHT);

  const run = runWith;

  describe("fused_softmax", () => {
    const IMPL = "fused_softmax:native.fused_softmax.f32";
    for (const n of LENGTHS) {
      test(`rows of ${n}: moderate, large and negative values`, () => {
        for (const [scale, shift] of [[3, 0], [1e4, 0], [40, -1e3], [1e-3, 5]] as const) {
          const v = values(3 * n, scale, shift, n);
          within(run(() => loom.softmax(t(v, [3, n]).lazy(), -1), IMPL), softmaxRef(v, n), SOFTMAX_CONTRACT);
        }
      });
    }

    test("batched leading dims [2, 3, 5, 33], a 1-D input, a strided (transposed) input", () => {
      const v = values(2 * 3 * 5 * 33, 4);
      within(run(() => loom.softmax(t(v, [2, 3, 5, 33]).lazy(), -1), IMPL), softmaxRef(v, 33), SOFTMAX_CONTRACT);
      within(run(() => loom.softmax(t(v, [990]).lazy(), 0), IMPL), softmaxRef(v, 990), SOFTMAX_CONTRACT); // one row, 1-D
      // x.T is [33, 5] over a [5, 33] buffer: the row walks the buffer with stride 33
      const tr = new Float64Array(33 * 5);
      for (let i = 0; i < 5; i++) for (let j = 0; j < 33; j++) tr[j * 5 + i] = v[i * 33 + j]!;
      within(run(() => loom.softmax(t(v.slice(0, 165), [5, 33]).lazy().transpose(0, 1), -1), IMPL), softmaxRef(tr, 5), SOFTMAX_CONTRACT);
    });

    test("scale prologue (x·s, x/s) is rounded as the graph rounds it", () => {
      const n = 1000, v = values(4 * n, 6);
      const scaled = Float64Array.from(v, (x) => f32(x * f32(0.125)));
      within(run(() => loom.softmax(t(v, [4, n]).lazy().mul(0.125), -1), IMPL), softmaxRef(scaled, n), SOFTMAX_CONTRACT);
      const divided = Float64Array.from(v, (x) => f32(x / 3));
      within(run(() => loom.softmax(t(v, [4, n]).lazy().div(3), -1), IMPL), softmaxRef(divided, n), SOFTMAX_CONTRACT);
    });

    test("-inf masks: masked_fill with a broadcast bool mask, an additive mask; a fully masked row is NaN", () => {
      const n = 17, r = 4, v = values(r * n, 2);
      const mask = new Uint8Array(r * n);
      for (let i = 0; i < r; i++) for (let j = 0; j < n; j++) mask[i * n + j] = i === 3 || j > i * 5 ? 1 : 0; // row 3: all masked
      const masked = Float64Array.from(v, (x, k) => (mask[k] ? -Infinity : f32(x * f32(0.5))));
      const y = run(() => loom.softmax(t(v, [r, n]).lazy().mul(0.5).masked_fill(t(mask, [r, n], "bool").lazy(), -Infinity), -1), IMPL);
      within(y, softmaxRef(masked, n), SOFTMAX_CONTRACT);
      for (let j = 0; j < n; j++) expect(Number.isNaN(y[3 * n + j]!)).toBe(true);
      // the attention form: masked_fill(mask.logical_not(), -inf) with the mask broadcast over rows
      const keep = new Uint8Array(n).map((_, j) => (j % 3 === 0 ? 1 : 0));
      const kept = Float64Array.from(v, (x, k) => (keep[k % n] ? x : -Infinity));
      within(run(() => loom.softmax(t(v, [r, n]).lazy().masked_fill(t(keep, [n], "bool").lazy().logical_not(), -Infinity), -1), IMPL),
        softmaxRef(kept, n), SOFTMAX_CONTRACT);
      const add = new Float32Array(n).map((_, j) => (j % 2 ? -Infinity : -j));
      const summed = Float64Array.from(v, (x, k) => f32(x + add[k % n]!));
      within(run(() => loom.softmax(t(v, [r, n]).lazy().add(t(add, [1, n]).lazy()), -1), IMPL), softmaxRef(summed, n), SOFTMAX_CONTRACT);
    });

    test("the exponential over its whole range: rows [0, d] for d in [-110, 0] by 1/64", () => {
      const rows = 110 * 64 + 1, v = new Float32Array(2 * rows);
      for (let i = 0; i < rows; i++) v[2 * i + 1] = -i / 64;
      within(run(() => loom.softmax(t(v, [rows, 2]).lazy(), -1), IMPL), softmaxRef(v, 2), SOFTMAX_CONTRACT);
    });

    test("NaN and +inf inputs give the decomposition's NaN rows", () => {
      const v = values(3 * 7, 1);
      v[2] = NaN;
      v[7 + 4] = Infinity;
      const y = run(() => loom.softmax(t(v, [3, 7]).lazy(), -1), IMPL);
      within(y, softmaxRef(v, 7), SOFTMAX_CONTRACT);
      expect(Array.from(y.slice(0, 14)).every(Number.isNaN)).toBe(true);
    });

    test("not taken: softmax over a leading dim, float64, a prologue with other ops", () => {
      const v = values(6 * 5, 2);
      expect(impls(loom.softmax(t(v, [6, 5]).lazy(), 0))).toContain("fused_softmax:native.fused_softmax.exact");
      expect(impls(loom.softmax(t(v, [6, 5]).lazy().double(), -1))).toContain("fused_softmax:native.fused_softmax.exact");
      expect(impls(loom.softmax(t(v, [6, 5]).lazy().exp(), -1))).toContain("fused_softmax:native.fused_softmax.exact");
    });
  });

  describe("fused_rms_norm", () => {
    const IMPL = "fused_rms_norm:native.fused_rms_norm.f32";
    const eps = f32(1e-6);
    for (const n of NORM_LENGTHS) {
      test(`rows of ${n}, with and without weight, small/large/offset values`, () => {
        for (const [scale, shift] of [[1, 0], [1e-4, 0], [3e3, -5e3]] as const) {
          const x = values(3 * n, scale, shift, n), w = values(n, 0.5, 1, 7);
          within(run(() => loom.rms_norm(t(x, [3, n]).lazy(), [n], t(w, [n]).lazy(), 1e-6), IMPL), rmsRef(x, n, eps, w), RMS_NORM_CONTRACT);
          within(run(() => loom.rms_norm(t(x, [3, n]).lazy(), [n], null, 1e-6), IMPL), rmsRef(x, n, eps, null), RMS_NORM_CONTRACT);
        }
      });
    }

    test("batched [2, 3, 40] over two dims, and rows of a sliced (strided) input", () => {
      const x = values(2 * 3 * 40, 2);
      within(run(() => loom.rms_norm(t(x, [2, 3, 40]).lazy(), [3, 40], null, 1e-6), IMPL), rmsRef(x, 120, eps, null), RMS_NORM_CONTRACT);
      // x[:, :24] of a [10, 24] view: rows contiguous, the outer stride 24 ≠ the row length 12
      const big = values(10 * 24, 3), rows = new Float64Array(10 * 12);
      for (let i = 0; i < 10; i++) for (let j = 0; j < 12; j++) rows[i * 12 + j] = big[i * 24 + j]!;
      within(run(() => loom.rms_norm(t(big, [10, 24]).lazy().narrow(1, 0, 12), [12], null, 1e-6), IMPL), rmsRef(rows, 12, eps, null), RMS_NORM_CONTRACT);
    });
  });

  describe("fused_layer_norm", () => {
    const IMPL = "fused_layer_norm:native.fused_layer_norm.f32";
    const eps = f32(1e-5);
    for (const n of NORM_LENGTHS) {
      test(`rows of ${n}: weight and bias, none, and rows far from zero (cancellation)`, () => {
        for (const [scale, shift] of [[1, 0], [0.01, 1e4], [5e3, -3e3]] as const) {
          const x = values(3 * n, scale, shift, n), w = values(n, 0.3, 1, 5), b = values(n, 2, 0, 9);
          within(run(() => loom.layer_norm(t(x, [3, n]).lazy(), [n], t(w, [n]).lazy(), t(b, [n]).lazy()), IMPL), layerNormRef(x, n, eps, w, b), LAYER_NORM_CONTRACT);
          within(run(() => loom.layer_norm(t(x, [3, n]).lazy(), [n]), IMPL), layerNormRef(x, n, eps, null, null), LAYER_NORM_CONTRACT);
        }
      });
    }

    test("a constant row normalizes to exactly 0 (+ bias)", () => {
      const x = new Float32Array(2 * 9).fill(1e4 / 3), b = values(9, 1);
      const y = run(() => loom.layer_norm(t(x, [2, 9]).lazy(), [9], null, t(b, [9]).lazy()), IMPL);
      expect(Array.from(y)).toEqual([...b, ...b]);
    });

    test("weights beyond the bound's range (|w| > 2^10), and a negative eps, run the exact kernel: eager's bits", () => {
      const x = values(4 * 33, 2), w = values(33, 3000);
      const f = () => loom.layer_norm(t(x, [4, 33]).lazy(), [33], t(w, [33]).lazy());
      const y = run(f, IMPL);
      const eager = loom.layer_norm(t(x, [4, 33]), [33], t(w, [33])).dataSync();
      expect(Array.from(y)).toEqual(Array.from(eager));
      // a negative eps (s/n + eps may cancel) likewise
      const r = run(() => loom.rms_norm(t(x, [4, 33]).lazy(), [33], null, -1e-3), "fused_rms_norm:native.fused_rms_norm.f32");
      expect(Array.from(r)).toEqual(Array.from(loom.rms_norm(t(x, [4, 33]), [33], null, -1e-3).dataSync()));
    });
  });

  test("the row kernels are instructions of the plan's one command buffer (asynchronous, no eager call)", () => {
    const nb = NATIVE!;
    const x = t(values(64 * 100, 2), [64, 100]), w = t(values(100, 1, 1), [100]);
    const f = () => (loom.softmax(x.lazy(), -1) as L).add(loom.rms_norm(x.lazy(), [100], w.lazy())) as L;
    f().eval().dataSync(); // compile once
    const y = f();
    expect(impls(y)).toEqual(["fused_softmax:native.fused_softmax.f32", "fused_rms_norm:native.fused_rms_norm.f32", expect.stringMatching(/^fused_elementwise:native\.fused_elementwise\.(exact|jit)$/)]); // jit where it compiles and applies (size)
    const s0 = nb.stats.submits, e0 = nb.stats.execs, c0 = nb.shimCounters().byOp.get("fused_softmax_f32") ?? 0;
    y.eval();
    expect(nb.stats.submits - s0).toBe(1);
    y.dataSync();
    expect(nb.stats.execs - e0).toBe(0);
    expect(nb.shimCounters().byOp.get("fused_softmax_f32")! - c0).toBe(1);
  });

  test('tolerance "exact": the exact kernels run, equal to eager bit for bit', () => {
    loom.set_compiler_options({ tolerance: "exact" });
    try {
      const n = 1000, x = values(3 * n, 4), w = values(n, 1, 1);
      const cases: [string, (lazy: boolean) => L][] = [
        ["fused_softmax", (lz) => loom.softmax((lz ? t(x, [3, n]).lazy() : t(x, [3, n])).mul(0.25) as L, -1)],
        ["fused_rms_norm", (lz) => loom.rms_norm(lz ? t(x, [3, n]).lazy() : t(x, [3, n]), [n], lz ? t(w, [n]).lazy() : t(w, [n]))],
        ["fused_layer_norm", (lz) => loom.layer_norm(lz ? t(x, [3, n]).lazy() : t(x, [3, n]), [n], lz ? t(w, [n]).lazy() : t(w, [n]), lz ? t(w, [n]).lazy() : t(w, [n]))],
      ];
      for (const [op, f] of cases) {
        const y = f(true);
        expect(impls(y)).toContain(`${op}:native.${op}.exact`);
        expect(Array.from(y.eval().dataSync())).toEqual(Array.from(f(false).dataSync()));
      }
    } finally {
      loom.set_compiler_options(TIGHT, true);
    }
  });
});
