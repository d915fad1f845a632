/**
 * Quantized linear as one op: y = x · dequant(W)ᵀ (+ b), W never materialized as a dense array.
 * A dequantize-and-multiply kernel is one more implementation of matmul (issue 12).
 *
 * Packed layouts (W is [N, K]: N out, K in; each row quantized independently along K):
 * - `q8_0` (ggml block_q8_0, ggml-common.h): uint8 [N, K/32·34]; a block is an fp16 d (little
 *   endian) then 32 int8 q; w = d·q.
 * - `q4_0` (ggml block_q4_0): uint8 [N, K/32·18]; an fp16 d then 16 bytes, byte j holding element
 *   j in the low nibble and element j+16 in the high one; w = d·(q − 8).
 * - `nf4` (bitsandbytes, csrc/kernels.cu kDequantizeBlockwise: `vals[j*2] = dDequantizeNF4(qvals[j]
 *   >> 4)`, `vals[j*2+1] = dDequantizeNF4(qvals[j] & 0x0F)`): uint8 [N, K/2], element 2i in the
 *   high nibble and 2i+1 in the low one, float32 absmax [N·K/64] over blocks of 64 of the
 *   flattened row-major weight; w = NF4_CODE[q]·absmax[block].
 * - `int8` (per channel): int8 [N, K] and float32 scale [N]; w = scale[n]·q.
 *
 * The packed bytes may also come as int32 [N, row bytes / 4]: the same bytes read as little-endian
 * words (`packed_words` in lazy/quantized_ops.ts). The WebGPU backend stores every element in 4
 * bytes, so only this form keeps a packed weight at its packed size there.
 *
 * With `transposed` the op is the adjoint: x [..., N] → [..., K] = x · dequant(W) (the gradient
 * to x of the forward, and the forward of that gradient's gradient), so gradients flow through
 * fused kernels in both directions (QLoRA). The quantized weight gets no gradient: it is frozen.
 *
 * The js reference dequantizes in float64, accumulates in float64 and rounds once to float32.
 * Fused kernels (native, webgpu) accumulate in float32; their stated error is QUANT_ERROR_BOUND.
 */
import { halfToFloat } from "../../tensor/dtype.ts";
import { toFloat64, type TensorData } from "../../tensor/storage.ts";
import { LoomAutogradError, LoomDtypeError, LoomShapeError, fmtShape } from "../../tensor/errors.ts";
import { defineOp, type KernelOp, type Meta } from "../op.ts";

export type QuantFormat = "q8_0" | "q4_0" | "nf4" | "int8";

/** Per format: elements per block, bytes per block in qweight, qweight dtype, whether a scales operand is taken. */
export const QUANT_FORMATS: Readonly<Record<QuantFormat, { block: number; bytes: number; dtype: "uint8" | "int8"; scales: boolean }>> = {
  q8_0: { block: 32, bytes: 34, dtype: "uint8", scales: false },
  q4_0: { block: 32, bytes: 18, dtype: "uint8", scales: false },
  nf4: { block: 64, bytes: 32, dtype: "uint8", scales: true },
  int8: { block: 1, bytes: 1, dtype: "int8", scales: true },
};

/**
 * bitsandbytes' NF4 code book (csrc/kernels.cu `dDequantizeNF4`; functional.py `get_4bit_type("nf4")`):
 * quantiles of N(0, 1) normalized to [−1, 1], with an exact 0.
 */
export const NF4_CODE: readonly number[] = [
  -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334,
  -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
  0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
].map(Math.fround);

/**
 * The fused kernels' error bound against the float64 reference, elementwise:
 *   |y − ref| ≤ rtol·|ref| + (n + extra)·u·S,   u = 2^-24, S = Σ_i |x_i·w_i| (+ |b|),
 * n the length of the reduced dim (K forward, N transposed). Any float32 summation order of n
 * products (sequential fmas, 16 lanes and a tree, a BLAS GEMM's k-blocking, a 64-thread tree on
 * the GPU) is within γ_n·S (Higham, Accuracy and Stability of Numerical Algorithms, §3.1:
 * γ_n = n·u/(1 − n·u)); `extra` covers the float32 decode d·q (exact for Q8_0/Q4_0, one rounding
 * for NF4 and int8: u·|w|), the bias add and γ's second-order term; rtol is the final rounding.
 * The kernels' lanes keep the typical error far smaller (below 1e-7·S measured); layout bugs give
 * errors of order S and cannot hide under it.
 */
export const QUANT_ERROR_BOUND = { rtol: 2 ** -24, extra: 16 } as const;

export interface QuantizedLinearAttrs {
  readonly format: QuantFormat;
  /** Inputs end with a bias [N] (forward only). */
  readonly has_bias: boolean;
  /** The adjoint: x [..., N] → [..., K] = x · dequant(W). */
  readonly transposed: boolean;
}

/** Bytes of one packed row of K elements. */
export function quantRowBytes(format: QuantFormat, K: number): number {
  const f = QUANT_FORMATS[format];
  return (K / f.block) * f.bytes;
}

