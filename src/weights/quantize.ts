/**
 * Reference quantizers, bit-exact with the implementations they name, on a float32 weight
 * W [N, K] (N out, K in) quantized row by row along K. They produce the packed layouts the fused
 * kernels (src/lazy/quantized_ops.ts) read:
 *
 * | format | qweight                      | scales                  | block |
 * |--------|------------------------------|-------------------------|-------|
 * | q8_0   | uint8 [N, K/32·34]: per block fp16 d (little endian), 32 × int8 q      | 32 |
 * | q4_0   | uint8 [N, K/32·18]: per block fp16 d, 16 bytes; byte j = element j (low nibble) + element j+16 (high nibble) | 32 |
 * | nf4    | uint8 [N, K/2]: byte i = element 2i (high nibble) + element 2i+1 (low) | float32 absmax [N·K/64] | 64 |
 * | int8   | int8 [N, K]                  | float32 scale [N]       | K (per output channel) |
 *
 * All arithmetic is float32 as in the C/CUDA sources (Math.fround after every operation).
 */
import { QUANT_FORMATS, quantRowBytes, type QuantFormat } from "../graph/ops/quantized.ts";
import { floatToHalf } from "../tensor/dtype.ts";
import { LoomShapeError, LoomValueError } from "../tensor/errors.ts";

export type { QuantFormat } from "../graph/ops/quantized.ts";

/**
 * The decision thresholds of bitsandbytes' dQuantizeNF4 (csrc/kernels.cu), ascending, as float32:
 * the tree returns the number of thresholds t with x > t (so a tie goes to the lower code, and
 * NaN, failing every comparison, to code 0).
 */
const NF4_THRESHOLDS: Float32Array = new Float32Array([
  -0.8480964004993439, -0.6106329262256622, -0.4599952697753906, -0.33967943489551544,
  -0.23460740596055984, -0.13791173323988914, -0.045525018125772476, 0.03979014977812767,
  0.1202552504837513, 0.2035212516784668, 0.2920137718319893, 0.3893125355243683,
  0.5016634166240692, 0.6427869200706482, 0.8614784181118011,
]);

const f = Math.fround;

/** C roundf: half away from zero. */
function roundf(v: number): number {
  return v < 0 ? -Math.floor(-v + 0.5) : Math.floor(v + 0.5);
}

/** nearbyint under the default rounding mode: half to even (torch's quantize_val; Python's round()). */
export function rint(v: number): number {
  const r = Math.round(v);
  return r - v === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** dQuantizeNF4(x): the NF4 index of a scaled value (bitsandbytes csrc/kernels.cu). */
export function nf4_index(x: number): number {
  let q = 0;
  for (let i = 0; i < 15; i++) if (x > NF4_THRESHOLDS[i]!) q = i + 1;
  return q;
}

/** A quantized weight's packed pieces. */
export interface Packed {
  qweight: Uint8Array | Int8Array;
  /** nf4: absmax [N·K/64]; int8: scale [N]; q8_0/q4_0: null (scales sit in the blocks). */
  scales: Float32Array | null;
}

/**
 * Check that W [N, K] can be quantized in `format` and holds finite values.
 * @throws LoomShapeError if W is not 2-D or K is not a multiple of the block size
 * @throws LoomValueError on a NaN or infinite element (naming the tensor, row and column)
 */
export function check_quantizable(w: Float32Array, shape: readonly number[], format: QuantFormat, name: string): void {
  if (shape.length !== 2) throw new LoomShapeError(`[quantize ${format}] ${name}: weight must be 2-D [out, in], got [${shape.join(", ")}]`);
  const K = shape[1]!;
  const bs = QUANT_FORMATS[format].block;
  if (K % bs !== 0) throw new LoomShapeError(`[quantize ${format}] ${name}: in_features K=${K} is not a multiple of the block size ${bs}`);
  for (let i = 0; i < w.length; i++) {
    if (!Number.isFinite(w[i]!)) throw new LoomValueError(`[quantize ${format}] ${name}: element [${Math.floor(i / K)}, ${i % K}] is ${w[i]} (only finite weights can be quantized)`);
  }
}

/**
 * Quantize W [N, K] (row-major float32) into `format`'s packed layout.
 * Sources: ggml quantize_row_q8_0_ref / quantize_row_q4_0_ref (ggml/src/ggml-quants.c);
 * bitsandbytes kQuantizeBlockwise<…, NF4> + dQuantizeNF4 (csrc/kernels.cu); int8 per output
 * channel: scale = amax/127, q = nearbyint(x · (1/scale)) clamped to ±127 (torch's
 * quantize_per_channel arithmetic, symmetric, zero point 0; an all-zero row gets scale 0, q 0).
 * @throws see check_quantizable
 */
export function quantize_array(w: Float32Array, shape: readonly number[], format: QuantFormat, name = "weight"): Packed {
  check_quantizable(w, shape, format, name);
  const N = shape[0]!, K = shape[1]!;
  switch (format) {
    case "q8_0": return { qweight: quantize_q8_0(w, N, K), scales: null };
    case "q4_0": return { qweight: quantize_q4_0(w, N, K), scales: null };
    case "nf4": return quantize_nf4(w, N, K);
    case "int8": return quantize_int8(w, N, K);
  }
}

function putHalf(out: Uint8Array, at: number, v: number): void {
  const h = floatToHalf(v); // GGML_FP32_TO_FP16: round to nearest even
  out[at] = h & 0xff;
  out[at + 1] = h >> 8;
}

/** ggml quantize_row_q8_0_ref: d = amax/127, id = d ? 1/d : 0, q = roundf(x·id). */
function quantize_q8_0(w: Float32Array, N: number, K: number): Uint8Array {
  const nb = K / 32, out = new Uint8Array(N * nb * 34);
  for (let b = 0; b < N * nb; b++) {
    const x0 = b * 32, o = b * 34;
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(w[x0 + j]!));
    const d = f(amax / 127);
    const id = d ? f(1 / d) : 0;
    putHalf(out, o, d);
    for (let j = 0; j < 32; j++) out[o + 2 + j] = roundf(f(w[x0 + j]! * id)) & 0xff;
  }
  return out;
}

