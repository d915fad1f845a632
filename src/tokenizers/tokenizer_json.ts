/**
 * tokenizer.json -> a `@huggingface/tokenizers` Tokenizer, checked first so that a file the
 * library would misread gets a typed error naming the file instead of a silent fallback.
 *
 * Why the checks: the library's `create_tokenizer_model` falls back to a character-level
 * `Legacy` model for a `model.type` it does not know (or a missing one) whenever `model.vocab`
 * is an object, and its constructor fails with bare TypeErrors on missing fields. Loom accepts
 * the model types the Rust library serializes (BPE, WordPiece, Unigram), checks the fields each
 * reads, and wraps any construction error as a LoomFormatError naming tokenizer.json.
 * Source: huggingface/tokenizers tokenizers/src/models/mod.rs (ModelWrapper), bpe/serialization.rs.
 */
import { Tokenizer as HFTokenizer } from "@huggingface/tokenizers";
import { LoomFormatError, LoomValueError } from "../tensor/errors.ts";
import type { JsonObject } from "./files.ts";

/** The model types Loom loads (those of the Rust library; WordLevel is not in the JS library). */
export const MODEL_TYPES = ["BPE", "WordPiece", "Unigram"] as const;

/** HF's named special tokens, in transformers' SPECIAL_TOKENS_ATTRIBUTES order. */
export const SPECIAL_TOKEN_NAMES = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"] as const;
export type SpecialTokenName = (typeof SPECIAL_TOKEN_NAMES)[number];

const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Checks the parts of a parsed tokenizer.json the library reads without checking.
 * @param source - the file, named in every message
 * @throws LoomFormatError for a missing/unknown model type, a malformed vocab or merges list,
 *   ids that are not non-negative integers, or malformed added_tokens
 */
export function validate_tokenizer_json(tok: JsonObject, source: string): void {
  const fail = (msg: string) => new LoomFormatError(`[tokenizer.json] ${source}: ${msg}`);
  const model = tok.model;
  if (!isObject(model)) throw fail(`"model" must be an object, got ${JSON.stringify(model) ?? "nothing"}`);
  const type = model.type;
  if (typeof type !== "string") throw fail(`"model.type" is missing; expected one of ${MODEL_TYPES.join(", ")}`);
  if (!(MODEL_TYPES as readonly string[]).includes(type)) throw fail(`unknown model type ${JSON.stringify(type)}; Loom loads ${MODEL_TYPES.join(", ")}`);
  const isId = (v: unknown) => Number.isInteger(v) && (v as number) >= 0;
  if (type === "Unigram") {
    if (!Array.isArray(model.vocab) || model.vocab.length === 0) throw fail(`Unigram "model.vocab" must be a non-empty array of [piece, score]`);
    const bad = model.vocab.findIndex((e) => !Array.isArray(e) || typeof e[0] !== "string" || typeof e[1] !== "number");
    if (bad >= 0) throw fail(`Unigram "model.vocab[${bad}]" must be [piece, score], got ${JSON.stringify(model.vocab[bad])}`);
  } else {
    if (!isObject(model.vocab) || Object.keys(model.vocab).length === 0) throw fail(`${type} "model.vocab" must be a non-empty object {token: id}`);
    for (const [k, v] of Object.entries(model.vocab)) if (!isId(v)) throw fail(`"model.vocab" maps ${JSON.stringify(k)} to ${JSON.stringify(v)}, not a non-negative integer id`);
  }
  if (type === "BPE") {
    const merges = model.merges;
    if (!Array.isArray(merges)) throw fail(`BPE "model.merges" must be an array, got ${JSON.stringify(merges) ?? "nothing"}`);
    // the library picks the format from merges[0]; a mixed list would be misread
    const pairs = merges.length > 0 && Array.isArray(merges[0]);
    merges.forEach((m, i) => {
      const ok = pairs
        ? Array.isArray(m) && m.length === 2 && typeof m[0] === "string" && typeof m[1] === "string"
        : typeof m === "string" && m.split(" ").length === 2;
      if (!ok) throw fail(`"model.merges[${i}]" must be ${pairs ? "a pair [left, right]" : `"left right"`} like merges[0], got ${JSON.stringify(m)}`);
    });
  }
  const added = tok.added_tokens;
  if (added !== undefined && added !== null) {
    if (!Array.isArray(added)) throw fail(`"added_tokens" must be an array`);
    added.forEach((a, i) => {
      if (!isObject(a) || typeof a.content !== "string" || !isId(a.id)) throw fail(`"added_tokens[${i}]" must have a string "content" and an integer "id", got ${JSON.stringify(a)}`);
    });
  }
}

/** Number of entries of the model's own vocabulary (HF's `vocab_size`, without added tokens). */
export function model_vocab_size(tok: JsonObject): number {
  const vocab = (tok.model as JsonObject).vocab;
  if (Array.isArray(vocab)) return vocab.length;
  // a loop, not Math.max(...ids): V8 (Node, Deno) overflows its stack spreading Qwen2's 151k ids
  let max = -1;
  for (const id of Object.values(vocab as Record<string, number>)) if (id > max) max = id;
  return max + 1;
}

/** A special token's text from tokenizer_config.json: a string, an AddedToken dict, or null. */
export function special_token_text(v: unknown): string | null {
  if (typeof v === "string") return v;
  if (isObject(v) && typeof v.content === "string") return v.content;
  return null;
}

/**
 * Builds the library tokenizer from a tokenizer.json that passed validate_tokenizer_json.
 * `config` is passed as the library's TokenizerConfig (it reads additional_special_tokens,
 * clean_up_tokenization_spaces, remove_space...).
 * @throws LoomFormatError wrapping the library's own error
 *   (an unknown normalizer/pre-tokenizer/decoder/post-processor type, a bad regex...)
 */
