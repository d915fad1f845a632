/**
 * The building blocks of a Llama-family decoder, ported from Hugging Face transformers'
 * modeling_llama.py (Qwen2 and Mistral share them; modeling_qwen2.py differs only in the q/k/v
 * biases, see LlamaConfig.qkv_bias): LlamaRMSNorm, LlamaRotaryEmbedding (default rope),
 * rotate_half / apply_rotary_pos_emb, repeat_kv (grouped-query attention),
 * eager_attention_forward, LlamaAttention (with a StaticCache), LlamaMLP (SwiGLU) and
 * LlamaDecoderLayer. Parameter names are HF's (`self_attn.q_proj.weight`, `mlp.gate_proj.weight`,
 * `input_layernorm.weight`, ...), so HF state dicts load as they are.
 * Every forward is written once (`forward_lazy`, generic over Tensor and LazyTensor).
 * Source: https://github.com/huggingface/transformers/blob/main/src/transformers/models/llama/modeling_llama.py
 */
import { apply_rotary, rotate_half as rope_rotate_half } from "../graph/ops/rope.ts";
import { arange, ones } from "../lazy/creation.ts";
import { pow } from "../lazy/free_functions.ts";
import { cat, dropout } from "../lazy/functional.ts";
import type { TensorOps } from "../lazy/surface.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { SiLU } from "../nn/activation.ts";
import { lift } from "../nn/execution.ts";
import { Linear } from "../nn/linear.ts";
import { Module, TensorModule } from "../nn/module.ts";
import { Parameter } from "../nn/parameter.ts";
import type { DType } from "../tensor/dtype.ts";
import type { Generator } from "../tensor/rng.ts";
import type { StaticCache } from "./kv_cache.ts";
import type { LlamaConfig } from "./llama_config.ts";

export interface LlamaOptions {
  /** Parameter dtype (default float32). */
  dtype?: DType;
  /** Random source for the initialization (default generator when omitted). */
  generator?: Generator;
  /** Draw HF's initialization (default true); false leaves the constructor values, e.g. before loading a checkpoint. */
  init?: boolean;
}

/**
 * weight · (x / √(mean(x²) + eps)), the statistics in float32 whatever x's dtype (LlamaRMSNorm,
 * equivalent to T5LayerNorm): eps inside the square root, the weight applied after casting back.
 * @param hidden_states - [..., hidden_size] float
 * @returns the same shape, x's dtype (promoted with the weight's)
 */
export class LlamaRMSNorm extends TensorModule {
  weight: Parameter;
  variance_epsilon: number;

  constructor(hidden_size: number, eps = 1e-6, opts: { dtype?: DType } = {}) {
    super();
    this.weight = new Parameter(ones([hidden_size], { dtype: opts.dtype ?? "float32" }));
    this.variance_epsilon = eps;
  }

  forward_lazy<S extends TensorOps<S>>(hidden_states: S): S {
    const input_dtype = hidden_states.dtype;
    let h = hidden_states.to("float32");
    const variance = h.pow(2).mean(-1, true);
    h = h.mul(variance.add(this.variance_epsilon).rsqrt());
    return lift(this.weight, h).mul(h.to(input_dtype));
  }

  override extra_repr(): string {
    return `(${this.weight.shape[0]},), eps=${this.variance_epsilon}`;
  }
}

/**
 * cos and sin of position · inv_freq, inv_freq = 1 / θ^(2i/d) for i in [0, d/2), each frequency
 * used twice (`cat(freqs, freqs)`: HF's halves convention, paired with rotate_half). Computed in
 * float32 (HF disables autocast here), returned in x's dtype. inv_freq is a non-persistent buffer.
 */
export class LlamaRotaryEmbedding extends Module {
  declare inv_freq: Tensor;
  readonly attention_scaling = 1.0; // "default" rope

  constructor(config: LlamaConfig) {
    super();
    const dim = config.head_dim;
    const exponent = arange(0, dim, 2, { dtype: "int64" }).float().div(dim);
    const inv_freq = pow(config.rope_theta, exponent).reciprocal(); // 1 / base ** (arange(0, dim, 2) / dim)
    this.register_buffer("inv_freq", scaled_inv_freq(inv_freq, config.rope_scaling), false);
  }

