/**
 * AutoTokenizer.from_pretrained(dir): the tokenizer of a Hugging Face model directory (or a
 * Hugging Face cache snapshot), built from its tokenizer.json. Every fast tokenizer class of
 * transformers (GPT2TokenizerFast, LlamaTokenizerFast, Qwen2TokenizerFast, PreTrainedTokenizerFast...)
 * is this one class here: the behaviour lives in tokenizer.json, the rest in tokenizer_config.json.
 * Source: transformers models/auto/tokenization_auto.py.
 */
import { read_tokenizer_dir } from "./files.ts";
import { PreTrainedTokenizer } from "./pretrained_tokenizer.ts";
import type { Side } from "./padding.ts";

export interface AutoTokenizerOptions {
  /** Override tokenizer_config.json's padding side. */
  padding_side?: Side;
  /** Override tokenizer_config.json's truncation side. */
  truncation_side?: Side;
  /** Override special tokens (HF kwargs such as pad_token="<|endoftext|>"); must be in the vocabulary. */
  bos_token?: string;
  eos_token?: string;
  unk_token?: string;
  pad_token?: string;
  model_max_length?: number;
}

export class AutoTokenizer {
  /**
   * @param dir - a directory holding tokenizer.json (+ tokenizer_config.json,
   *   special_tokens_map.json, chat_template.jinja when present)
   * @throws LoomValueError if `dir` does not exist or has no tokenizer.json; LoomFormatError if a
   *   file is malformed or names a model the library cannot load (never a fallback tokenizer)
   */
  static from_pretrained(dir: string, opts: AutoTokenizerOptions = {}): PreTrainedTokenizer {
    const files = read_tokenizer_dir(dir);
    // user kwargs win over both files, as in transformers
    const config = { ...files.config };
    for (const [k, v] of Object.entries(opts)) if (v !== undefined) config[k] = v;
    const map = { ...files.special_tokens_map };
    for (const k of ["bos_token", "eos_token", "unk_token", "pad_token"] as const) if (opts[k] !== undefined) map[k] = opts[k];
    return new PreTrainedTokenizer({ tokenizer: files.tokenizer, config, special_tokens_map: map, chat_template: files.chat_template, source: files.source });
  }
}
