/**
 * How Loom dtypes live on the GPU. WGSL has 32-bit scalars only (no f64, no i64, and f16 is an
 * optional feature lavapipe lacks), so every element takes 4 bytes:
 * - float32 -> f32.
 * - float16 / bfloat16 -> f32 holding a value rounded to the half type (round-to-nearest-even on
 *   every store, as the js backend rounds on store); read back as Uint16Array bits.
 * - int64 -> i32. Loom stores int64 as integer-valued float64; uploads outside the int32 range
 *   throw LoomDtypeError, and integer arithmetic on the GPU wraps at 2^31 (documented limit).
 * - int32 -> i32; int8 / uint8 / bool -> i32 holding the narrowed value (wrapped on store).
 * - float64 -> not supported: LoomDtypeError naming the op ("convert with .float()"). Emulating
 *   it in f32 would silently lose precision; double-float emulation is not worth its cost here.
 */
import { bf16ToFloat, floatToBf16, floatToHalf, halfToFloat, type DType, type TypedArray } from "../../tensor/dtype.ts";
import { LoomDtypeError } from "../../tensor/errors.ts";

export type Wgsl = "f32" | "i32";

/** The WGSL element type storing `d` (throws for float64). */
export function gpuType(d: DType, op = "webgpu"): Wgsl {
  switch (d) {
    case "float32": case "float16": case "bfloat16": return "f32";
    case "int32": case "int64": case "int8": case "uint8": case "bool": return "i32";
    case "float64":
      throw new LoomDtypeError(`[${op}] float64 is not supported on the webgpu device (WGSL has no 64-bit floats); convert with .float() first`);
  }
}

export const isFloatClass = (d: DType): boolean => d === "float32" || d === "float16" || d === "bfloat16" || d === "float64";

const I32_MIN = -2147483648, I32_MAX = 2147483647;

/**
 * Values of a CPU storage range [lo, hi) of dtype `d` in GPU layout (Float32Array or Int32Array).
 * @throws LoomDtypeError for float64, or int64 values outside the int32 range
 */
export function toGpuArray(d: DType, data: TypedArray, lo: number, hi: number, op = "webgpu"): Float32Array | Int32Array {
  const t = gpuType(d, op);
  const n = Math.max(hi - lo, 0);
  if (d === "float32") return (data as Float32Array).slice(lo, hi);
  if (d === "int32") return (data as Int32Array).slice(lo, hi);
  if (t === "f32") {
    const dec = d === "float16" ? halfToFloat : bf16ToFloat;
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = dec(data[lo + i]!);
    return out;
  }
  const out = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const v = data[lo + i]!;
    if (d === "int64" && (v < I32_MIN || v > I32_MAX)) {
      throw new LoomDtypeError(`[${op}] int64 value ${v} does not fit the webgpu device's 32-bit integers (range ±2^31)`);
    }
    out[i] = v;
  }
  return out;
}

/** One scalar in GPU layout as u32 bits (for kernel parameters). */
export function scalarBits(t: Wgsl, v: number, op = "webgpu"): number {
  if (t === "f32") {
    F32[0] = v;
    return U32[0]!;
  }
  if (v < I32_MIN || v > I32_MAX) throw new LoomDtypeError(`[${op}] value ${v} does not fit the webgpu device's 32-bit integers`);
  I32[0] = Math.trunc(v) || 0;
  return U32[0]!;
}
const F32 = new Float32Array(1);
const I32 = new Int32Array(F32.buffer);
const U32 = new Uint32Array(F32.buffer);

