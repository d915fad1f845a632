/**
 * Llama-family causal language models in the Hugging Face layout (transformers
 * LlamaForCausalLM; Qwen2ForCausalLM and MistralForCausalLM are the same code driven by
 * LlamaConfig.model_type; SmolLM is model_type "llama"). State-dict keys equal HF's, so HF
 * checkpoints load as they are and checkpoints saved here load in transformers.
 *
 * ```
 * LlamaForCausalLM
 *   model: LlamaModel
 *     embed_tokens [vocab, hidden]
 *     layers: ModuleList of LlamaDecoderLayer { input_layernorm, self_attn { q_proj, k_proj, v_proj, o_proj },
 *                                              post_attention_layernorm, mlp { gate_proj, up_proj, down_proj } }
 *     norm (RMSNorm), rotary_emb (non-persistent inv_freq)
 *   lm_head: Linear(hidden, vocab, bias=false), tied to model.embed_tokens.weight iff tie_word_embeddings
 * ```
 * Same forward interface as GPT2LMHeadModel: `forward(input_ids, { labels, targets,
 * past_key_values, use_cache, position_ids, cache_position, attention_mask })` returns
 * `{ logits, loss, past_key_values }`.
 * Source: https://github.com/huggingface/transformers/blob/main/src/transformers/models/llama/modeling_llama.py;
 * Touvron et al. 2023, "LLaMA"; Qwen2 / Mistral model cards.
 */
