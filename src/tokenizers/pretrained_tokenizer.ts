/**
 * PreTrainedTokenizer: transformers' fast-tokenizer surface over a `@huggingface/tokenizers`
 * Tokenizer built from tokenizer.json. The tokenization itself (normalizer, pre-tokenizer, BPE /
 * WordPiece / Unigram model, post-processor, decoder) is the library's; this class adds HF's
 * names and the batch logic: special tokens from tokenizer_config.json / special_tokens_map.json,
 * truncation, padding with attention masks, int64 Loom tensors, chat templates, save_pretrained.
 *
 * ```ts
 * const tok = tokenizers.AutoTokenizer.from_pretrained("checkpoints/llama");
 * tok.encode("Hello world");                              // [1, 15043, 3186] for Llama-2
 * const { input_ids, attention_mask } = tok.call(["a", "longer text"], { padding: true, padding_side: "left", return_tensors: "loom" });
 * tok.decode(ids, { skip_special_tokens: true });
 * tok.apply_chat_template([{ role: "user", content: "Hi" }], { add_generation_prompt: true });
 * ```
 * Runs without node:fs except save_pretrained (files.ts). Source: transformers
 * tokenization_utils_base.py (PreTrainedTokenizerBase.__call__, pad, decode, special tokens),
 * tokenization_utils_fast.py.
 */
import type { Tokenizer as HFTokenizer } from "@huggingface/tokenizers";
import { tensor, zeros } from "../lazy/creation.ts";
import { Tensor } from "../lazy/tensor.ts";
import { LoomFormatError, LoomIndexError, LoomValueError } from "../tensor/errors.ts";
import { type ChatMessage, type ChatTemplateSetting, render_chat_template, select_chat_template } from "./chat_template.ts";
import { type JsonObject, SPECIAL_TOKENS_MAP_FILE, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE, write_tokenizer_dir } from "./files.ts";
import { NO_MAX_LENGTH, type PaddingStrategy, type Side, type TruncationStrategy, pad_batch, resolve_lengths, truncate_ids } from "./padding.ts";
import {
  SPECIAL_TOKEN_NAMES, type SpecialTokenName, apply_template_flags, build_hf_tokenizer, json_token_id, model_vocab_size, special_token_text, validate_tokenizer_json,
} from "./tokenizer_json.ts";

/** What a tokenizer is built from: parsed tokenizer.json and optional transformers configs. */
export interface TokenizerSources {
  /** tokenizer.json, parsed */
  tokenizer: JsonObject;
  /** tokenizer_config.json, parsed ({} when absent) */
  config?: JsonObject;
  /** special_tokens_map.json, parsed; its entries override config's */
  special_tokens_map?: JsonObject;
  /** chat_template.jinja's text, used when config has no chat_template */
  chat_template?: string | null;
  /** Where tokenizer.json came from, named in errors (default "tokenizer.json") */
  source?: string;
}

export interface EncodeOptions {
  /** Add the post-processor's special tokens (BOS for Llama, none for GPT-2). Default true. */
  add_special_tokens?: boolean;
  truncation?: TruncationStrategy;
  max_length?: number;
}

export interface DecodeOptions {
  /** Drop special tokens (named ones, additional ones and added tokens marked special). */
  skip_special_tokens?: boolean;
  /** transformers' clean_up_tokenization (" ." -> "."): tokenizer_config.json's value, else false (so decode inverts encode). */
  clean_up_tokenization_spaces?: boolean;
}

export interface CallOptions extends EncodeOptions {
  padding?: PaddingStrategy;
  pad_to_multiple_of?: number;
  /** Default: tokenizer_config.json's padding_side, else "right". */
  padding_side?: Side;
  /** Default: tokenizer_config.json's truncation_side, else "right". */
  truncation_side?: Side;
  /** "loom": int64 tensors [B, T] (needs equal lengths); absent: number[] / number[][]. */
  return_tensors?: "loom";
}

/** HF BatchEncoding: token ids and the attention mask (1 = token, 0 = padding). */
export interface BatchEncoding<T> {
  input_ids: T;
  attention_mask: T;
}

export interface ChatTemplateOptions {
  /** Append the template's assistant header so the model continues as the assistant. */
  add_generation_prompt?: boolean;
  /** Return ids (default, as transformers) or the rendered string (false). */
  tokenize?: boolean;
  /** A template name from tokenizer_config.json, or a literal Jinja template. */
  chat_template?: string;
  tools?: unknown[];
  documents?: unknown[];
  /** Extra template variables (transformers' **kwargs). */
  template_kwargs?: Record<string, unknown>;
}

