/**
 * loom.models: reusable models. GPT-2 in the Hugging Face layout (loads and saves HF
 * `config.json` + `model.safetensors` checkpoints) and a character tokenizer for small
 * char-level GPTs trained from scratch.
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
export { load_checkpoint, save_checkpoint, type LoadCheckpointOptions, type SaveCheckpointOptions } from "./hf_checkpoint.ts";