/** K and N of a packed weight, with the layout checks (typed errors naming the op and operands). */
export function quantDims(op: string, format: QuantFormat, qweight: Meta, K: number | null): { N: number; K: number } {
  const f = QUANT_FORMATS[format];
  if (!f) throw new LoomShapeError(`[${op}] unknown format '${format}' (q8_0, q4_0, nf4, int8)`);
  if (qweight.shape.length !== 2) throw new LoomShapeError(`[${op}] qweight must be 2-D [N, bytes per row], got ${fmtShape(qweight.shape)}`);
  const N = qweight.shape[0]!;
  const words = qweight.dtype === "int32";
  const rb = qweight.shape[1]! * (words ? 4 : 1); // bytes per row
  if (K === null) {
    // transposed: K comes from the row length
    if (rb % f.bytes !== 0) throw new LoomShapeError(`[${op}] ${format} qweight ${fmtShape(qweight.shape)}: row of ${rb} bytes is not a whole number of ${f.bytes}-byte blocks (truncated block stream or another block size)`);
    K = (rb / f.bytes) * f.block;
  }
  if (K % f.block !== 0) throw new LoomShapeError(`[${op}] ${format}: in_features K = ${K} is not a multiple of the block size ${f.block}`);
  if (rb !== quantRowBytes(format, K)) {
    const want = quantRowBytes(format, K);
    throw new LoomShapeError(`[${op}] ${format} qweight ${fmtShape(qweight.shape)}${words ? " (int32 words)" : ""} does not fit K = ${K}: expected [N, ${words ? `${want / 4}` : want}] (${K / f.block} blocks of ${f.bytes} bytes per row${words ? ", as 4-byte words" : ""}; a block-size mismatch or a truncated block stream)`);
  }
  return { N, K };
}

/** Operand positions: [x, qweight, scales?, bias?]. */
function parts(ins: readonly Meta[], a: QuantizedLinearAttrs): { x: Meta; qw: Meta; scales: Meta | null; bias: Meta | null } {
  const s = QUANT_FORMATS[a.format]?.scales ? 1 : 0;
  return { x: ins[0]!, qw: ins[1]!, scales: s ? ins[2]! : null, bias: a.has_bias ? ins[2 + s]! : null };
}

/** Expected input count for attrs. */
function arity(a: QuantizedLinearAttrs): number {
  return 2 + (QUANT_FORMATS[a.format]?.scales ? 1 : 0) + (a.has_bias ? 1 : 0);
}

/**
 * Dequantize row n of W into w (float64, K values): the reference decoding, shared by the js
 * kernel and quantized_ops' `dequantize`.
 */
export function dequantRow(format: QuantFormat, q: TensorData, scales: TensorData | null, n: number, K: number, w: Float64Array): void {
  const qs = q.strides, qo = q.offset + n * qs[0]!, c = qs[1]!;
  const qd = q.data;
  // byte j of row n as 0..255 (int8 data masked; int32 words little endian)
  const byte = q.dtype === "int32" ? (j: number) => (qd[qo + (j >> 2) * c]! >>> ((j & 3) * 8)) & 255 : (j: number) => qd[qo + j * c]! & 255;
  const half = (j: number) => halfToFloat(byte(j) | (byte(j + 1) << 8));
  if (format === "q8_0" || format === "q4_0") {
    const bytes = QUANT_FORMATS[format].bytes;
    for (let b = 0; b < K / 32; b++) {
      const o = b * bytes, d = half(o);
      for (let j = 0; j < 32; j++) {
        if (format === "q8_0") {
          const v = byte(o + 2 + j);
          w[b * 32 + j] = d * (v >= 128 ? v - 256 : v);
        } else {
          const v = byte(o + 2 + (j & 15));
          w[b * 32 + j] = d * ((j < 16 ? v & 15 : v >> 4) - 8);
        }
      }
    }
  } else if (format === "nf4") {
    const so = scales!.offset, ss = scales!.strides[0]!;
    for (let k = 0; k < K; k++) {
      const v = byte(k >> 1);
      const code = NF4_CODE[(k & 1) === 0 ? v >> 4 : v & 15]!;
      w[k] = code * scales!.data[so + Math.floor((n * K + k) / 64) * ss]!;
    }
  } else {
    const sc = scales!.data[scales!.offset + n * scales!.strides[0]!]!;
    for (let k = 0; k < K; k++) {
      const v = byte(k);
      w[k] = sc * (v >= 128 ? v - 256 : v);
    }
  }
}

/**
 * @param x - [..., K] float32 (transposed: [..., N]); qweight - packed [N, row bytes] uint8 (int8
 *   for `int8`), or those bytes as int32 words [N, row bytes / 4]; scales - float32 absmax [N·K/64] (nf4) or scale [N] (int8); bias - float32 [N]
 * @returns [..., N] float32 (transposed: [..., K])
 * @throws LoomShapeError for K not a multiple of the block size, a qweight row length that does
 *   not fit K (block-size mismatch, truncated block stream), scales/bias of the wrong length;
 *   LoomDtypeError for x/scales/bias not float32 or qweight not the format's byte dtype
 */