const TAG = "[PreTrainedTokenizer]";
// a token no vocabulary holds, to find where the post-processor puts the sequence
const SENTINEL = "\u{10FFFF}loom-sequence\u{10FFFF}";

export class PreTrainedTokenizer {
  /** The library tokenizer (normalizer, pre-tokenizer, model, post-processor, decoder). */
  readonly backend: HFTokenizer;
  /** tokenizer.json as loaded (save_pretrained writes it back). */
  readonly tokenizer_json: JsonObject;
  /** tokenizer_config.json as loaded. */
  readonly init_kwargs: JsonObject;
  readonly source: string;
  /** Default sides, from tokenizer_config.json or "right". */
  padding_side: Side;
  truncation_side: Side;
  /** Longest input the model takes (tokenizer_config.json), else 1e30 as transformers. */
  model_max_length: number;
  chat_template: ChatTemplateSetting;
  /** Extra special tokens (additional_special_tokens). */
  additional_special_tokens: string[];
  private readonly special = new Map<SpecialTokenName, string | null>();
  private readonly _vocab_size: number;
  /** Ids the post-processor puts before and after one sequence. */
  private readonly prefix_ids: number[];
  private readonly suffix_ids: number[];
  private readonly clean_up_default: boolean;

  /**
   * @throws LoomFormatError if tokenizer.json cannot be loaded (see tokenizer_json.ts), or a
   *   special token named in the configs is not in the vocabulary
   */
  constructor(src: TokenizerSources) {
    const config = src.config ?? {};
    const map = src.special_tokens_map ?? {};
    this.source = src.source ?? TOKENIZER_FILE;
    this.init_kwargs = config;
    for (const name of SPECIAL_TOKEN_NAMES) this.special.set(name, special_token_text(name in map ? map[name] : config[name]));
    validate_tokenizer_json(src.tokenizer, this.source);
    const [bos, eos] = [this.get_special("bos_token"), this.get_special("eos_token")];
    const tok = apply_template_flags(src.tokenizer, config, bos, eos, json_token_id(src.tokenizer, bos), json_token_id(src.tokenizer, eos), this.source);
    this.tokenizer_json = tok;
    const extra = (map.additional_special_tokens ?? config.additional_special_tokens ?? []) as unknown[];
    this.additional_special_tokens = (Array.isArray(extra) ? extra : []).map(special_token_text).filter((t): t is string => t !== null);
    const named = [...this.special.values()].filter((t): t is string => t !== null);
    this.clean_up_default = config.clean_up_tokenization_spaces === true;
    // the library reads these from its config: named tokens join the ones decode may skip
    const libConfig: JsonObject = { ...config, additional_special_tokens: [...new Set([...this.additional_special_tokens, ...named])], clean_up_tokenization_spaces: this.clean_up_default };
    for (const name of SPECIAL_TOKEN_NAMES) libConfig[name] = this.special.get(name) ?? undefined;
    this.backend = build_hf_tokenizer(tok, libConfig, this.source);
    this._vocab_size = model_vocab_size(tok);
    for (const t of [...named, ...this.additional_special_tokens]) {
      if (this.backend.token_to_id(t) === undefined) {
        throw new LoomFormatError(`${TAG} ${this.source}: special token ${JSON.stringify(t)} (from ${TOKENIZER_CONFIG_FILE} / ${SPECIAL_TOKENS_MAP_FILE}) is not in the vocabulary`);
      }
    }
    this.padding_side = config.padding_side === "left" ? "left" : "right";
    this.truncation_side = config.truncation_side === "left" ? "left" : "right";
    const mml = config.model_max_length;
    this.model_max_length = typeof mml === "number" && mml > 0 ? mml : NO_MAX_LENGTH;
    this.chat_template = (config.chat_template as ChatTemplateSetting) ?? src.chat_template ?? null;
    const pp = this.backend.post_processor;
    const out = pp === null ? [SENTINEL] : pp([SENTINEL], null, true).tokens;
    const at = out.indexOf(SENTINEL);
    if (at < 0 || out.lastIndexOf(SENTINEL) !== at) throw new LoomFormatError(`${TAG} ${this.source}: the post_processor does not place the sequence exactly once`);
    this.prefix_ids = this.token_ids(out.slice(0, at), "post_processor");
    this.suffix_ids = this.token_ids(out.slice(at + 1), "post_processor");
  }

