/**
 * `quantized_linear(x, qweight, { format, scales?, bias? })`: x · dequant(W)ᵀ + b with W kept in
 * its packed form (ggml Q8_0 / Q4_0, bitsandbytes NF4, per-channel int8), as the registry's
 * `quantized_linear` op (src/graph/ops/quantized.ts gives the layouts and the error bound). Eager
 * on eager tensors, recorded on lazy ones; eager weight operands with a lazy x are lifted as for
 * any op (so a frozen packed weight can stay an eager tensor).
 *
 * The gradient to x runs the op's transposed form (g · dequant(W)), a fused kernel too, so a
 * LoRA adapter trained on a frozen quantized base (QLoRA, Dettmers et al. 2023) never
 * materializes the base. The packed weight and its scales take no gradient.
 */
import { OPS } from "../graph/registry.ts";
import { QUANT_FORMATS, type QuantFormat } from "../graph/ops/quantized.ts";
import { LoomAutogradError, LoomDtypeError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { tensor } from "./creation.ts";
import type { TensorOps } from "./surface.ts";
import type { Tensor } from "./tensor.ts";

export type { QuantFormat } from "../graph/ops/quantized.ts";
export { NF4_CODE, QUANT_ERROR_BOUND, QUANT_FORMATS, quantRowBytes } from "../graph/ops/quantized.ts";

/** Any tensor (eager or lazy): weight operands of another kind than x are lifted as for any op. */
type AnyTensor = TensorOps<any>;

export interface QuantizedLinearOptions {
  /** Packed layout of `qweight`. */
  readonly format: QuantFormat;
  /** float32 absmax [N·K/64] (nf4) or per-row scale [N] (int8); absent for q8_0/q4_0 (scales are in the blocks). */
  readonly scales?: AnyTensor | null;
  /** float32 [N]. */
  readonly bias?: AnyTensor | null;
}

/**
 * y = x · dequant(qweight)ᵀ + bias without a dense weight.
 * @param x - float32 [..., K]
 * @param qweight - packed W [N, K]: uint8 [N, K/32·34] (q8_0), uint8 [N, K/32·18] (q4_0),
 *   uint8 [N, K/2] (nf4), int8 [N, K] (int8)
 * @returns float32 [..., N]
 * @throws LoomValueError for an unknown format or scales missing/extra for the format;
 *   LoomShapeError for K not a multiple of the block size (32; nf4 64) or a qweight row length
 *   that does not fit K (block-size mismatch, truncated stream); LoomDtypeError for wrong
 *   dtypes; LoomAutogradError if qweight or scales require grad (the weight is frozen)
 * Source: ggml-quants.c dequantize_row_q8_0/q4_0; bitsandbytes kDequantizeBlockwise (NF4)
 */
export function quantized_linear<S extends TensorOps<S>>(x: S, qweight: AnyTensor, opts: QuantizedLinearOptions): S {
  const f = QUANT_FORMATS[opts.format];
  if (!f) throw new LoomValueError(`[quantized_linear] unknown format '${String(opts.format)}' (q8_0, q4_0, nf4, int8)`);
  const scales = opts.scales ?? null;
  if (f.scales && !scales) throw new LoomValueError(`[quantized_linear] ${opts.format} needs scales (${opts.format === "nf4" ? "float32 absmax [N·K/64]" : "float32 [N]"})`);
  if (!f.scales && scales) throw new LoomValueError(`[quantized_linear] ${opts.format} keeps its scales in the blocks; got a scales operand`);
  if (qweight.requires_grad || scales?.requires_grad) {
    throw new LoomAutogradError(`[quantized_linear] the quantized weight${scales?.requires_grad ? "'s scales" : ""} requires grad, but a quantized weight is frozen (no gradient); train an adapter on it instead`);
  }
  const rest = [qweight, ...(scales ? [scales] : []), ...(opts.bias ? [opts.bias] : [])];
  return x._apply(OPS.quantized_linear, rest as unknown as S[], { format: opts.format, has_bias: !!opts.bias, transposed: false });
}

/**
 * The bytes of a packed weight as little-endian int32 words (a copy), the form quantized_linear
 * also takes: on WebGPU, where every element is stored in 4 bytes, it keeps the weight at its
 * packed size (a uint8 tensor there costs 4 bytes per byte).
 * @param qweight - uint8 or int8 [N, B], B a multiple of 4 (Q8_0/Q4_0: K a multiple of 64)
 * @returns int32 [N, B / 4] on qweight's device
 * @throws LoomDtypeError for another dtype; LoomShapeError for a shape that is not [N, 4·m]
 */
export function packed_words(qweight: Tensor): Tensor {
  if (qweight.dtype !== "uint8" && qweight.dtype !== "int8") throw new LoomDtypeError(`[packed_words] qweight must be uint8 or int8, got ${qweight.dtype}`);
  const [N, B] = qweight.shape as [number, number];
  if (qweight.shape.length !== 2 || B % 4 !== 0) throw new LoomShapeError(`[packed_words] qweight ${fmtShape(qweight.shape)}: expected [N, B] with B a multiple of 4`);
  const bytes = Uint8Array.from(qweight.dataSync(), (v) => v & 255); // row-major values; int8 as two's complement
  return tensor(new Int32Array(bytes.buffer), { dtype: "int32" }).reshape([N, B / 4]).to(qweight.device);
}