  /**
   * @param x - any tensor of the activations' dtype and kind (HF passes the hidden states)
   * @param position_ids - int [B, T] (or [1, T])
   * @returns [cos, sin], each [B, T, head_dim]
   */
  override forward_lazy<S extends TensorOps<S>>(x: S, position_ids: S): [S, S] {
    const inv_freq = lift(this.inv_freq, x);
    const inv_freq_expanded = inv_freq.view(1, -1, 1).expand(position_ids.shape[0]!, -1, 1); // [B, d/2, 1]
    const position_ids_expanded = position_ids.unsqueeze(1).float(); // [B, 1, T]
    const freqs = inv_freq_expanded.matmul(position_ids_expanded).transpose(1, 2); // [B, T, d/2]
    const emb = cat([freqs, freqs], -1);
    return [emb.cos().mul(this.attention_scaling).to(x.dtype), emb.sin().mul(this.attention_scaling).to(x.dtype)];
  }
}

/**
 * The inv_freq of HF's ROPE_INIT_FUNCTIONS for a validated rope_scaling (float32, as HF):
 * "linear": inv_freq / factor; "llama3" (_compute_llama3_parameters): wavelengths 2π/inv_freq
 * above original_max_position_embeddings / low_freq_factor are divided by factor, those below
 * original / high_freq_factor kept, the band between interpolated smoothly. attention_scaling stays 1.
 * @param inv_freq - float32 [head_dim / 2]
 */
export function scaled_inv_freq(inv_freq: Tensor, rope_scaling: Record<string, unknown> | null): Tensor {
  const type = rope_scaling?.rope_type ?? rope_scaling?.type;
  if (!rope_scaling || type === "default") return inv_freq;
  const factor = rope_scaling.factor as number;
  if (type === "linear") return inv_freq.div(factor);
  const low = rope_scaling.low_freq_factor as number, high = rope_scaling.high_freq_factor as number;
  const old_context_len = rope_scaling.original_max_position_embeddings as number;
  const low_freq_wavelen = old_context_len / low, high_freq_wavelen = old_context_len / high;
  const wavelen = inv_freq.reciprocal().mul(2 * Math.PI);
  let llama = inv_freq.div(factor).where(wavelen.gt(low_freq_wavelen), inv_freq);
  const smooth = wavelen.reciprocal().mul(old_context_len).sub(low).div(high - low);
  const smoothed = smooth.neg().add(1).mul(llama).div(factor).add(smooth.mul(llama));
  const medium = wavelen.lt(high_freq_wavelen).logical_not().logical_and(wavelen.gt(low_freq_wavelen).logical_not());
  llama = smoothed.where(medium, llama);
  return llama;
}

/** cat(-x2, x1) of the two halves of the last dim (HF rotate_half; one definition, graph/ops/rope.ts). */
export function rotate_half<S extends TensorOps<S>>(x: S): S {
  return rope_rotate_half(x);
}

/**
 * q·cos + rotate_half(q)·sin and the same for k (HF apply_rotary_pos_emb), each as the registry's
 * `rotary_embedding` op (graph/ops/rope.ts): one kernel per tensor forward and one backward, with
 * the bits of this decomposition (the op's reference).
 * @param q - [B, H, T, D]; k - [B, H_kv, T, D]; cos, sin - [B, T, D] (unsqueezed at unsqueeze_dim)
 * @returns [q_embed, k_embed], shapes of q and k
 */
export function apply_rotary_pos_emb<S extends TensorOps<S>>(q: S, k: S, cos: S, sin: S, unsqueeze_dim = 1): [S, S] {
  const c = cos.unsqueeze(unsqueeze_dim), s = sin.unsqueeze(unsqueeze_dim);
  return [apply_rotary(q, c, s), apply_rotary(k, c, s)];
}