  private token_ids(tokens: readonly string[], what: string): number[] {
    return tokens.map((t) => {
      const id = this.backend.token_to_id(t);
      if (id === undefined) throw new LoomFormatError(`${TAG} ${this.source}: ${what} token ${JSON.stringify(t)} is not in the vocabulary`);
      return id;
    });
  }

  // ---- special tokens (HF attribute names) ----
  private get_special(name: SpecialTokenName): string | null {
    return this.special.get(name) ?? null;
  }
  /**
   * @throws LoomValueError if `value` is not in the vocabulary (Loom does not grow the vocab)
   */
  private set_special(name: SpecialTokenName, value: string | null): void {
    if (value !== null && this.backend.token_to_id(value) === undefined) throw new LoomValueError(`${TAG} ${name} ${JSON.stringify(value)} is not in the vocabulary`);
    this.special.set(name, value);
  }
  private special_id(name: SpecialTokenName): number | null {
    const t = this.get_special(name);
    return t === null ? null : this.backend.token_to_id(t)!;
  }
  get bos_token(): string | null { return this.get_special("bos_token"); }
  set bos_token(v: string | null) { this.set_special("bos_token", v); }
  get eos_token(): string | null { return this.get_special("eos_token"); }
  set eos_token(v: string | null) { this.set_special("eos_token", v); }
  get unk_token(): string | null { return this.get_special("unk_token"); }
  set unk_token(v: string | null) { this.set_special("unk_token", v); }
  get pad_token(): string | null { return this.get_special("pad_token"); }
  set pad_token(v: string | null) { this.set_special("pad_token", v); }
  get sep_token(): string | null { return this.get_special("sep_token"); }
  get cls_token(): string | null { return this.get_special("cls_token"); }
  get mask_token(): string | null { return this.get_special("mask_token"); }
  get bos_token_id(): number | null { return this.special_id("bos_token"); }
  get eos_token_id(): number | null { return this.special_id("eos_token"); }
  get unk_token_id(): number | null { return this.special_id("unk_token"); }
  get pad_token_id(): number | null { return this.special_id("pad_token"); }

  /** The named special tokens that are set (transformers' special_tokens_map). */
  get special_tokens_map(): Record<string, string | string[]> {
    const out: Record<string, string | string[]> = {};
    for (const [k, v] of this.special) if (v !== null) out[k] = v;
    if (this.additional_special_tokens.length) out.additional_special_tokens = this.additional_special_tokens.slice();
    return out;
  }
  /** Ids of every special token: named, additional and added tokens marked special. */
  get all_special_ids(): number[] {
    const ids = new Set<number>();
    for (const t of [...this.special.values(), ...this.additional_special_tokens]) if (t !== null) ids.add(this.backend.token_to_id(t)!);
    for (const [id, a] of this.backend.get_added_tokens_decoder()) if (a.special) ids.add(id);
    return [...ids].sort((a, b) => a - b);
  }

  // ---- vocabulary ----
  /** Size of the model's vocabulary without added tokens (HF `vocab_size`). */
  get vocab_size(): number {
    return this._vocab_size;
  }
  /** Size with added tokens: HF's `len(tokenizer)`, the embedding rows a model needs. */
  get length(): number {
    return Math.max(this._vocab_size, ...[...this.backend.get_added_tokens_decoder().keys()].map((id) => id + 1));
  }
  /** token -> id, added tokens included. */
  get_vocab(): Map<string, number> {
    return this.backend.get_vocab(true);
  }
  /** Ids of tokens; an unknown token maps to unk_token_id, or null without an unk token (as HF). */
  convert_tokens_to_ids(tokens: string): number | null;
  convert_tokens_to_ids(tokens: readonly string[]): (number | null)[];
  convert_tokens_to_ids(tokens: string | readonly string[]): number | null | (number | null)[] {
    const one = (t: string) => this.backend.token_to_id(t) ?? this.unk_token_id;
    return typeof tokens === "string" ? one(tokens) : tokens.map(one);
  }
  /** @throws LoomIndexError for an id outside the vocabulary */
  convert_ids_to_tokens(ids: number): string;
  convert_ids_to_tokens(ids: readonly number[]): string[];
  convert_ids_to_tokens(ids: number | readonly number[]): string | string[] {
    const one = (id: number) => {
      this.check_id(id, "convert_ids_to_tokens");
      return this.backend.id_to_token(id)!;
    };
    return typeof ids === "number" ? one(ids) : ids.map(one);
  }
  private check_id(id: number, op: string): void {
    if (!Number.isInteger(id) || id < 0 || this.backend.id_to_token(id) === undefined) {
      throw new LoomIndexError(`[PreTrainedTokenizer.${op}] token id ${id} is not in the vocabulary (ids 0..${this.length - 1})`);
    }
  }

