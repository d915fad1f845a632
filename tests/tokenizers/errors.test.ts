/**
 * Bad tokenizer directories and files: each gets a typed error naming the file, never a
 * fallback tokenizer (the library itself would fall back to a character-level "Legacy" model
 * for an unknown model type). Also: the Hugging Face cache layout loads.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AutoTokenizer, LoomFormatError, LoomIndexError, LoomValueError, tokenizers } from "../../src/index.ts";
import { thrown } from "../thrown.ts";

const FIX = join(import.meta.dir, "fixtures");
const ROOT = mkdtempSync(join(tmpdir(), "loom-tok-err-"));
afterAll(() => rmSync(ROOT, { recursive: true, force: true }));
let n = 0;

/** A copy of fixture `name` with tokenizer.json (and optionally tokenizer_config.json) edited. */
function variant(name: string, edit: (tok: any) => unknown, editConfig?: (c: any) => unknown): string {
  const dir = join(ROOT, `v${n++}`);
  cpSync(join(FIX, name), dir, { recursive: true });
  const tok = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8"));
  const out = edit(tok) ?? tok;
  writeFileSync(join(dir, "tokenizer.json"), typeof out === "string" ? out : JSON.stringify(out));
  if (editConfig) {
    const c = JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8"));
    writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify(editConfig(c) ?? c));
  }
  return dir;
}

function expectError(dir: string, type: new (...a: any[]) => Error, ...parts: string[]): void {
  const e = thrown(() => AutoTokenizer.from_pretrained(dir));
  expect(e).toBeInstanceOf(type);
  for (const p of parts) expect(e.message).toContain(p);
}

describe("files that cannot be loaded", () => {
  test("a directory without tokenizer.json, a missing directory, a file", () => {
    const empty = join(ROOT, "empty");
    mkdirSync(empty);
    writeFileSync(join(empty, "vocab.json"), "{}");
    expectError(empty, LoomValueError, "no tokenizer.json in", empty);
    expectError(join(ROOT, "nope"), LoomValueError, "does not exist");
    expectError(join(empty, "vocab.json"), LoomValueError, "is not a directory");
  });

  test("malformed JSON, a non-object, a repeated key", () => {
    const bad = variant("byte_bpe", () => '{"model": {"type": "BPE",');
    expectError(bad, LoomFormatError, join(bad, "tokenizer.json"), "is not valid JSON");
    expectError(variant("byte_bpe", () => "[1, 2]"), LoomFormatError, "must hold a JSON object, got an array");
    expectError(variant("byte_bpe", () => '{"model": {"type": "BPE", "type": "Unigram"}}'), LoomFormatError, `key "type" occurs twice`);
  });

  test("unknown or missing model type: an error, not the library's character-level fallback", () => {
    const dir = variant("byte_bpe", (t) => void (t.model.type = "WordLevel"));
    expectError(dir, LoomFormatError, join(dir, "tokenizer.json"), `unknown model type "WordLevel"`);
    expectError(variant("byte_bpe", (t) => void delete t.model.type), LoomFormatError, `"model.type" is missing`);
    expectError(variant("byte_bpe", (t) => void delete t.model), LoomFormatError, `"model" must be an object`);
  });

  test("malformed vocab, merges and added tokens", () => {
    expectError(variant("byte_bpe", (t) => void (t.model.vocab.he = -1)), LoomFormatError, `maps "he" to -1`);
    expectError(variant("byte_bpe", (t) => void delete t.model.merges), LoomFormatError, `BPE "model.merges" must be an array`);
    expectError(variant("byte_bpe", (t) => void (t.model.merges[3] = "a b")), LoomFormatError, `"model.merges[3]" must be a pair`);
    expectError(variant("llama2_spm", (t) => void (t.added_tokens[1] = { content: "<s>" })), LoomFormatError, `"added_tokens[1]"`);
  });

  test("a component the library does not know is wrapped with the file name", () => {
    const dir = variant("byte_bpe", (t) => void (t.pre_tokenizer = { type: "Frobnicate" }));
    expectError(dir, LoomFormatError, join(dir, "tokenizer.json"), "@huggingface/tokenizers cannot load it", "Frobnicate");
  });

  test("a special token outside the vocabulary", () => {
    expectError(variant("byte_bpe", () => undefined, (c) => void (c.eos_token = "<|eot|>")), LoomFormatError, `special token "<|eot|>"`, "not in the vocabulary");
    // add_bos_token with no bos_token (LlamaTokenizerFast raises too)
    const nobos = variant("llama2_spm", () => undefined, (c) => void (c.bos_token = null));
    rmSync(join(nobos, "special_tokens_map.json")); // it names bos_token too, and would win
    expectError(nobos, LoomFormatError, "add_bos_token is true but bos_token is not set");
  });
});

describe("bad ids and text", () => {
  const tok = AutoTokenizer.from_pretrained(join(FIX, "llama2_spm"));

  test("decode of an id outside the vocabulary", () => {
    for (const id of [281, -1, 1.5]) {
      const e = thrown(() => tok.decode([1, id]));
      expect(e).toBeInstanceOf(LoomIndexError);
      expect(e.message).toContain(`token id ${id} is not in the vocabulary`);
    }
    expect(thrown(() => tok.convert_ids_to_tokens(999))).toBeInstanceOf(LoomIndexError);
  });

  test("a character with no token, no byte fallback and no unk_token is an error, not a dropped character", () => {
    const dir = variant("llama2_spm", (t) => {
      t.model.byte_fallback = false;
      t.model.unk_token = null;
    }, (c) => void (c.unk_token = null));
    const strict = tokenizers.AutoTokenizer.from_pretrained(dir);
    expect(strict.encode("hello")).toEqual([1, 275]);
    const e = thrown(() => strict.encode("héllo"));
    expect(e).toBeInstanceOf(LoomValueError);
    expect(e.message).toContain(`"é" has no token in ${join(dir, "tokenizer.json")}`);
  });

  test("no chat template", () => {
    const dir = variant("byte_bpe", () => undefined, (c) => void delete c.chat_template);
    const e = thrown(() => AutoTokenizer.from_pretrained(dir).apply_chat_template([{ role: "user", content: "x" }]));
    expect(e).toBeInstanceOf(LoomValueError);
    expect(e.message).toContain("has no chat_template");
    const raising = "{{ raise_exception('roles must alternate') }}";
    expect(thrown(() => tok.apply_chat_template([], { chat_template: raising })).message).toContain("roles must alternate");
  });
});

test("the Hugging Face cache layout (snapshot links into blobs/) loads", () => {
  const repo = join(ROOT, "models--org--tiny");
  const snap = join(repo, "snapshots", "abc123");
  mkdirSync(join(repo, "blobs"), { recursive: true });
  mkdirSync(snap, { recursive: true });
  for (const [i, f] of ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"].entries()) {
    cpSync(join(FIX, "llama2_spm", f), join(repo, "blobs", `sha${i}`));
    symlinkSync(join("..", "..", "blobs", `sha${i}`), join(snap, f));
  }
  const tok = AutoTokenizer.from_pretrained(snap);
  expect(tok.encode("hello world")).toEqual([1, 275, 280]);
  expect(tok.pad_token).toBe("<unk>");
});