/**
 * [B, H_kv, T, D] → [B, H_kv·n_rep, T, D], each KV head repeated for n_rep consecutive query heads
 * (HF repeat_kv, = torch.repeat_interleave(x, n_rep, dim=1)): query head h reads KV head ⌊h / n_rep⌋.
 */
export function repeat_kv<S extends TensorOps<S>>(hidden_states: S, n_rep: number): S {
  const [b, kv, slen, hd] = hidden_states.shape as [number, number, number, number];
  if (n_rep === 1) return hidden_states;
  return hidden_states.unsqueeze(2).expand(b, kv, n_rep, slen, hd).reshape(b, kv * n_rep, slen, hd);
}

/**
 * softmax(q·kᵀ·scaling + mask)·v over repeated KV heads, softmax in float32 (HF
 * eager_attention_forward).
 * @param query - [B, H, T, D]; key, value - [B, H_kv, S, D]
 * @param attention_mask - additive float [B|1, 1, T, S'] (S' >= S; cut to S) or null
 * @returns [B, T, H, D] (transposed back, as HF returns it)
 */
export function eager_attention_forward<S extends TensorOps<S>>(module: { num_key_value_groups: number; training: boolean }, query: S, key: S, value: S, attention_mask: S | null, scaling: number, p_dropout = 0): S {
  const key_states = repeat_kv(key, module.num_key_value_groups);
  const value_states = repeat_kv(value, module.num_key_value_groups);
  let attn_weights = query.matmul(key_states.transpose(2, 3)).mul(scaling); // [B, H, T, S]
  if (attention_mask) attn_weights = attn_weights.add(attention_mask.narrow(-1, 0, key_states.shape[2]!));
  attn_weights = attn_weights.softmax(-1, { dtype: "float32" }).to(query.dtype);
  if (p_dropout > 0 && module.training) attn_weights = dropout(attn_weights, p_dropout, true);
  return attn_weights.matmul(value_states).transpose(1, 2).contiguous();
}

/** What LlamaAttention / LlamaDecoderLayer take besides the hidden states (HF keyword names). */
export interface LlamaLayerInputs<S> {
  /** [cos, sin], each [B|1, T, head_dim] (LlamaRotaryEmbedding). */
  position_embeddings: [S, S];
  /** Additive float mask [B|1, 1, T, S_total] (0 attended, dtype min masked), or null for none. */
  attention_mask: S | null;
  /** The KV cache, written in place at cache_position; null: attention over these T positions only. */
  past_key_value?: StaticCache | null;
  /** int64 [T], the cache slots of the new positions (needed with past_key_value). */
  cache_position?: S | null;
}

/**
 * Multi-head attention with grouped KV heads and RoPE (HF LlamaAttention; Qwen2Attention with
 * q/k/v biases). q_proj: [H·D, hidden], k_proj/v_proj: [H_kv·D, hidden], o_proj: [hidden, H·D].
 */
export class LlamaAttention extends Module {
  /** Projections; a LoRA wrapper may replace any of them (same shapes in and out). */
  q_proj: TensorModule;
  k_proj: TensorModule;
  v_proj: TensorModule;
  o_proj: TensorModule;
  readonly head_dim: number;
  readonly num_key_value_groups: number;
  readonly scaling: number;
  readonly attention_dropout: number;
  readonly is_causal = true;

  constructor(readonly config: LlamaConfig, readonly layer_idx: number, opts: LlamaOptions = {}) {
    super();
    this.head_dim = config.head_dim;
    this.num_key_value_groups = config.num_key_value_groups;
    this.scaling = this.head_dim ** -0.5;
    this.attention_dropout = config.attention_dropout;
    const o = { dtype: opts.dtype, generator: opts.generator };
    const qkv = { ...o, bias: config.qkv_bias };
    this.q_proj = new Linear(config.hidden_size, config.num_attention_heads * this.head_dim, qkv);
    this.k_proj = new Linear(config.hidden_size, config.num_key_value_heads * this.head_dim, qkv);
    this.v_proj = new Linear(config.hidden_size, config.num_key_value_heads * this.head_dim, qkv);
    this.o_proj = new Linear(config.num_attention_heads * this.head_dim, config.hidden_size, { ...o, bias: config.o_bias });
  }