/** CPU storage of dtype `d` (Loom's layout) from `n` GPU elements in `raw`. */
export function fromGpuBytes(d: DType, raw: ArrayBuffer, n: number): TypedArray {
  switch (d) {
    case "float32": return new Float32Array(raw, 0, n).slice();
    case "float16": case "bfloat16": {
      const src = new Float32Array(raw, 0, n);
      const enc = d === "float16" ? floatToHalf : floatToBf16;
      const out = new Uint16Array(n);
      for (let i = 0; i < n; i++) out[i] = enc(src[i]!);
      return out;
    }
    case "int64": return Float64Array.from(new Int32Array(raw, 0, n));
    case "int32": return new Int32Array(raw, 0, n).slice();
    case "int8": return Int8Array.from(new Int32Array(raw, 0, n));
    case "uint8": case "bool": return Uint8Array.from(new Int32Array(raw, 0, n));
    case "float64": throw new LoomDtypeError("[webgpu] float64 is not supported on the webgpu device");
  }
}

/**
 * WGSL helpers every kernel may call: NaN tests on bits (robust against fast-math folding),
 * half-type rounding (round-to-nearest-even, as floatToHalf/floatToBf16 in src/tensor/dtype.ts),
 * and float -> integer conversion (truncate; NaN -> 0).
 */
export const WGSL_COMMON = /* wgsl */ `
fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
var<private> INF_BITS: u32 = 0x7f800000u; // a var, so WGSL does not const-evaluate (and reject) inf
var<private> NAN_BITS: u32 = 0x7fc00000u;
fn f_inf() -> f32 { return bitcast<f32>(INF_BITS); }
fn f_nan() -> f32 { return bitcast<f32>(NAN_BITS); }
fn round_bf16(x: f32) -> f32 {
  let b = bitcast<u32>(x);
  if (is_nan(x)) { return bitcast<f32>((b | 0x00400000u) & 0xffff0000u); }
  return bitcast<f32>((b + 0x7fffu + ((b >> 16u) & 1u)) & 0xffff0000u);
}
fn round_f16(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  let b = bitcast<u32>(x);
  let s = b & 0x80000000u;
  let a = abs(x);
  if (a >= 65520.0) { return bitcast<f32>(s | 0x7f800000u); }
  if (a < 6.103515625e-05) {
    // subnormal half: a multiple of 2^-24; round the quotient to even
    let q = a * 16777216.0;
    var r = floor(q);
    let rem = q - r;
    if (rem > 0.5 || (rem == 0.5 && (u32(r) & 1u) == 1u)) { r = r + 1.0; }
    return bitcast<f32>(s | bitcast<u32>(r / 16777216.0));
  }
  // normal: keep 10 mantissa bits, round to nearest even on the 13 dropped bits
  let lsb = (b >> 13u) & 1u;
  return bitcast<f32>((b + 0x0fffu + lsb) & 0xffffe000u);
}
fn f_to_i(x: f32) -> i32 {
  if (is_nan(x)) { return 0; }
  return i32(clamp(trunc(x), -2147483648.0, 2147483520.0));
}
`;

/** WGSL expression storing computed value `v` (of WGSL type `ct`) as dtype `d`. */
export function storeExpr(d: DType, ct: Wgsl, v: string): string {
  switch (d) {
    case "float32": return ct === "f32" ? v : `f32(${v})`;
    case "float16": return `round_f16(${ct === "f32" ? v : `f32(${v})`})`;
    case "bfloat16": return `round_bf16(${ct === "f32" ? v : `f32(${v})`})`;
    case "int32": case "int64": return ct === "i32" ? v : `f_to_i(${v})`;
    case "int8": return `((${ct === "i32" ? v : `f_to_i(${v})`} << 24u) >> 24u)`;
    case "uint8": return `(${ct === "i32" ? v : `f_to_i(${v})`} & 255)`;
    case "bool": return `select(0, 1, ${v} != ${ct === "f32" ? "0.0" : "0"})`;
    case "float64": throw new LoomDtypeError("[webgpu] float64 is not supported on the webgpu device");
  }
}

/** WGSL expression converting a loaded element of storage type `from` to compute type `to`. */
export function convertExpr(from: Wgsl, to: Wgsl, v: string): string {
  if (from === to) return v;
  return to === "f32" ? `f32(${v})` : `f_to_i(${v})`;
}
