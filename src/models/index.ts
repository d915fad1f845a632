/**
 * loom.models: reusable models. GPT-2 and the Llama family (Llama, Qwen2, Mistral, SmolLM) in the
 * Hugging Face layout (load and save HF `config.json` + `model.safetensors` checkpoints;
 * AutoModelForCausalLM dispatches on model_type) and a character tokenizer for small char-level
 * GPTs trained from scratch.
 *
 * ```ts
 * const model = models.GPT2LMHeadModel.from_pretrained("checkpoints/char-gpt");
 * const { logits, loss } = model.call(input_ids, { labels: input_ids });
 * const out = model.generate(prompt, 100, { temperature: 0.8, top_k: 20 }); // KV cache when it fits
 * // HF's form: left-padded batch, nucleus sampling, per-row eos stopping
 * const seqs = model.generate(input_ids, { max_new_tokens: 50, attention_mask, do_sample: true, top_p: 0.9, eos_token_id: 50256 });
 * // by hand, HF-style: prefill, then one token per call
 * const cache = new models.StaticCache({ config: model.config, max_batch_size: 1 });
 * let { logits } = model.call(prompt, { past_key_values: cache });
 * ({ logits } = model.call(next_token, { past_key_values: cache })); // [1, 1] at position cache.get_seq_length()
 * ```
 */
export { GPT2Config, CONFIG_NAME, type GPT2ConfigFields, type GPT2Activation } from "./gpt2_config.ts";
export {
  GPT2Attention, GPT2Block, GPT2LMHeadModel, GPT2MLP, GPT2Model, activation_module, sample_logits,
  type CausalLMInputs, type CausalLMOutput, type GPT2CacheInputs, type GPT2Options, type GenerateOptions, type LayerCacheInputs,
} from "./gpt2.ts";
export {
  generate, get_logits_processor, legacy_generation_config,
  type GenerationConfig, type GenerationInputs, type GenerationModel, type Streamer,
} from "./generate.ts";
export {
  LogitsProcessorList, RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper,
  type LogitsProcessor,
} from "./logits_process.ts";
export { StaticCache, causal_padding_mask, finfo_min, padding_keep, type CacheConfig, type StaticCacheOptions } from "./kv_cache.ts";
export { Conv1D, type Conv1DOptions } from "../nn/conv1d.ts";
export { CharTokenizer, VOCAB_NAME, type EncodeOptions } from "./char_tokenizer.ts";
export {
  checkpoint_dtype, type FromPretrainedOptions, load_checkpoint, resolve_torch_dtype, save_checkpoint, type LoadCheckpointOptions,
  type SaveCheckpointOptions, type TorchDtype,
} from "./hf_checkpoint.ts";
export { LlamaConfig, LLAMA_MODEL_TYPES, read_config_json, type LlamaConfigFields, type LlamaModelType } from "./llama_config.ts";
export {
  LlamaAttention, LlamaDecoderLayer, LlamaMLP, LlamaRMSNorm, LlamaRotaryEmbedding, apply_rotary_pos_emb,
  eager_attention_forward, repeat_kv, rotate_half, scaled_inv_freq, type LlamaLayerInputs, type LlamaOptions,
} from "./llama_layers.ts";
export {
  LLAMA_CAUSAL_LM, LlamaForCausalLM, LlamaModel, MistralForCausalLM, Qwen2ForCausalLM, llama_attention_mask,
  type LlamaCausalLMInputs, type LlamaModelInputs,
} from "./llama.ts";
export { AUTO_MODEL_TYPES, AutoConfig, AutoModelForCausalLM, type AutoFromPretrainedOptions } from "./auto.ts";
