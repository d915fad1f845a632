/**
 * tokenizer.call(texts, ...): truncation, padding sides, attention masks and int64 tensors,
 * with transformers' rules (specials kept when truncating, "max_length" padding does not cut,
 * model_max_length as the default limit). Ids are the hand-derived ones of fixtures.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { AutoTokenizer, LoomValueError, Tensor } from "../../src/index.ts";
import { thrown } from "../thrown.ts";

const FIX = join(import.meta.dir, "fixtures");

describe("call: padding and truncation", () => {
  // llama2_spm: "hello world" -> [1, 275, 280], "the" -> [1, 271], pad_token "<unk>" = 0
  const tok = AutoTokenizer.from_pretrained(join(FIX, "llama2_spm"));

  test("one string gives flat lists", () => {
    expect(tok.call("hello world")).toEqual({ input_ids: [1, 275, 280], attention_mask: [1, 1, 1] });
  });

  test("padding longest, right and left", () => {
    const right = tok.call(["hello world", "the"], { padding: true });
    expect(right).toEqual({ input_ids: [[1, 275, 280], [1, 271, 0]], attention_mask: [[1, 1, 1], [1, 1, 0]] });
    const left = tok.call(["hello world", "the"], { padding: "longest", padding_side: "left" });
    expect(left).toEqual({ input_ids: [[1, 275, 280], [0, 1, 271]], attention_mask: [[1, 1, 1], [0, 1, 1]] });
  });

  test("max_length padding, pad_to_multiple_of, no padding", () => {
    expect(tok.call(["the"], { padding: "max_length", max_length: 5 }).input_ids).toEqual([[1, 271, 0, 0, 0]]);
    expect(tok.call(["the", "hello world"], { padding: true, pad_to_multiple_of: 4 }).attention_mask).toEqual([[1, 1, 0, 0], [1, 1, 1, 0]]);
    expect(tok.call(["the", "hello world"]).input_ids).toEqual([[1, 271], [1, 275, 280]]);
    // "max_length" padding does not cut a longer sequence (HF pads, truncation cuts)
    expect(tok.call(["hello world"], { padding: "max_length", max_length: 2 }).input_ids).toEqual([[1, 275, 280]]);
  });

  test("truncation keeps the special tokens and cuts the text", () => {
    // "hello world the" -> [1, 275, 280, 271]; max_length 3 leaves BOS + 2 text ids
    expect(tok.encode("hello world the")).toEqual([1, 275, 280, 271]);
    expect(tok.call("hello world the", { truncation: true, max_length: 3 }).input_ids).toEqual([1, 275, 280]);
    expect(tok.call("hello world the", { truncation: true, max_length: 3, truncation_side: "left" }).input_ids).toEqual([1, 280, 271]);
    expect(tok.encode("hello world the", { truncation: true, max_length: 2, add_special_tokens: false })).toEqual([275, 280]);
    // no max_length: model_max_length (32 in tokenizer_config.json)
    const long = "the ".repeat(40).trim();
    expect(tok.call(long, { truncation: true }).input_ids.length).toBe(32);
    expect(tok.call(long).input_ids.length).toBe(41);
  });

  test("return_tensors loom: int64 [B, T]", () => {
    const { input_ids, attention_mask } = tok.call(["hello world", "the"], { padding: true, padding_side: "left", return_tensors: "loom" });
    expect(input_ids).toBeInstanceOf(Tensor);
    expect([input_ids.dtype, attention_mask.dtype]).toEqual(["int64", "int64"]);
    expect(input_ids.shape).toEqual([2, 3]);
    expect(input_ids.tolist()).toEqual([[1, 275, 280], [0, 1, 271]]);
    expect(attention_mask.tolist()).toEqual([[1, 1, 1], [0, 1, 1]]);
    expect(tok.call("the", { return_tensors: "loom" }).input_ids.shape).toEqual([1, 2]);
    expect(tok.batch_decode(input_ids, { skip_special_tokens: true })).toEqual(["hello world", "the"]);
    expect(tok.decode(tok.call("the", { return_tensors: "loom" }).input_ids.reshape([2]))).toBe("<s> the");
  });

  test("errors: ragged tensors, unknown strategies, bad max_length", () => {
    const e = thrown(() => tok.call(["hello world", "the"], { return_tensors: "loom" }));
    expect(e).toBeInstanceOf(LoomValueError);
    expect(e.message).toContain("lengths 3, 2");
    expect(thrown(() => tok.call(["a"], { padding: "sideways" as never }))).toBeInstanceOf(LoomValueError);
    expect(thrown(() => tok.call(["a"], { truncation: true, max_length: 0 })).message).toContain("max_length must be a positive integer");
    expect(thrown(() => tok.decode(tok.call(["a", "b"], { padding: true, return_tensors: "loom" }).input_ids)).message).toContain("1-D integer tensor");
  });
});

describe("padding without a pad token", () => {
  test("is an error until pad_token is set (HF: tokenizer.pad_token = tokenizer.eos_token)", () => {
    const tok = AutoTokenizer.from_pretrained(join(FIX, "byte_bpe")); // no pad_token
    const e = thrown(() => tok.call(["hello world", " the"], { padding: true }));
    expect(e).toBeInstanceOf(LoomValueError);
    expect(e.message).toContain("no pad_token");
    // equal lengths need no padding
    expect(tok.call(["hello world", "hello world"], { padding: true }).input_ids).toEqual([[267, 259, 264], [267, 259, 264]]);
    tok.pad_token = tok.eos_token;
    expect(tok.pad_token_id).toBe(268);
    expect(tok.call(["hello world", " the"], { padding: true }).input_ids).toEqual([[267, 259, 264], [267, 266, 268]]);
    expect(thrown(() => (tok.pad_token = "<nope>"))).toBeInstanceOf(LoomValueError);
    // the from_pretrained kwarg does the same
    const tok2 = AutoTokenizer.from_pretrained(join(FIX, "byte_bpe"), { pad_token: "<|pad|>", padding_side: "left" });
    expect(tok2.call(["hello world", " the"], { padding: true }).input_ids).toEqual([[267, 259, 264], [271, 267, 266]]);
  });
});