export const quantized_linear: KernelOp<QuantizedLinearAttrs> = defineOp<QuantizedLinearAttrs, KernelOp<QuantizedLinearAttrs>>({
  kind: "kernel", arity: "variadic", name: "quantized_linear",
  shape: (ins, a) => {
    const op = "quantized_linear";
    if (ins.length !== arity(a)) throw new LoomShapeError(`[${op}] ${a.format}${a.has_bias ? " with bias" : ""} takes ${arity(a)} operands, got ${ins.length}`);
    if (a.transposed && a.has_bias) throw new LoomShapeError(`[${op}] the transposed form takes no bias`);
    const { x, qw, scales, bias } = parts(ins, a);
    if (x.shape.length < 1) throw new LoomShapeError(`[${op}] x must have at least 1 dim, got ${fmtShape(x.shape)}`);
    const last = x.shape[x.shape.length - 1]!;
    const { N, K } = quantDims(op, a.format, qw, a.transposed ? null : last);
    if (a.transposed && last !== N) throw new LoomShapeError(`[${op}] (transposed) x ${fmtShape(x.shape)} and qweight ${fmtShape(qw.shape)}: x's last dim ${last} != N = ${N}`);
    const want = a.format === "nf4" ? (N * K) / 64 : N;
    if (scales && (scales.shape.length !== 1 || scales.shape[0] !== want)) {
      throw new LoomShapeError(`[${op}] ${a.format} scales ${fmtShape(scales.shape)} for W [${N}, ${K}]: expected [${want}] (${a.format === "nf4" ? "one absmax per 64 elements" : "one scale per output row"})`);
    }
    if (bias && (bias.shape.length !== 1 || bias.shape[0] !== N)) throw new LoomShapeError(`[${op}] bias ${fmtShape(bias.shape)} for W [${N}, ${K}]: expected [${N}]`);
    return [...x.shape.slice(0, -1), a.transposed ? K : N];
  },
  dtype: (ins, a) => {
    const { x, qw, scales, bias } = parts(ins, a);
    const want = QUANT_FORMATS[a.format].dtype;
    const bad = x.dtype !== "float32" || (qw.dtype !== want && qw.dtype !== "int32") || (scales && scales.dtype !== "float32") || (bias && bias.dtype !== "float32");
    if (bad) {
      throw new LoomDtypeError(`[quantized_linear] ${a.format}: x ${x.dtype}, qweight ${qw.dtype}${scales ? `, scales ${scales.dtype}` : ""}${bias ? `, bias ${bias.dtype}` : ""}; expected x float32, qweight ${want} (or int32 words)${scales ? ", scales float32" : ""}${bias ? ", bias float32" : ""}`);
    }
    return "float32";
  },
  ref: (ins, a, out) => {
    const x = ins[0]!, qw = ins[1]!;
    const s = QUANT_FORMATS[a.format].scales ? ins[2]! : null;
    const b = a.has_bias ? ins[ins.length - 1]! : null;
    const f = QUANT_FORMATS[a.format];
    const N = qw.shape[0]!, K = ((qw.shape[1]! * (qw.dtype === "int32" ? 4 : 1)) / f.bytes) * f.block;
    const kout = a.transposed ? K : N;
    const M = out.data.length / Math.max(kout, 1) || 0;
    const xs = toFloat64(x); // M dense rows of the reduced dim (x may be any view)
    const acc = new Float64Array(M * kout);
    const w = new Float64Array(K);
    for (let n = 0; n < N; n++) {
      dequantRow(a.format, qw, s, n, K, w);
      for (let m = 0; m < M; m++) {
        if (a.transposed) {
          const g = xs[m * N + n]!;
          for (let k = 0; k < K; k++) acc[m * K + k] = acc[m * K + k]! + g * w[k]!; // not +=: users' noUncheckedIndexedAccess
        } else {
          let t = 0;
          for (let k = 0; k < K; k++) t += xs[m * K + k]! * w[k]!;
          acc[m * N + n] = t + (b ? b.data[b.offset + n * b.strides[0]!]! : 0);
        }
      }
    }
    for (let i = 0; i < acc.length; i++) out.data[i] = acc[i]!;
  },
  grad: (g, ins, _out, a, needs) => {
    const s = QUANT_FORMATS[a.format].scales ? 1 : 0;
    if (needs[1] || (s && needs[2])) {
      throw new LoomAutogradError(`[quantized_linear] no gradient to the quantized weight${s ? " or its scales" : ""} (${a.format}): it is frozen; train an adapter on it (QLoRA) or dequantize it first`);
    }
    const qw = ins[1]!;
    const w = ins.slice(1, 2 + s); // [qweight, scales?]
    const gx = needs[0] ? g._apply(quantized_linear, w, { format: a.format, has_bias: false, transposed: !a.transposed }) : null;
    const N = qw.shape[0]!;
    const gb = a.has_bias && needs[2 + s] ? g.reshape([-1, N]).sum(0) : null;
    return a.has_bias ? [gx, null, ...(s ? [null] : []), gb] : [gx, null, ...(s ? [null] : [])];
  },
  describe: (a) => `${a.format}${a.has_bias ? " bias" : ""}${a.transposed ? " transposed" : ""}`,
});