  /**
   * @param hidden_states - [B, T, hidden_size]
   * @returns [B, T, hidden_size]
   * @throws what StaticCache.update throws for states that do not fit the cache
   */
  override forward_lazy<S extends TensorOps<S>>(hidden_states: S, inputs: LlamaLayerInputs<S>): S {
    const input_shape = hidden_states.shape.slice(0, -1);
    const hidden_shape = [...input_shape, -1, this.head_dim];
    let query_states = this.q_proj.forward(hidden_states).view(hidden_shape).transpose(1, 2); // [B, H, T, D]
    let key_states = this.k_proj.forward(hidden_states).view(hidden_shape).transpose(1, 2); // [B, H_kv, T, D]
    let value_states = this.v_proj.forward(hidden_states).view(hidden_shape).transpose(1, 2);
    const [cos, sin] = inputs.position_embeddings;
    [query_states, key_states] = apply_rotary_pos_emb(query_states, key_states, cos, sin);
    if (inputs.past_key_value) {
      // the cache holds the KV heads before repeat_kv, as HF's (keys [B, H_kv, T_max, D])
      [key_states, value_states] = inputs.past_key_value.update(key_states, value_states, this.layer_idx, { cache_position: inputs.cache_position! });
    }
    const attn_output = eager_attention_forward(this, query_states, key_states, value_states, inputs.attention_mask, this.scaling, this.training ? this.attention_dropout : 0);
    return this.o_proj.forward(attn_output.reshape(...input_shape, -1));
  }
}

/** down_proj(silu(gate_proj(x)) · up_proj(x)) (HF LlamaMLP, hidden_act "silu": SwiGLU, Shazeer 2020). */
export class LlamaMLP extends TensorModule {
  gate_proj: TensorModule;
  up_proj: TensorModule;
  down_proj: TensorModule;
  act_fn = new SiLU();

  constructor(config: LlamaConfig, opts: LlamaOptions = {}) {
    super();
    const o = { bias: config.mlp_bias, dtype: opts.dtype, generator: opts.generator };
    this.gate_proj = new Linear(config.hidden_size, config.intermediate_size, o);
    this.up_proj = new Linear(config.hidden_size, config.intermediate_size, o);
    this.down_proj = new Linear(config.intermediate_size, config.hidden_size, o);
  }

  /** @param x - [B, T, hidden_size] @returns [B, T, hidden_size] */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return this.down_proj.forward(this.act_fn.forward(this.gate_proj.forward(x)).mul(this.up_proj.forward(x)));
  }
}

/** Pre-norm residual block: h = x + attn(norm(x)); out = h + mlp(norm(h)) (HF LlamaDecoderLayer). */
export class LlamaDecoderLayer extends Module {
  self_attn: LlamaAttention;
  mlp: LlamaMLP;
  input_layernorm: LlamaRMSNorm;
  post_attention_layernorm: LlamaRMSNorm;
  readonly hidden_size: number;

  constructor(config: LlamaConfig, layer_idx: number, opts: LlamaOptions = {}) {
    super();
    this.hidden_size = config.hidden_size;
    this.self_attn = new LlamaAttention(config, layer_idx, opts);
    this.mlp = new LlamaMLP(config, opts);
    this.input_layernorm = new LlamaRMSNorm(config.hidden_size, config.rms_norm_eps, opts);
    this.post_attention_layernorm = new LlamaRMSNorm(config.hidden_size, config.rms_norm_eps, opts);
  }

  /** @param hidden_states - [B, T, hidden_size] @returns [B, T, hidden_size] */
  override forward_lazy<S extends TensorOps<S>>(hidden_states: S, inputs: LlamaLayerInputs<S>): S {
    let residual = hidden_states;
    let h = this.input_layernorm.forward(hidden_states);
    h = this.self_attn.forward(h, inputs);
    h = residual.add(h);
    residual = h;
    h = this.post_attention_layernorm.forward(h);
    h = this.mlp.forward(h);
    return residual.add(h);
  }
}
