/**
 * Random packed weights for the quantized_linear tests, and an independent float64
 * dequantize-then-matmul to compare every backend with. Random bytes are valid packed data once
 * each block's fp16 scale is set to a sane normal value (a random half could be NaN/inf), so no
 * quantizer is needed. The decoding here is written per element from the format descriptions
 * (ggml-common.h block_q8_0/block_q4_0, bitsandbytes kDequantizeBlockwise), not with the op's
 * dequantRow.
 */
import * as loom from "../../src/index.ts";
import { mulberry32 } from "../../src/tensor/rng.ts";
import { QUANT_ERROR_BOUND, type QuantFormat } from "../../src/lazy/quantized_ops.ts";

/** A small deterministic generator in [0, 1) (mulberry32). */
export const rng = mulberry32;

/** Bytes per packed row and block geometry (restated from the format descriptions). */
const GEOM: Record<QuantFormat, { block: number; bytes: number }> = {
  q8_0: { block: 32, bytes: 34 }, q4_0: { block: 32, bytes: 18 }, nf4: { block: 64, bytes: 32 }, int8: { block: 1, bytes: 1 },
};

export interface Packed {
  format: QuantFormat;
  N: number;
  K: number;
  bytes: Uint8Array;
  scales: Float32Array | null;
}

/** fp16 bits of ±2^e·(1 + m/1024) for e in [-10, -3]: normal halves, so every scale is exact. */
function randomHalf(r: () => number): number {
  const e = -10 + Math.floor(r() * 8), m = Math.floor(r() * 1024), s = r() < 0.5 ? 0x8000 : 0;
  return s | ((e + 15) << 10) | m;
}

export function randomPacked(format: QuantFormat, N: number, K: number, seed: number): Packed {
  const r = rng(seed);
  const g = GEOM[format];
  const rb = (K / g.block) * g.bytes;
  const bytes = new Uint8Array(N * rb);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(r() * 256);
  if (format === "q8_0" || format === "q4_0") {
    for (let n = 0; n < N; n++) {
      for (let b = 0; b < K / 32; b++) {
        const h = randomHalf(r), o = n * rb + b * g.bytes;
        bytes[o] = h & 255;
        bytes[o + 1] = h >> 8;
      }
    }
  }
  let scales: Float32Array | null = null;
  if (format === "nf4") scales = Float32Array.from({ length: (N * K) / 64 }, () => 0.01 + r());
  if (format === "int8") scales = Float32Array.from({ length: N }, () => 0.001 + r() * 0.05);
  return { format, N, K, bytes, scales };
}

function half(h: number): number {
  const e = (h >> 10) & 31, m = h & 1023, s = h & 0x8000 ? -1 : 1;
  return e === 0 ? s * m * 2 ** -24 : s * (1 + m / 1024) * 2 ** (e - 15);
}

/** NF4 code book, bitsandbytes functional.py get_4bit_type("nf4") (float32 values). */
const NF4 = [
  -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334,
  -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
  0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
].map(Math.fround);

/** W[n, k] in float64, decoded from the description of each format. */
export function weightAt(p: Packed, n: number, k: number): number {
  const g = GEOM[p.format], rb = (p.K / g.block) * g.bytes, row = n * rb;
  const B = p.bytes;
  switch (p.format) {
    case "q8_0": {
      const blk = row + Math.floor(k / 32) * 34;
      const q = B[blk + 2 + (k % 32)]!;
      return half(B[blk]! + 256 * B[blk + 1]!) * (q > 127 ? q - 256 : q);
    }
    case "q4_0": {
      const blk = row + Math.floor(k / 32) * 18, i = k % 32;
      const byte = B[blk + 2 + (i % 16)]!;
      const q = i < 16 ? byte % 16 : Math.floor(byte / 16);
      return half(B[blk]! + 256 * B[blk + 1]!) * (q - 8);
    }
    case "nf4": {
      const byte = B[row + Math.floor(k / 2)]!;
      const q = k % 2 === 0 ? Math.floor(byte / 16) : byte % 16;
      return NF4[q]! * p.scales![Math.floor((n * p.K + k) / 64)]!;
    }
    case "int8": {
      const q = B[row + k]!;
      return p.scales![n]! * (q > 127 ? q - 256 : q);
    }
  }
}

/** Dense W [N, K] in float64. */
export function dense(p: Packed): Float64Array {
  const w = new Float64Array(p.N * p.K);
  for (let n = 0; n < p.N; n++) for (let k = 0; k < p.K; k++) w[n * p.K + k] = weightAt(p, n, k);
  return w;
}

/** The op's operands as tensors: qweight [N, row bytes] (int8 for the int8 format) and scales. */
export function operands(p: Packed): { qweight: loom.Tensor; scales: loom.Tensor | null } {
  const g = GEOM[p.format], rb = (p.K / g.block) * g.bytes;
  const qweight = p.format === "int8"
    ? loom.tensor(new Int8Array(p.bytes.buffer.slice(0)), { dtype: "int8" }).reshape([p.N, rb])
    : loom.tensor(p.bytes.slice(), { dtype: "uint8" }).reshape([p.N, rb]);
  const scales = p.scales ? loom.tensor(p.scales.slice()) : null;
  return { qweight, scales };
}

/**
 * ref = x·Wᵀ (+ b) in float64 and the scale of the stated error bound, S = Σ_k |x_k·w_k| + |b|.
 * With `transposed`, x is [M, N] and ref = x·W ([M, K]).
 */
export function reference(x: ArrayLike<number>, M: number, W: Float64Array, N: number, K: number, bias: ArrayLike<number> | null, transposed = false): { ref: Float64Array; S: Float64Array } {
  const kout = transposed ? K : N, kin = transposed ? N : K;
  const ref = new Float64Array(M * kout), S = new Float64Array(M * kout);
  for (let m = 0; m < M; m++) {
    for (let j = 0; j < kout; j++) {
      let t = bias ? bias[j]! : 0, s = bias ? Math.abs(bias[j]!) : 0;
      for (let i = 0; i < kin; i++) {
        const v = x[m * kin + i]! * (transposed ? W[i * K + j]! : W[j * K + i]!);
        t += v;
        s += Math.abs(v);
      }
      ref[m * kout + j] = t;
      S[m * kout + j] = s;
    }
  }
  return { ref, S };
}

/** Indices where |got − ref| exceeds the stated bound for a reduction over `kin` (first few, as text). */
export function outOfBound(got: ArrayLike<number>, ref: Float64Array, S: Float64Array, kin: number, exactRounding = false): string[] {
  const u = 2 ** -24;
  const bad: string[] = [];
  for (let i = 0; i < ref.length; i++) {
    const slack = exactRounding ? (kin + 2) * 2 ** -52 * S[i]! : (kin + QUANT_ERROR_BOUND.extra) * u * S[i]!;
    const bound = QUANT_ERROR_BOUND.rtol * Math.abs(ref[i]!) + slack + 1e-300;
    const err = Math.abs(got[i]! - ref[i]!);
    if (!(err <= bound) && bad.length < 5) bad.push(`[${i}] got ${got[i]} ref ${ref[i]} err ${err} bound ${bound}`);
  }
  return bad;
}
