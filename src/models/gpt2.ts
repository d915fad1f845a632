/**
 * GPT-2 in the Hugging Face layout (transformers GPT2LMHeadModel): the same module tree, so
 * state-dict keys equal HF's (`transformer.h.0.attn.c_attn.weight`, Conv1D weights [in, out]) and
 * HF checkpoints load as they are (see pretrained.ts).
 *
 * ```
 * GPT2LMHeadModel
 *   transformer: GPT2Model
 *     wte [vocab, n_embd], wpe [n_positions, n_embd], drop
 *     h: ModuleList of GPT2Block { ln_1, attn { c_attn, c_proj, attn_dropout, resid_dropout },
 *                                  ln_2, mlp { c_fc, c_proj, act, dropout } }
 *     ln_f
 *   lm_head: Linear(n_embd, vocab, bias=false), weight tied to transformer.wte.weight
 * ```
 * Every forward is written once (`forward_lazy`, generic over Tensor and LazyTensor).
 * Source: https://github.com/huggingface/transformers/blob/main/src/transformers/models/gpt2/modeling_gpt2.py;
 * Radford et al. 2019, "Language Models are Unsupervised Multitask Learners".
 */
import { arange } from "../lazy/creation.ts";
import { cross_entropy, scaled_dot_product_attention } from "../lazy/functional.ts";
import type { TensorOps } from "../lazy/surface.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { Dropout, GELU, ReLU, SiLU, Tanh } from "../nn/activation.ts";
import { ModuleList } from "../nn/container.ts";
import { Conv1D } from "../nn/conv1d.ts";
import { lift } from "../nn/execution.ts";
import { init_empty_weights, normal_, ones_, zeros_ } from "../nn/init.ts";
import { Embedding, Linear } from "../nn/linear.ts";
import { resolve_pretrained_dir } from "../io/index.ts";
import { Module, TensorModule } from "../nn/module.ts";
import { LayerNorm } from "../nn/normalization.ts";
import type { DType } from "../tensor/dtype.ts";
import { LoomDtypeError, LoomIndexError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import type { Generator } from "../tensor/rng.ts";
import { GPT2Config, type GPT2Activation } from "./gpt2_config.ts";
import { type FromPretrainedOptions, load_checkpoint, resolve_torch_dtype, save_checkpoint } from "./hf_checkpoint.ts";
import { generate, legacy_generation_config, type GenerateOptions, type GenerationConfig } from "./generate.ts";
import { StaticCache, causal_padding_mask, padding_keep } from "./kv_cache.ts";

export { sample_logits, type GenerateOptions, type GenerationConfig } from "./generate.ts";

export interface GPT2Options {
  /** Parameter dtype (default float32). */
  dtype?: DType;
  /** Random source for the initialization (default generator when omitted). */
  generator?: Generator;
  /** Draw the HF initialization (default true); false leaves the weights at their constructor values, e.g. before loading a checkpoint. */
  init?: boolean;
}

/** The activation module transformers' ACT2FN gives for a config name ("gelu_new" = tanh GELU). */
export function activation_module(name: GPT2Activation): TensorModule {
  switch (name) {
    case "gelu_new": case "gelu_pytorch_tanh": return new GELU("tanh");
    case "gelu": return new GELU("none");
    case "relu": return new ReLU();
    case "silu": case "swish": return new SiLU();
    case "tanh": return new Tanh();
  }
}

/**
 * What one attention layer needs to read and write the KV cache: the cache, its layer, the slots
 * of the new positions and the additive mask over all T_max slots (StaticCache.attention_mask).
 */
export interface LayerCacheInputs<S> {
  past_key_values: StaticCache;
  layer_idx: number;
  /** int64 [T]: cache slot of each new position. */
  cache_position: S;
  /** Additive mask [1 or B, 1, T, T_max]: 0 where attended, dtype min elsewhere (padding included). */
  attention_mask: S;
}

/**
 * Causal multi-head self-attention (HF GPT2Attention): q, k, v = split(c_attn(x)),
 * softmax(q kᵀ / √head_dim + causal mask) v, heads merged, then c_proj and resid_dropout.
 * c_attn: Conv1D(3·n_embd, n_embd); c_proj: Conv1D(n_embd, n_embd). HF's non-persistent
 * `attn.bias` mask buffer is not kept: the mask comes from scaled_dot_product_attention(is_causal),
 * or with a KV cache from the cache's mask over all T_max slots.
 */
export class GPT2Attention extends TensorModule {
  /** q/k/v projection; a LoRA wrapper may replace it (any [*, n_embd] -> [*, 3·n_embd] module). */
  c_attn: TensorModule;
  c_proj: TensorModule;
  attn_dropout: Dropout;
  resid_dropout: Dropout;
  readonly n_embd: number;
  readonly n_head: number;
  readonly scale_attn_weights: boolean;

  constructor(config: GPT2Config, opts: GPT2Options = {}) {
    super();
    const o = { dtype: opts.dtype, generator: opts.generator };
    this.c_attn = new Conv1D(3 * config.n_embd, config.n_embd, o);
    this.c_proj = new Conv1D(config.n_embd, config.n_embd, o);
    this.attn_dropout = new Dropout(config.attn_pdrop);
    this.resid_dropout = new Dropout(config.resid_pdrop);
    this.n_embd = config.n_embd;
    this.n_head = config.n_head;
    this.scale_attn_weights = config.scale_attn_weights;
  }

  /**
   * @param x - [B, T, n_embd] float
   * @param kv - with a KV cache: the new keys/values are written to their slots and attention runs
   *   over all T_max slots under kv.attention_mask (HF GPT2Attention with layer_past)
   * @param attn_mask - without a cache: additive float [B, 1, T, T] (causal and padding, from
   *   GPT2Model's attention_mask) instead of the plain causal mask
   * @returns [B, T, n_embd]
   */
  forward_lazy<S extends TensorOps<S>>(x: S, kv: LayerCacheInputs<S> | null = null, attn_mask: S | null = null): S {
    const [B, T, C] = x.shape as [number, number, number];
    const nh = this.n_head, hd = C / nh;
    const [q, k, v] = this.c_attn.forward(x).split(C, 2) as [S, S, S]; // 3 × [B, T, C]
    const heads = (t: S) => t.view(B, T, nh, hd).transpose(1, 2); // [B, nh, T, hd]
    const sdpa = { dropout_p: this.training ? this.attn_dropout.p : 0, scale: this.scale_attn_weights ? 1 / Math.sqrt(hd) : 1 };
    let y: S;
    if (kv) {
      const [keys, values] = kv.past_key_values.update(heads(k), heads(v), kv.layer_idx, { cache_position: kv.cache_position }); // [B, nh, T_max, hd]
      y = scaled_dot_product_attention(heads(q), keys, values, { ...sdpa, attn_mask: kv.attention_mask });
    } else if (attn_mask) {
      y = scaled_dot_product_attention(heads(q), heads(k), heads(v), { ...sdpa, attn_mask }); // [B, nh, T, hd]
    } else {
      y = scaled_dot_product_attention(heads(q), heads(k), heads(v), { ...sdpa, is_causal: true }); // [B, nh, T, hd]
    }
    const merged = y.transpose(1, 2).contiguous().view(B, T, C); // heads side by side again
    return this.resid_dropout.forward(this.c_proj.forward(merged));
  }
}

/** The feed-forward block (HF GPT2MLP): dropout(c_proj(act(c_fc(x)))), hidden size inner_dim. */
export class GPT2MLP extends TensorModule {
  c_fc: TensorModule;
  act: TensorModule;
  c_proj: TensorModule;
  dropout: Dropout;

  constructor(config: GPT2Config, opts: GPT2Options = {}) {
    super();
    const o = { dtype: opts.dtype, generator: opts.generator };
    this.c_fc = new Conv1D(config.inner_dim, config.n_embd, o);
    this.act = activation_module(config.activation_function);
    this.c_proj = new Conv1D(config.n_embd, config.inner_dim, o);
    this.dropout = new Dropout(config.resid_pdrop);
  }

  /** @param x - [B, T, n_embd] @returns [B, T, n_embd] */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return this.dropout.forward(this.c_proj.forward(this.act.forward(this.c_fc.forward(x))));
  }
}