export function build_hf_tokenizer(tok: JsonObject, config: JsonObject, source: string): HFTokenizer {
  // the library requires every component key and iterates added_tokens; an absent one means none (as in Rust)
  const withAdded: JsonObject = { ...tok, added_tokens: tok.added_tokens ?? [] };
  for (const k of ["normalizer", "pre_tokenizer", "post_processor", "decoder"]) withAdded[k] ??= null;
  let hf: HFTokenizer;
  try {
    hf = new HFTokenizer(withAdded, config);
  } catch (e) {
    throw new LoomFormatError(`[tokenizer.json] ${source}: @huggingface/tokenizers cannot load it: ${(e as Error).message}`);
  }
  refuse_dropped_pieces(hf, source);
  return hf;
}

/** Fast tokenizer classes whose __init__ rebuilds the post-processor from add_bos_token / add_eos_token. */
const TEMPLATE_FROM_FLAGS = /^(Llama|CodeLlama|Gemma)Tokenizer(Fast)?$/;

/**
 * transformers' LlamaTokenizerFast.update_post_processor: for Llama/CodeLlama/Gemma tokenizer
 * classes, tokenizer_config.json's add_bos_token (default true) and add_eos_token (default false)
 * decide the specials, replacing tokenizer.json's post_processor with
 * TemplateProcessing("<bos>:0 $A:0 <eos>:0"). Other classes keep tokenizer.json's.
 * @returns `tok` itself, or a copy with the rebuilt post_processor
 * @throws LoomFormatError if a flag asks for a token that is not set
 */
export function apply_template_flags(tok: JsonObject, config: JsonObject, bos: string | null, eos: string | null, bos_id: number | undefined, eos_id: number | undefined, source: string): JsonObject {
  if (typeof config.tokenizer_class !== "string" || !TEMPLATE_FROM_FLAGS.test(config.tokenizer_class)) return tok;
  const add_bos = config.add_bos_token !== false;
  const add_eos = config.add_eos_token === true;
  if (add_bos && (bos === null || bos_id === undefined)) throw new LoomFormatError(`[tokenizer_config.json] beside ${source}: add_bos_token is true but bos_token is not set or not in the vocabulary`);
  if (add_eos && (eos === null || eos_id === undefined)) throw new LoomFormatError(`[tokenizer_config.json] beside ${source}: add_eos_token is true but eos_token is not set or not in the vocabulary`);
  const special = (t: string, type_id: number) => ({ SpecialToken: { id: t, type_id } });
  const seq = (id: "A" | "B", type_id: number) => [
    ...(add_bos ? [special(bos!, type_id)] : []),
    { Sequence: { id, type_id } },
    ...(add_eos ? [special(eos!, type_id)] : []),
  ];
  const special_tokens: Record<string, unknown> = {};
  if (add_bos) special_tokens[bos!] = { id: bos, ids: [bos_id], tokens: [bos] };
  if (add_eos) special_tokens[eos!] = { id: eos, ids: [eos_id], tokens: [eos] };
  return { ...tok, post_processor: { type: "TemplateProcessing", single: seq("A", 0), pair: [...seq("A", 0), ...seq("B", 1)], special_tokens } };
}

/** The id tokenizer.json gives `token` (added tokens first, then the model vocabulary), if any. */
export function json_token_id(tok: JsonObject, token: string | null): number | undefined {
  if (token === null) return undefined;
  const added = (tok.added_tokens ?? []) as { id: number; content: string }[];
  const a = added.find((t) => t.content === token);
  if (a) return a.id;
  const vocab = (tok.model as JsonObject).vocab;
  if (Array.isArray(vocab)) {
    const i = vocab.findIndex((e) => Array.isArray(e) && e[0] === token);
    return i >= 0 ? i : undefined;
  }
  const id = (vocab as Record<string, number>)[token];
  return Object.hasOwn(vocab as object, token) ? id : undefined;
}

/** What the library's BPE model exposes at run time (its .d.ts types only the base class). */
interface BPEInternals {
  config: { type?: string };
  tokens_to_ids: Map<string, number>;
  byte_fallback: boolean;
  ignore_merges: boolean;
  unk_token?: string | null;
  encode(tokens: string[]): string[];
  bpe(token: string): string[];
}

/**
 * The library's BPE drops a piece that is not in the vocabulary when there is no byte fallback
 * for it and no unk_token (tokenizers.js BPE.encode); Loom refuses the text instead. Installs a
 * check around the model's encode for BPE models without an unk_token, mirroring the library's
 * own decision (vocab hit, then byte fallback, then unk).
 * @throws LoomValueError at encode time, naming the piece
 */
export function refuse_dropped_pieces(hf: HFTokenizer, source: string): void {
  const model = hf.model as unknown as BPEInternals | null;
  if (model === null || model.config.type !== "BPE" || model.unk_token != null) return;
  const utf8 = new TextEncoder();
  const covered = (piece: string): boolean => {
    if (model.tokens_to_ids.has(piece)) return true;
    if (!model.byte_fallback) return false;
    return Array.from(utf8.encode(piece)).every((b) => model.tokens_to_ids.has(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`));
  };
  const encode = model.encode.bind(model);
  model.encode = (tokens: string[]) => {
    for (const t of tokens) {
      if (model.ignore_merges && model.tokens_to_ids.has(t)) continue;
      const bad = model.bpe(t).find((p) => !covered(p));
      if (bad !== undefined) throw new LoomValueError(`[PreTrainedTokenizer.encode] ${JSON.stringify(bad)} has no token in ${source} (no byte fallback for it and no unk_token); the library would drop it`);
    }
    return encode(tokens);
  };
}
