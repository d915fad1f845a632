/**
 * A Llama decoder block ported from Hugging Face transformers' modeling_llama.py with Loom's
 * public API. The block now lives in src/models (models.LlamaForCausalLM is built from it) and is
 * re-exported here: LlamaRMSNorm, LlamaRotaryEmbedding (default rope), rotate_half /
 * apply_rotary_pos_emb, repeat_kv (grouped-query attention), eager_attention_forward,
 * LlamaAttention (with a KV cache: Loom's models.StaticCache), LlamaMLP and LlamaDecoderLayer,
 * plus `LlamaDecoder`: LlamaModel.forward from `inputs_embeds` (position ids, rotary cos/sin, causal
 * mask, the cache bookkeeping) without embed_tokens and the final norm.
 *
 * Parameter names are HF's (`self_attn.q_proj.weight`, `mlp.gate_proj.weight`,
 * `input_layernorm.weight`, ...), so a state dict of HF's LlamaDecoderLayer loads as is.
 *
 * ```ts
 * const config = new LlamaConfig({ hidden_size: 32, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 48, num_hidden_layers: 1 });
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

// The block itself now lives in src/models/llama_layers.ts (LlamaForCausalLM is built from it);
// re-exported here so this example and its test keep their names.
export {
  LlamaAttention, LlamaConfig, LlamaDecoderLayer, LlamaMLP, LlamaRMSNorm, LlamaRotaryEmbedding, apply_rotary_pos_emb,
  eager_attention_forward, repeat_kv, rotate_half, type LlamaLayerInputs,
} from "../src/models/index.ts";
const { LlamaConfig, LlamaDecoderLayer, LlamaRotaryEmbedding } = models;
type LlamaConfig = models.LlamaConfig;
type LlamaDecoderLayer = models.LlamaDecoderLayer;
type LlamaRotaryEmbedding = models.LlamaRotaryEmbedding;

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
    const attention_mask = cache ? cache.attention_mask(cache_position) : models.llama_attention_mask(cache_position, cache_position, inputs_embeds.dtype);
    const position_embeddings: [S, S] = this.rotary_emb.forward(inputs_embeds, position_ids);
    let h = inputs_embeds;
    for (const layer of this.layers) h = layer.forward(h, { position_embeddings, attention_mask, past_key_value: cache, cache_position });
    return h;
  }
}

// `bun examples/llama_block.ts`: a random tiny block; cached decoding reproduces the full forward
if (import.meta.main) {
  loom.manual_seed(0);
  const config = new LlamaConfig({ hidden_size: 32, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 48, num_hidden_layers: 1, max_position_embeddings: 16 });
  const model = new LlamaDecoder(config);
  const x = loom.randn([1, 7, config.hidden_size]);
  const full = loom.no_grad(() => model.call(x) as loom.Tensor);
  const cache = make_static_cache(config, { max_cache_len: 16 });
  const parts = loom.no_grad(() => [[0, 4], [4, 1], [5, 1], [6, 1]].map(([s, n]) => model.call(x.narrow(1, s!, n!), { past_key_values: cache }) as loom.Tensor));
  const diff = loom.cat(parts, 1).sub(full).abs().max().item();
  console.log(`${model.layers.get(0).named_parameters().length} parameter tensors, ${model.parameters().reduce((n, p) => n + p.numel(), 0)} values`);
  console.log(`full forward [1, 7, ${config.hidden_size}] vs prefill 4 + 3 cached decode steps: max |diff| = ${diff.toExponential(2)}`);
}