/** A pre-norm transformer block (HF GPT2Block): x + attn(ln_1(x)), then + mlp(ln_2(·)). */
export class GPT2Block extends TensorModule {
  ln_1: LayerNorm;
  attn: GPT2Attention;
  ln_2: LayerNorm;
  mlp: GPT2MLP;

  constructor(config: GPT2Config, opts: GPT2Options = {}) {
    super();
    const ln = { eps: config.layer_norm_epsilon, dtype: opts.dtype };
    this.ln_1 = new LayerNorm(config.n_embd, ln);
    this.attn = new GPT2Attention(config, opts);
    this.ln_2 = new LayerNorm(config.n_embd, ln);
    this.mlp = new GPT2MLP(config, opts);
  }

  /**
   * @param x - [B, T, n_embd] @param kv - the layer's KV cache inputs (GPT2Attention)
   * @param attn_mask - without a cache: additive [B, 1, T, T] (GPT2Attention) @returns [B, T, n_embd]
   */
  forward_lazy<S extends TensorOps<S>>(x: S, kv: LayerCacheInputs<S> | null = null, attn_mask: S | null = null): S {
    const a = this.ln_1.forward(x);
    const h = x.add(kv || attn_mask ? this.attn.forward_lazy(a, kv, attn_mask) : this.attn.forward(a));
    return h.add(this.mlp.forward(this.ln_2.forward(h)));
  }
}

