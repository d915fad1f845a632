/**
 * float16 / bfloat16 on the native backend against the js reference, bit for bit: the block
 * conversions of native/kernels/common.h (f16_to_f32_bf, f32_to_f16_bf, f32_to_bf16_bf: the
 * vectorized loads and stores of load_block/store_block/round_block) must give the bits of the
 * reference's encoders (src/tensor/dtype.ts: float32 math, round to nearest even on store).
 * NaNs compare as NaN (see `bits`). Inputs: every float16 and bfloat16 bit pattern; float32/float64 values at the rounding
 * boundaries (ties to even, subnormals, overflow to infinity, NaN payloads, ±0) and seeded
 * random bit patterns; elementwise ops and a matmul on half tensors, dense, strided and broadcast.
 */
import { describe, expect, test } from "bun:test";
import { jsBackend } from "../../src/backends/js/backend.ts";
import type { OpDef } from "../../src/graph/op.ts";
import { OPS } from "../../src/graph/registry.ts";
import type { DType } from "../../src/tensor/dtype.ts";
import { fromValues, viewOf, type TensorData } from "../../src/tensor/storage.ts";
import { NATIVE, nativeOrSkip } from "./helpers.ts";

const HALVES = ["float16", "bfloat16"] as const;

/**
 * Storage bits of a dense result, one number per element, with every NaN as -1: the reference
 * computes in JS numbers, whose NaN sign and payload the engine does not keep (its half NaNs are
 * always 0x7e00 / 0x7fc0), so NaN-ness is compared and its bits are not (as tests/native/parity).
 */
function bits(t: TensorData): number[] {
  const d = t.data;
  const n = t.shape.reduce((p, s) => p * s, 1);
  if (d instanceof Float32Array) {
    const u = new Uint32Array(d.buffer, d.byteOffset + t.offset * 4, n);
    return Array.from({ length: n }, (_, i) => (Number.isNaN(d[t.offset + i]!) ? -1 : u[i]!));
  }
  if (d instanceof Float64Array) {
    const u = new Uint32Array(d.buffer, d.byteOffset + t.offset * 8, 2 * n);
    return Array.from({ length: n }, (_, i) => (Number.isNaN(d[t.offset + i]!) ? -1 : u[2 * i + 1]! * 2 ** 32 + u[2 * i]!));
  }
  const h = Array.from(d.subarray(t.offset, t.offset + n) as ArrayLike<number>);
  if (t.dtype === "float16") return h.map((b) => ((b & 0x7c00) === 0x7c00 && (b & 0x3ff) !== 0 ? -1 : b));
  if (t.dtype === "bfloat16") return h.map((b) => ((b & 0x7f80) === 0x7f80 && (b & 0x7f) !== 0 ? -1 : b));
  return h;
}

/** Elements (index, native bits, js bits) where native and the reference differ, at most 5. */
function mismatches(op: OpDef, inputs: TensorData[], attrs: unknown): string[] {
  const nb = nativeOrSkip();
  const shape = op.shape(inputs, attrs), dtype = op.dtype(inputs, attrs);
  const want = bits(jsBackend.run(op, inputs, attrs, shape, dtype));
  const before = nb.stats.fallbacks;
  const got = bits(nb.run(op, inputs, attrs, shape, dtype));
  const out: string[] = [];
  if (nb.stats.fallbacks !== before) out.push(`${op.name}: ran on the js fallback`);
  for (let i = 0; i < want.length && out.length < 5; i++) {
    if (got[i] !== want[i]) out.push(`${op.name} ${inputs.map((x) => x.dtype).join(",")} -> ${dtype} [${i}]: native ${got[i]!.toString(16)}, js ${want[i]!.toString(16)}`);
  }
  return out;
}

/** A half tensor holding every 16-bit pattern (NaNs with every payload, subnormals, ±0, ±inf). */
function everyHalf(d: DType): TensorData {
  const data = new Uint16Array(65536).map((_, i) => i);
  return { dtype: d, shape: [65536], strides: [1], offset: 0, data };
}

/** Deterministic 32-bit patterns (LCG), for random float32 inputs. */
function lcg(n: number, seed: number): Uint32Array {
  const u = new Uint32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; u[i] = s; }
  return u;
}

