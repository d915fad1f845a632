/**
 * The fixture tokenizers of gen_tokenizer_fixtures.py, loaded with AutoTokenizer, against ids
 * derived by hand from their vocabularies and merge lists (derivations in the comments).
 *
 * byte_bpe (Llama-3 style): id of byte b is b (GPT-2 alphabet: " " = "Ġ", "\n" = "Ċ"); merges
 *   256 he, 257 ll, 258 hell, 259 hello, 260 Ġw, 261 or, 262 Ġwor, 263 ld, 264 Ġworld, 265 Ġt,
 *   266 Ġthe; added 267 <|begin_of_text|> (BOS), 268 <|end_of_text|> (EOS), 269 <|im_start|>,
 *   270 <|im_end|>, 271 <|pad|>.
 * llama2_spm / metaspace_bpe (Llama-2 style): 0 <unk>, 1 <s>, 2 </s>, byte b = <0xbb> = 3 + b,
 *   259 ▁ 260 t 261 h 262 e 263 l 264 o 265 w 266 r 267 d 268 a; merges 269 ▁t, 270 he, 271 ▁the,
 *   272 ll, 273 hell, 274 hello, 275 ▁hello, 276 or, 277 ▁w, 278 ▁wor, 279 ld, 280 ▁world.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { AutoTokenizer, tokenizers } from "../../src/index.ts";

const { PreTrainedTokenizer } = tokenizers;

const FIX = join(import.meta.dir, "fixtures");
const load = (name: string) => AutoTokenizer.from_pretrained(join(FIX, name));

describe("byte-level BPE (Llama-3 layout)", () => {
  const tok = load("byte_bpe");

  test("ids against hand-derived merges", () => {
    // Llama-3 regex splits "hello world" into "hello" | " world" -> "hello" | "Ġworld";
    // h e l l o: he(256) ll(257) -> hell(258) -> hello(259); Ġ w o r l d: Ġw(260) or(261) ->
    // Ġwor(262), ld(263) -> Ġworld(264); TemplateProcessing puts BOS 267 first
    expect(tok.encode("hello world")).toEqual([267, 259, 264]);
    expect(tok.encode("hello world", { add_special_tokens: false })).toEqual([259, 264]);
    // "the": t h e -> t he (no "t he" merge) = [116, 256]; " the": Ġ t h e -> he first, then Ġt(265), Ġthe(266)
    expect(tok.encode("the world", { add_special_tokens: false })).toEqual([116, 256, 264]);
    expect(tok.encode(" the", { add_special_tokens: false })).toEqual([266]);
    // " hello": Ġ hello, no merge joins them -> [32, 259]
    expect(tok.encode("the hello", { add_special_tokens: false })).toEqual([116, 256, 32, 259]);
    // é = C3 A9, 😀 = F0 9F 98 80: bytes are ids; "héllo" keeps ll(257)
    expect(tok.encode("héllo", { add_special_tokens: false })).toEqual([104, 195, 169, 257, 111]);
    expect(tok.encode("😀", { add_special_tokens: false })).toEqual([240, 159, 152, 128]);
    // an added token inside text is one id, never split into bytes
    expect(tok.encode("<|im_start|>user", { add_special_tokens: false })).toEqual([269, 117, 115, 101, 114]);
    expect(tok.tokenize("hello world")).toEqual(["hello", "Ġworld"]);
  });

  test("special tokens and sizes from tokenizer_config.json", () => {
    expect([tok.bos_token, tok.bos_token_id, tok.eos_token, tok.eos_token_id]).toEqual(["<|begin_of_text|>", 267, "<|end_of_text|>", 268]);
    expect([tok.pad_token, tok.pad_token_id, tok.unk_token]).toEqual([null, null, null]);
    expect(tok.vocab_size).toBe(267); // 256 bytes + 11 merges; added tokens excluded (HF vocab_size)
    expect(tok.length).toBe(272); // len(tokenizer): with the 5 added tokens
    expect(tok.model_max_length).toBe(16);
    expect(tok.convert_tokens_to_ids(["Ġworld", "<|im_end|>"])).toEqual([264, 270]);
    expect(tok.convert_tokens_to_ids("not-a-token")).toBeNull(); // no unk_token: HF gives None
    expect(tok.convert_ids_to_tokens([259, 264, 267])).toEqual(["hello", "Ġworld", "<|begin_of_text|>"]);
  });

  test("decode inverts encode (unicode, emoji, whitespace runs, newlines)", () => {
    for (const s of ["hello world", "héllo wörld ✓", "😀👍🏽 emoji", "a   b\t\tc", "x\n\n  y \n", "  leading and trailing  ", "日本語のテキスト"]) {
      const ids = tok.encode(s);
      expect(ids[0]).toBe(267);
      expect(tok.decode(ids, { skip_special_tokens: true })).toBe(s);
      expect(tok.decode(ids)).toBe("<|begin_of_text|>" + s);
    }
    expect(tok.decode([])).toBe("");
    expect(tok.batch_decode([[259, 264], [267, 266]], { skip_special_tokens: true })).toEqual(["hello world", " the"]);
  });

  test("chat template (ChatML with bos_token) rendered by @huggingface/jinja", () => {
    const msgs = [{ role: "user", content: "hello" }, { role: "assistant", content: "world" }];
    expect(tok.apply_chat_template(msgs, { tokenize: false })).toBe("<|begin_of_text|><|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\nworld<|im_end|>\n");
    // tokenize: specials come from the text (no second BOS); "\n" = Ċ = byte 10;
    // "assistant" has no merges, so its bytes a s s i s t a n t
    expect(tok.apply_chat_template([msgs[0]!], { add_generation_prompt: true })).toEqual([
      267, 269, 117, 115, 101, 114, 10, 259, 270, 10, 269, 97, 115, 115, 105, 115, 116, 97, 110, 116, 10,
    ]);
    // a literal template passed by the caller
    expect(tok.apply_chat_template(msgs, { tokenize: false, chat_template: "{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}" })).toBe("user:hello;assistant:world;");
  });
});

describe("SentencePiece BPE (Llama-2 layout: Prepend/Replace normalizer, byte fallback)", () => {
  const tok = load("llama2_spm");

  test("ids against hand-derived merges", () => {
    // normalizer: "▁hello▁world", one word; merges in order: he, ll, hell, hello, ▁hello(275),
    // or, ▁w, ▁wor, ld, ▁world(280); BOS <s> = 1 (as Llama-2's [1, 15043, 3186] for "Hello world")
    expect(tok.encode("hello world")).toEqual([1, 275, 280]);
    // "▁the▁world": ▁t(269) first, he, ▁the(271)
    expect(tok.encode("the world")).toEqual([1, 271, 280]);
    // " the" -> "▁▁the": ▁t merges the second ▁ (leftmost lowest pair is (▁, t)), so [▁, ▁the]
    expect(tok.encode(" the")).toEqual([1, 259, 271]);
    // byte fallback: é = C3 A9 -> <0xC3> = 3 + 195 = 198, <0xA9> = 3 + 169 = 172; ll = 272, o = 264
    expect(tok.encode("héllo")).toEqual([1, 259, 261, 198, 172, 272, 264]);
    // 😀 = F0 9F 98 80 -> 243 162 155 131; never <unk>
    expect(tok.encode("😀")).toEqual([1, 259, 243, 162, 155, 131]);
  });

  test("special tokens: AddedToken dicts, special_tokens_map.json overrides tokenizer_config.json", () => {
    // bos_token is an {"__type": "AddedToken", "content": "<s>"} dict; pad_token is null in
    // tokenizer_config.json and "<unk>" in special_tokens_map.json, which wins (transformers)
    expect([tok.bos_token_id, tok.eos_token_id, tok.unk_token_id, tok.pad_token, tok.pad_token_id]).toEqual([1, 2, 0, "<unk>", 0]);
    expect(tok.vocab_size).toBe(281);
    expect(tok.convert_tokens_to_ids("zzz")).toBe(0); // unknown token -> unk_token_id, as HF
    expect(tok.all_special_ids).toEqual([0, 1, 2]);
  });

  test("decode: byte fallback joins bytes; Strip removes the prefix space; legacy <s> text", () => {
    for (const s of ["hello world", "héllo wörld", "😀👍🏽", "a   b  c", "x\n\ny"]) expect(tok.decode(tok.encode(s), { skip_special_tokens: true })).toBe(s);
    expect(tok.decode([1, 275, 280])).toBe("<s> hello world"); // as Llama-2 decodes [1, 15043, 3186] to "<s> Hello world"
  });

  test("Llama-2 chat template", () => {
    const text = tok.apply_chat_template([{ role: "user", content: "hi" }, { role: "assistant", content: "hello" }], { tokenize: false });
    expect(text).toBe("<s>[INST] hi [/INST] hello </s>");
  });
});

describe("SentencePiece BPE (Metaspace pre-tokenizer, prepend_scheme first, add_eos_token)", () => {
  const tok = load("metaspace_bpe");

  test("same ids as the legacy layout; LlamaTokenizerFast's add_eos_token appends </s>", () => {
    expect(tok.encode("hello world")).toEqual([1, 275, 280, 2]);
    expect(tok.encode("héllo", { add_special_tokens: false })).toEqual([259, 261, 198, 172, 272, 264]);
    // Metaspace does not prepend ▁ to text that starts with one (Rust: starts_with(replacement)):
    // " the" -> "▁the" = [271], where the legacy normalizer gave [259, 271]
    expect(tok.encode(" the", { add_special_tokens: false })).toEqual([271]);
    // prepend_scheme "first": a section after an added token gets no ▁ ("<s>hello" -> <s>, h e l l o -> hello 274)
    expect(tok.encode("<s>hello", { add_special_tokens: false })).toEqual([1, 274]);
    expect(tok.decode(tok.encode("a   b 😀"), { skip_special_tokens: true })).toBe("a   b 😀");
  });

  test("save_pretrained writes the rebuilt template, and it loads back the same", async () => {
    const { mkdtempSync, readFileSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const dir = mkdtempSync(join(tmpdir(), "loom-tok-"));
    const written = tok.save_pretrained(dir).map((p) => p.slice(dir.length + 1)).sort();
    expect(written).toEqual(["special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"]);
    const back = AutoTokenizer.from_pretrained(dir);
    for (const s of ["hello world", "héllo 😀", " the"]) expect(back.encode(s)).toEqual(tok.encode(s));
    expect(back.pad_token).toBe("<unk>");
    const pp = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")).post_processor;
    expect(pp.single.map((x: Record<string, { id: string }>) => Object.values(x)[0]!.id)).toEqual(["<s>", "A", "</s>"]);
  });
});

describe("other model types, built from parsed JSON (no files: the browser path)", () => {
  test("Unigram (T5/ALBERT style): Viterbi picks the best-scoring split", () => {
    // pieces and log-probabilities: "▁ab" (-1.5) beats "▁a" + "b" (-1 + -2 = -3) and "▁" + "a" + "b"
    const tok = new PreTrainedTokenizer({
      tokenizer: {
        model: { type: "Unigram", unk_id: 0, vocab: [["<unk>", 0], ["▁a", -1], ["b", -2], ["▁ab", -1.5], ["▁", -3], ["a", -3]] },
        pre_tokenizer: { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true },
        decoder: { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true },
        added_tokens: [{ id: 0, content: "<unk>", special: true }],
      },
      config: { unk_token: "<unk>" },
    });
    expect(tok.encode("ab")).toEqual([3]);
    expect(tok.encode("ab a")).toEqual([3, 1]);
    expect(tok.encode("ac")).toEqual([1, 0]); // "c" is unknown -> <unk> (Unigram always has one)
    expect(tok.decode([3, 1])).toBe("ab a");
  });

  test("WordPiece (BERT style) with [CLS]/[SEP] from BertProcessing", () => {
    const vocab = { "[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, hello: 4, world: 5, "##s": 6 };
    const tok = new PreTrainedTokenizer({
      tokenizer: {
        model: { type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##", max_input_chars_per_word: 100, vocab },
        normalizer: { type: "BertNormalizer", lowercase: true, clean_text: true, handle_chinese_chars: true, strip_accents: null },
        pre_tokenizer: { type: "BertPreTokenizer" },
        post_processor: { type: "BertProcessing", sep: ["[SEP]", 3], cls: ["[CLS]", 2] },
        decoder: { type: "WordPiece", prefix: "##", cleanup: true },
        added_tokens: ["[PAD]", "[UNK]", "[CLS]", "[SEP]"].map((content, id) => ({ id, content, special: true })),
      },
      config: { pad_token: "[PAD]", unk_token: "[UNK]", cls_token: "[CLS]", sep_token: "[SEP]" },
    });
    // lowercased; "worlds" = world + ##s; "x" unknown -> [UNK]
    expect(tok.encode("Hello worlds x")).toEqual([2, 4, 5, 6, 1, 3]);
    expect(tok.call(["hello", "hello world"], { padding: true }).input_ids).toEqual([[2, 4, 3, 0], [2, 4, 5, 3]]);
    expect(tok.decode([2, 4, 5, 6, 3], { skip_special_tokens: true })).toBe("hello worlds");
  });
});
