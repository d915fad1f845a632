/**
 * Eager composites reach their fused kernels (src/lazy/eager_fused.ts): an eager native softmax
 * without a gradient to record is one `fused_softmax` kernel, chosen from the catalog at the
 * global tolerance as a plan chooses it. So eager equals lazy bit for bit at both tolerances (the
 * same kernel runs), "exact" equals the decomposition run op by op bit for bit, and the default
 * tolerance is within native.fused_softmax.f32x's contract of a float64 reference. Where a
 * gradient is recorded (or on js) the decomposition runs op by op, as before.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { LAYER_NORM_CONTRACT, RMS_NORM_X_CONTRACT, SOFTMAX_X_CONTRACT } from "../../src/backends/native/rows.ts";
import { set_default_backend } from "../../src/lazy/device.ts";
import { NATIVE } from "../native/helpers.ts";
import { expectWithinContract as within, softmaxRef, t, useNative, values } from "./helpers.ts";

type T = loom.Tensor;
const bits = (a: ArrayLike<number>) => Array.from(new Uint32Array(Float32Array.from(a).buffer));
/** The softmax decomposition of surface.ts, one eager kernel per op. */
const opByOp = (x: T, d: number) => {
  const e = x.sub(x.amax(d, true).detach()).exp();
  return e.div(e.sum(d, true));
};