/** The transformer body (HF GPT2Model): embeddings, blocks, final LayerNorm. */
export class GPT2Model extends TensorModule {
  wte: Embedding;
  wpe: Embedding;
  drop: Dropout;
  h: ModuleList<GPT2Block>;
  ln_f: LayerNorm;
  readonly config: GPT2Config;

  constructor(config: GPT2Config, opts: GPT2Options = {}) {
    super();
    this.config = config;
    const e = { dtype: opts.dtype, generator: opts.generator };
    this.wte = new Embedding(config.vocab_size, config.n_embd, e);
    this.wpe = new Embedding(config.n_positions, config.n_embd, e);
    this.drop = new Dropout(config.embd_pdrop);
    this.h = new ModuleList(Array.from({ length: config.n_layer }, () => new GPT2Block(config, opts)));
    this.ln_f = new LayerNorm(config.n_embd, { eps: config.layer_norm_epsilon, dtype: opts.dtype });
  }

  /**
   * @param input_ids - int64/int32 [B, T] token ids in [0, vocab_size), T <= n_positions
   * @param inputs - KV cache inputs (HF names): `past_key_values` (a StaticCache, written in place
   *   at `cache_position`), `cache_position` (int64 [T], default get_seq_length() + 0..T-1),
   *   `position_ids` (int [B, T] or [1, T], default cache_position as [1, T]); `use_cache` false
   *   ignores the cache. Without a cache every input attends causally to its own T positions.
   *   `attention_mask` (HF's 2-D padding mask, see GPT2CacheInputs) is combined with the causal
   *   mask; as in HF's GPT2Model it does not change position_ids (generate derives those).
   * @returns hidden states [B, T, n_embd] after ln_f
   * @throws LoomShapeError for a non-2-D input or T > n_positions, a cache of another shape or an
   *   attention_mask of another shape; LoomValueError for attention_mask values other than 0/1;
   *   LoomIndexError for a cache position outside [0, T_max), raised before anything is written;
   *   LoomDtypeError for a cache dtype other than the model's
   */
  forward_lazy<S extends TensorOps<S>>(input_ids: S, inputs: GPT2CacheInputs<S> = {}): S {
    if (input_ids.ndim !== 2) throw new LoomShapeError(`[GPT2Model] input_ids must be [B, T], got ${fmtShape(input_ids.shape)}`);
    const T = input_ids.shape[1]!;
    if (T > this.config.n_positions) {
      throw new LoomShapeError(`[GPT2Model] sequence length ${T} exceeds n_positions=${this.config.n_positions}`);
    }
    const cache = inputs.use_cache === false ? null : inputs.past_key_values ?? null;
    if (inputs.use_cache && !cache) throw new LoomValueError("[GPT2Model] use_cache needs past_key_values (a StaticCache); GPT2LMHeadModel makes one itself");
    let cache_position: S | null = null;
    let end = 0; // positions 0..end-1 are written once this call is done
    if (cache) {
      // every check before the first write: a failing call leaves the cache as it was
      this.check_cache(cache, input_ids);
      let positions: number[];
      if (inputs.cache_position) {
        cache_position = inputs.cache_position;
        positions = Array.from(cache_position.dataSync());
      } else {
        const past = cache.get_seq_length();
        positions = Array.from({ length: T }, (_, i) => past + i);
      }
      cache.check_positions(positions);
      if (new Set(positions).size !== positions.length) throw new LoomValueError(`[GPT2Model] cache_position [${positions.join(", ")}] repeats a slot`);
      // the positions enter the graph as tensor values only (same graph at every decode step)
      cache_position ??= lift(arange(positions[0]!, positions[0]! + T, 1, { dtype: "int64", device: input_ids.device }), input_ids); // [T]
      if (cache_position.ndim !== 1 || cache_position.shape[0] !== T) throw new LoomShapeError(`[GPT2Model] cache_position must be [${T}], got ${fmtShape(cache_position.shape)}`);
      if (!inputs.position_ids && Math.max(...positions) >= this.config.n_positions) {
        throw new LoomIndexError(`[GPT2Model] position ${Math.max(...positions)} has no position embedding (n_positions=${this.config.n_positions})`);
      }
      end = Math.max(...positions) + 1;
    }
    // positions: given, the cache slots as [1, T], or (no cache) 0..T-1 as [T]
    const position_ids = inputs.position_ids ?? cache_position?.unsqueeze(0) ?? lift(arange(T, undefined, 1, { dtype: "int64", device: input_ids.device }), input_ids);
    if (inputs.position_ids && (position_ids.ndim !== 2 || position_ids.shape[1] !== T)) throw new LoomShapeError(`[GPT2Model] position_ids ${fmtShape(position_ids.shape)} must be [B, ${T}] or [1, ${T}]`);
    const keep = inputs.attention_mask ? padding_keep("GPT2Model", inputs.attention_mask, input_ids, cache ? { end, T_max: cache.max_cache_len } : null) : null; // bool [B, T or T_max]
    let x = this.drop.forward(this.wte.forward(input_ids).add(this.wpe.forward(position_ids))); // [B, T, C]
    if (cache) {
      const attention_mask = cache.attention_mask(cache_position!, keep); // [1 or B, 1, T, T_max]
      let layer_idx = 0;
      for (const block of this.h) x = block.forward_lazy(x, { past_key_values: cache, layer_idx: layer_idx++, cache_position: cache_position!, attention_mask });
      cache.advance(end);
    } else if (keep) {
      const mask = causal_padding_mask(keep, x.dtype); // [B, 1, T, T]
      for (const block of this.h) x = block.forward_lazy(x, null, mask);
    } else {
      for (const block of this.h) x = block.forward(x); // causal attention within the input
    }
    return this.ln_f.forward(x);
  }

