/**
 * float16/bfloat16 products accumulated in float32 (src/backends/native/half_matmul.ts): at the
 * default tolerance (assert_close's per-dtype defaults) eager and lazy half matmuls run
 * `matmul_f32acc`, within one output ulp of the float64 reference; at "exact", or under a
 * float32-only bound, the exact kernel runs (the reference rounded once, checked against a host
 * float64 product). Shapes cover plain, batched, broadcast, transposed and strided operands.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { DEFAULT_TOLERANCE, FLOAT32_TOLERANCE, admits } from "../../src/backends/catalog.ts";
import { HALF_MATMUL_CONTRACTS } from "../../src/backends/native/half_matmul.ts";
import { selectionStats } from "../../src/scheduler/select.ts";
import { NATIVE } from "../native/helpers.ts";
import { expectWithinContract, t, useNative, values } from "./helpers.ts";

type T = loom.Tensor;
type Half = "bfloat16" | "float16";
/** Significant bits of each half dtype (an ulp is 2^(e − p + 1)). */
const PRECISION: Record<Half, number> = { bfloat16: 8, float16: 11 };

/** The float64 product of a and b on the host, from their (exact) float64 values, broadcasting batch dims. */
function hostMatmul(a: T, b: T): { ref: Float64Array; shape: number[] } {
  const out = a.to("float64").matmul(b.to("float64")); // only for the broadcast shape
  const A = a.to("float64").expand([...out.shape.slice(0, -2), a.shape.at(-2)!, a.shape.at(-1)!]).contiguous().dataSync();
  const B = b.to("float64").expand([...out.shape.slice(0, -2), b.shape.at(-2)!, b.shape.at(-1)!]).contiguous().dataSync();
  const M = a.shape.at(-2)!, K = a.shape.at(-1)!, N = b.shape.at(-1)!, nb = out.numel() / (M * N);
  const ref = new Float64Array(nb * M * N);
  for (let q = 0; q < nb; q++)
    for (let i = 0; i < M; i++)
      for (let j = 0; j < N; j++) {
        let s = 0;
        for (let k = 0; k < K; k++) s += A[q * M * K + i * K + k]! * B[q * K * N + k * N + j]!;
        ref[q * M * N + i * N + j] = s;
      }
  return { ref, shape: [...out.shape] };
}

/** [a, b] pairs: plain, batched, broadcast batch, b transposed (linear's x·Wᵀ), a strided. */
function cases(dt: Half): [string, T, T][] {
  const v = (n: number, seed: number) => values(n, 1, 0.1, seed);
  const h = (n: number, shape: number[], seed: number) => t(v(n, seed), shape).to(dt);
  return [
    ["[64,256]x[256,96]", h(64 * 256, [64, 256], 1), h(256 * 96, [256, 96], 2)],
    ["[3,17,40]x[3,40,23]", h(3 * 17 * 40, [3, 17, 40], 3), h(3 * 40 * 23, [3, 40, 23], 4)],
    ["[2,1,5,8]x[3,8,4]", h(80, [2, 1, 5, 8], 5), h(96, [3, 8, 4], 6)],
    ["[33,48]x[20,48]ᵀ", h(33 * 48, [33, 48], 7), h(20 * 48, [20, 48], 8).transpose(0, 1)],
    ["[30,64][:, ::2]x[32,9]", h(30 * 64, [30, 64], 9).index(":", "::2"), h(32 * 9, [32, 9], 10)],
  ];
}

const exact = <R>(fn: () => R) => loom.with_compiler_options({ tolerance: "exact" }, fn);
const f32 = (x: T) => x.to("float32").dataSync();

