/**
 * Eager composites reach their fused kernels (src/lazy/eager_fused.ts): an eager native softmax
 * without a gradient to record is one `fused_softmax` kernel, chosen from the catalog at the
 * global tolerance as a plan chooses it. So eager equals lazy bit for bit at both tolerances (the
 * same kernel runs), "exact" equals the decomposition run op by op bit for bit, and the default
 * tolerance is within native.fused_softmax.f32x's contract of a float64 reference. Where a
 * gradient is recorded (or on js) the decomposition runs op by op, as before.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { SOFTMAX_X_CONTRACT } from "../../src/backends/native/rows.ts";
import { set_default_backend } from "../../src/lazy/device.ts";
import { NATIVE } from "../native/helpers.ts";
import { expectWithinContract as within, softmaxRef, t, values } from "./helpers.ts";

type T = loom.Tensor;
const bits = (a: ArrayLike<number>) => Array.from(new Uint32Array(Float32Array.from(a).buffer));
/** The softmax decomposition of surface.ts, one eager kernel per op. */
const opByOp = (x: T, d: number) => {
  const e = x.sub(x.amax(d, true).detach()).exp();
  return e.div(e.sum(d, true));
};

describe.skipIf(!NATIVE)("eager softmax runs the fused kernel (native)", () => {
  let prev = "";
  beforeAll(() => {
    prev = set_default_backend("native");
    loom.set_compiler_options({}, true);
  });
  afterAll(() => {
    loom.set_compiler_options({}, true);
    set_default_backend(prev as "js" | "native");
  });

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
});