  /**
   * The cache fits this model and input: layers, heads, head_dim, batch, dtype.
   * @throws LoomShapeError / LoomDtypeError naming the cache and the model
   */
  check_cache(cache: StaticCache, input_ids: { shape: readonly number[] }): void {
    const c = this.config, hd = c.n_embd / c.n_head;
    if (!(cache instanceof StaticCache)) throw new LoomValueError("[GPT2Model] past_key_values must be a StaticCache");
    if (cache.num_layers !== c.n_layer || cache.num_heads !== c.n_head || cache.head_dim !== hd) {
      throw new LoomShapeError(`[GPT2Model] past_key_values has ${cache.num_layers} layers of ${fmtShape(cache.shape)} but the model needs ${c.n_layer} layers of [B, ${c.n_head}, T_max, ${hd}]`);
    }
    if (cache.max_batch_size !== input_ids.shape[0]) {
      throw new LoomShapeError(`[GPT2Model] input_ids ${fmtShape(input_ids.shape)} has batch ${input_ids.shape[0]} but past_key_values ${fmtShape(cache.shape)} holds batch ${cache.max_batch_size}`);
    }
    const dtype = this.wte.weight.dtype;
    if (cache.dtype !== dtype) throw new LoomDtypeError(`[GPT2Model] past_key_values holds ${cache.dtype} but the model computes in ${dtype}`);
  }
}