  // ---- encoding ----
  /** The tokens (strings) of `text`, without special tokens (HF `tokenize`). */
  tokenize(text: string): string[] {
    return this.backend.tokenize(text, { add_special_tokens: false });
  }

  /**
   * Ids of `text`, specials added around the (truncated) sequence as the post-processor does.
   * @throws LoomValueError if a token maps to no id (a model without unk_token or byte fallback)
   */
  encode(text: string, opts: EncodeOptions = {}): number[] {
    if (typeof text !== "string") throw new LoomValueError(`[PreTrainedTokenizer.encode] text must be a string, got ${typeof text}`);
    const { truncate_to } = resolve_lengths(false, opts.truncation, opts.max_length, this.model_max_length, "[PreTrainedTokenizer.encode]");
    return this.encode_one(text, opts.add_special_tokens ?? true, truncate_to, this.truncation_side);
  }

  private encode_one(text: string, specials: boolean, truncate_to: number | null, side: Side): number[] {
    const enc = this.backend.encode(text, { add_special_tokens: false });
    const bad = enc.ids.findIndex((id) => id === undefined);
    if (bad >= 0) throw new LoomValueError(`[PreTrainedTokenizer.encode] token ${JSON.stringify(enc.tokens[bad])} is not in the vocabulary and the model has no unk_token`);
    const n_special = specials ? this.prefix_ids.length + this.suffix_ids.length : 0;
    const body = truncate_to === null ? enc.ids : truncate_ids(enc.ids, truncate_to - n_special, side);
    return specials ? [...this.prefix_ids, ...body, ...this.suffix_ids] : body;
  }

  /**
   * HF `tokenizer(text | texts, ...)`: ids and attention masks, truncated and padded.
   * @returns number[] fields for one string, number[][] for a list, int64 Tensors [B, T] with
   *   return_tensors "loom" (one string gives B = 1)
   * @throws LoomValueError for bad options, padding without a pad_token, or return_tensors with
   *   sequences of different lengths (HF: "activate truncation and/or padding")
   */
  call(text: string | readonly string[], opts: CallOptions & { return_tensors: "loom" }): BatchEncoding<Tensor>;
  call(text: string, opts?: CallOptions): BatchEncoding<number[]>;
  call(text: readonly string[], opts?: CallOptions): BatchEncoding<number[][]>;
  call(text: string | readonly string[], opts: CallOptions = {}): BatchEncoding<number[] | number[][] | Tensor> {
    const tag = "[PreTrainedTokenizer.call]";
    const single = typeof text === "string";
    const texts = single ? [text] : text;
    if (!Array.isArray(texts) || texts.some((t) => typeof t !== "string")) throw new LoomValueError(`${tag} text must be a string or an array of strings`);
    const r = resolve_lengths(opts.padding, opts.truncation, opts.max_length, this.model_max_length, tag);
    const side = opts.truncation_side ?? this.truncation_side;
    const seqs = texts.map((t) => this.encode_one(t, opts.add_special_tokens ?? true, r.truncate_to, side));
    const batch = pad_batch(seqs, r.pad, r.pad_to, opts.padding_side ?? this.padding_side, this.pad_token_id, opts.pad_to_multiple_of, tag);
    if (opts.return_tensors === "loom") {
      const lens = new Set(batch.input_ids.map((s) => s.length));
      if (lens.size > 1) throw new LoomValueError(`${tag} return_tensors "loom" needs sequences of one length, got lengths ${[...lens].join(", ")}: use padding and/or truncation`);
      const T = batch.input_ids[0]?.length ?? 0;
      const mk = (rows: number[][]) => (T === 0 ? zeros([rows.length, 0], { dtype: "int64" }) : tensor(rows, { dtype: "int64" }));
      return { input_ids: mk(batch.input_ids), attention_mask: mk(batch.attention_mask) };
    }
    if (single) return { input_ids: batch.input_ids[0]!, attention_mask: batch.attention_mask[0]! };
    return batch;
  }

