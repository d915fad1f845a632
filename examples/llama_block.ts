/**
 * A Llama decoder block ported from Hugging Face transformers' modeling_llama.py with Loom's
 * public API: LlamaRMSNorm, LlamaRotaryEmbedding (default rope), rotate_half /
 * apply_rotary_pos_emb, repeat_kv (grouped-query attention), eager_attention_forward,
 * LlamaAttention (with a KV cache: Loom's models.StaticCache), LlamaMLP and LlamaDecoderLayer,
 * plus `LlamaDecoder`: LlamaModel.forward from `inputs_embeds` (position ids, rotary cos/sin, causal
 * mask, the cache bookkeeping) without embed_tokens and the final norm.
 *
 * Parameter names are HF's (`self_attn.q_proj.weight`, `mlp.gate_proj.weight`,
 * `input_layernorm.weight`, ...), so a state dict of HF's LlamaDecoderLayer loads as is.
 *
 * ```ts
 * const config = new LlamaConfig({ hidden_size: 32, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 48 });
 * const model = new LlamaDecoder(config);
 * const y = model.call(x);                                          // [B, T, hidden], causal
 * const cache = make_static_cache(config, { max_batch_size: B, max_cache_len: 16 });
 * model.call(x.narrow(1, 0, 4), { past_key_values: cache });        // prefill positions 0..3
 * model.call(x.narrow(1, 4, 1), { past_key_values: cache });        // decode position 4
 * ```
 * Source: https://github.com/huggingface/transformers/blob/main/src/transformers/models/llama/modeling_llama.py
 */
import * as loom from "../src/index.ts";
import { models, nn, type TensorOps } from "../src/index.ts";

/** LlamaConfig's fields this block reads (HF names and defaults of Llama-2-7B, rope "default"). */
export class LlamaConfig {
  hidden_size = 4096;
  intermediate_size = 11008;
  num_hidden_layers = 1;
  num_attention_heads = 32;
  /** Fewer than num_attention_heads gives grouped-query attention; default = num_attention_heads. */
  num_key_value_heads: number;
  /** Default hidden_size / num_attention_heads. */
  head_dim: number;
  hidden_act = "silu";
  max_position_embeddings = 2048;
  rms_norm_eps = 1e-6;
  rope_theta = 10000.0;
  attention_bias = false;
  attention_dropout = 0.0;
  mlp_bias = false;

  /** @throws LoomValueError when heads do not divide evenly (HF asserts the same in repeat_kv's shapes) */
  constructor(over: Partial<Omit<LlamaConfig, "num_key_value_groups">> = {}) {
    Object.assign(this, over);
    this.num_key_value_heads = over.num_key_value_heads ?? this.num_attention_heads;
    this.head_dim = over.head_dim ?? this.hidden_size / this.num_attention_heads;
    if (!Number.isInteger(this.head_dim) || this.num_attention_heads % this.num_key_value_heads !== 0) {
      throw new loom.LoomValueError(`[LlamaConfig] num_attention_heads=${this.num_attention_heads} must be a multiple of num_key_value_heads=${this.num_key_value_heads}, head_dim=${this.head_dim} an integer`);
    }
    if (this.hidden_act !== "silu") throw new loom.LoomValueError(`[LlamaConfig] only hidden_act "silu" is ported, got ${this.hidden_act}`);
  }

  get num_key_value_groups(): number {
    return this.num_attention_heads / this.num_key_value_heads;
  }
}

/**
 * weight · (x / √(mean(x²) + eps)), the statistics in float32 whatever x's dtype (LlamaRMSNorm,
 * equivalent to T5LayerNorm). eps inside the square root.
 * @param x - [..., hidden_size] float; @returns the same shape, x's dtype (weight's after promotion)
 */
export class LlamaRMSNorm extends nn.TensorModule {
  weight: nn.Parameter;
  variance_epsilon: number;

  constructor(hidden_size: number, eps = 1e-6) {
    super();
    this.weight = new nn.Parameter(loom.ones([hidden_size]));
    this.variance_epsilon = eps;
  }

