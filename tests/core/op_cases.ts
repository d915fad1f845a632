/**
 * One table of op applications shared by the gradient checks, the eager-vs-lazy checks and the
 * registry coverage test. Each case is written once against the generic surface, so the same
 * function runs on Tensor and on LazyTensor.
 *
 * Inputs avoid non-differentiable points (|x| away from 0 for abs/relu, positive bases for log,
 * sqrt and pow, no ties for max) so central differences are valid.
 */
import * as loom from "../../src/index.ts";
import type { TensorOps } from "../../src/index.ts";

type S = TensorOps<any>;
export interface OpCase {
  name: string;
  /** Inputs: float64 tensors that may be differentiated, plus fixed (non-float) operands. Call once per case: values are drawn from a running seed. */
  inputs: () => loom.Tensor[];
  /** Indices of inputs to differentiate (default: every float64 input). */
  diff?: number[];
  fn: (...xs: any[]) => S | S[];
  /** Also check second derivatives. */
  second?: boolean;
  /** Output is not differentiable (comparisons, argmax, integer ops). */
  nondiff?: boolean;
  /** Finite-difference step, for cases whose values are quantized (float32 round trips). */
  eps?: number;
}

let seed = 1;
/** Deterministic float64 values in [lo, hi), avoiding |x| < 0.05 when `awayFromZero`. */
export function rnd(shape: number[], lo = -1, hi = 1, awayFromZero = true): loom.Tensor {
  const g = new loom.Generator(seed++);
  const n = shape.reduce((p, s) => p * s, 1);
  const vals = Array.from({ length: n }, () => {
    let v = lo + (hi - lo) * g.uniform53();
    if (awayFromZero && Math.abs(v) < 0.05) v += v < 0 ? -0.1 : 0.1;
    return v;
  });
  return loom.tensor(vals, { dtype: "float64" }).reshape(shape);
}
const pos = (shape: number[]) => rnd(shape, 0.3, 2);
/** A constant operand used inside a case's fn: seeded, so every call gives the same values. */
const fixed = (shape: number[]) => {
  const g = new loom.Generator(shape.reduce((h, s) => h * 31 + s, 7));
  return loom.tensor(Array.from({ length: shape.reduce((p, s) => p * s, 1) }, () => g.uniform53() - 0.5), { dtype: "float64" }).reshape(shape);
};
const idx = (vals: number[], shape?: number[]) => {
  const t = loom.tensor(vals, { dtype: "int64" });
  return shape ? t.reshape(shape) : t;
};
/** Q4_0 bytes of a [3, 64] weight: 2 blocks per row, each d = 0x2400 (2^-6), nibbles from a fixed pattern. */
const Q4_0_W = loom.tensor(Uint8Array.from({ length: 3 * 36 }, (_, i) => (i % 18 === 0 ? 0x00 : i % 18 === 1 ? 0x24 : (i * 37 + 11) % 256))).reshape([3, 36]);
const bool = (vals: number[], shape: number[]) => loom.tensor(vals.map((v) => v !== 0)).reshape(shape);

const unary = (name: string, f: (x: S) => S, input = () => rnd([3, 4]), second = false): OpCase => ({
  name, inputs: () => [input()], fn: f, second,
});