describe.skipIf(!NATIVE)("half matmul accumulated in float32 (native)", () => {
  useNative();

  test("the default tolerance admits the contracts; a float32-only bound and \"exact\" do not", () => {
    for (const dt of ["bfloat16", "float16"] as const) {
      expect(admits(DEFAULT_TOLERANCE, HALF_MATMUL_CONTRACTS[dt], dt)).toBe(true);
      expect(admits(DEFAULT_TOLERANCE, HALF_MATMUL_CONTRACTS[dt], "float32")).toBe(false);
      expect(admits(FLOAT32_TOLERANCE, HALF_MATMUL_CONTRACTS[dt], dt)).toBe(false);
      expect(admits("exact", HALF_MATMUL_CONTRACTS[dt], dt)).toBe(false);
    }
    // bfloat16's looser bound is not admitted for float16 outputs
    expect(admits(DEFAULT_TOLERANCE, HALF_MATMUL_CONTRACTS.bfloat16, "float16")).toBe(false);
  });

  for (const dt of ["bfloat16", "float16"] as const) {
    test(`${dt}: eager and lazy run matmul_f32acc, bit-equal, within one ulp of the float64 reference; "exact" is the reference rounded once`, () => {
      const ulpRel = 2 ** (1 - PRECISION[dt]);
      let differs = 0;
      for (const [name, a, b] of cases(dt)) {
        const { ref, shape } = hostMatmul(a, b);
        // exact: within half an ulp of the host product (the reference rounded once)
        const ye = exact(() => a.matmul(b));
        expect(ye.shape).toEqual(shape);
        expectWithinContract(f32(ye), ref, { kind: "bound", atol: 2 ** -25, rtol: ulpRel / 2, source: "round to nearest" }, { what: `${dt} exact ${name}`, float64: true });
        // default tolerance: the float32-accumulating kernel, eager and lazy the same bits
        const c0 = NATIVE!.shimCounters().byOp.get("matmul_f32acc") ?? 0;
        const chosen0 = selectionStats.chosen.get(`native.matmul.f32acc.${dt}`) ?? 0;
        const y = a.matmul(b), yl = a.lazy().matmul(b.lazy()).eval();
        expect(Array.from(f32(yl))).toEqual(Array.from(f32(y)));
        expect(NATIVE!.shimCounters().byOp.get("matmul_f32acc")! - c0).toBe(2); // read after the plan ran
        expect(selectionStats.chosen.get(`native.matmul.f32acc.${dt}`)! - chosen0).toBeGreaterThanOrEqual(1);
        expectWithinContract(f32(y), f32(ye), HALF_MATMUL_CONTRACTS[dt], { what: `${dt} f32acc ${name}`, float64: true });
        const A = f32(y), E = f32(ye);
        for (let i = 0; i < A.length; i++) if (A[i] !== E[i]) differs++;
      }
      // the two kernels are different computations (otherwise this test could not tell them apart)
      expect(differs).toBeGreaterThan(0);
    });

    test(`${dt}: under a float32-only bound the exact kernel runs`, () => {
      const [, a, b] = cases(dt)[0]!;
      const ye = exact(() => a.matmul(b));
      const y = loom.with_compiler_options({ tolerance: FLOAT32_TOLERANCE }, () => a.matmul(b));
      expect(Array.from(f32(y))).toEqual(Array.from(f32(ye)));
    });
  }

  test("gradients of a bfloat16 product use the same kernel and match float32 within bfloat16's tolerance", () => {
    const a = t(values(12 * 16, 1, 0, 3), [12, 16]), b = t(values(16 * 8, 1, 0, 4), [16, 8]);
    const ah = a.to("bfloat16").requires_grad_(), bh = b.to("bfloat16").requires_grad_();
    const c0 = NATIVE!.shimCounters().byOp.get("matmul_f32acc") ?? 0;
    ah.matmul(bh).sum().backward();
    expect(NATIVE!.shimCounters().byOp.get("matmul_f32acc")! - c0).toBe(3); // forward, dA = g·Bᵀ, dB = Aᵀ·g
    // d(Σ a·b)/da[i,k] = Σ_j b[k,j]: each row of dA is the row sums of b (in bfloat16's values)
    const B = bh.detach().to("float64").dataSync(), dA = f32(ah.grad!);
    for (let i = 0; i < 12; i++)
      for (let k = 0; k < 16; k++) {
        let s = 0;
        for (let j = 0; j < 8; j++) s += B[k * 8 + j]!;
        expect(Math.abs(dA[i * 16 + k]! - s)).toBeLessThanOrEqual(1e-5 + 2 ** -7 * Math.abs(s));
      }
  });
});

describe("tolerance by dtype (set_compiler_options)", () => {
  test("by_dtype entries are validated and copied", () => {
    expect(() => loom.set_compiler_options({ tolerance: { atol: 1e-5, rtol: 1e-6, by_dtype: { bfloat17: { atol: 0, rtol: 0 } } as never } })).toThrow(loom.LoomValueError);
    expect(() => loom.set_compiler_options({ tolerance: { atol: 1e-5, rtol: 1e-6, by_dtype: { bfloat16: { atol: 0, rtol: -1 } } } })).toThrow(/by_dtype/);
    const by = { bfloat16: { atol: 1e-5, rtol: 1.6e-2 } };
    loom.set_compiler_options({ tolerance: { atol: 1e-5, rtol: 1.3e-6, by_dtype: by } });
    try {
      by.bfloat16.rtol = 0; // the options hold their own copy
      const tol = loom.get_compiler_options().tolerance;
      expect(tol !== "exact" && tol.by_dtype?.bfloat16?.rtol).toBe(1.6e-2);
    } finally {
      loom.set_compiler_options({}, true);
    }
    expect(loom.get_compiler_options().tolerance).toEqual(DEFAULT_TOLERANCE);
  });
});