/** KV cache inputs of GPT2Model / GPT2LMHeadModel (HF argument names). */
export interface GPT2CacheInputs<S> {
  /** The cache to read and write (HF past_key_values); written in place. */
  past_key_values?: StaticCache | null;
  /** Use (GPT2LMHeadModel: make when missing) the cache; false ignores past_key_values. */
  use_cache?: boolean;
  /** int [B, T] or [1, T] positions for the position embedding (default: cache_position). */
  position_ids?: S | null;
  /** int64 [T] cache slots of the new tokens (default: get_seq_length() + 0..T-1). */
  cache_position?: S | null;
  /**
   * HF's 2-D padding mask [B, L] (int, bool or float; 1 = attend, 0 = padding), combined with the
   * causal mask (HF `_prepare_4d_causal_attention_mask_with_cache_position`). Without a cache
   * L = T; with one it covers cache slots 0..L-1 with end <= L <= T_max (end: the last slot this
   * call writes + 1), slots past L counting as 0. Queries at padded positions see only padding;
   * their additive dtype-min mask keeps softmax finite (uniform), and no real query reads them.
   */
  attention_mask?: S | null;
}


/** What GPT2LMHeadModel.forward returns (HF CausalLMOutput): logits and, given labels/targets, the loss. */
export interface CausalLMOutput<S> {
  /** [B, T, vocab_size] unnormalized next-token scores. */
  logits: S;
  /** 0-d mean cross entropy, or null without labels/targets. */
  loss: S | null;
  /** The KV cache after this call's writes (the same StaticCache object), or null without a cache. */
  past_key_values: StaticCache | null;
}

/**
 * The causal-LM loss of HF's ForCausalLMLoss, shared by the decoders: mean cross entropy in
 * float32 (float64 kept) of `labels` (aligned with input_ids, shifted here: position t predicts
 * labels[t+1]) or `targets` (already shifted, nanoGPT); -100 is ignored. null when neither is given.
 * @param logits - float [B, T, V]
 * @throws LoomValueError when both are given; LoomShapeError unless the one given is [B, T]
 */
export function causal_lm_loss<S extends TensorOps<S>>(op: string, logits: S, labels: S | null, targets: S | null): S | null {
  if (labels && targets) throw new LoomValueError(`[${op}] pass labels (HF, shifted inside) or targets (already shifted), not both`);
  const given = labels ?? targets;
  if (!given) return null;
  const [B, T, V] = logits.shape as [number, number, number];
  if (given.ndim !== 2 || given.shape[0] !== B || given.shape[1] !== T) {
    throw new LoomShapeError(`[${op}] ${labels ? "labels" : "targets"} ${fmtShape(given.shape)} must match input_ids [${B}, ${T}]`);
  }
  const f = logits.dtype === "float64" ? logits : logits.to("float32"); // HF: logits.float()
  return labels
    ? cross_entropy(f.narrow(1, 0, T - 1).reshape([-1, V]), labels.narrow(1, 1, T - 1).reshape([-1])) // positions 0..T-2
    : cross_entropy(f.reshape([-1, V]), given.reshape([-1]));
}

export interface CausalLMInputs<S> extends GPT2CacheInputs<S> {
  /**
   * HF semantics: token ids [B, T] aligned with input_ids; the model shifts them (position t
   * predicts labels[t+1]); -100 is ignored.
   */
  labels?: S | null;
  /** nanoGPT semantics: next-token ids [B, T] already shifted (targets[t] follows input[t]); -100 is ignored. */
  targets?: S | null;
}

/**
 * GPT-2 with a language-modeling head (HF GPT2LMHeadModel). lm_head shares its weight with
 * transformer.wte when `config.tie_word_embeddings` (one Parameter, one gradient).
 * `generate` is written in generate.ts; the KV cache is kv_cache.ts's StaticCache.
 */
export class GPT2LMHeadModel extends Module {
  transformer: GPT2Model;
  lm_head: Linear;
  readonly config: GPT2Config;

