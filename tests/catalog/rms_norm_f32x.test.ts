/**
 * native.fused_rms_norm.f32x (rms_norm with the scaling in float32 lanes, rows_f32.c nf_rows)
 * against a float64 reference of the decomposition, within its stated contract
 * RMS_NORM_X_CONTRACT (rows.ts derives it: atol 2^-148, rtol 2.5e-7): odd row lengths, with and
 * without weight, small/large/offset values, subnormal inputs and outputs, large outputs (whose
 * stores are non-temporal, with rows not aligned to the vector width). The rows it must hand to
 * the double lanes (a factor fl32(rs)·w that would be subnormal or overflow, non-finite weights,
 * NaN/inf rows) give fused_rms_norm.f32's bits exactly. Selection: the default tolerance takes
 * it; a tolerance tighter than its contract takes native.fused_rms_norm.f32; "exact" takes
 * neither and equals eager bit for bit; eager rms_norm runs it too.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { RMS_NORM_CONTRACT, RMS_NORM_X_CONTRACT } from "../../src/backends/native/rows.ts";
import { NATIVE } from "../native/helpers.ts";
import { expectWithinContract as within, impls, rmsRef, runWith, t, useNative, values } from "./helpers.ts";

type L = any;
const f32 = Math.fround;
const IMPL = "fused_rms_norm:native.fused_rms_norm.f32x";
const F32 = "fused_rms_norm:native.fused_rms_norm.f32";
/** Admits fused_rms_norm.f32's contract (rtol 2.4e-7) but not this one's. */
const TIGHT = { tolerance: { atol: 1e-5, rtol: 2.4e-7 } } as const;

