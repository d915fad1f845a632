/**
 * Multi-head attention (torch.nn.MultiheadAttention, torch 1.13 semantics and parameter names):
 * `in_proj_weight` [3E, E] and `in_proj_bias` [3E] (or `q_proj_weight` [E, E], `k_proj_weight`
 * [E, kdim], `v_proj_weight` [E, vdim] when kdim/vdim differ from E), `out_proj` (a Linear),
 * optional `bias_k`/`bias_v` [1, 1, E]. So state dicts load from torch unchanged.
 * Source: Vaswani et al. 2017; torch/nn/functional.py multi_head_attention_forward (1.13).
 */
import { cat, dropout, linear, scaled_dot_product_attention } from "../lazy/functional.ts";
import type { TensorOps } from "../lazy/surface.ts";
import { isFloating, type DType } from "../tensor/dtype.ts";
import { LoomDtypeError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import type { Generator } from "../tensor/rng.ts";
import { zeros } from "../lazy/creation.ts";
import { fromValues } from "../tensor/storage.ts";
import { lift } from "./execution.ts";
import { constant_, xavier_normal_, xavier_uniform_ } from "./init.ts";
import { Linear } from "./linear.ts";
import { Module } from "./module.ts";
import { Parameter } from "./parameter.ts";

export interface MultiheadAttentionOptions {
  /** Dropout probability on the attention weights while training (default 0). */
  dropout?: number;
  /** Biases in the input and output projections (default true). */
  bias?: boolean;
  /** Learned key/value rows appended to the key and value sequences (default false). */
  add_bias_kv?: boolean;
  /** Append a row of zeros to the projected keys and values (default false). */
  add_zero_attn?: boolean;
  /** Feature size of key (default embed_dim). */
  kdim?: number | null;
  /** Feature size of value (default embed_dim). */
  vdim?: number | null;
  /** Inputs and outputs are [N, L, E] instead of [L, N, E] (default false, as torch). */
  batch_first?: boolean;
  dtype?: DType;
  generator?: Generator;
}

export interface MultiheadAttentionForwardOptions<S> {
  /** [N, S] or [S] (unbatched): bool, true = ignore that key; or float, added to the scores. */
  key_padding_mask?: S | null;
  /** Return the attention weights (default true). */
  need_weights?: boolean;
  /** [L, S] or [N·num_heads, L, S]: bool, true = not allowed to attend; or float, added to the scores. */
  attn_mask?: S | null;
  /** Average the returned weights over the heads (default true). */
  average_attn_weights?: boolean;
  /**
   * Causal attention. Without attn_mask, the causal mask (key j > query i masked) is applied;
   * with attn_mask it is a hint that attn_mask is causal and attn_mask is used as given
   * (torch >= 2.0; torch 2.x raises instead when attn_mask is missing).
   */
  is_causal?: boolean;
}

/**
 * The output projection's class in torch (a Linear that dynamic quantization leaves alone); the
 * same Linear here, named as torch so the module prints as torch's.
 */
export class NonDynamicallyQuantizableLinear extends Linear {}

/** Additive float mask from a bool (true → -inf) or float mask, in dtype. */
function additive<S extends TensorOps<S>>(op: string, name: string, m: S, dtype: DType): S {
  if (m.dtype === "bool") return m.full_like(0, dtype).masked_fill(m, -Infinity);
  if (m.dtype === "uint8") return m.full_like(0, dtype).masked_fill(m.to("bool"), -Infinity); // torch: deprecated byte mask
  if (!isFloating(m.dtype)) throw new LoomDtypeError(`[${op}] only bool and floating types of ${name} are supported, got ${m.dtype}`);
  return m.to(dtype);
}

/** A zero column appended along the last dim (torch's pad(mask, (0, 1))). */
function padLast<S extends TensorOps<S>>(m: S): S {
  const shape = [...m.shape];
  shape[shape.length - 1] = 1;
  return cat([m, m.narrow(-1, 0, 1).full_like(0).expand(shape)], -1);
}

/**
 * out = out_proj(concat_h softmax(q_h k_hᵀ / √hd + mask) v_h) with q, k, v the input projections
 * of query, key and value split into num_heads heads of size hd = embed_dim / num_heads.
 * Inputs: query [L, N, E] (or [N, L, E] with batch_first, or unbatched [L, E]); key [S, N, kdim];
 * value [S, N, vdim]. forward returns [attn_output like query, attn_weights | null] with weights
 * [N, L, S] averaged over heads (or [N, num_heads, L, S]); unbatched inputs drop the N dim.
 * Fully masked rows give NaN, as torch.
 */
export class MultiheadAttention extends Module {
  in_proj_weight: Parameter | null = null;
  q_proj_weight: Parameter | null = null;
  k_proj_weight: Parameter | null = null;
  v_proj_weight: Parameter | null = null;
  in_proj_bias: Parameter | null = null;
  out_proj: NonDynamicallyQuantizableLinear;
  bias_k: Parameter | null = null;
  bias_v: Parameter | null = null;
  readonly embed_dim: number;
  readonly kdim: number;
  readonly vdim: number;
  readonly _qkv_same_embed_dim: boolean;
  readonly num_heads: number;
  readonly dropout: number;
  readonly batch_first: boolean;
  readonly head_dim: number;
  readonly add_zero_attn: boolean;

  /** @throws LoomValueError if embed_dim is not divisible by num_heads, or for a bad dropout */
  constructor(embed_dim: number, num_heads: number, opts: MultiheadAttentionOptions = {}) {
    super();
    if (!Number.isInteger(embed_dim) || embed_dim <= 0) throw new LoomValueError(`[MultiheadAttention] embed_dim must be a positive integer, got ${embed_dim}`);
    if (!Number.isInteger(num_heads) || num_heads <= 0 || embed_dim % num_heads !== 0) {
      throw new LoomValueError(`[MultiheadAttention] embed_dim (${embed_dim}) must be divisible by num_heads (${num_heads})`);
    }
    const p = opts.dropout ?? 0;
    if (!(p >= 0 && p <= 1)) throw new LoomValueError(`[MultiheadAttention] dropout probability has to be between 0 and 1, but got ${p}`);
    this.embed_dim = embed_dim;
    this.kdim = opts.kdim ?? embed_dim;
    this.vdim = opts.vdim ?? embed_dim;
    this._qkv_same_embed_dim = this.kdim === embed_dim && this.vdim === embed_dim;
    this.num_heads = num_heads;
    this.dropout = p;
    this.batch_first = opts.batch_first ?? false;
    this.head_dim = embed_dim / num_heads;
    this.add_zero_attn = opts.add_zero_attn ?? false;
    const dtype = opts.dtype ?? "float32";
    const bias = opts.bias ?? true;
    // registration order = torch's state-dict order: projections, in_proj_bias, out_proj, bias_k, bias_v
    if (this._qkv_same_embed_dim) {
      this.in_proj_weight = new Parameter(zeros([3 * embed_dim, embed_dim], { dtype }));
    } else {
      this.q_proj_weight = new Parameter(zeros([embed_dim, embed_dim], { dtype }));
      this.k_proj_weight = new Parameter(zeros([embed_dim, this.kdim], { dtype }));
      this.v_proj_weight = new Parameter(zeros([embed_dim, this.vdim], { dtype }));
    }
    if (bias) this.in_proj_bias = new Parameter(zeros([3 * embed_dim], { dtype }));
    this.out_proj = new NonDynamicallyQuantizableLinear(embed_dim, embed_dim, { bias, dtype, generator: opts.generator });
    if (opts.add_bias_kv) {
      this.bias_k = new Parameter(zeros([1, 1, embed_dim], { dtype }));
      this.bias_v = new Parameter(zeros([1, 1, embed_dim], { dtype }));
    }
    this._reset_parameters(opts.generator);
  }

  /** torch's _reset_parameters: xavier_uniform_ projections, zero biases, xavier_normal_ bias_k/v. */
  _reset_parameters(generator?: Generator): void {
    for (const w of [this.in_proj_weight, this.q_proj_weight, this.k_proj_weight, this.v_proj_weight]) if (w) xavier_uniform_(w, 1, { generator });
    if (this.in_proj_bias) constant_(this.in_proj_bias, 0);
    if (this.out_proj.bias) constant_(this.out_proj.bias, 0);
    if (this.bias_k) xavier_normal_(this.bias_k, 1, { generator });
    if (this.bias_v) xavier_normal_(this.bias_v, 1, { generator });
  }

  /** Check ranks, feature sizes, batch and sequence sizes; returns whether the input is batched. */
  private _check<S extends TensorOps<S>>(query: S, key: S, value: S): boolean {
    const op = "MultiheadAttention";
    const batched = query.ndim === 3;
    if (query.ndim !== 3 && query.ndim !== 2) throw new LoomShapeError(`[${op}] query should be unbatched 2D or batched 3D, got ${fmtShape(query.shape)}`);
    if (key.ndim !== query.ndim || value.ndim !== query.ndim) {
      throw new LoomShapeError(`[${op}] query ${fmtShape(query.shape)}, key ${fmtShape(key.shape)} and value ${fmtShape(value.shape)} must all be ${query.ndim}-D`);
    }
    for (const [name, t, d] of [["query", query, this.embed_dim], ["key", key, this.kdim], ["value", value, this.vdim]] as const) {
      if (t.shape[t.ndim - 1] !== d) throw new LoomShapeError(`[${op}] ${name} ${fmtShape(t.shape)} must end in ${d}`);
      if (!isFloating(t.dtype)) throw new LoomDtypeError(`[${op}] ${name} must be floating, got ${t.dtype}`);
    }
    const sd = batched && !this.batch_first ? 0 : batched ? 1 : 0; // sequence dim
    if (key.shape[sd] !== value.shape[sd]) throw new LoomShapeError(`[${op}] key ${fmtShape(key.shape)} and value ${fmtShape(value.shape)} must have the same sequence length`);
    if (batched) {
      const bd = 1 - sd;
      if (key.shape[bd] !== query.shape[bd] || value.shape[bd] !== query.shape[bd]) {
        throw new LoomShapeError(`[${op}] query ${fmtShape(query.shape)}, key ${fmtShape(key.shape)} and value ${fmtShape(value.shape)} must have the same batch size (batch_first=${this.batch_first})`);
      }
    }
    return batched;
  }

  /**
   * @param query - [L, N, E] ([N, L, E] with batch_first; [L, E] unbatched) float
   * @param key - [S, N, kdim]; value - [S, N, vdim] (same layout as query)
   * @returns [attn_output (query's layout, E features), attn_weights [N, L, S] or
   *   [N, num_heads, L, S] (average_attn_weights false) or null (need_weights false)]
   * @throws LoomShapeError for mismatched ranks, feature sizes, batch or sequence sizes and mask
   *   shapes; LoomDtypeError for an integer input or a mask that is neither bool nor float
   */
  override forward_lazy<S extends TensorOps<S>>(query: S, key: S, value: S, opts: MultiheadAttentionForwardOptions<S> = {}): [S, S | null] {
    const op = "MultiheadAttention";
    const { need_weights = true, average_attn_weights = true, is_causal = false } = opts;
    const batched = this._check(query, key, value);
    // work in [N, L, E] whatever the layout
    const bf = (t: S) => (!batched ? t.unsqueeze(0) : this.batch_first ? t : t.transpose(0, 1));
    const q_in = bf(query), k_in = bf(key), v_in = bf(value);
    const N = q_in.shape[0]!, L = q_in.shape[1]!, E = this.embed_dim, H = this.num_heads, hd = this.head_dim;
    let S_len = k_in.shape[1]!;
    const b = lift(this.in_proj_bias, query);
    const [b_q, b_k, b_v] = b ? (b.split(E, 0) as [S, S, S]) : [null, null, null];
    let q: S, k: S, v: S;
    if (this.in_proj_weight) {
      const w = lift(this.in_proj_weight, query);
      if (query === key && key === value) {
        [q, k, v] = linear(q_in, w, b).split(E, -1) as [S, S, S]; // self-attention: one packed GEMM
      } else {
        const [w_q, w_k, w_v] = w.split(E, 0) as [S, S, S];
        [q, k, v] = [linear(q_in, w_q, b_q), linear(k_in, w_k, b_k), linear(v_in, w_v, b_v)];
      }
    } else {
      q = linear(q_in, lift(this.q_proj_weight!, query), b_q);
      k = linear(k_in, lift(this.k_proj_weight!, query), b_k);
      v = linear(v_in, lift(this.v_proj_weight!, query), b_v);
    } // [N, L|S, E]

    // masks as one additive float mask broadcastable to [N, H, L, S]
    let mask: S | null = null;
    const dt = q.dtype;
    if (opts.attn_mask) {
      const m = opts.attn_mask;
      if (m.ndim === 2) {
        if (m.shape[0] !== L || m.shape[1] !== S_len) throw new LoomShapeError(`[${op}] The shape of the 2D attn_mask is ${fmtShape(m.shape)}, but should be [${L}, ${S_len}].`);
        mask = additive(op, "attn_mask", m, dt).view(1, 1, L, S_len);
      } else if (m.ndim === 3) {
        if (m.shape[0] !== N * H || m.shape[1] !== L || m.shape[2] !== S_len) throw new LoomShapeError(`[${op}] The shape of the 3D attn_mask is ${fmtShape(m.shape)}, but should be [${N * H}, ${L}, ${S_len}].`);
        mask = additive(op, "attn_mask", m, dt).view(N, H, L, S_len);
      } else {
        throw new LoomShapeError(`[${op}] attn_mask's dimension ${m.ndim} is not supported (2-D [L, S] or 3-D [N·num_heads, L, S])`);
      }
    } else if (is_causal) {
      // key j > query i is masked (SDPA's is_causal: the top-left aligned lower triangle)
      const causal = Array.from({ length: L * S_len }, (_, i) => (i % S_len > Math.floor(i / S_len) ? -Infinity : 0));
      mask = q._constant(fromValues(dt, [1, 1, L, S_len], causal));
    }
    if (opts.key_padding_mask) {
      const m = opts.key_padding_mask;
      const want = batched ? [N, S_len] : [S_len];
      if (m.ndim !== want.length || m.shape.some((s, i) => s !== want[i])) throw new LoomShapeError(`[${op}] expecting key_padding_mask shape of ${fmtShape(want)}, but got ${fmtShape(m.shape)}`);
      const kpm = additive(op, "key_padding_mask", m, dt).view(N, 1, 1, S_len);
      mask = mask ? mask.add(kpm) : kpm;
    }
    if (this.bias_k && this.bias_v) {
      // learned key/value rows appended to every sequence; the masks get a column of "attend"
      k = cat([k, lift(this.bias_k, query).expand([N, 1, E])], 1);
      v = cat([v, lift(this.bias_v, query).expand([N, 1, E])], 1);
      if (mask) mask = padLast(mask);
      S_len += 1;
    }
    const heads = (t: S, T: number) => t.view(N, T, H, hd).transpose(1, 2); // [N, H, T, hd]
    const qh = heads(q, L);
    let kh = heads(k, S_len), vh = heads(v, S_len);
    if (this.add_zero_attn) {
      kh = cat([kh, kh.narrow(2, 0, 1).zeros_like()], 2);
      vh = cat([vh, vh.narrow(2, 0, 1).zeros_like()], 2);
      if (mask) mask = padLast(mask);
      S_len += 1;
    }
    const p = this.training ? this.dropout : 0;
    let o: S, weights: S | null = null;
    if (need_weights) {
      // torch 1.13: softmax(baddbmm(mask, q / √hd, kᵀ)), dropout, then P·v
      let att = qh.div(Math.sqrt(hd)).matmul(kh.transpose(-2, -1)); // [N, H, L, S]
      if (mask) att = att.add(mask);
      att = att.softmax(-1);
      if (p > 0) att = dropout(att, p, true);
      o = att.matmul(vh);
      weights = average_attn_weights ? att.sum(1).div(H) : att; // [N, L, S] or [N, H, L, S]
      if (!batched) weights = weights.squeeze(0);
    } else {
      o = scaled_dot_product_attention(qh, kh, vh, { attn_mask: mask, dropout_p: p }); // [N, H, L, hd]
    }
    const merged = o.transpose(1, 2).contiguous().view(N, L, E); // heads side by side
    let out = this.out_proj.forward(merged);
    out = !batched ? out.squeeze(0) : this.batch_first ? out : out.transpose(0, 1);
    return [out, weights];
  }

  override forward<S extends TensorOps<S>>(query: S, key: S, value: S, opts: MultiheadAttentionForwardOptions<S> = {}): [S, S | null] {
    return super.forward(query, key, value, opts) as [S, S | null];
  }
}