  // ---- decoding ----
  /**
   * Text of `ids` (a list, or a 1-D integer Tensor).
   * @throws LoomIndexError for an id outside the vocabulary; LoomValueError for a tensor that is not 1-D integer
   */
  decode(ids: readonly number[] | Tensor, opts: DecodeOptions = {}): string {
    const list = this.id_list(ids, 1, "decode") as number[];
    for (const id of list) this.check_id(id, "decode");
    if (list.length === 0) return "";
    let kept = list;
    if (opts.skip_special_tokens) {
      const skip = new Set(this.all_special_ids);
      kept = list.filter((id) => !skip.has(id));
      if (kept.length === 0) return "";
    }
    return this.backend.decode(kept, { skip_special_tokens: false, clean_up_tokenization_spaces: opts.clean_up_tokenization_spaces ?? this.clean_up_default });
  }

  /** decode for each row of a list of id lists or a 2-D integer Tensor. */
  batch_decode(sequences: readonly (readonly number[])[] | Tensor, opts: DecodeOptions = {}): string[] {
    return (this.id_list(sequences, 2, "batch_decode") as number[][]).map((s) => this.decode(s, opts));
  }

  private id_list(ids: unknown, ndim: 1 | 2, op: string): number[] | number[][] {
    if (ids instanceof Tensor) {
      if (ids.ndim !== ndim || !["int64", "int32", "uint8", "int8", "int16"].includes(ids.dtype)) {
        throw new LoomValueError(`[PreTrainedTokenizer.${op}] expects a ${ndim}-D integer tensor, got ${ids.dtype} of shape [${ids.shape.join(", ")}]`);
      }
      return ids.tolist() as number[] | number[][];
    }
    if (!Array.isArray(ids) || (ndim === 2 && ids.some((r) => !Array.isArray(r)))) throw new LoomValueError(`[PreTrainedTokenizer.${op}] expects ${ndim === 1 ? "a list of ids" : "a list of id lists"}`);
    return ids as number[] | number[][];
  }

  // ---- chat templates ----
  /**
   * Renders `messages` with the chat template (see chat_template.ts).
   * @returns ids (tokenize, the default; special tokens come from the template, none are added)
   *   or the rendered text
   * @throws LoomValueError if there is no chat template or it raises
   */
  apply_chat_template(messages: readonly ChatMessage[], opts: ChatTemplateOptions & { tokenize: false }): string;
  apply_chat_template(messages: readonly ChatMessage[], opts?: ChatTemplateOptions): number[];
  apply_chat_template(messages: readonly ChatMessage[], opts: ChatTemplateOptions = {}): string | number[] {
    const tag = "[PreTrainedTokenizer.apply_chat_template]";
    const template = select_chat_template(this.chat_template, opts.chat_template, tag);
    const vars: Record<string, unknown> = {
      ...this.special_tokens_map,
      ...(opts.template_kwargs ?? {}),
      messages,
      add_generation_prompt: opts.add_generation_prompt ?? false,
    };
    if (opts.tools !== undefined) vars.tools = opts.tools;
    if (opts.documents !== undefined) vars.documents = opts.documents;
    const text = render_chat_template(template, vars, tag);
    return opts.tokenize === false ? text : this.encode(text, { add_special_tokens: false });
  }

  // ---- saving ----
  /** The files save_pretrained writes, as text (for callers without a file system). */
  to_files(): Record<string, string> {
    const config: JsonObject = { ...this.init_kwargs };
    for (const name of SPECIAL_TOKEN_NAMES) {
      const v = this.get_special(name);
      if (v !== null) config[name] = v;
      else delete config[name];
    }
    if (this.additional_special_tokens.length) config.additional_special_tokens = this.additional_special_tokens.slice();
    config.padding_side = this.padding_side;
    config.truncation_side = this.truncation_side;
    config.clean_up_tokenization_spaces = this.clean_up_default;
    if (this.model_max_length < NO_MAX_LENGTH) config.model_max_length = this.model_max_length;
    if (this.chat_template !== null && this.chat_template !== undefined) config.chat_template = this.chat_template;
    return {
      [TOKENIZER_FILE]: JSON.stringify(this.tokenizer_json, null, 2),
      [TOKENIZER_CONFIG_FILE]: JSON.stringify(config, null, 2),
      [SPECIAL_TOKENS_MAP_FILE]: JSON.stringify(this.special_tokens_map, null, 2),
    };
  }

  /**
   * Writes tokenizer.json, tokenizer_config.json and special_tokens_map.json into `dir`
   * (created), so transformers' AutoTokenizer and Loom's load it back.
   * @returns the paths written
   */
  save_pretrained(dir: string): string[] {
    return write_tokenizer_dir(dir, this.to_files());
  }
}