  forward_lazy<S extends TensorOps<S>>(hidden_states: S): S {
    const input_dtype = hidden_states.dtype;
    let h = hidden_states.to("float32");
    const variance = h.pow(2).mean(-1, true);
    h = h.mul(variance.add(this.variance_epsilon).rsqrt());
    return nn.lift(this.weight, h).mul(h.to(input_dtype));
  }

  override extra_repr(): string {
    return `(${this.weight.shape[0]},), eps=${this.variance_epsilon}`;
  }
}

/**
 * cos and sin of position · inv_freq, inv_freq = 1 / θ^(2i/d) for i in [0, d/2), each frequency
 * used twice (`cat(freqs, freqs)`: HF's halves convention, paired with rotate_half). Computed in
 * float32 (HF disables autocast here), returned in x's dtype.
 */
export class LlamaRotaryEmbedding extends nn.Module {
  declare inv_freq: loom.Tensor;
  readonly attention_scaling = 1.0; // "default" rope

  constructor(config: LlamaConfig) {
    super();
    const dim = config.head_dim;
    const exponent = loom.arange(0, dim, 2, { dtype: "int64" }).float().div(dim);
    this.register_buffer("inv_freq", loom.pow(config.rope_theta, exponent).reciprocal(), false); // 1 / base ** (arange(0, dim, 2) / dim)
  }

  /**
   * @param x - any tensor of the activations' dtype and kind (HF passes the hidden states)
   * @param position_ids - int [B, T] (or [1, T])
   * @returns [cos, sin], each [B, T, head_dim]
   */
  override forward_lazy<S extends TensorOps<S>>(x: S, position_ids: S): [S, S] {
    const inv_freq = nn.lift(this.inv_freq, x);
    const inv_freq_expanded = inv_freq.view(1, -1, 1).expand(position_ids.shape[0]!, -1, 1); // [B, d/2, 1]
    const position_ids_expanded = position_ids.unsqueeze(1).float(); // [B, 1, T]
    const freqs = inv_freq_expanded.matmul(position_ids_expanded).transpose(1, 2); // [B, T, d/2]
    const emb = loom.cat([freqs, freqs], -1);
    return [emb.cos().mul(this.attention_scaling).to(x.dtype), emb.sin().mul(this.attention_scaling).to(x.dtype)];
  }
}

/** cat(-x2, x1) of the two halves of the last dim (HF rotate_half). */
export function rotate_half<S extends TensorOps<S>>(x: S): S {
  const half = x.shape[x.ndim - 1]! / 2;
  const x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return loom.cat([x2.neg(), x1], -1);
}

/**
 * q·cos + rotate_half(q)·sin and the same for k (HF apply_rotary_pos_emb).
 * @param q - [B, H, T, D]; k - [B, H_kv, T, D]; cos, sin - [B, T, D] (unsqueezed at unsqueeze_dim)
 */
export function apply_rotary_pos_emb<S extends TensorOps<S>>(q: S, k: S, cos: S, sin: S, unsqueeze_dim = 1): [S, S] {
  const c = cos.unsqueeze(unsqueeze_dim), s = sin.unsqueeze(unsqueeze_dim);
  return [q.mul(c).add(rotate_half(q).mul(s)), k.mul(c).add(rotate_half(k).mul(s))];
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
 * eager_attention_forward: the KV heads are repeated here as HF's eager path does;
 * F.scaled_dot_product_attention(..., { enable_gqa: true }) computes the same, see the tests).
 * @param attention_mask - additive float [B|1, 1, T, S_total] or null; its last dim is cut to the key length
 * @returns [B, T, H, D] (transposed back, as HF returns it)
 */
export function eager_attention_forward<S extends TensorOps<S>>(module: LlamaAttention, query: S, key: S, value: S, attention_mask: S | null, scaling: number, dropout = 0): S {
  const key_states = repeat_kv(key, module.num_key_value_groups);
  const value_states = repeat_kv(value, module.num_key_value_groups);
  let attn_weights = query.matmul(key_states.transpose(2, 3)).mul(scaling);
  if (attention_mask) attn_weights = attn_weights.add(attention_mask.narrow(-1, 0, key_states.shape[2]!));
  attn_weights = attn_weights.softmax(-1, { dtype: "float32" }).to(query.dtype);
  if (dropout > 0 && module.training) attn_weights = nn.F.dropout(attn_weights, dropout, true);
  return attn_weights.matmul(value_states).transpose(1, 2).contiguous();
}

