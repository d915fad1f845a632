/**
 * Data types, their storage arrays and PyTorch's type-promotion rules.
 *
 * Storage choices (documented, see docs/ARCHITECTURE.md):
 * - int64 is stored in a Float64Array holding integer values: exact for |v| <= 2^53, which covers
 *   every index and count a tensor program produces, and keeps kernels on plain JS numbers instead
 *   of BigInt. Values are truncated toward zero when written by an integer op.
 * - float16 / bfloat16 are storage dtypes: raw bits in a Uint16Array. Kernels compute them in
 *   float32 and round on store (round-to-nearest-even), as PyTorch's CPU kernels do.
 * - bool is a Uint8Array of 0/1.
 */
import { LoomDtypeError } from "./errors.ts";

export type DType =
  | "float32"
  | "float64"
  | "float16"
  | "bfloat16"
  | "int32"
  | "int64"
  | "int8"
  | "uint8"
  | "bool";

export const DTYPES: readonly DType[] = [
  "float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8", "bool",
];

export type TypedArray =
  | Float32Array
  | Float64Array
  | Uint16Array
  | Int32Array
  | Int8Array
  | Uint8Array;

/** Bytes per element as stored (int64 reports 8: its logical size, also its Float64Array size). */
export const itemsize: Record<DType, number> = {
  float32: 4, float64: 8, float16: 2, bfloat16: 2, int32: 4, int64: 8, int8: 1, uint8: 1, bool: 1,
};

export function isFloating(d: DType): boolean {
  return d === "float32" || d === "float64" || d === "float16" || d === "bfloat16";
}
export function isIntegral(d: DType): boolean {
  return d === "int32" || d === "int64" || d === "int8" || d === "uint8";
}
/** float16/bfloat16: stored as bits, computed as float32. */
export function isHalf(d: DType): boolean {
  return d === "float16" || d === "bfloat16";
}

/** A zeroed storage array for `n` elements of dtype `d`. */
export function allocArray(d: DType, n: number): TypedArray {
  switch (d) {
    case "float32": return new Float32Array(n);
    case "float64": case "int64": return new Float64Array(n);
    case "float16": case "bfloat16": return new Uint16Array(n);
    case "int32": return new Int32Array(n);
    case "int8": return new Int8Array(n);
    case "uint8": case "bool": return new Uint8Array(n);
  }
}

// ---- PyTorch type promotion ------------------------------------------------------------------
// Categories: bool < integral < floating. Within a category the wider type wins; float16 and
// bfloat16 promote to float32 together (torch.promote_types(float16, bfloat16) == float32).
const CATEGORY: Record<DType, number> = {
  bool: 0, uint8: 1, int8: 1, int32: 1, int64: 1, float16: 2, bfloat16: 2, float32: 2, float64: 2,
};
const RANK: Record<DType, number> = {
  bool: 0, uint8: 1, int8: 1, int32: 2, int64: 3, float16: 4, bfloat16: 4, float32: 5, float64: 6,
};

/** torch.promote_types(a, b). */
export function promoteTypes(a: DType, b: DType): DType {
  if (a === b) return a;
  if ((a === "uint8" && b === "int8") || (a === "int8" && b === "uint8")) return "int32"; // torch: int16; we have no int16
  if (isHalf(a) && isHalf(b)) return "float32";
  return RANK[a] >= RANK[b] ? a : b;
}

/** Default dtype of a float produced from integers (torch.get_default_dtype()). */
export const DEFAULT_FLOAT: DType = "float32";

/**
 * Result dtype of an op between a tensor and a Python-style scalar: the scalar only matters when
 * it is of a higher category (int tensor + 0.5 -> float32; float16 tensor + 2.0 -> float16).
 */
export function promoteWithScalar(t: DType, s: number | boolean): DType {
  const sc = typeof s === "boolean" ? 0 : Number.isInteger(s) ? 1 : 2;
  if (sc <= CATEGORY[t]) return t;
  return sc === 1 ? "int64" : DEFAULT_FLOAT;
}

/**
 * Whether an op result of dtype `from` may be written into a tensor of dtype `to` by an in-place
 * op (torch's canCast): never float -> integer, never non-bool -> bool.
 */
export function canCast(from: DType, to: DType): boolean {
  if (isFloating(from) && !isFloating(to)) return false;
  return from === "bool" || to !== "bool";
}

/** Dtype of ops that always produce floats (exp, sqrt, true division, mean...). */
export function promoteFloat(d: DType): DType {
  return isFloating(d) ? d : DEFAULT_FLOAT;
}

export function assertFloating(op: string, d: DType): void {
  if (!isFloating(d)) throw new LoomDtypeError(`[${op}] expected a floating point tensor, got ${d}`);
}

export function parseDType(name: string): DType {
  if ((DTYPES as readonly string[]).includes(name)) return name as DType;
  throw new LoomDtypeError(`unknown dtype '${name}'; expected one of ${DTYPES.join(", ")}`);
}

// ---- float16 / bfloat16 bit conversion -------------------------------------------------------
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE 754 binary16 bits -> number. */
export function halfToFloat(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

/** number -> IEEE 754 binary16 bits, round-to-nearest-even (via float32, as torch's .half()). */
export function floatToHalf(v: number): number {
  f32[0] = v;
  const x = u32[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    let r = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    if (rem > half || (rem === half && (r & 1))) r++;
    return sign | r;
  }
  let r = mant >>> 13;
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (r & 1))) {
    r++;
    if (r === 0x400) { r = 0; e++; if (e >= 31) return sign | 0x7c00; }
  }
  return sign | (e << 10) | r;
}

/** bfloat16 bits -> number (the top half of a float32). */
export function bf16ToFloat(h: number): number {
  u32[0] = h << 16;
  return f32[0]!;
}

/** number -> bfloat16 bits, round-to-nearest-even (as torch's .bfloat16()). */
export function floatToBf16(v: number): number {
  f32[0] = v;
  const x = u32[0]!;
  if ((x & 0x7fffffff) > 0x7f800000) return ((x >>> 16) | 0x40) & 0xffff; // quiet NaN
  const lsb = (x >>> 16) & 1;
  return ((x + 0x7fff + lsb) >>> 16) & 0xffff;
}

/** Read element i of a storage array as a JS number, decoding half types. */
export function decoder(d: DType): ((a: TypedArray, i: number) => number) | null {
  if (d === "float16") return (a, i) => halfToFloat(a[i]!);
  if (d === "bfloat16") return (a, i) => bf16ToFloat(a[i]!);
  return null;
}

/**
 * Convert a JS number to the value stored for dtype `d` (integers truncate toward zero like
 * torch's float->int cast; bool is v != 0). Typed arrays do the rest of the narrowing.
 */
export function encoder(d: DType): ((v: number) => number) | null {
  switch (d) {
    case "float16": return floatToHalf;
    case "bfloat16": return floatToBf16;
    case "int64": return (v) => Math.trunc(v) || 0; // NaN -> 0 and -0 -> 0: integers have no signed zero
    case "bool": return (v) => (v !== 0 ? 1 : 0);
    default: return null;
  }
}