describe.skipIf(!NATIVE)("eager softmax runs the fused kernel (native)", () => {
  useNative();

  test("one kernel, not five; eager == lazy bit for bit at the default tolerance, within f32x's contract", () => {
    const n = 1000, v = values(7 * n, 8, 3, 5);
    const x = t(v, [7, n]);
    const before = NATIVE!.stats.execs;
    const y = loom.softmax(x, -1) as T;
    expect(NATIVE!.stats.execs - before).toBe(1);
    const ye = y.dataSync();
    within(ye, softmaxRef(v, n), SOFTMAX_X_CONTRACT);
    const yl = (loom.softmax(x.lazy(), -1) as loom.LazyTensor).eval().dataSync();
    expect(bits(ye)).toEqual(bits(yl));
  });

  test('"exact": the same bits as the op-by-op decomposition and as lazy, for rows, middle dims, strided inputs and float64', () => {
    loom.set_compiler_options({ tolerance: "exact" });
    try {
      const v = values(4 * 6 * 33, 5, -2, 9);
      const cases: [T, number][] = [
        [t(v, [24, 33]), -1],
        [t(v, [4, 6, 33]), 1],
        [t(v, [24, 33]).transpose(0, 1), -1],
        [t(v, [24, 33]).to("float64"), 0],
      ];
      for (const [x, d] of cases) {
        const before = NATIVE!.stats.execs;
        const y = x.softmax(d);
        expect(NATIVE!.stats.execs - before).toBe(1);
        const ref = opByOp(x, d).dataSync();
        const lazy = x.lazy().softmax(d).eval().dataSync();
        expect(Array.from(y.dataSync())).toEqual(Array.from(ref));
        expect(Array.from(y.dataSync())).toEqual(Array.from(lazy));
      }
    } finally {
      loom.set_compiler_options({}, true);
    }
  });

  test("a -inf masked row is NaN and a row with +inf NaN, as the decomposition", () => {
    const x = loom.tensor([[-Infinity, -Infinity, -Infinity], [0, Infinity, 1], [1, 2, 3]]);
    const y = Array.from(x.softmax(-1).dataSync());
    const ref = Array.from(opByOp(x, -1).dataSync());
    expect(y.slice(0, 6).every(Number.isNaN)).toBe(true);
    expect(ref.slice(0, 6).every(Number.isNaN)).toBe(true);
    within(y.slice(6), softmaxRef([1, 2, 3], 3), SOFTMAX_X_CONTRACT);
  });

  test("with a gradient to record, the decomposition runs op by op and its gradient is torch's", () => {
    const x = t(values(2 * 5, 2, 0, 3), [2, 5]).requires_grad_(true);
    const before = NATIVE!.stats.execs;
    const y = x.softmax(-1);
    expect(NATIVE!.stats.execs - before).toBeGreaterThan(1);
    // d/dx_j of y_0 = y_0 (δ_0j − y_j) per row (the softmax Jacobian), summed over each row's y_0
    y.select(1, 0).sum().backward();
    const Y = y.detach().dataSync(), G = x.grad!.dataSync();
    for (let r = 0; r < 2; r++) {
      for (let j = 0; j < 5; j++) {
        const want = Y[r * 5]! * ((j === 0 ? 1 : 0) - Y[r * 5 + j]!);
        expect(Math.abs(G[r * 5 + j]! - want)).toBeLessThan(1e-6);
      }
    }
    // under no_grad the same tensor takes the fused kernel
    const b2 = NATIVE!.stats.execs;
    loom.no_grad(() => x.softmax(-1));
    expect(NATIVE!.stats.execs - b2).toBe(1);
  });

  test("the cached choice is per input layout: the same shape with other strides gets its own kernel", () => {
    loom.set_compiler_options({ tolerance: "exact" });
    try {
      const a = t(values(6 * 6, 12, 1, 7), [6, 6]);
      const dense = a.softmax(-1).dataSync(); // chosen and cached for strides [6, 1]
      const at = a.transpose(0, 1); // shape [6, 6], strides [1, 6]: a kernel reading columns
      const y = at.softmax(-1).dataSync();
      expect(bits(y)).toEqual(bits(opByOp(at, -1).dataSync()));
      expect(bits(y)).not.toEqual(bits(dense));
      expect(bits(a.softmax(-1).dataSync())).toEqual(bits(dense)); // the first choice is still there
    } finally {
      loom.set_compiler_options({}, true);
    }
  });

  test("after set_default_backend('js'), an eager softmax on the cpu device runs js's op-by-op kernels (the choice is per backend)", () => {
    const x = t(values(3 * 7, 2, 0, 11), [3, 7]);
    x.softmax(-1); // native: chosen and cached
    const before = NATIVE!.stats.execs;
    set_default_backend("js");
    try {
      const y = x.softmax(-1).dataSync();
      expect(NATIVE!.stats.execs - before).toBe(0);
      expect(Array.from(y)).toEqual(Array.from(opByOp(x, -1).dataSync()));
    } finally {
      set_default_backend("native");
    }
  });

  test('with patterns off, eager runs op by op (set_compiler_options({ patterns: false }))', () => {
    loom.set_compiler_options({ patterns: false });
    try {
      const x = t(values(40, 3), [4, 10]);
      const before = NATIVE!.stats.execs;
      x.softmax(-1);
      expect(NATIVE!.stats.execs - before).toBeGreaterThan(1);
    } finally {
      loom.set_compiler_options({}, true);
    }
  });

  /** rms_norm / layer_norm eager (fused), eager op by op (patterns off), lazy; and kernels run. */
  function norms(x: T, w: T | null, b: T | null, kind: "rms" | "ln") {
    const f = () => (kind === "rms" ? loom.rms_norm(x, [x.shape.at(-1)!], w, 1e-5) : loom.layer_norm(x, [x.shape.at(-1)!], w, b, 1e-5)) as T;
    const g = () => (kind === "rms" ? loom.rms_norm(x.lazy(), [x.shape.at(-1)!], w?.lazy(), 1e-5) : loom.layer_norm(x.lazy(), [x.shape.at(-1)!], w?.lazy(), b?.lazy(), 1e-5)) as loom.LazyTensor;
    const before = NATIVE!.stats.execs;
    const y = f().dataSync();
    const execs = NATIVE!.stats.execs - before;
    const ref = loom.with_compiler_options({ patterns: false }, () => f().dataSync());
    return { y, execs, ref, lazy: g().eval().dataSync() };
  }
  /** rms_norm / layer_norm rows in float64 (biased variance, the decomposition's math). */
  function normRef(v: ArrayLike<number>, n: number, w: ArrayLike<number>, b: ArrayLike<number> | null, kind: "rms" | "ln"): Float64Array {
    const out = new Float64Array(v.length);
    for (let o = 0; o < v.length; o += n) {
      let m = 0;
      if (kind === "ln") { for (let j = 0; j < n; j++) m += v[o + j]!; m /= n; }
      let s = 0;
      for (let j = 0; j < n; j++) s += (v[o + j]! - m) ** 2;
      const r = 1 / Math.sqrt(s / n + Math.fround(1e-5));
      for (let j = 0; j < n; j++) out[o + j] = (v[o + j]! - m) * r * w[j]! + (b ? b[j]! : 0);
    }
    return out;
  }

  test("rms_norm and layer_norm: one kernel; eager == lazy bit for bit; within the row kernels' contracts", () => {
    const n = 96, v = values(5 * n, 3, 1, 4), wv = values(n, 1, 0.5, 6), bv = values(n, 2, 0, 8);
    const x = t(v, [5, n]), w = t(wv, [n]), b = t(bv, [n]);
    for (const kind of ["rms", "ln"] as const) {
      const r = norms(x, w, kind === "ln" ? b : null, kind);
      expect(r.execs).toBe(1);
      expect(bits(r.y)).toEqual(bits(r.lazy));
      within(r.y, normRef(v, n, wv, kind === "ln" ? bv : null, kind), kind === "rms" ? RMS_NORM_X_CONTRACT : LAYER_NORM_CONTRACT);
    }
  });

  test('rms_norm and layer_norm at "exact": the op-by-op bits, with and without weight/bias, strided rows', () => {
    loom.set_compiler_options({ tolerance: "exact" });
    try {
      const n = 40, v = values(6 * n, 4, -1, 2);
      const w = t(values(n, 1, 1, 3), [n]), b = t(values(n, 1, 0, 7), [n]);
      for (const x of [t(v, [6, n]), t(v, [2, 3, n]).transpose(0, 1)]) {
        for (const [ww, bb] of [[null, null], [w, null], [w, b]] as const) {
          for (const kind of ["rms", "ln"] as const) {
            const r = norms(x, ww, bb, kind);
            expect(r.execs).toBe(1);
            expect(Array.from(r.y)).toEqual(Array.from(r.ref));
            expect(Array.from(r.y)).toEqual(Array.from(r.lazy));
          }
        }
      }
    } finally {
      loom.set_compiler_options({}, true);
    }
  });

  test("a weight requiring grad, or of another dtype, keeps the op-by-op decomposition", () => {
    const x = t(values(4 * 8, 2), [4, 8]);
    const w = t(values(8, 1, 1), [8]).requires_grad_(true);
    const before = NATIVE!.stats.execs;
    (loom.rms_norm(x, [8], w, 1e-5) as T).sum().backward();
    expect(NATIVE!.stats.execs - before).toBeGreaterThan(1);
    expect(w.grad).not.toBeNull();
    const b2 = NATIVE!.stats.execs;
    loom.rms_norm(x, [8], w.detach().to("float64"), 1e-5);
    expect(NATIVE!.stats.execs - b2).toBeGreaterThan(1);
  });
});
