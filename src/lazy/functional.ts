/**
 * Functional ops (torch / torch.nn.functional names), generic over Tensor and LazyTensor.
 * Each is a composite of primitives; the composite is the reference a fused kernel must match.
 */
import { is_grad_enabled, no_grad } from "../autograd/grad_mode.ts";
import { OPS } from "../graph/registry.ts";
import { promoteWithScalar, type DType } from "../tensor/dtype.ts";
import { LoomDtypeError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { normalizeDim, shapesEqual } from "../tensor/shape.ts";
import { fromValues } from "../tensor/storage.ts";
import { default_generator } from "../tensor/rng.ts";
import type { Scalar, TensorOps } from "./surface.ts";
import { autocast_args } from "./autocast.ts";

// the losses live in their own file
export {
  binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, huber_loss, kl_div, l1_loss, mse_loss,
  nll_loss, smooth_l1_loss, type BCEOptions, type BCEWithLogitsOptions, type CrossEntropyOptions,
  type HuberLossOptions, type KLDivOptions, type LossOptions, type NLLLossOptions, type Reduction,
  type SmoothL1LossOptions,
} from "./losses.ts";
// convolution, pooling and batch/group normalization live in their own files
export { conv1d, conv2d, fold, unfold, type ConvOptions, type IntOrTuple, type PaddingMode, type UnfoldOptions } from "./conv.ts";
export {
  adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_max_pool1d, adaptive_max_pool2d, avg_pool1d, avg_pool2d, max_pool1d,
  max_pool2d, type AvgPoolOptions, type MaxPoolOptions,
} from "./pooling.ts";
export { batch_norm, group_norm } from "./batch_norm.ts";
// torch.nn.functional.pad lives with the other shape ops
export { pad, type PadMode } from "./shape_ops.ts";


/**
 * torch.where(condition, input, other); input and other may be scalars. Two scalars give
 * condition's shape and their result type: bool, int64 when both are integers (a JS 1.0 is the
 * integer 1, so `where(c, 1.0, 0.0)` is int64: write `where(c, 1.0, 0.0).float()`), else float32.
 */
export function where<S extends TensorOps<S>>(condition: S, input: S | Scalar, other: S | Scalar): S {
  if (typeof input === "object") return input.where(condition, other);
  if (typeof other !== "object") {
    const d = promoteWithScalar(promoteWithScalar("bool", input), other);
    return condition._constant(fromValues(d, [], [Number(input)])).where(condition, other);
  }
  const x = other._constant(fromValues(promoteWithScalar(other.dtype, input), [], [Number(input)]));
  return x.where(condition, other);
}

/** torch.cat: concatenate along `dim`; sizes must match elsewhere. */
export function cat<S extends TensorOps<S>>(tensors: readonly S[], dim = 0): S {
  if (tensors.length === 0) throw new LoomValueError("[cat] expected a non-empty list of tensors");
  const d = normalizeDim("cat", dim, tensors[0]!.ndim);
  return tensors[0]!._apply(OPS.cat, tensors.slice(1), { dim: d });
}

/** torch.stack: join equal-shaped tensors along a new dim. */
export function stack<S extends TensorOps<S>>(tensors: readonly S[], dim = 0): S {
  if (tensors.length === 0) throw new LoomValueError("[stack] expects a non-empty list of tensors");
  const s0 = tensors[0]!.shape;
  tensors.forEach((t, i) => {
    if (!shapesEqual(t.shape, s0)) throw new LoomShapeError(`[stack] expects each tensor to be equal size, but got ${fmtShape(s0)} at entry 0 and ${fmtShape(t.shape)} at entry ${i}`);
  });
  const d = normalizeDim("stack", dim, s0.length + 1);
  return cat(tensors.map((t) => t.unsqueeze(d)), d);
}

export function matmul<S extends TensorOps<S>>(a: S, b: S): S { return a.matmul(b); }
export function relu<S extends TensorOps<S>>(x: S): S { return x.relu(); }
export function sigmoid<S extends TensorOps<S>>(x: S): S { return x.sigmoid(); }
export function tanh<S extends TensorOps<S>>(x: S): S { return x.tanh(); }
export function silu<S extends TensorOps<S>>(x: S): S { return x.silu(); }
/** x for x > 0, else negative_slope·x (torch.nn.functional.leaky_relu); the gradient at 0 is negative_slope, as torch. */
export function leaky_relu<S extends TensorOps<S>>(x: S, negative_slope = 0.01): S { return x.where(x.gt(0), x.mul(negative_slope)); }
export function gelu<S extends TensorOps<S>>(x: S, approximate: "none" | "tanh" = "none"): S { return x.gelu(approximate); }
export function softmax<S extends TensorOps<S>>(x: S, dim: number, opts?: { dtype?: DType }): S { return x.softmax(dim, opts); }
export function log_softmax<S extends TensorOps<S>>(x: S, dim: number, opts?: { dtype?: DType }): S { return x.log_softmax(dim, opts); }
export function tril<S extends TensorOps<S>>(x: S, diagonal = 0): S { return x.tril(diagonal); }
export function triu<S extends TensorOps<S>>(x: S, diagonal = 0): S { return x.triu(diagonal); }

/**
 * y = x Wᵀ + b (torch.nn.functional.linear).
 * @param x - [..., in]; weight - [out, in]; bias - [out]
 * @returns [..., out]
 */
export function linear<S extends TensorOps<S>>(x: S, weight: S, bias?: S | null): S {
  const c = autocast_args("linear", [x, weight, bias]); // under autocast the bias is cast too (torch)
  if (c) [x, weight, bias] = c as [S, S, S | null];
  const y = x.matmul(weight.t());
  return bias ? y.add(bias) : y;
}

function normDims(op: string, x: TensorOps<any>, normalized_shape: readonly number[]): number[] {
  const n = normalized_shape.length;
  if (n === 0 || !shapesEqual(x.shape.slice(x.ndim - n), normalized_shape)) {
    throw new LoomShapeError(`[${op}] given normalized_shape=${fmtShape(normalized_shape)}, expected input with shape [*, ${normalized_shape.join(", ")}], but got input of size ${fmtShape(x.shape)}`);
  }
  return normalized_shape.map((_, i) => x.ndim - n + i);
}

/**
 * Layer normalization over the last dims: (x - E[x]) / sqrt(Var[x] + eps) · weight + bias,
 * with the biased variance. Source: Ba et al. 2016; torch.nn.functional.layer_norm.
 *
 * The mean is a corrected two pass (Chan, Golub & LeVeque 1983): m0 = mean(x) is rounded, so
 * x - m0 is centred again by its own mean. For a constant row x - m0 is one exact value whose
 * mean is itself, so the centred row is exactly 0 and y = bias, as torch's Welford moments give
 * (a plain x - mean(x) leaves the rounding error of the mean, ±0.3 after dividing by
 * sqrt(eps) at 12345.678). m0 is detached: the centring's gradient is the second pass's.
 * Decomposition: m0 = sum(x)/n; d0 = x - m0; d = d0 - sum(d0)/n; var = sum(d·d)/n;
 * y = d · rsqrt(var + eps) [· w] [+ b] (the reference for fused_layer_norm).
 * @param x - [*, ...normalized_shape]; weight, bias - normalized_shape
 * @param eps - added to the variance (absolute)
 */
export function layer_norm<S extends TensorOps<S>>(x: S, normalized_shape: readonly number[], weight?: S | null, bias?: S | null, eps = 1e-5): S {
  const dims = normDims("layer_norm", x, normalized_shape);
  const n = dims.reduce((p, d) => p * x.shape[d]!, 1);
  const f = x._fusedNorm("layer_norm", dims.length, n, weight ?? null, bias ?? null, eps);
  if (f !== null) return f;
  const d0 = x.sub(x.mean(dims, true).detach());
  const d = d0.sub(d0.mean(dims, true));
  let y = d.mul(d.mul(d).mean(dims, true).add(eps).rsqrt());
  if (weight) y = y.mul(weight);
  if (bias) y = y.add(bias);
  return y;
}

const FINFO_EPS: Partial<Record<DType, number>> = {
  float32: 1.1920928955078125e-7, float64: 2.220446049250313e-16, float16: 0.0009765625, bfloat16: 0.0078125,
};

/**
 * RMS normalization: x · rsqrt(mean(x², last dims) + eps) · weight.
 * Source: Zhang & Sennrich 2019; torch.nn.functional.rms_norm (eps defaults to finfo(dtype).eps).
 */
export function rms_norm<S extends TensorOps<S>>(x: S, normalized_shape: readonly number[], weight?: S | null, eps?: number | null): S {
  const dims = normDims("rms_norm", x, normalized_shape);
  const e = eps ?? FINFO_EPS[x.dtype] ?? 1.1920928955078125e-7;
  const f = x._fusedNorm("rms_norm", dims.length, dims.reduce((p, d) => p * x.shape[d]!, 1), weight ?? null, null, e);
  if (f !== null) return f;
  const y = x.mul(x.mul(x).mean(dims, true).add(e).rsqrt());
  return weight ? y.mul(weight) : y;
}

export interface EmbeddingFnOptions {
  /** Row that gets no gradient (negative counts from the end). */
  padding_idx?: number | null;
  /** Looked-up rows whose norm exceeds this are rescaled to it, in place, before the lookup. */
  max_norm?: number | null;
  /** The p of the max_norm p-norm (default 2). */
  norm_type?: number;
  /** Scale each row's gradient by 1 / (count of its index in `input`). */
  scale_grad_by_freq?: boolean;
}

/**
 * Rows of `weight` picked by integer `input` (torch.nn.functional.embedding).
 * With `max_norm`, first (no grad, in place: eager weights are written now, a lazy weight is
 * rebound and the eager tensor it was lifted from gets a deferred write) every looked-up row with
 * ‖row‖_p > max_norm is scaled by max_norm / (‖row‖_p + 1e-7) (torch.embedding_renorm_).
 * @param input - int32/int64 [*]
 * @param weight - [num_embeddings, D] float
 * @param opts - padding_idx (a number is read as padding_idx), max_norm, norm_type (default 2),
 *   scale_grad_by_freq
 * @returns [*, D]; rows at `padding_idx` get no gradient
 * @throws LoomDtypeError for non-integer indices; LoomShapeError for a weight that is not 2-D;
 *   LoomIndexError for an index outside [0, num_embeddings)
 */
export function embedding<S extends TensorOps<S>>(input: S, weight: S, opts?: number | null | EmbeddingFnOptions): S {
  return _embedding(input, weight, opts, (w, v) => no_grad(() => w.copy_(v)));
}

/**
 * embedding with the max_norm write given: `write(weight, value)` stores the renormalized weight
 * (nn.Embedding writes its eager parameter privately, as BatchNorm writes running stats) and must
 * leave `weight` holding it.
 */
export function _embedding<S extends TensorOps<S>>(input: S, weight: S, opts: number | null | undefined | EmbeddingFnOptions, write: (weight: S, value: S) => void): S {
  const o: EmbeddingFnOptions = typeof opts === "number" || opts === null || opts === undefined ? { padding_idx: opts } : opts;
  if (input.dtype !== "int64" && input.dtype !== "int32") throw new LoomDtypeError(`[embedding] expected indices of dtype int64 or int32, got ${input.dtype}`);
  if (weight.ndim !== 2) throw new LoomShapeError(`[embedding] weight must be 2-D, got ${fmtShape(weight.shape)}`);
  const N = weight.shape[0]!;
  if (o.max_norm !== undefined && o.max_norm !== null && !(o.max_norm >= 0)) throw new LoomValueError(`[embedding] max_norm must be non-negative, got ${o.max_norm}`);
  const flat = input.flatten();
  // (an empty embedding_dim has nothing to renormalize or scale)
  const needCounts = weight.shape[1]! > 0 && ((o.max_norm ?? null) !== null || (o.scale_grad_by_freq === true && weight.requires_grad && is_grad_enabled()));
  // how often each row is looked up: [N] (an index out of range throws in index_add, naming embedding)
  const ct: DType = weight.dtype === "float64" ? "float64" : "float32";
  const counts = needCounts
    ? no_grad(() => weight.detach().select(1, 0).full_like(0, ct).index_add(0, flat, flat.ones_like().to(ct)))
    : null;
  if (o.max_norm !== undefined && o.max_norm !== null && counts) {
    const max_norm = o.max_norm;
    no_grad(() => {
      const norm = weight.detach().norm(o.norm_type ?? 2, 1); // [N]
      const over = counts!.gt(0).logical_and(norm.gt(max_norm));
      const scale = norm.full_like(max_norm).div(norm.add(1e-7)).where(over, 1); // torch: max_norm / (norm + 1e-7)
      write(weight, weight.detach().mul(scale.unsqueeze(1)));
    });
  }
  // an index outside [0, num_embeddings) raises `[embedding] index ... out of bounds` (no wrap)
  let rows = weight._apply(OPS.index_select, [flat], { dim: 0, caller: "embedding" }); // [n, D]
  if (o.scale_grad_by_freq && counts && rows.requires_grad && is_grad_enabled()) {
    const s = no_grad(() => counts!.index_select(0, flat).reciprocal().to(weight.dtype).unsqueeze(1)); // [n, 1]
    rows.register_hook((g) => g.mul(s));
  }
  let out = rows.reshape([...input.shape, weight.shape[1]!]);
  if (o.padding_idx !== undefined && o.padding_idx !== null) {
    const p = o.padding_idx < 0 ? o.padding_idx + N : o.padding_idx;
    // same values, but the padding rows' values come from a detached copy: no gradient to them
    out = out.where(input.ne(p).unsqueeze(-1), out.detach());
  }
  return out;
}

/**
 * Zero elements with probability p and scale the rest by 1/(1-p) when training
 * (Srivastava et al. 2014; torch.nn.functional.dropout).
 */
export function dropout<S extends TensorOps<S>>(x: S, p = 0.5, training = true): S {
  if (p < 0 || p > 1) throw new LoomValueError(`[dropout] probability has to be between 0 and 1, but got ${p}`);
  if (!training || p === 0) return x;
  if (p === 1) return x.mul(0);
  const n = x.numel();
  const keep = new Array<number>(n);
  for (let i = 0; i < n; i++) keep[i] = default_generator.uniform() >= p ? 1 / (1 - p) : 0;
  return x.mul(x._constant(fromValues(x.dtype, x.shape, keep)));
}

export interface SDPAOptions<S> {
  attn_mask?: S | null;
  dropout_p?: number;
  is_causal?: boolean;
  scale?: number | null;
  /** Grouped-query attention (torch 2.5): k/v may have fewer heads (dim -3) than q. */
  enable_gqa?: boolean;
}

/**
 * Scaled dot-product attention: softmax(q kᵀ · scale + mask) v.
 * @param q - [..., Hq, L, E]; k - [..., Hkv, S, E]; v - [..., Hkv, S, Ev]
 * @param opts.attn_mask - bool (true = attend) or additive float, broadcastable to [..., L, S]
 * @param opts.is_causal - mask out keys after the query position (top-left aligned tril)
 * @param opts.enable_gqa - with Hkv < Hq, each k/v head serves Hq / Hkv consecutive query heads
 *   (torch 2.5: k.repeat_interleave(Hq / Hkv, -3); HF repeat_kv); without it the heads must match
 *   (or broadcast)
 * @returns [..., Hq, L, Ev], dtype of q
 * @throws LoomShapeError if E differs between q and k, or S between k and v; with enable_gqa if
 *   q, k, v are not at least 3-D, k and v differ in heads, or Hkv does not divide Hq
 * Source: Vaswani et al. 2017; torch.nn.functional.scaled_dot_product_attention
 */
export function scaled_dot_product_attention<S extends TensorOps<S>>(q: S, k: S, v: S, opts: SDPAOptions<S> = {}): S {
  const { attn_mask = null, dropout_p = 0, is_causal = false, scale = null, enable_gqa = false } = opts;
  if (enable_gqa) [k, v] = repeat_kv_heads(q, k, v);
  const E = q.shape[q.ndim - 1]!;
  if (k.shape[k.ndim - 1] !== E) throw new LoomShapeError(`[scaled_dot_product_attention] q ${fmtShape(q.shape)} and k ${fmtShape(k.shape)} must have the same last dim`);
  if (k.shape[k.ndim - 2] !== v.shape[v.ndim - 2]) throw new LoomShapeError(`[scaled_dot_product_attention] k ${fmtShape(k.shape)} and v ${fmtShape(v.shape)} must have the same sequence length`);
  if (is_causal && attn_mask) throw new LoomValueError("[scaled_dot_product_attention] explicit attn_mask should not be set when is_causal=true");
  const L = q.shape[q.ndim - 2]!, Sk = k.shape[k.ndim - 2]!;
  let att = q.matmul(k.transpose(-2, -1)).mul(scale ?? 1 / Math.sqrt(E)); // [..., L, S]
  if (is_causal) {
    const m = Array.from({ length: L * Sk }, (_, i) => (i % Sk <= Math.floor(i / Sk) ? 1 : 0));
    att = att.masked_fill(q._constant(fromValues("bool", [L, Sk], m)).logical_not(), -Infinity);
  } else if (attn_mask) {
    att = attn_mask.dtype === "bool" ? att.masked_fill(attn_mask.logical_not(), -Infinity) : att.add(attn_mask);
  }
  att = att.softmax(-1);
  if (dropout_p > 0) att = dropout(att, dropout_p, true);
  return att.matmul(v);
}

/** enable_gqa: k/v heads (dim -3) repeated to q's, each Hq / Hkv times in a row (repeat_interleave). */
function repeat_kv_heads<S extends TensorOps<S>>(q: S, k: S, v: S): [S, S] {
  const shapes = `q ${fmtShape(q.shape)}, k ${fmtShape(k.shape)}, v ${fmtShape(v.shape)}`;
  if (q.ndim < 3 || k.ndim < 3 || v.ndim < 3) throw new LoomShapeError(`[scaled_dot_product_attention] enable_gqa needs heads at dim -3 (at least 3-D inputs), got ${shapes}`);
  const Hq = q.shape[q.ndim - 3]!, Hkv = k.shape[k.ndim - 3]!;
  if (v.shape[v.ndim - 3] !== Hkv) throw new LoomShapeError(`[scaled_dot_product_attention] enable_gqa: k and v must have the same number of heads, got ${shapes}`);
  if (Hkv === Hq) return [k, v];
  if (Hq % Hkv !== 0) throw new LoomShapeError(`[scaled_dot_product_attention] enable_gqa: the ${Hq} query heads are not divisible by the ${Hkv} key/value heads (${shapes})`);
  const n_rep = Hq / Hkv;
  const rep = (t: S): S => {
    const s = t.shape, d = t.ndim - 3;
    // [..., Hkv, 1, S, E] expanded to n_rep and merged: query head h reads kv head ⌊h / n_rep⌋
    return t.unsqueeze(d + 1).expand(...s.slice(0, d + 1), n_rep, ...s.slice(d + 1)).reshape(...s.slice(0, d), Hq, ...s.slice(d + 1));
  };
  return [rep(k), rep(v)];
}

/**
 * One-hot encoding (torch.nn.functional.one_hot): int64 [..., num_classes].
 * num_classes -1 infers max + 1 (this reads the values, so a lazy input is realized).
 * @throws LoomValueError for a value outside [0, num_classes): eagerly now, for a lazy input when
 *   the result is realized or read
 */
export function one_hot<S extends TensorOps<S>>(x: S, num_classes = -1): S {
  if (x.dtype !== "int64" && x.dtype !== "int32") throw new LoomDtypeError(`[one_hot] is only applicable to index tensors, got ${x.dtype}`);
  let C = num_classes;
  if (C === -1) {
    const vals = x.dataSync();
    if (vals.some((v) => v < 0)) throw new LoomValueError("[one_hot] class values must be non-negative");
    C = vals.reduce((m, v) => Math.max(m, v), -1) + 1;
  }
  const classes = x._constant(fromValues("int64", [C], Array.from({ length: C }, (_, i) => i)));
  // With a given num_classes the values go through index_select over 0..C-1 (the identity on valid
  // values), whose bounds check raises the errors above without reading the values back here.
  const checked = num_classes === -1 ? x : classes._apply(OPS.index_select, [x.flatten()], { dim: 0, caller: "one_hot" }).reshape(x.shape);
  return checked.unsqueeze(-1).eq(classes).to("int64");
}

/**
 * LoRA linear, y = x Wᵀ + b + scaling · (x Aᵀ) Bᵀ, as the fused `lora_linear` op
 * (Hu et al. 2021; PEFT lora.Linear). Equal to `linear(x, W, b) + linear(linear(x, A), B) * scaling`.
 * @param x - [..., in]; weight - [out, in]; lora_A - [r, in]; lora_B - [out, r]; bias - [out]
 * @returns [..., out]
 */
export function lora_linear<S extends TensorOps<S>>(x: S, weight: S, lora_A: S, lora_B: S, scaling: number, bias?: S | null): S {
  const rest = bias ? [weight, lora_A, lora_B, bias] : [weight, lora_A, lora_B];
  return x._apply(OPS.lora_linear, rest, { scaling, has_bias: !!bias });
}
