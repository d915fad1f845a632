/**
 * The file system side of tokenizers: the only module of src/tokenizers that touches node:fs, so
 * the tokenizer class itself runs anywhere (browser, Deno, Bun) on already-parsed JSON.
 *
 * A Hugging Face tokenizer directory holds `tokenizer.json` (the tokenizers library's own
 * serialization: normalizer, pre-tokenizer, model, post-processor, decoder, added tokens) and
 * optionally `tokenizer_config.json` (transformers' settings: special tokens, chat_template,
 * model_max_length, padding_side...), `special_tokens_map.json` and `chat_template.jinja`.
 * Files are read through io's readCheckpointFile, so the Hugging Face cache layout
 * (`models--*\/snapshots/<rev>/` links into `blobs/`) loads and links escaping it are refused.
 * Source: transformers tokenization_utils_base.py (TOKENIZER_CONFIG_FILE, SPECIAL_TOKENS_MAP_FILE,
 * FULL_TOKENIZER_FILE, CHAT_TEMPLATE_FILE).
 */
import { mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { findDuplicateKey, formatJsonPath, readCheckpointFile } from "../io/index.ts";
import { LoomFormatError, LoomValueError } from "../tensor/errors.ts";

export const TOKENIZER_FILE = "tokenizer.json";
export const TOKENIZER_CONFIG_FILE = "tokenizer_config.json";
export const SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json";
export const CHAT_TEMPLATE_FILE = "chat_template.jinja";

/** A JSON object as parsed from a file. */
export type JsonObject = Record<string, unknown>;

/** The parsed files of one tokenizer directory; `source` names where each came from, for messages. */
export interface TokenizerFiles {
  /** tokenizer.json */
  tokenizer: JsonObject;
  /** tokenizer_config.json, or {} when absent */
  config: JsonObject;
  /** special_tokens_map.json, or {} when absent */
  special_tokens_map: JsonObject;
  /** chat_template.jinja (newer transformers save the template there), or null */
  chat_template: string | null;
  /** The path of tokenizer.json (named in every later error about its content). */
  source: string;
}

/**
 * Parses `bytes` as one JSON object.
 * @param path - named in errors
 * @throws LoomFormatError for invalid UTF-8, invalid JSON, a repeated key or a non-object root
 */
export function parseJsonObject(bytes: Uint8Array, path: string, tag: string): JsonObject {
  let text: string;
  let d: unknown;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    d = JSON.parse(text);
  } catch (e) {
    throw new LoomFormatError(`${tag} ${path} is not valid JSON: ${(e as Error).message}`);
  }
  if (typeof d !== "object" || d === null || Array.isArray(d)) throw new LoomFormatError(`${tag} ${path} must hold a JSON object, got ${Array.isArray(d) ? "an array" : typeof d}`);
  const dup = findDuplicateKey(text);
  if (dup) throw new LoomFormatError(`${tag} ${path}: key ${JSON.stringify(dup.key)} occurs twice in ${formatJsonPath(dup.path)}`);
  return d as JsonObject;
}

/**
 * Reads a tokenizer directory (the one function here that reads files).
 * @throws LoomValueError if `dir` is not a directory or holds no tokenizer.json (Loom never falls
 *   back to another tokenizer); LoomFormatError if a file is not valid JSON, not an object, a
 *   directory/FIFO, or a link escaping the directory
 */
export function read_tokenizer_dir(dir: string, tag = "[AutoTokenizer.from_pretrained]"): TokenizerFiles {
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    throw new LoomValueError(`${tag} ${dir} does not exist`);
  }
  if (!isDir) throw new LoomValueError(`${tag} ${dir} is not a directory`);
  const source = join(dir, TOKENIZER_FILE);
  const tok = readCheckpointFile(dir, TOKENIZER_FILE, tag);
  if (tok === null) {
    throw new LoomValueError(
      `${tag} no ${TOKENIZER_FILE} in ${dir}: Loom loads fast (tokenizers-library) tokenizers only; ` +
        "convert a slow one (vocab.json + merges.txt, tokenizer.model) with transformers' save_pretrained first",
    );
  }
  const optional = (name: string): JsonObject => {
    const b = readCheckpointFile(dir, name, tag);
    return b === null ? {} : parseJsonObject(b, join(dir, name), tag);
  };
  const jinja = readCheckpointFile(dir, CHAT_TEMPLATE_FILE, tag);
  return {
    tokenizer: parseJsonObject(tok, source, tag),
    config: optional(TOKENIZER_CONFIG_FILE),
    special_tokens_map: optional(SPECIAL_TOKENS_MAP_FILE),
    chat_template: jinja === null ? null : new TextDecoder().decode(jinja),
    source,
  };
}

/**
 * Writes `files` (name -> text) into `dir`, creating it.
 * @returns the paths written
 */
export function write_tokenizer_dir(dir: string, files: Readonly<Record<string, string>>): string[] {
  mkdirSync(dir, { recursive: true });
  return Object.entries(files).map(([name, text]) => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  });
}