import { resolve_pretrained_dir } from "../io/index.ts";
import { arange, zeros } from "../lazy/creation.ts";
import { cat } from "../lazy/functional.ts";
import type { TensorOps } from "../lazy/surface.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { ModuleList } from "../nn/container.ts";
import { lift } from "../nn/execution.ts";
import { init_empty_weights, normal_, ones_, zeros_ } from "../nn/init.ts";
import { Embedding, Linear } from "../nn/linear.ts";
import { Module, TensorModule } from "../nn/module.ts";
import type { DType } from "../tensor/dtype.ts";
import { LoomDtypeError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import type { Generator } from "../tensor/rng.ts";
import { causal_lm_loss, type CausalLMOutput } from "./gpt2.ts";
import { generate, type GenerationConfig } from "./generate.ts";
import { load_checkpoint, resolve_torch_dtype, save_checkpoint, type FromPretrainedOptions } from "./hf_checkpoint.ts";
import { StaticCache, finfo_min } from "./kv_cache.ts";
import { LlamaConfig } from "./llama_config.ts";
import { LlamaDecoderLayer, LlamaRMSNorm, LlamaRotaryEmbedding, type LlamaOptions } from "./llama_layers.ts";

/** Inputs of LlamaModel / LlamaForCausalLM besides input_ids (HF argument names). */
export interface LlamaModelInputs<S> {
  /** The cache to read and write (a StaticCache, see make_cache); written in place. */
  past_key_values?: StaticCache | null;
  /** Use (LlamaForCausalLM: make when missing) the cache; false ignores past_key_values. */
  use_cache?: boolean;
  /** int [B, T] or [1, T] positions for RoPE (default: cache_position as [1, T]). */
  position_ids?: S | null;
  /** int64 [T] positions / cache slots of the new tokens (default: get_seq_length() + 0..T-1, or 0..T-1). */
  cache_position?: S | null;
  /**
   * HF's 2-D padding mask [B, S]: 1 (or true) for tokens to attend, 0 for padding, over every
   * position so far (S = T without a cache; with a cache past + T <= S <= T_max, later slots
   * count as 0). Combined with the causal mask (and Mistral's sliding window).
   */
  attention_mask?: S | null;
}

export interface LlamaCausalLMInputs<S> extends LlamaModelInputs<S> {
  /** HF semantics: token ids [B, T] aligned with input_ids, shifted inside; -100 is ignored. */
  labels?: S | null;
  /** nanoGPT semantics: next-token ids [B, T] already shifted; -100 is ignored. */
  targets?: S | null;
}

/**
 * The additive attention mask of HF's create_causal_mask (eager path): 0 where query t may attend
 * key s, finfo(dtype).min elsewhere. Allowed: key_pos[s] <= query_pos[t], within the sliding
 * window (query_pos - key_pos < window) when one is given, and padding[b, s] != 0.
 * @param query_pos - int64 [T]; key_pos - int64 [S] (0..T_max-1 with a cache, else query_pos)
 * @param padding - [B, S] 0/1 (any dtype) or null
 * @returns [B|1, 1, T, S] in `dtype`
 */
export function llama_attention_mask<S extends TensorOps<S>>(query_pos: S, key_pos: S, dtype: DType, padding: S | null = null, window: number | null = null): S {
  const T = query_pos.shape[0]!, Sk = key_pos.shape[0]!;
  const q = query_pos.unsqueeze(1), k = key_pos.unsqueeze(0); // [T, 1], [1, S]
  let allowed = k.le(q); // bool [T, S]
  if (window !== null) allowed = allowed.logical_and(q.sub(k).lt(window));
  allowed = allowed.view(1, 1, T, Sk);
  if (padding) allowed = allowed.logical_and(padding.to("bool").view(padding.shape[0]!, 1, 1, Sk)); // [B, 1, T, S]
  return allowed.to(dtype).zeros_like().masked_fill(allowed.logical_not(), finfo_min(dtype));
}

/** The decoder body (HF LlamaModel): embed_tokens, the layers, the final RMSNorm. */
export class LlamaModel extends Module {
  embed_tokens: Embedding;
  layers: ModuleList<LlamaDecoderLayer>;
  norm: LlamaRMSNorm;
  rotary_emb: LlamaRotaryEmbedding;
  readonly config: LlamaConfig;

  constructor(config: LlamaConfig, opts: LlamaOptions = {}) {
    super();
    this.config = config;
    this.embed_tokens = new Embedding(config.vocab_size, config.hidden_size, { dtype: opts.dtype, generator: opts.generator, padding_idx: config.pad_token_id ?? undefined });
    this.layers = new ModuleList(Array.from({ length: config.num_hidden_layers }, (_, i) => new LlamaDecoderLayer(config, i, opts)));
    this.norm = new LlamaRMSNorm(config.hidden_size, config.rms_norm_eps, opts);
    this.rotary_emb = new LlamaRotaryEmbedding(config);
  }

  /**
   * @param input_ids - int64/int32 [B, T] token ids in [0, vocab_size)
   * @param inputs - see LlamaModelInputs (HF names)
   * @returns hidden states [B, T, hidden_size] after the final norm
   * @throws LoomShapeError for a non-2-D input, a cache, cache_position, position_ids or
   *   attention_mask of another shape; LoomIndexError for a cache position outside [0, T_max),
   *   raised before anything is written; LoomDtypeError for a cache dtype other than the model's
   */
  override forward_lazy<S extends TensorOps<S>>(input_ids: S, inputs: LlamaModelInputs<S> = {}): S {
    if (input_ids.ndim !== 2) throw new LoomShapeError(`[LlamaModel] input_ids must be [B, T], got ${fmtShape(input_ids.shape)}`);
    const [B, T] = input_ids.shape as [number, number];
    const cache = inputs.use_cache === false ? null : inputs.past_key_values ?? null;
    if (inputs.use_cache && !cache) throw new LoomValueError("[LlamaModel] use_cache needs past_key_values (a StaticCache); LlamaForCausalLM makes one itself");
    let cache_position: S;
    let end: number; // positions 0..end-1 exist once this call is done
    if (cache) {
      // every check before the first write: a failing call leaves the cache as it was
      this.check_cache(cache, input_ids);
      if (inputs.cache_position) {
        cache_position = inputs.cache_position;
        const positions = Array.from(cache_position.dataSync());
        cache.check_positions(positions);
        if (new Set(positions).size !== positions.length) throw new LoomValueError(`[LlamaModel] cache_position [${positions.join(", ")}] repeats a slot`);
        end = positions.reduce((m, p) => Math.max(m, p + 1), 0); // no spread: V8 overflows on a long prefill
      } else {
        // the cache's own positions: bounds-checked now, counted by layer 0's update
        end = cache.get_seq_length() + T;
        cache_position = cache.cache_positions(T, input_ids);
      }
    } else {
      cache_position = inputs.cache_position ?? lift(arange(0, T, 1, { dtype: "int64", device: input_ids.device }), input_ids);
      end = T;
    }
    if (cache_position.ndim !== 1 || cache_position.shape[0] !== T) throw new LoomShapeError(`[LlamaModel] cache_position must be [${T}], got ${fmtShape(cache_position.shape)}`);
    const position_ids = inputs.position_ids ?? cache_position.unsqueeze(0); // [1, T]
    if (position_ids.ndim !== 2 || position_ids.shape[1] !== T || (position_ids.shape[0] !== 1 && position_ids.shape[0] !== B)) {
      throw new LoomShapeError(`[LlamaModel] position_ids ${fmtShape(position_ids.shape)} must be [${B}, ${T}] or [1, ${T}]`);
    }

    let h = this.embed_tokens.forward(input_ids); // [B, T, hidden]
    const dtype = h.dtype;
    // keys: the cache's T_max slots, or these T positions
    const key_pos = cache ? lift(arange(0, cache.max_cache_len, 1, { dtype: "int64", device: input_ids.device }), input_ids) : cache_position;
    const Sk = key_pos.shape[0]!;
    let padding: S | null = null;
    if (inputs.attention_mask) {
      const am = inputs.attention_mask;
      const min = cache ? end : T;
      if (am.ndim !== 2 || am.shape[0] !== B || am.shape[1]! < min || am.shape[1]! > Sk || (!cache && am.shape[1] !== T)) {
        throw new LoomShapeError(`[LlamaModel] attention_mask ${fmtShape(am.shape)} must be [${B}, S] with ${cache ? `${min} <= S <= ${Sk} (past + new positions; the cache holds ${Sk})` : `S = ${T}`} for input_ids ${fmtShape(input_ids.shape)}`);
      }
      padding = am.to("bool");
      if (am.shape[1]! < Sk) padding = cat([padding, lift(zeros([B, Sk - am.shape[1]!], { dtype: "bool", device: input_ids.device }), am)], 1); // later slots: not attended
    }
    const attention_mask = llama_attention_mask(cache_position, key_pos, dtype, padding, this.config.attention_window); // [B|1, 1, T, Sk]
    const position_embeddings = this.rotary_emb.forward(h, position_ids) as [S, S];
    for (const layer of this.layers) h = layer.forward(h, { position_embeddings, attention_mask, past_key_value: cache, cache_position });
    if (cache) cache.advance(end);
    return this.norm.forward(h);
  }

  /**
   * The cache fits this model and input: layers, KV heads, head_dim, batch, dtype.
   * @throws LoomShapeError / LoomDtypeError naming the cache and the model
   */
  check_cache(cache: StaticCache, input_ids: { shape: readonly number[] }): void {
    const c = this.config;
    if (!(cache instanceof StaticCache)) throw new LoomValueError("[LlamaModel] past_key_values must be a StaticCache");
    if (cache.num_layers !== c.num_hidden_layers || cache.num_heads !== c.num_key_value_heads || cache.head_dim !== c.head_dim) {
      throw new LoomShapeError(`[LlamaModel] past_key_values has ${cache.num_layers} layers of ${fmtShape(cache.shape)} but the model needs ${c.num_hidden_layers} layers of [B, ${c.num_key_value_heads}, T_max, ${c.head_dim}]`);
    }
    if (cache.max_batch_size !== input_ids.shape[0]) {
      throw new LoomShapeError(`[LlamaModel] input_ids ${fmtShape(input_ids.shape)} has batch ${input_ids.shape[0]} but past_key_values ${fmtShape(cache.shape)} holds batch ${cache.max_batch_size}`);
    }
    const dtype = this.embed_tokens.weight.dtype;
    if (cache.dtype !== dtype) throw new LoomDtypeError(`[LlamaModel] past_key_values holds ${cache.dtype} but the model computes in ${dtype}`);
  }
}

/**
 * A Llama-family decoder with a language-modeling head (HF LlamaForCausalLM). lm_head shares its
 * weight with model.embed_tokens when `config.tie_word_embeddings` (one Parameter, one gradient).
 */
export class LlamaForCausalLM extends Module {
  model: LlamaModel;
  lm_head: Linear;
  readonly config: LlamaConfig;

  /** @param opts.init - false skips HF's random initialization (weights to be loaded) */
  constructor(config: LlamaConfig, opts: LlamaOptions = {}) {
    super();
    this.config = config;
    this.model = new LlamaModel(config, opts);
    this.lm_head = new Linear(config.hidden_size, config.vocab_size, { bias: false, dtype: opts.dtype, generator: opts.generator });
    if (opts.init !== false) this.init_weights(opts.generator);
    if (config.tie_word_embeddings) this.tie_weights();
  }

  /** Make lm_head.weight the very Parameter of model.embed_tokens.weight (HF tie_weights). */
  tie_weights(): void {
    this.lm_head.weight = this.model.embed_tokens.weight;
  }

  /**
   * HF's `_init_weights` (LlamaPreTrainedModel): Linear weights and embeddings N(0,
   * initializer_range²), biases and the padding row zero, RMSNorm weights 1.
   */
  init_weights(generator?: Generator): void {
    const std = this.config.initializer_range;
    for (const [, m] of this.named_modules()) {
      if (m instanceof Linear) {
        normal_(m.weight, 0, std, { generator });
        if (m.bias) zeros_(m.bias);
      } else if (m instanceof Embedding) {
        normal_(m.weight, 0, std, { generator });
        if (m.padding_idx !== null) m.weight.narrow(0, m.padding_idx, 1).zero_();
      } else if (m instanceof LlamaRMSNorm) {
        ones_(m.weight);
      }
    }
  }

  /**
   * @param input_ids - int64/int32 [B, T]
   * @param inputs - `labels` (HF, shifted inside) or `targets` (already shifted), int [B, T], and
   *   the LlamaModelInputs; `use_cache` without past_key_values makes a cache (make_cache)
   * @returns {logits [B, T, vocab_size], loss 0-d float32 or null, past_key_values}
   * @throws LoomValueError when both labels and targets are given; LoomShapeError for mismatched shapes
   */
  override forward_lazy<S extends TensorOps<S>>(input_ids: S, inputs: LlamaCausalLMInputs<S> = {}): CausalLMOutput<S> {
    const past_key_values = inputs.use_cache === false ? null : inputs.past_key_values ?? (inputs.use_cache ? this.make_cache(input_ids) : null);
    const { position_ids, cache_position, attention_mask } = inputs;
    const hidden = this.model.forward(input_ids, { past_key_values, position_ids, cache_position, attention_mask }) as S; // [B, T, C]
    const logits = this.lm_head.forward(hidden) as S; // [B, T, V]
    const loss = causal_lm_loss("LlamaForCausalLM", logits, inputs.labels ?? null, inputs.targets ?? null);
    return { logits, loss, past_key_values };
  }

  override forward<S extends TensorOps<S>>(input_ids: S, inputs: LlamaCausalLMInputs<S> = {}): CausalLMOutput<S> {
    return super.forward(input_ids, inputs) as CausalLMOutput<S>;
  }

  /**
   * A StaticCache for this model and input: per layer [B, num_key_value_heads, T_max, head_dim],
   * batch of input_ids, the model's dtype, the input's device. T_max defaults to
   * max_position_embeddings, which is large for real models (32k for Qwen2): pass what you need.
   */
  make_cache(input_ids: { shape: readonly number[]; device: string }, max_cache_len = this.config.max_position_embeddings): StaticCache {
    return new StaticCache({ config: this.config, max_batch_size: input_ids.shape[0]!, max_cache_len, device: input_ids.device, dtype: this.model.embed_tokens.weight.dtype });
  }

  /** Positions the model was trained for (config.max_position_embeddings; generate's limit). */
  get max_position_embeddings(): number {
    return this.config.max_position_embeddings;
  }

  /**
   * Autoregressive generation (HF generate, src/models/generate.ts):
   * `generate(input_ids, { max_new_tokens, do_sample, temperature, top_k, top_p,
   * repetition_penalty, eos_token_id, pad_token_id, attention_mask, streamer })` with HF's defaults
   * (greedy unless do_sample). With the KV cache (default): one prefill call, then one [B, 1] call
   * per token; left-padded batches with an attention_mask generate what each row would alone.
   * Runs under no_grad in eval() mode and restores the training flag afterwards.
   * @param input_ids - int64 [B, T] prompt ids (T >= 1), any device
   * @returns int64 [B, T + n] on the cpu (n = max_new_tokens, or fewer when all rows hit eos_token_id)
   * @throws LoomValueError for invalid options, LoomShapeError for a non-2-D prompt or a mask of
   *   another shape, LoomIndexError for use_cache: true past max_position_embeddings
   */
  generate(input_ids: Tensor, config: GenerationConfig): Tensor {
    return generate(this, input_ids, config);
  }

  /** Number of parameters (tied weights counted once), as HF num_parameters(). */
  num_parameters(only_trainable = false): number {
    return this.parameters().filter((p) => !only_trainable || p.requires_grad).reduce((n, p) => n + p.numel(), 0);
  }

  /** The output head PEFT's "all-linear" leaves out (HF get_output_embeddings). */
  get_output_embeddings(): TensorModule {
    return this.lm_head;
  }

  /**
   * Load a Hugging Face checkpoint directory: `config.json` + `model.safetensors` (or
   * `model.safetensors.index.json` and its shards; the HF cache's snapshot layout too). A missing
   * tied `lm_head.weight` and old checkpoints' `rotary_emb.inv_freq` buffers are accepted, as
   * transformers does. Weights are not randomly initialized first. Returned in eval() mode.
   * Called on Qwen2ForCausalLM / MistralForCausalLM it returns that class.
   * @param opts.dtype - parameter dtype (checkpoint values are converted)
   * @param opts.strict - throw on other missing/unexpected keys (default true)
   * @throws LoomValueError for a missing/invalid config.json (naming the key and file), missing
   *   weights, key mismatches; LoomShapeError for a tensor of the wrong shape, naming the key,
   *   both shapes and the file; LoomFormatError for malformed safetensors
   */
  static from_pretrained<M extends LlamaForCausalLM>(this: new (config: LlamaConfig, opts?: LlamaOptions) => M, dir: string, opts: FromPretrainedOptions = {}): M {
    dir = resolve_pretrained_dir(dir, opts.revision);
    const config = LlamaConfig.from_pretrained(dir);
    const dtype = resolve_torch_dtype(dir, opts);
    // no random init for weights about to be replaced by the file's (mapped) tensors
    const model = init_empty_weights(() => new this(config, { dtype, init: false }));
    try {
      load_checkpoint(model, dir, {
        base_model_prefix: "model",
        ignore_unexpected: [/(^|\.)rotary_emb\.inv_freq$/],
        allow_missing: config.tie_word_embeddings ? ["lm_head.weight"] : [],
        strict: opts.strict,
        assign: true,
        mmap: opts.mmap,
        on_missing: () => model.init_weights(), // all of them: the loaded ones are replaced after
      });
    } catch (e) {
      throw as_shape_error(e);
    }
    return model.eval();
  }

  /**
   * Write `config.json` and `model.safetensors` (shards + index above max_shard_size) in the HF
   * layout, metadata {"format": "pt"}; a tied lm_head.weight is not written (transformers drops it too).
   * @param opts.max_shard_size - bytes or "10MB"-style text (default 5 GB)
   */
  save_pretrained(dir: string, opts: { max_shard_size?: number | string } = {}): void {
    const tied = this.lm_head.weight === this.model.embed_tokens.weight;
    this.config.save_pretrained(dir);
    save_checkpoint(this, dir, { skip: tied ? ["lm_head.weight"] : [], max_shard_size: opts.max_shard_size });
  }
}

/**
 * load_checkpoint's "size mismatch for K: A in FILE, B in MODEL" (it names the key, both shapes
 * and the file already) as the LoomShapeError it is; other errors unchanged.
 */
function as_shape_error(e: unknown): unknown {
  return e instanceof LoomValueError && e.message.includes("size mismatch for ") ? new LoomShapeError(e.message) : e;
}

/** Qwen2 (HF Qwen2ForCausalLM): LlamaForCausalLM with config.model_type "qwen2" (q/k/v biases, o_proj without). */
export class Qwen2ForCausalLM extends LlamaForCausalLM {}

/** Mistral (HF MistralForCausalLM): LlamaForCausalLM with config.model_type "mistral" (sliding-window mask). */
export class MistralForCausalLM extends LlamaForCausalLM {}

/** The CausalLM class name for a Llama-family model_type (HF `architectures`). */
export const LLAMA_CAUSAL_LM = { llama: LlamaForCausalLM, qwen2: Qwen2ForCausalLM, mistral: MistralForCausalLM } as const;