  /** @param opts.init - false skips the random initialization (weights to be loaded) */
  constructor(config: GPT2Config, opts: GPT2Options = {}) {
    super();
    this.config = config;
    this.transformer = new GPT2Model(config, opts);
    this.lm_head = new Linear(config.n_embd, config.vocab_size, { bias: false, dtype: opts.dtype });
    if (opts.init !== false) this.init_weights(opts.generator);
    if (config.tie_word_embeddings) this.tie_weights();
  }

  /** Make lm_head.weight the very Parameter of transformer.wte.weight (HF tie_weights). */
  tie_weights(): void {
    this.lm_head.weight = this.transformer.wte.weight;
  }

  /**
   * HF's `_init_weights`: Linear/Conv1D weights and embeddings N(0, initializer_range²), biases
   * zero, LayerNorm weight 1 and bias 0, and every `c_proj.weight` N(0, (initializer_range/√(2·n_layer))²)
   * (GPT-2 paper: residual projections scaled by 1/√N).
   */
  init_weights(generator?: Generator): void {
    const std = this.config.initializer_range;
    const g = { generator };
    for (const [name, m] of this.named_modules()) {
      if (m instanceof Conv1D || m instanceof Linear) {
        const projStd = name.endsWith("c_proj") ? std / Math.sqrt(2 * this.config.n_layer) : std;
        normal_(m.weight, 0, projStd, g);
        if (m.bias) zeros_(m.bias);
      } else if (m instanceof Embedding) {
        normal_(m.weight, 0, std, g);
      } else if (m instanceof LayerNorm) {
        if (m.weight) ones_(m.weight);
        if (m.bias) zeros_(m.bias);
      }
    }
  }

  /**
   * @param input_ids - int64/int32 [B, T]
   * @param inputs - optional `labels` (HF, shifted inside) or `targets` (already shifted), int [B, T]
   * @returns {logits [B, T, vocab_size], loss 0-d float32 (float64 with float64 logits) or null}
   * @throws LoomValueError when both labels and targets are given; LoomShapeError for mismatched shapes
   */
  override forward_lazy<S extends TensorOps<S>>(input_ids: S, inputs: CausalLMInputs<S> = {}): CausalLMOutput<S> {
    const past_key_values = inputs.use_cache === false ? null : inputs.past_key_values ?? (inputs.use_cache ? this.make_cache(input_ids) : null);
    const { position_ids, cache_position, attention_mask } = inputs;
    const hidden = this.transformer.forward_lazy(input_ids, { past_key_values, position_ids, cache_position, attention_mask }); // [B, T, C]
    const logits = this.lm_head.forward(hidden); // [B, T, V]
    const loss = causal_lm_loss("GPT2LMHeadModel", logits, inputs.labels ?? null, inputs.targets ?? null);
    return { logits, loss, past_key_values };
  }

  /**
   * A StaticCache for this model and input: batch of input_ids, T_max = n_positions, the model's
   * dtype and the input's device (what use_cache without past_key_values makes).
   */
  make_cache(input_ids: { shape: readonly number[]; device: string }, max_cache_len = this.config.n_positions): StaticCache {
    return new StaticCache({ config: this.config, max_batch_size: input_ids.shape[0]!, max_cache_len, device: input_ids.device, dtype: this.transformer.wte.weight.dtype });
  }

  override forward<S extends TensorOps<S>>(input_ids: S, inputs: CausalLMInputs<S> = {}): CausalLMOutput<S> {
    return super.forward(input_ids, inputs) as CausalLMOutput<S>;
  }