describe.skipIf(!NATIVE)("native.fused_rms_norm.f32x (float32 scaling)", () => {
  useNative();

  /** Realize `f` lazily: the values, and checks the plan ran `impl`. */
  const run = (f: () => L, impl = IMPL) => runWith(f, impl);
  /** rms_norm of x [r, n] (w [n] or none) with `eps`, lazily, by `impl` (F32 under TIGHT). */
  function rms(x: Float32Array, r: number, n: number, w: Float32Array | null, eps: number, impl = IMPL): Float64Array {
    const f = () => loom.rms_norm(t(x, [r, n]).lazy(), [n], w ? t(w, [n]).lazy() : null, eps) as L;
    if (impl === IMPL) return run(f, impl);
    return loom.with_compiler_options(TIGHT, () => run(f, impl));
  }

  test("the contract is within the default tolerance and looser than fused_rms_norm.f32's", () => {
    if (RMS_NORM_X_CONTRACT.kind !== "bound" || RMS_NORM_CONTRACT.kind !== "bound") throw new Error("bounds expected");
    expect(RMS_NORM_X_CONTRACT.rtol).toBeLessThanOrEqual(1e-6);
    expect(RMS_NORM_X_CONTRACT.rtol).toBeGreaterThan(RMS_NORM_CONTRACT.rtol);
    expect(RMS_NORM_X_CONTRACT.atol).toBe(RMS_NORM_CONTRACT.atol);
  });

  for (const n of [2, 7, 17, 1000, 4097]) {
    test(`rows of ${n}, with and without weight, small/large/offset values`, () => {
      const eps = f32(1e-6);
      for (const [scale, shift] of [[1, 0], [1e-4, 0], [3e3, -5e3], [1e-20, 0]] as const) {
        const x = values(3 * n, scale, shift, n), w = values(n, 0.5, 1, 7);
        within(rms(x, 3, n, w, 1e-6), rmsRef(x, n, eps, w), RMS_NORM_X_CONTRACT);
        within(rms(x, 3, n, null, 1e-6), rmsRef(x, n, eps, null), RMS_NORM_X_CONTRACT);
      }
    });
  }

  test("large outputs (streamed stores), rows of a length that is not a multiple of 16", () => {
    for (const [r, n] of [[2048, 1024], [2100, 1001]] as const) {
      const x = values(r * n, 2, 0.5, 5), w = values(n, 1, 0, 9);
      within(rms(x, r, n, w, 1e-5), rmsRef(x, n, f32(1e-5), w), RMS_NORM_X_CONTRACT);
      within(rms(x, r, n, null, 1e-5), rmsRef(x, n, f32(1e-5), null), RMS_NORM_X_CONTRACT);
    }
  });

  test("subnormal inputs and outputs stay within atol; zero weights give 0", () => {
    const n = 33, x = values(2 * n, 1, 0, 3);
    x[4] = 1e-42;
    x[n + 5] = -3e-44;
    const w = values(n, 1, 0, 4);
    w[7] = 0;
    w[8] = 1e-37; // fl32(rs)·w stays normal (rs ≈ 1)
    const y = rms(x, 2, n, w, 0);
    within(y, rmsRef(x, n, 0, w), RMS_NORM_X_CONTRACT);
    expect(y[7]).toBe(0);
    expect(y[n + 7]).toBe(0);
  });

  test("rows the float lanes must not take run the double lanes: fused_rms_norm.f32's bits", () => {
    const n = 24;
    const cases: [string, Float32Array, Float32Array | null, number][] = [];
    // fl32(rs)·w subnormal for a nonzero w (rs ≈ 1): relative error unbounded in float32
    const w1 = values(n, 1, 0, 2);
    w1[3] = 1e-39;
    cases.push(["a subnormal factor", values(2 * n, 1, 0, 1), w1, 1e-6]);
    // x ~ 1e-20 with eps 0: rs ≈ 1e20, rs·w ≈ 1e39 overflows float32 though y ≈ 1e19 does not
    cases.push(["an overflowing factor", values(2 * n, 1e-20, 0, 5), values(n, 1e19, 0, 6), 0]);
    // non-finite weights: the whole call
    const w3 = values(n, 1, 0, 7);
    w3[2] = Infinity;
    cases.push(["an infinite weight", values(2 * n, 1, 0, 8), w3, 1e-6]);
    // NaN and inf rows (s NaN / inf: rs NaN / 0)
    const x4 = values(2 * n, 1, 0, 9);
    x4[1] = NaN;
    x4[n + 2] = Infinity;
    cases.push(["NaN and inf rows", x4, values(n, 1, 0, 10), 1e-6]);
    // all rows too small for fl32(rs) to be finite: x = 0, eps = 0 (rs = inf)
    cases.push(["a zero row with eps 0", new Float32Array(2 * n), null, 0]);
    for (const [what, x, w, eps] of cases) {
      const fast = rms(x, 2, n, w, eps), exact = rms(x, 2, n, w, eps, F32);
      expect({ what, bits: Array.from(fast) }).toEqual({ what, bits: Array.from(exact) });
      within(fast, rmsRef(x, n, f32(eps), w), RMS_NORM_CONTRACT, { what });
    }
  });

  test("selection: tolerance tighter than the contract takes fused_rms_norm.f32; \"exact\" the exact kernel (eager's bits); eager runs f32x", () => {
    const n = 1000, x = values(3 * n, 4), w = values(n, 1, 1);
    const f = (lz: boolean) => loom.rms_norm(lz ? t(x, [3, n]).lazy() : t(x, [3, n]), [n], lz ? t(w, [n]).lazy() : t(w, [n])) as L;
    expect(impls(f(true))).toContain(IMPL);
    const lazy = f(true).eval().dataSync(), eager = f(false).dataSync();
    expect(Array.from(eager)).toEqual(Array.from(lazy)); // the eager call runs the same kernel
    loom.with_compiler_options(TIGHT, () => expect(impls(f(true))).toContain(F32));
    loom.with_compiler_options({ tolerance: "exact" }, () => {
      const y = f(true);
      expect(impls(y)).toContain("fused_rms_norm:native.fused_rms_norm.exact");
      expect(Array.from(y.eval().dataSync())).toEqual(Array.from(f(false).dataSync()));
    });
  });
});