/** float32 inputs at every rounding boundary of float16 and bfloat16, plus random bit patterns. */
function float32Edges(): TensorData {
  const u: number[] = [
    0x00000000, 0x80000000, 0x7f800000, 0xff800000, // ±0, ±inf
    0x7fc00000, 0xffc00000, 0x7f800001, 0x7fbfffff, 0xff812345, 0x7fffffff, // NaNs: quiet, signalling, payloads
    0x00000001, 0x807fffff, 0x00400000, // float32 subnormals (0 in both halves)
    0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff, // bfloat16 ties to even (down, up), just above/below
    0x7f7fffff, 0xff7f8000, 0x7f7f7fff, // bfloat16 overflow to inf at the top
    0x3f801000, 0x3f803000, 0x3f801001, 0x3f800fff, // float16 ties to even at 1
    0x477fe000, 0x477fefff, 0x477ff000, 0x477fffff, 0x47800000, // 65504, just below/at the overflow tie, 65536
    0x33800000, 0x33000000, 0x33000001, 0x32ffffff, 0x33c00000, 0x33a00000, // float16 subnormal range: 2^-24, its half, ties
    0x387fc000, 0x387fe000, 0x38800000, 0x387ff000, // largest subnormal, rounding up to the smallest normal
    0xb3400000, 0xb4400000, 0xb4a00000, // negative subnormal ties
  ];
  for (let m = 0; m < 64; m++) u.push(0x33000000 + m * 0x100000, 0x38000000 + m * 0x1000); // subnormal ladder
  const rnd = lcg(20000, 7);
  const f = new Float32Array(new Uint32Array([...u, ...rnd]).buffer);
  return { dtype: "float32", shape: [f.length], strides: [1], offset: 0, data: f };
}

/** float64 inputs whose rounding to float32 first, then to the half, differs from one rounding (double rounding). */
function float64Edges(): TensorData {
  const v = [1 + 2 ** -11 + 2 ** -40, 1 + 2 ** -11 - 2 ** -40, 1 + 2 ** -8 + 2 ** -35, 1 + 2 ** -8 - 2 ** -60, 65519.999999, 65520,
    2 ** -25 + 2 ** -60, 2 ** -25, 3 * 2 ** -26, 1e300, -1e300, 1e-300, -1e-300, NaN, -0, 0, Infinity, -Infinity, Math.PI, -Math.E];
  const r = lcg(2000, 11);
  for (let i = 0; i < r.length; i += 2) v.push((r[i]! / 2 ** 32 - 0.5) * 2 ** ((r[i + 1]! % 60) - 30));
  return fromValues("float64", [v.length], v);
}

describe.skipIf(!NATIVE)("native half precision == js reference, bit for bit", () => {
  test("every float16 / bfloat16 bit pattern loads as the reference (cast to float32, float64, the other half)", () => {
    const errs: string[] = [];
    for (const d of HALVES) for (const to of ["float32", "float64", "float16", "bfloat16"] as const) {
      errs.push(...mismatches(OPS.cast, [everyHalf(d)], { dtype: to }));
    }
    expect(errs).toEqual([]);
  });

  test("float32 -> half rounds to nearest even: ties, subnormals, overflow, NaN payloads, random bits", () => {
    const x = float32Edges();
    const errs = HALVES.flatMap((d) => mismatches(OPS.cast, [x], { dtype: d }));
    // strided source (every other element) and a strided destination shape through a transposed view
    const n = x.shape[0]! >> 1;
    const strided = viewOf(x, [n], [2], 1);
    errs.push(...HALVES.flatMap((d) => mismatches(OPS.cast, [strided], { dtype: d })));
    expect(errs).toEqual([]);
  });

  test("float64 -> half rounds through float32 as the reference does", () => {
    const errs = HALVES.flatMap((d) => mismatches(OPS.cast, [float64Edges()], { dtype: d }));
    expect(errs).toEqual([]);
  });

  test("elementwise ops on half tensors: dense, transposed and broadcast operands", () => {
    const r = lcg(2 * 48 * 40, 3);
    const vals = (k: number, n: number) => Array.from({ length: n }, (_, i) => (r[k + i]! / 2 ** 32 - 0.5) * 2 ** ((r[k + i]! & 31) - 12));
    const errs: string[] = [];
    for (const d of HALVES) {
      const a = fromValues(d, [48, 40], vals(0, 48 * 40));
      const bt = viewOf(fromValues(d, [40, 48], vals(1920, 48 * 40)), [48, 40], [1, 48], 0);
      const row = fromValues(d, [40], vals(100, 40));
      for (const op of [OPS.add, OPS.sub, OPS.mul, OPS.div]) {
        errs.push(...mismatches(op, [a, bt], {}), ...mismatches(op, [a, row], {}));
      }
      errs.push(...mismatches(OPS.neg, [bt], {}), ...mismatches(OPS.abs, [a], {}));
    }
    expect(errs).toEqual([]);
  });

  test("matmul on half tensors (exact kernel): dense and transposed operands", () => {
    // dyadic values with few bits: every float64 partial sum is exact, so any summation order
    // gives the reference's float64 result and the single rounding to the half must match
    const r = lcg(64 * 96 + 96 * 80, 5);
    const v = (k: number, n: number) => Array.from({ length: n }, (_, i) => ((r[k + i]! % 33) - 16) / 8);
    const errs: string[] = [];
    for (const d of HALVES) {
      const a = fromValues(d, [64, 96], v(0, 64 * 96));
      const b = fromValues(d, [96, 80], v(64 * 96, 96 * 80));
      const bt = viewOf(fromValues(d, [80, 96], v(64 * 96, 96 * 80)), [96, 80], [1, 96], 0);
      errs.push(...mismatches(OPS.matmul, [a, b], {}), ...mismatches(OPS.matmul, [a, bt], {}));
    }
    expect(errs).toEqual([]);
  });
});