export const OP_CASES: OpCase[] = [
  // ---- elementwise unary
  unary("neg", (x) => x.neg()),
  unary("abs", (x) => x.abs()),
  unary("exp", (x) => x.exp(), undefined, true),
  unary("log", (x) => x.log(), () => pos([3, 4]), true),
  unary("log1p", (x) => x.log1p(), () => pos([5])),
  unary("sqrt", (x) => x.sqrt(), () => pos([3, 4]), true),
  unary("rsqrt", (x) => x.rsqrt(), () => pos([6])),
  unary("reciprocal", (x) => x.reciprocal(), () => pos([6]), true),
  unary("sin", (x) => x.sin(), undefined, true),
  unary("cos", (x) => x.cos()),
  unary("tanh", (x) => x.tanh(), undefined, true),
  unary("sigmoid", (x) => x.sigmoid(), undefined, true),
  unary("relu", (x) => x.relu()),
  unary("erf", (x) => x.erf(), undefined, true),
  unary("gelu_erf", (x) => x.gelu(), undefined, true),
  unary("gelu_tanh", (x) => x.gelu("tanh"), undefined, true),
  unary("silu", (x) => x.silu(), undefined, true),
  unary("square", (x) => x.square(), undefined, true),
  unary("sign", (x) => x.sign().add(x)),
  unary("floor_ceil_round", (x) => x.mul(3).floor().add(x.mul(3).ceil()).add(x.mul(3).round()).add(x)),
  unary("clamp", (x) => x.clamp(-0.5, 0.5)),
  unary("clamp_min_only", (x) => x.clamp(0.2, null)),
  unary("contiguous_of_transpose", (x) => x.t().contiguous(), () => rnd([3, 5])),
  // linear in x so that a coarse step (float32 quantizes values) still gives exact differences
  { name: "cast_roundtrip", inputs: () => [rnd([3, 4])], fn: (x) => x.to("float32").to("float64").mul(3), eps: 1e-3 },
  // ---- elementwise binary, broadcasting
  { name: "add_broadcast", inputs: () => [rnd([3, 4]), rnd([4])], fn: (a, b) => a.add(b) },
  { name: "add_alpha_scalar", inputs: () => [rnd([2, 3]), rnd([2, 1])], fn: (a, b) => a.add(b, { alpha: 2.5 }).add(1) },
  { name: "sub_broadcast", inputs: () => [rnd([2, 3, 1]), rnd([4])], fn: (a, b) => a.sub(b) },
  { name: "mul_broadcast", inputs: () => [rnd([3, 1]), rnd([1, 4])], fn: (a, b) => a.mul(b), second: true },
  { name: "div", inputs: () => [rnd([3, 4]), pos([3, 4])], fn: (a, b) => a.div(b), second: true },
  { name: "rsub_scalar_div", inputs: () => [pos([4])], fn: (a) => a.rsub(1).div(a) },
  // a/b stays away from integers so floor(a/b) is locally constant
  { name: "remainder", inputs: () => [loom.tensor([2.3, -1.7, 5.2, 0.45], { dtype: "float64" }), loom.tensor([0.7, 0.9, -1.1, 0.3], { dtype: "float64" })], fn: (a, b) => a.remainder(b) },
  { name: "pow_tensor", inputs: () => [pos([3, 4]), rnd([3, 4])], fn: (a, b) => a.pow(b), second: true },
  { name: "pow_scalar", inputs: () => [rnd([5])], fn: (a) => a.pow(3), second: true },
  { name: "maximum", inputs: () => [rnd([3, 4]), rnd([4])], fn: (a, b) => a.maximum(b) },
  { name: "minimum", inputs: () => [rnd([3, 4]), rnd([3, 1])], fn: (a, b) => a.minimum(b) },
  { name: "where", inputs: () => [rnd([3, 4]), rnd([4]), bool([1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0], [3, 4])], diff: [0, 1], fn: (a, b, c) => loom.where(c, a, b) },
  { name: "masked_fill", inputs: () => [rnd([3, 4]), bool([1, 0, 0, 1], [4])], diff: [0], fn: (a, m) => a.masked_fill(m, -2.5) },
  // ---- reductions
  { name: "sum_all", inputs: () => [rnd([3, 4])], fn: (a) => a.sum() },
  { name: "sum_dims_keepdim", inputs: () => [rnd([2, 3, 4])], fn: (a) => a.sum([0, -1], true), second: true },
  { name: "mean", inputs: () => [rnd([2, 3, 4])], fn: (a) => a.mean(-1) },
  { name: "amax", inputs: () => [rnd([3, 4])], fn: (a) => a.amax(1) },
  { name: "amin_keepdim", inputs: () => [rnd([3, 4])], fn: (a) => a.amin(0, true) },
  { name: "max_all", inputs: () => [rnd([3, 4])], fn: (a) => a.max() },
  { name: "max_dim_values", inputs: () => [rnd([3, 4])], fn: (a) => a.max(1).values },
  { name: "min_dim_values_keepdim", inputs: () => [rnd([3, 4])], fn: (a) => a.min(0, true).values },
  { name: "var_unbiased", inputs: () => [rnd([3, 4])], fn: (a) => a.var(1), second: true },
  { name: "var_biased_dims", inputs: () => [rnd([2, 3, 4])], fn: (a) => a.var([0, 2], { unbiased: false, keepdim: true }) },
  { name: "std", inputs: () => [rnd([3, 4])], fn: (a) => a.std(0) },
  { name: "logsumexp", inputs: () => [rnd([3, 4])], fn: (a) => a.logsumexp(-1), second: true },
  { name: "cumsum", inputs: () => [rnd([3, 4])], fn: (a) => a.cumsum(1) },
  // sort/topk values are argsort + gather (no ties in rnd values: the order is well defined)
  { name: "sort_topk_kthvalue", inputs: () => [rnd([3, 5])], fn: (a) => [a.sort(1, true).values, a.topk(2, 0).values, a.kthvalue(2).values, a.msort()] },
  { name: "softmax", inputs: () => [rnd([3, 4])], fn: (a) => a.softmax(-1), second: true },
  { name: "log_softmax", inputs: () => [rnd([3, 4])], fn: (a) => a.log_softmax(0) },
  // ---- movement
  { name: "reshape_noncontig", inputs: () => [rnd([3, 4])], fn: (a) => a.t().reshape(2, 6).mul(a.reshape(6, 2).t()) },
  { name: "permute", inputs: () => [rnd([2, 3, 4])], fn: (a) => a.permute(2, 0, 1).mul(fixed([4, 2, 3])) },
  { name: "expand", inputs: () => [rnd([3, 1])], fn: (a) => a.expand(2, 3, 4).mul(fixed([2, 3, 4])) },
  { name: "narrow_index_steps", inputs: () => [rnd([5, 6])], fn: (a) => a.narrow(0, 1, 3).index("...", "::2").add(a.index(-1, "1:4", null).sum()) },
  { name: "cat", inputs: () => [rnd([2, 3]), rnd([4, 3])], fn: (a, b) => loom.cat([a, b, a], 0) },
  { name: "stack", inputs: () => [rnd([2, 3]), rnd([2, 3])], fn: (a, b) => loom.stack([a, b], -1) },
  { name: "split_chunk", inputs: () => [rnd([5, 4])], fn: (a) => a.split([2, 3], 0)[1]!.sum(0).add(a.chunk(2, 1)[0]!.sum(1).sum()) },
  { name: "squeeze_unsqueeze_flatten", inputs: () => [rnd([2, 1, 3])], fn: (a) => a.squeeze(1).unsqueeze(0).flatten().mul(fixed([6])) },
  { name: "tril_triu", inputs: () => [rnd([2, 4, 4])], fn: (a) => a.tril(-1).add(a.triu(1).mul(2)) },
  // ---- linear algebra
  { name: "matmul_1d_1d", inputs: () => [rnd([4]), rnd([4])], fn: (a, b) => a.matmul(b) },
  { name: "matmul_2d_1d", inputs: () => [rnd([3, 4]), rnd([4])], fn: (a, b) => a.matmul(b) },
  { name: "matmul_1d_2d", inputs: () => [rnd([3]), rnd([3, 4])], fn: (a, b) => a.matmul(b) },
  { name: "matmul_2d", inputs: () => [rnd([3, 4]), rnd([4, 2])], fn: (a, b) => a.matmul(b), second: true },
  { name: "matmul_batched_broadcast", inputs: () => [rnd([2, 1, 3, 4]), rnd([3, 4, 2])], fn: (a, b) => a.matmul(b) },
  { name: "mm_transposed_operands", inputs: () => [rnd([4, 3]), rnd([2, 4])], fn: (a, b) => a.t().mm(b.t()) },
  { name: "bmm", inputs: () => [rnd([2, 3, 4]), rnd([2, 4, 2])], fn: (a, b) => a.bmm(b) },
  // ---- indexing
  { name: "gather", inputs: () => [rnd([3, 4]), idx([0, 3, 3, 1, 2, 0], [3, 2])], fn: (a, i) => a.gather(1, i) },
  { name: "scatter_add", inputs: () => [rnd([3, 4]), idx([0, 2, 2, 1, 0, 0], [2, 3]), rnd([2, 3])], fn: (a, i, s) => a.scatter_add(0, i, s) },
  { name: "index_select", inputs: () => [rnd([4, 3]), idx([3, 0, 3])], fn: (a, i) => a.index_select(0, i) },
  { name: "index_add", inputs: () => [rnd([4, 3]), idx([1, 1, 3]), rnd([3, 3])], fn: (a, i, s) => a.index_add(0, i, s) },
  { name: "embedding", inputs: () => [rnd([5, 3]), idx([4, 0, 2, 4, 1, 0], [2, 3])], fn: (w, i) => loom.embedding(i, w) },
  // padding_idx rows get no gradient by design (not the true derivative): no finite-difference check
  { name: "embedding_padding", nondiff: true, inputs: () => [rnd([5, 3]), idx([4, 0, 2, 4, 1, 0], [2, 3])], fn: (w, i) => loom.embedding(i, w, 0) },
  // ---- nn composites
  { name: "layer_norm", inputs: () => [rnd([2, 3, 4]), rnd([4]), rnd([4])], fn: (x, w, b) => loom.layer_norm(x, [4], w, b, 1e-5), second: true },
  { name: "layer_norm_2d_no_affine", inputs: () => [rnd([2, 3, 4])], fn: (x) => loom.layer_norm(x, [3, 4]) },
  { name: "rms_norm", inputs: () => [rnd([3, 4]), rnd([4])], fn: (x, w) => loom.rms_norm(x, [4], w, 1e-6), second: true },
  { name: "linear", inputs: () => [rnd([2, 3]), rnd([4, 3]), rnd([4])], fn: (x, w, b) => loom.linear(x, w, b) },
  { name: "mse_loss", inputs: () => [rnd([3, 4]), rnd([3, 4])], fn: (a, b) => loom.mse_loss(a, b) },
  { name: "cross_entropy_ignore", inputs: () => [rnd([4, 5]), idx([1, -100, 4, 0])], fn: (x, t) => loom.cross_entropy(x, t), second: true },
  { name: "cross_entropy_3d_sum", inputs: () => [rnd([2, 3, 4]), idx([0, 1, 2, 2, 1, 0, 0, 0], [2, 4])], fn: (x, t) => loom.cross_entropy(x, t, { reduction: "sum" }) },
  { name: "cross_entropy_none_weight_smooth", inputs: () => [rnd([4, 3]), idx([2, 0, 1, 1]), pos([3])], fn: (x, t, w) => loom.cross_entropy(x, t, { weight: w, reduction: "none", label_smoothing: 0.1 }) },
  { name: "cross_entropy_mean_weight_smooth", inputs: () => [rnd([4, 3]), idx([2, 0, -100, 1]), pos([3])], fn: (x, t, w) => loom.cross_entropy(x, t, { weight: w, label_smoothing: 0.2 }) },
  { name: "cross_entropy_probs", inputs: () => [rnd([3, 4]), pos([3, 4]).softmax(-1)], fn: (x, p) => loom.cross_entropy(x, p) },
  { name: "sdpa_causal", inputs: () => [rnd([2, 3, 4]), rnd([2, 3, 4]), rnd([2, 3, 4])], fn: (q, k, v) => loom.scaled_dot_product_attention(q, k, v, { is_causal: true }), second: true },
  { name: "sdpa_bool_mask", inputs: () => [rnd([1, 2, 3, 4]), rnd([1, 2, 5, 4]), rnd([1, 2, 5, 2]), bool([1, 1, 0, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 1], [3, 5])], fn: (q, k, v, m) => loom.scaled_dot_product_attention(q, k, v, { attn_mask: m }) },
  { name: "sdpa_float_mask_scale", inputs: () => [rnd([3, 4]), rnd([5, 4]), rnd([5, 3]), rnd([3, 5])], fn: (q, k, v, m) => loom.scaled_dot_product_attention(q, k, v, { attn_mask: m, scale: 0.3 }) },
  { name: "lora_linear", inputs: () => [rnd([2, 3, 4]), rnd([5, 4]), rnd([2, 4]), rnd([5, 2]), rnd([5])], fn: (x, W, A, B, b) => loom.lora_linear(x, W, A, B, 2, b), second: true },
  { name: "lora_linear_no_bias_strided", inputs: () => [rnd([3, 4]), rnd([4, 5]), rnd([2, 4]), rnd([5, 2])], fn: (x, Wt, A, B) => loom.lora_linear(x, Wt.t(), A, B, 0.5) },
  // W [3, 4] in CSR: rows 0 and 2 hold 2 and 1 non-zeros, row 1 none
  { name: "spmm_csr", inputs: () => [rnd([2, 3, 4]), idx([0, 2, 2, 3]), idx([0, 3, 1]), rnd([3]), idx([0, 0, 2])], fn: (x, crow, col, v, row) => x._apply(loom.OPS.spmm, [crow, col, v, row], {}), second: true },
  // packed Q4_0 W [3, 64] (fixed bytes; fp16 d = 2^-6 in every block); the op is float32 and
  // linear in x and b, so a large step keeps float32 rounding out of the finite differences
  { name: "quantized_linear", inputs: () => [rnd([2, 64]), rnd([3])], fn: (x, b) => loom.quantized_linear(x.to("float32"), Q4_0_W, { format: "q4_0", bias: b.to("float32") }), eps: 0.25, second: true },
  // RoPE (graph/ops/rope.ts): x [B, H, T, D], cos/sin [B, 1, T, D] and [T, D]; the transposed form is the gradient to x
  { name: "rotary_embedding", inputs: () => [rnd([2, 2, 3, 4]), rnd([2, 1, 3, 4]), rnd([2, 1, 3, 4])], fn: (x, c, s) => x._apply(loom.OPS.rotary_embedding, [c, s], { transposed: false }), second: true },
  { name: "rotary_embedding_transposed", inputs: () => [rnd([2, 3, 4]), rnd([3, 4]), rnd([3, 4])], fn: (x, c, s) => x._apply(loom.OPS.rotary_embedding, [c, s], { transposed: true }), second: true },
  // ---- non-differentiable (eager-vs-lazy and coverage only)
  { name: "comparisons", nondiff: true, inputs: () => [rnd([3, 4]), rnd([4])], fn: (a, b) => [a.eq(b), a.ne(b), a.lt(b), a.le(b), a.gt(b), a.ge(a)] },
  { name: "logical", nondiff: true, inputs: () => [rnd([3, 4])], fn: (a) => [a.gt(0).logical_and(a.lt(0.5)), a.gt(0).logical_or(a.lt(-0.5)), a.gt(0).logical_not(), a.log().isnan()] },
  { name: "argsort", nondiff: true, inputs: () => [rnd([3, 4])], fn: (a) => [a.argsort(), a.argsort(0, true), a.topk(2).indices] },
  { name: "argmax_argmin", nondiff: true, inputs: () => [rnd([3, 4])], fn: (a) => [a.argmax(), a.argmax(1), a.argmin(0, true), a.max(1).indices] },
  { name: "integer_ops", nondiff: true, inputs: () => [idx([7, -7, 5, -3, 0, 9], [2, 3])], fn: (a) => [a.floor_divide(2), a.remainder(-4), a.sum(1), a.cumsum(0), a.mul(3).sub(1)] },
  { name: "one_hot", nondiff: true, inputs: () => [idx([2, 0, 1, 2])], fn: (a) => loom.one_hot(a, 4) },
];