/** What LlamaAttention / LlamaDecoderLayer take besides the hidden states (HF keyword names). */
export interface LlamaLayerInputs<S> {
  /** [cos, sin], each [B, T, head_dim] (LlamaRotaryEmbedding). */
  position_embeddings: [S, S];
  /** Additive float mask [B|1, 1, T, S_total] (0 allowed, dtype min masked), or null for none. */
  attention_mask: S | null;
  /** The KV cache, written in place at cache_position; null: attention over these T positions only. */
  past_key_value?: models.StaticCache | null;
  /** int64 [T], the cache slots of the new positions (needed with past_key_value). */
  cache_position?: S | null;
}

/** Multi-head attention with grouped KV heads and RoPE (HF LlamaAttention). */
export class LlamaAttention extends nn.Module {
  q_proj: nn.Linear;
  k_proj: nn.Linear;
  v_proj: nn.Linear;
  o_proj: nn.Linear;
  readonly head_dim: number;
  readonly num_key_value_groups: number;
  readonly scaling: number;
  readonly attention_dropout: number;
  readonly is_causal = true;

  constructor(readonly config: LlamaConfig, readonly layer_idx: number) {
    super();
    this.head_dim = config.head_dim;
    this.num_key_value_groups = config.num_key_value_groups;
    this.scaling = this.head_dim ** -0.5;
    this.attention_dropout = config.attention_dropout;
    const bias = config.attention_bias;
    this.q_proj = new nn.Linear(config.hidden_size, config.num_attention_heads * this.head_dim, { bias });
    this.k_proj = new nn.Linear(config.hidden_size, config.num_key_value_heads * this.head_dim, { bias });
    this.v_proj = new nn.Linear(config.hidden_size, config.num_key_value_heads * this.head_dim, { bias });
    this.o_proj = new nn.Linear(config.num_attention_heads * this.head_dim, config.hidden_size, { bias });
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

/** down_proj(silu(gate_proj(x)) · up_proj(x)) (HF LlamaMLP, hidden_act "silu"). */
export class LlamaMLP extends nn.TensorModule {
  gate_proj: nn.Linear;
  up_proj: nn.Linear;
  down_proj: nn.Linear;
  act_fn = new nn.SiLU();

  constructor(config: LlamaConfig) {
    super();
    const bias = config.mlp_bias;
    this.gate_proj = new nn.Linear(config.hidden_size, config.intermediate_size, { bias });
    this.up_proj = new nn.Linear(config.hidden_size, config.intermediate_size, { bias });
    this.down_proj = new nn.Linear(config.intermediate_size, config.hidden_size, { bias });
  }

  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return this.down_proj.forward(this.act_fn.forward(this.gate_proj.forward(x)).mul(this.up_proj.forward(x)));
  }
}

/** Pre-norm residual block: h = x + attn(norm(x)); out = h + mlp(norm(h)) (HF LlamaDecoderLayer). */
export class LlamaDecoderLayer extends nn.Module {
  self_attn: LlamaAttention;
  mlp: LlamaMLP;
  input_layernorm: LlamaRMSNorm;
  post_attention_layernorm: LlamaRMSNorm;
  readonly hidden_size: number;

