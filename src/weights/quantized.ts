/**
 * Quantized: a weight W [N, K] stored in a packed block format (quantize.ts): GGML Q8_0 / Q4_0,
 * bitsandbytes NF4, or per-channel int8. Its reference decomposition dequantizes with registry
 * ops only (byte arithmetic, a table lookup for the fp16 scale's power of two and for the NF4
 * code book, one float32 multiply per element), so it is bit-exact with the reference
 * dequantizers on every backend: ggml dequantize_row_q8_0 / _q4_0 (y = q·d in float32) and
 * bitsandbytes kDequantizeBlockwise (y = code[q]·absmax).
 */
import { cat, linear as F_linear, stack, where } from "../lazy/functional.ts";
import { quantized_linear } from "../lazy/quantized_ops.ts";
import type { TensorOps } from "../lazy/surface.ts";
import { Tensor } from "../lazy/tensor.ts";
import { shapesEqual } from "../tensor/shape.ts";
import { LoomFormatError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { WeightNode, raw_tensor, register_weight_kind, type JsonValue, type WeightSpec } from "./node.ts";
import { NF4_CODE, QUANT_FORMATS, type QuantFormat } from "../graph/ops/quantized.ts";
import { packed_shapes, quantize_array } from "./quantize.ts";


const tables = new Map<string, { pow2: Tensor; nf4: Tensor }>();
/**
 * Constant tables on `device`: pow2[e] = the weight of one fp16 mantissa unit at biased exponent
 * e (2^-24 for e = 0 and 1, 2^(e-25) up to 30; e = 31 is handled apart), and the NF4 code book.
 */
function consts(device: string): { pow2: Tensor; nf4: Tensor } {
  let t = tables.get(device);
  if (!t) {
    const p = new Float32Array(32);
    for (let e = 0; e < 31; e++) p[e] = 2 ** (Math.max(e, 1) - 25);
    p[31] = Infinity;
    t = { pow2: raw_tensor("float32", [32], p), nf4: raw_tensor("float32", [16], Float32Array.from(NF4_CODE)) };
    if (device !== "cpu") t = { pow2: t.pow2.to(device), nf4: t.nf4.to(device) };
    tables.set(device, t);
  }
  return t;
}

/**
 * IEEE binary16 from its two little-endian bytes, with registry ops (float32 arithmetic, exact).
 * @param lo - low byte as float32, any shape
 * @param hi - high byte, same shape
 * @returns the half value as float32 (±0, subnormals, ±inf and NaN included)
 */
export function half_from_bytes<S extends TensorOps<S>>(lo: S, hi: S, pow2: S): S {
  const neg = hi.ge(128); // sign bit
  const h7 = hi.remainder(128);
  const e = h7.floor_divide(4); // biased exponent 0..31
  const m = h7.remainder(4).mul(256).add(lo); // 10-bit mantissa
  const full = m.add(e.gt(0).float().mul(1024)); // implicit leading 1 unless subnormal
  const mag = full.mul(pow2.index_select(0, e.flatten().int()).reshape(e.shape)); // exact: ≤ 11 bits × power of two
  const special = where(m.eq(0), mag, Number.NaN); // e = 31: inf when m = 0, else NaN
  const v = where(e.eq(31), special, mag);
  return where(neg, v.neg(), v);
}

/** A weight node in one of the packed quantized formats. */
export class Quantized extends WeightNode {
  readonly kind = "quantized";
  readonly format: QuantFormat;
  /** Packed blocks: uint8 (q8_0, q4_0, nf4) or int8 (int8); shapes in quantize.ts. */
  readonly qweight: Tensor;
  /** nf4: float32 absmax [N·K/64]; int8: float32 scale [N]; q8_0/q4_0: null. */
  readonly scales: Tensor | null;

  /**
   * Wrap already packed pieces (use `Quantized.quantize` to quantize a dense weight).
   * @param shape - logical [N, K]
   * @throws LoomShapeError if K is not a multiple of the block size
   * @throws LoomFormatError if a piece's dtype or shape does not match the format's layout
   */
  constructor(format: QuantFormat, shape: readonly number[], qweight: Tensor, scales: Tensor | null = null, name = "weight") {
    super(shape, "float32");
    if (!Object.hasOwn(QUANT_FORMATS, format)) throw new LoomValueError(`[Quantized] ${name}: unknown format ${JSON.stringify(format)} (expected one of ${Object.keys(QUANT_FORMATS).join(", ")})`);
    this.format = format;
    check_layout(format, shape, qweight, scales, name);
    this.qweight = qweight;
    this.scales = scales;
  }

  /**
   * Quantize a dense float weight [N, K] (bit-exact with the reference quantizers, quantize.ts).
   * @param name - named in errors (e.g. the state-dict key)
   * @throws LoomShapeError / LoomValueError as quantize_array
   */
  static quantize(w: TensorOps<any>, format: QuantFormat, name = "weight"): Quantized {
    const e = (w instanceof Tensor ? w : (w as unknown as { eval(): Tensor }).eval()).detach();
    const data = Float32Array.from(e.float().contiguous().dataSync());
    const p = quantize_array(data, e.shape, format, name);
    const s = packed_shapes(format, e.shape[0]!, e.shape[1]!);
    const q = raw_tensor(QUANT_FORMATS[format].dtype, s.qweight, p.qweight);
    return new Quantized(format, e.shape, q, p.scales && s.scales ? raw_tensor("float32", s.scales, p.scales) : null, name);
  }

  pieces(): Record<string, Tensor> {
    return this.scales ? { qweight: this.qweight, scales: this.scales } : { qweight: this.qweight };
  }

  override attrs(): Record<string, JsonValue> {
    return { format: this.format };
  }

  /**
   * y = x Wᵀ + b through the fused dequantize-matmul (src/lazy/quantized_ops.ts quantized_linear):
   * the dense weight is never built, on any backend. Gradients flow to x and the bias (the
   * packed weight is frozen). Other float inputs (float64, float16, bfloat16) take the memoized
   * dense path with the weight cast to x's dtype (bitsandbytes' compute dtype).
   * @param x - [*, K] float32
   * @param bias - [N] or null
   * @returns [*, N] float32
   */
  override linear<S extends TensorOps<S>>(x: S, bias: S | null = null): S {
    this.check_linear_input(x);
    if (x.dtype !== "float32" || (bias && bias.dtype !== "float32")) return F_linear(x, this.dense_as(x).to(x.dtype), bias);
    return quantized_linear(x, this.piece_as(this.qweight, x), {
      format: this.format,
      scales: this.scales ? this.piece_as(this.scales, x) : null,
      bias,
    });
  }

  /** Dequantize with registry ops (see the file comment). @returns [N, K] float32 */
  decompose<S extends TensorOps<S>>(like: S): S {
    const [N, K] = this.shape as [number, number];
    const q = this.piece_as(this.qweight, like).float();
    const c = consts(this.qweight.device);
    switch (this.format) {
      case "q8_0":
      case "q4_0": {
        const nb = K / 32, bb = QUANT_FORMATS[this.format].bytes;
        const blocks = q.reshape([N, nb, bb]);
        const d = half_from_bytes(blocks.narrow(2, 0, 1), blocks.narrow(2, 1, 1), this.piece_as(c.pow2, like)); // [N, nb, 1]
        let vals: S;
        if (this.format === "q8_0") {
          const u = blocks.narrow(2, 2, 32);
          vals = u.sub(u.ge(128).float().mul(256)); // int8 two's complement
        } else {
          const u = blocks.narrow(2, 2, 16);
          vals = cat([u.remainder(16), u.floor_divide(16)], 2).sub(8); // elements j (low nibble), j+16 (high)
        }
        return vals.mul(d).reshape([N, K]);
      }
      case "nf4": {
        const idx = stack([q.floor_divide(16), q.remainder(16)], 2).reshape([N * K]).int(); // element 2i high, 2i+1 low
        const vals = this.piece_as(c.nf4, like).index_select(0, idx).reshape([(N * K) / 64, 64]);
        return vals.mul(this.piece_as(this.scales!, like).reshape([(N * K) / 64, 1])).reshape([N, K]);
      }
      case "int8":
        return q.mul(this.piece_as(this.scales!, like).reshape([N, 1]));
    }
  }
}

/** @throws LoomShapeError / LoomFormatError naming the weight and the mismatching value */
function check_layout(format: QuantFormat, shape: readonly number[], qweight: Tensor, scales: Tensor | null, name: string): void {
  if (shape.length !== 2) throw new LoomShapeError(`[Quantized ${format}] ${name}: weight must be 2-D [out, in], got ${fmtShape(shape)}`);
  const [N, K] = shape as [number, number];
  const bs = QUANT_FORMATS[format].block;
  if (K % bs !== 0) throw new LoomShapeError(`[Quantized ${format}] ${name}: in_features K=${K} is not a multiple of the block size ${bs}`);
  const want = packed_shapes(format, N, K);
  const qd = QUANT_FORMATS[format].dtype;
  if (qweight.dtype !== qd) throw new LoomFormatError(`[Quantized ${format}] ${name}: qweight must be ${qd}, got ${qweight.dtype}`);
  if (!shapesEqual(qweight.shape, want.qweight)) throw new LoomFormatError(`[Quantized ${format}] ${name}: qweight must be ${fmtShape(want.qweight)} for weight ${fmtShape(shape)}, got ${fmtShape(qweight.shape)}`);
  if (want.scales === null) {
    if (scales) throw new LoomFormatError(`[Quantized ${format}] ${name}: takes no separate scales (they sit in the blocks)`);
    return;
  }
  if (!scales) throw new LoomFormatError(`[Quantized ${format}] ${name}: missing scales ${fmtShape(want.scales)}`);
  if (scales.dtype !== "float32") throw new LoomFormatError(`[Quantized ${format}] ${name}: scales must be float32, got ${scales.dtype}`);
  if (!shapesEqual(scales.shape, want.scales)) throw new LoomFormatError(`[Quantized ${format}] ${name}: scales must be ${fmtShape(want.scales)} for weight ${fmtShape(shape)}, got ${fmtShape(scales.shape)}`);
}

register_weight_kind("quantized", (spec: WeightSpec) => {
  const format = spec.attrs.format;
  if (typeof format !== "string" || !Object.hasOwn(QUANT_FORMATS, format)) {
    throw new LoomFormatError(`[quantized] attrs.format must be one of ${Object.keys(QUANT_FORMATS).join(", ")}, got ${JSON.stringify(format)}`);
  }
  if (spec.dtype !== "float32") throw new LoomFormatError(`[quantized] dense dtype must be float32, got ${spec.dtype}`);
  const q = spec.pieces.qweight;
  if (!q) throw new LoomFormatError(`[quantized] missing piece "qweight"`);
  return new Quantized(format as QuantFormat, spec.shape, q, spec.pieces.scales ?? null);
});