  /**
   * Load a Hugging Face GPT-2 checkpoint directory: `config.json` + `model.safetensors` (or
   * `model.safetensors.index.json` and its shards), a Hugging Face cache snapshot, or a
   * `models--org--name` cache folder (`opts.revision`, default its refs/main). Keys saved without
   * `transformer.` (OpenAI's `gpt2` files), HF's non-persistent `attn.bias`/`attn.masked_bias`
   * buffers and a missing tied `lm_head.weight` are accepted, as transformers does. The model is
   * built under nn.init_empty_weights (no random init: the checkpoint overwrites it) and its
   * parameters become the file's tensors, mmap-backed where the dtype matches (see
   * hf_checkpoint.ts). The model is returned in eval() mode.
   * @param opts.torch_dtype / opts.dtype - the model's dtype; default "auto": the checkpoint's
   *   (float16/bfloat16 checkpoints load as such), else weights are converted
   * @param opts.strict - throw on other missing/unexpected keys (default true); with false,
   *   missing weights get the random init of init_weights
   * @throws LoomValueError for a missing/invalid config.json, missing weights, key or shape
   *   mismatches, a bad dtype; LoomFormatError for malformed safetensors or a bad cache folder
   */
  static from_pretrained(dir: string, opts: FromPretrainedOptions = {}): GPT2LMHeadModel {
    dir = resolve_pretrained_dir(dir, opts.revision);
    const config = GPT2Config.from_pretrained(dir);
    const dtype = resolve_torch_dtype(dir, opts);
    const model = init_empty_weights(() => new GPT2LMHeadModel(config, { dtype, init: false }));
    load_checkpoint(model, dir, {
      base_model_prefix: "transformer",
      ignore_unexpected: [/(^|\.)attn\.(masked_)?bias$/],
      allow_missing: config.tie_word_embeddings ? ["lm_head.weight"] : [],
      strict: opts.strict,
      assign: true,
      mmap: opts.mmap,
      on_missing: () => model.init_weights(), // all of them: the loaded ones are replaced after
    });
    return model.eval();
  }

  /**
   * Write `config.json` and `model.safetensors` (shards + index above max_shard_size) in the HF
   * layout, metadata {"format": "pt"}; a tied lm_head.weight is not written (transformers drops it too).
   * @param opts.max_shard_size - bytes or "10MB"-style text (default 5 GB)
   */
  save_pretrained(dir: string, opts: { max_shard_size?: number | string } = {}): void {
    const tied = this.lm_head.weight === this.transformer.wte.weight;
    this.config.save_pretrained(dir);
    save_checkpoint(this, dir, { skip: tied ? ["lm_head.weight"] : [], max_shard_size: opts.max_shard_size });
  }

  /** Number of parameters (tied weights counted once), as HF num_parameters(). */
  num_parameters(only_trainable = false): number {
    return this.parameters().filter((p) => !only_trainable || p.requires_grad).reduce((n, p) => n + p.numel(), 0);
  }

  /** The most positions the model embeds (n_positions): generate's cache length and cropping window. */
  get max_position_embeddings(): number {
    return this.config.n_positions;
  }

  /**
   * Autoregressive generation (HF generate, see generate.ts), in two forms:
   * - HF: `generate(input_ids, { max_new_tokens, do_sample, temperature, top_k, top_p,
   *   repetition_penalty, eos_token_id, pad_token_id, attention_mask, ... })` with HF's defaults
   *   (greedy unless do_sample; sampling uses top_k 50);
   * - nanoGPT: `generate(idx, max_new_tokens, { temperature, top_k, ... })`: samples from all
   *   tokens at temperature 1 by default; temperature 0 is greedy.
   * With the KV cache (default when the sequence fits in n_positions): one prefill call, then one
   * [B, 1] call per token over a StaticCache; without (`use_cache: false`, default when longer):
   * the context, cropped to n_positions tokens, is recomputed per token. Left-padded batches with
   * an attention_mask generate what each row would alone. Runs under no_grad in eval() mode and
   * restores the training flag afterwards.
   * @param input_ids - int64 [B, T] prompt ids (T >= 1), any device
   * @returns int64 [B, T + n] on the cpu (n = max_new_tokens, or fewer when all rows hit eos_token_id)
   * @throws LoomValueError for invalid options, LoomShapeError for a non-2-D prompt or a mask of
   *   another shape, LoomIndexError for use_cache: true past T_max (before any call)
   */
  generate(input_ids: Tensor, config: GenerationConfig): Tensor;
  generate(idx: Tensor, max_new_tokens: number, opts?: GenerateOptions): Tensor;
  generate(input_ids: Tensor, a: number | GenerationConfig, opts: GenerateOptions = {}): Tensor {
    return generate(this, input_ids, typeof a === "number" ? legacy_generation_config(a, opts) : a);
  }
}