/**
 * ggml quantize_row_q4_0_ref: max = the first element of largest magnitude (signed), d = max/−8,
 * id = d ? 1/d : 0, q = min(15, (int8_t)(x·id + 8.5f)).
 */
function quantize_q4_0(w: Float32Array, N: number, K: number): Uint8Array {
  const nb = K / 32, out = new Uint8Array(N * nb * 18);
  const q = (v: number, id: number) => Math.min(15, Math.trunc(f(f(v * id) + 8.5)));
  for (let b = 0; b < N * nb; b++) {
    const x0 = b * 32, o = b * 18;
    let amax = 0, max = 0;
    for (let j = 0; j < 32; j++) {
      const v = w[x0 + j]!;
      if (amax < Math.abs(v)) { amax = Math.abs(v); max = v; }
    }
    const d = f(max / -8);
    const id = d ? f(1 / d) : 0;
    putHalf(out, o, d);
    for (let j = 0; j < 16; j++) out[o + 2 + j] = q(w[x0 + j]!, id) | (q(w[x0 + 16 + j]!, id) << 4);
  }
  return out;
}

/**
 * bitsandbytes kQuantizeBlockwise (NF4): absmax = max |x| over 64 elements, x scaled by the
 * float32 reciprocal 1/absmax, index by dQuantizeNF4; byte i packs element 2i high, 2i+1 low.
 * An all-zero block scales 0·∞ = NaN, which dQuantizeNF4 maps to code 0 (−1.0): it dequantizes
 * to −1·0 = −0.
 */
function quantize_nf4(w: Float32Array, N: number, K: number): Packed {
  const n = N * K, nb = n / 64;
  const out = new Uint8Array(n / 2), absmax = new Float32Array(nb);
  for (let b = 0; b < nb; b++) {
    let am = 0;
    for (let j = 0; j < 64; j++) am = Math.max(am, Math.abs(w[b * 64 + j]!));
    absmax[b] = am;
    const inv = f(1 / am);
    for (let j = 0; j < 32; j++) {
      const i = b * 64 + 2 * j;
      out[i / 2] = (nf4_index(f(w[i]! * inv)) << 4) | nf4_index(f(w[i + 1]! * inv));
    }
  }
  return { qweight: out, scales: absmax };
}

/** Symmetric per-output-channel int8 (see quantize_array). */
function quantize_int8(w: Float32Array, N: number, K: number): Packed {
  const q = new Int8Array(N * K), scale = new Float32Array(N);
  for (let r = 0; r < N; r++) {
    let amax = 0;
    for (let j = 0; j < K; j++) amax = Math.max(amax, Math.abs(w[r * K + j]!));
    const s = f(amax / 127);
    const inv = s ? f(1 / s) : 0;
    scale[r] = s;
    for (let j = 0; j < K; j++) q[r * K + j] = Math.max(-127, Math.min(127, rint(f(w[r * K + j]! * inv))));
  }
  return { qweight: q, scales: scale };
}

/** Shapes of a format's pieces for a weight [N, K]. */
export function packed_shapes(format: QuantFormat, N: number, K: number): { qweight: number[]; scales: number[] | null } {
  const scales = format === "nf4" ? [(N * K) / 64] : format === "int8" ? [N] : null;
  return { qweight: [N, quantRowBytes(format, K)], scales };
}