  constructor(config: LlamaConfig, layer_idx: number) {
    super();
    this.hidden_size = config.hidden_size;
    this.self_attn = new LlamaAttention(config, layer_idx);
    this.mlp = new LlamaMLP(config);
    this.input_layernorm = new LlamaRMSNorm(config.hidden_size, config.rms_norm_eps);
    this.post_attention_layernorm = new LlamaRMSNorm(config.hidden_size, config.rms_norm_eps);
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

/** Inputs of LlamaDecoder (HF LlamaModel.forward names). */
export interface LlamaDecoderInputs {
  /** The KV cache (make_static_cache); written in place, positions from get_seq_length(). */
  past_key_values?: models.StaticCache | null;
}

/**
 * A StaticCache for this config: per layer keys/values [B, num_key_value_heads, T_max, head_dim]
 * (HF StaticCache(config, max_batch_size, max_cache_len): the cache reads HF's config names).
 */
export function make_static_cache(config: LlamaConfig, opts: { max_batch_size?: number; max_cache_len?: number; dtype?: loom.DType } = {}): models.StaticCache {
  return new models.StaticCache({ config, ...opts });
}

/**
 * HF LlamaModel.forward from inputs_embeds: position ids (0..T-1, or the cache's next slots),
 * rotary cos/sin computed once for all layers, the causal mask, the decoder layers. No
 * embed_tokens and no final norm (the block under test).
 */
export class LlamaDecoder extends nn.Module {
  layers: nn.ModuleList<LlamaDecoderLayer>;
  rotary_emb: LlamaRotaryEmbedding;

  constructor(readonly config: LlamaConfig) {
    super();
    this.layers = new nn.ModuleList(Array.from({ length: config.num_hidden_layers }, (_, i) => new LlamaDecoderLayer(config, i)));
    this.rotary_emb = new LlamaRotaryEmbedding(config);
  }

  /**
   * @param inputs_embeds - [B, T, hidden_size] float
   * @returns [B, T, hidden_size], the last layer's output
   * @throws LoomIndexError for positions past the cache's T_max (before anything is written)
   */
  override forward_lazy<S extends TensorOps<S>>(inputs_embeds: S, inputs: LlamaDecoderInputs = {}): S {
    const T = inputs_embeds.shape[1]!;
    const cache = inputs.past_key_values ?? null;
    // positions as tensor VALUES (never attributes or shapes): every decode step is the same graph;
    // the cache's own positions are bounds-checked now and counted by layer 0's update (no advance)
    const cache_position = cache ? cache.cache_positions(T, inputs_embeds) : nn.lift(loom.arange(0, T, 1, { dtype: "int64" }), inputs_embeds); // [T]
    const position_ids = cache_position.unsqueeze(0); // [1, T]
    // causal mask (HF create_causal_mask, additive float): over the cache's T_max slots with a
    // cache, else over these T positions
    const attention_mask = cache ? cache.attention_mask(cache_position) : causal_mask(cache_position, inputs_embeds.dtype);
    const position_embeddings: [S, S] = this.rotary_emb.forward(inputs_embeds, position_ids);
    let h = inputs_embeds;
    for (const layer of this.layers) h = layer.forward(h, { position_embeddings, attention_mask, past_key_value: cache, cache_position });
    return h;
  }
}

/** [1, 1, T, T]: 0 where key s <= query t, finfo(dtype).min above the diagonal. */
function causal_mask<S extends TensorOps<S>>(positions: S, dtype: loom.DType): S {
  const T = positions.shape[0]!;
  const allowed = positions.unsqueeze(0).le(positions.unsqueeze(1)); // [T, T]: key s <= query t
  return allowed.to(dtype).zeros_like().masked_fill(allowed.logical_not(), models.finfo_min(dtype)).view(1, 1, T, T);
}

// `bun examples/llama_block.ts`: a random tiny block; cached decoding reproduces the full forward
if (import.meta.main) {
  loom.manual_seed(0);
  const config = new LlamaConfig({ hidden_size: 32, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 48, max_position_embeddings: 16 });
  const model = new LlamaDecoder(config);
  const x = loom.randn([1, 7, config.hidden_size]);
  const full = loom.no_grad(() => model.call(x) as loom.Tensor);
  const cache = make_static_cache(config, { max_cache_len: 16 });
  const parts = loom.no_grad(() => [[0, 4], [4, 1], [5, 1], [6, 1]].map(([s, n]) => model.call(x.narrow(1, s!, n!), { past_key_values: cache }) as loom.Tensor));
  const diff = loom.cat(parts, 1).sub(full).abs().max().item();
  console.log(`${model.layers.get(0).named_parameters().length} parameter tensors, ${model.parameters().reduce((n, p) => n + p.numel(), 0)} values`);
  console.log(`full forward [1, 7, ${config.hidden_size}] vs prefill 4 + 3 cached decode steps: max |diff| = ${diff.toExponential(2)}`);
}
