/**
 * save_pretrained / from_pretrained: HF file layout (config.json, model.safetensors with
 * "transformer." keys and {"format": "pt"} metadata, no tied lm_head), sharded checkpoints,
 * untied heads, and the errors for checkpoints that do not fit.
 */
import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, realpathSync, rmSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { load_file, read_header_file, save_file } from "../../src/io/index.ts";
import { tensor_to_io } from "../../src/lora/tensor_io.ts";
import { CharTokenizer } from "../../src/models/char_tokenizer.ts";
import { GPT2Config } from "../../src/models/gpt2_config.ts";
import { GPT2LMHeadModel } from "../../src/models/gpt2.ts";
import { manual_seed } from "../../src/tensor/rng.ts";
import { LoomFormatError, LoomValueError } from "../../src/tensor/errors.ts";
import { hubCache, probeScript, runIsolated, srcPath } from "../io/helpers.ts";
import { REF, TINY, expectBitwise, expectClose, ids, tmp } from "./helpers.ts";
import { thrown } from "../thrown.ts";

describe("save_pretrained / from_pretrained", () => {
  test("single file: HF keys, no lm_head.weight (tied), format pt, identical logits after reload", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    const dir = tmp("gpt2-save");
    model.save_pretrained(dir);
    expect(readdirSync(dir).sort()).toEqual(["config.json", "model.safetensors"]);
    const header = read_header_file(join(dir, "model.safetensors"));
    expect(header.metadata).toEqual({ format: "pt" });
    const keys = [...header.tensors.keys()].sort();
    expect(keys).toEqual(Object.keys(REF.grads).sort()); // exactly HF's keys, lm_head left out
    expect(keys).toContain("transformer.h.0.attn.c_attn.weight");
    expect(header.tensors.get("transformer.h.0.attn.c_attn.weight")!.shape).toEqual([12, 36]);
    // values are the fixture's, bit for bit
    const orig = load_file(join(TINY, "model.safetensors")).tensors;
    const saved = load_file(join(dir, "model.safetensors")).tensors;
    for (const [k, t] of orig) expect(Array.from(saved.get(k)!.data)).toEqual(Array.from(t.data));
    const cfg = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
    expect(cfg).toEqual(REF.config);
    const back = GPT2LMHeadModel.from_pretrained(dir);
    expect(back.lm_head.weight).toBe(back.transformer.wte.weight);
    expectBitwise(back.call(ids()).logits, model.call(ids()).logits);
    rmSync(dir, { recursive: true });
  });

  test("sharded: index + shards with weight_map; reload gives identical logits; a later unsharded save removes the shards", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    const dir = tmp("gpt2-shard");
    model.save_pretrained(dir, { max_shard_size: 4000 });
    const files = readdirSync(dir).sort();
    expect(files).toContain("model.safetensors.index.json");
    const shards = files.filter((f) => /^model-\d{5}-of-\d{5}\.safetensors$/.test(f));
    expect(shards.length).toBeGreaterThan(2);
    const index = JSON.parse(readFileSync(join(dir, "model.safetensors.index.json"), "utf8"));
    expect(Object.keys(index.weight_map).sort()).toEqual(Object.keys(REF.grads).sort());
    expect(new Set(Object.values(index.weight_map))).toEqual(new Set(shards));
    const back = GPT2LMHeadModel.from_pretrained(dir);
    expectBitwise(back.call(ids()).logits, model.call(ids()).logits);
    model.save_pretrained(dir);
    expect(readdirSync(dir).sort()).toEqual(["config.json", "model.safetensors"]);
    rmSync(dir, { recursive: true });
  });

  test("untied lm_head is saved and loaded as its own tensor", () => {
    manual_seed(3);
    const cfg = new GPT2Config({ vocab_size: 11, n_positions: 8, n_embd: 8, n_layer: 1, n_head: 2, tie_word_embeddings: false });
    const model = new GPT2LMHeadModel(cfg);
    expect(model.lm_head.weight).not.toBe(model.transformer.wte.weight);
    const dir = tmp("gpt2-untied");
    model.save_pretrained(dir);
    expect(read_header_file(join(dir, "model.safetensors")).tensors.has("lm_head.weight")).toBe(true);
    const back = GPT2LMHeadModel.from_pretrained(dir);
    const x = ids().clamp(0, 10);
    expectBitwise(back.call(x).logits, model.eval().call(x).logits);
    rmSync(dir, { recursive: true });
  });

  test("errors: missing and unexpected keys (strict), shape mismatch, no weights file", () => {
    const dir = tmp("gpt2-bad");
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    model.config.save_pretrained(dir);
    const sd = Object.fromEntries(Object.entries(model.state_dict()).filter(([k]) => k !== "lm_head.weight").map(([k, t]) => [k, tensor_to_io(t)]));
    expect(() => GPT2LMHeadModel.from_pretrained(dir)).toThrow(/neither model.safetensors/);

    const { ["transformer.ln_f.bias"]: _gone, ...missing } = sd;
    save_file(missing, join(dir, "model.safetensors"));
    expect(() => GPT2LMHeadModel.from_pretrained(dir)).toThrow(/missing keys: transformer.ln_f.bias/);
    const loose = GPT2LMHeadModel.from_pretrained(dir, { strict: false }); // HF would warn and keep the init
    expect(loose).toBeInstanceOf(GPT2LMHeadModel);

    save_file({ ...sd, "transformer.h.0.attn.extra": sd["transformer.ln_f.bias"]! }, join(dir, "model.safetensors"));
    expect(() => GPT2LMHeadModel.from_pretrained(dir)).toThrow(/unexpected keys: transformer.h.0.attn.extra/);

    save_file({ ...sd, "transformer.ln_f.bias": sd["transformer.wpe.weight"]! }, join(dir, "model.safetensors"));
    expect(() => GPT2LMHeadModel.from_pretrained(dir)).toThrow(/size mismatch for transformer.ln_f.bias/);
    expect(() => GPT2LMHeadModel.from_pretrained(join(dir, "nope"))).toThrow(LoomValueError);
    rmSync(dir, { recursive: true });
  });
});



describe("untrusted checkpoint directories", () => {
  test("the Hugging Face cache layout loads: single file and sharded, logits match PyTorch", () => {
    const single = hubCache((d) => ["config.json", "model.safetensors"].forEach((f) => copyFileSync(join(TINY, f), join(d, f))));
    expect(readdirSync(single.snapshot).sort()).toEqual(["config.json", "model.safetensors"]);
    expectClose(GPT2LMHeadModel.from_pretrained(single.snapshot).call(ids()).logits, REF.logits);

    const sharded = hubCache((d) => GPT2LMHeadModel.from_pretrained(TINY).save_pretrained(d, { max_shard_size: 4000 }));
    expect(readdirSync(sharded.snapshot).filter((f) => /^model-\d{5}-of-\d{5}\.safetensors$/.test(f)).length).toBeGreaterThan(1);
    expectClose(GPT2LMHeadModel.from_pretrained(sharded.snapshot).call(ids()).logits, REF.logits);
  });

  test("links escaping the models--* cache folder are refused: model.safetensors, a shard, config.json", () => {
    const outside = realpathSync(tmp("outside"));
    for (const f of ["config.json", "model.safetensors"]) copyFileSync(join(TINY, f), join(outside, f));
    const relink = (snapshot: string, name: string) => {
      rmSync(join(snapshot, name));
      symlinkSync(join(outside, name), join(snapshot, name));
    };
    const fill = (d: string) => ["config.json", "model.safetensors"].forEach((f) => copyFileSync(join(TINY, f), join(d, f)));

    const a = hubCache(fill);
    relink(a.snapshot, "model.safetensors");
    let e = thrown(() => GPT2LMHeadModel.from_pretrained(a.snapshot));
    expect(e).toBeInstanceOf(LoomFormatError);
    expect(e.message).toBe(`[safetensors] ${join(a.snapshot, "model.safetensors")}: file: resolves to ${join(outside, "model.safetensors")}, outside the Hugging Face cache folder ${a.repo}`);

    const b = hubCache(fill);
    relink(b.snapshot, "config.json");
    e = thrown(() => GPT2LMHeadModel.from_pretrained(b.snapshot));
    expect(e).toBeInstanceOf(LoomFormatError);
    expect(e.message).toBe(`[GPT2Config.from_pretrained] ${join(b.snapshot, "config.json")}: resolves to ${join(outside, "config.json")}, outside the Hugging Face cache folder ${b.repo}`);

    const c = hubCache((d) => GPT2LMHeadModel.from_pretrained(TINY).save_pretrained(d, { max_shard_size: 4000 }));
    const shard = readdirSync(c.snapshot).find((f) => f.startsWith("model-00001-of-"))!;
    rmSync(join(c.snapshot, shard));
    symlinkSync(join(outside, "model.safetensors"), join(c.snapshot, shard));
    e = thrown(() => GPT2LMHeadModel.from_pretrained(c.snapshot));
    expect(e).toBeInstanceOf(LoomFormatError);
    expect(e.message).toBe(`[safetensors] ${join(c.snapshot, "model.safetensors.index.json")}: shard "${shard}": resolves to ${join(outside, "model.safetensors")}, outside the Hugging Face cache folder ${c.repo}`);

    // a link to a blob that is not there (an unfinished download) is named as such
    const d = hubCache((dd) => copyFileSync(join(TINY, "config.json"), join(dd, "config.json")));
    symlinkSync(join("..", "..", "blobs", "f".repeat(64)), join(d.snapshot, "model.safetensors"));
    e = thrown(() => GPT2LMHeadModel.from_pretrained(d.snapshot));
    expect(e).toBeInstanceOf(LoomFormatError);
    expect(e.message).toBe(`[safetensors] ${join(d.snapshot, "model.safetensors")}: file: is a symbolic link whose target does not exist (an incomplete download?)`);

    // an ordinary directory: a config.json link leaving it is refused as well
    const plain = realpathSync(tmp("plain"));
    copyFileSync(join(TINY, "model.safetensors"), join(plain, "model.safetensors"));
    symlinkSync(join(outside, "config.json"), join(plain, "config.json"));
    e = thrown(() => GPT2LMHeadModel.from_pretrained(plain));
    expect(e).toBeInstanceOf(LoomFormatError);
    expect(e.message).toBe(`[GPT2Config.from_pretrained] ${join(plain, "config.json")}: resolves to ${join(outside, "config.json")}, outside the checkpoint directory ${plain}`);
  });

  test("a directory or a FIFO named model.safetensors or config.json is refused with its path", () => {
    const dirW = tmp("dir-weights");
    copyFileSync(join(TINY, "config.json"), join(dirW, "config.json"));
    mkdirSync(join(dirW, "model.safetensors"));
    let e = thrown(() => GPT2LMHeadModel.from_pretrained(dirW));
    expect(e).toBeInstanceOf(LoomFormatError);
    expect(e.message).toBe(`[safetensors] ${join(dirW, "model.safetensors")}: file: is a directory, expected a regular file`);
    const dirC = tmp("dir-config");
    mkdirSync(join(dirC, "config.json"));
    e = thrown(() => GPT2LMHeadModel.from_pretrained(dirC));
    expect(e).toBeInstanceOf(LoomFormatError);
    expect(e.message).toBe(`[GPT2Config.from_pretrained] ${join(dirC, "config.json")}: is a directory, expected a regular file`);

    // FIFOs in a child process: open(2) on one without O_NONBLOCK waits for a writer forever
    const fifoW = tmp("fifo-weights");
    copyFileSync(join(TINY, "config.json"), join(fifoW, "config.json"));
    execFileSync("mkfifo", [join(fifoW, "model.safetensors")]);
    const fifoC = tmp("fifo-config");
    execFileSync("mkfifo", [join(fifoC, "config.json")]);
    const out = runIsolated(probeScript(`import { GPT2LMHeadModel } from ${JSON.stringify(srcPath("models/gpt2.ts"))};`, {
      weights: `GPT2LMHeadModel.from_pretrained(${JSON.stringify(fifoW)})`,
      config: `GPT2LMHeadModel.from_pretrained(${JSON.stringify(fifoC)})`,
    }));
    expect(JSON.parse(out)).toEqual([
      ["weights", "LoomFormatError", `[safetensors] ${join(fifoW, "model.safetensors")}: file: is a FIFO (named pipe), expected a regular file`],
      ["config", "LoomFormatError", `[GPT2Config.from_pretrained] ${join(fifoC, "config.json")}: is a FIFO (named pipe), expected a regular file`],
    ]);
    for (const d of [dirW, dirC, fifoW, fifoC]) rmSync(d, { recursive: true });
  }, 60_000); // the child process may be slow to start on a loaded machine; it is killed after 20 s
});

describe("CharTokenizer", () => {
  test("sorted vocabulary, encode/decode round trip, vocab.json round trip, unknown characters", () => {
    const tok = CharTokenizer.from_text("hello, world\n");
    expect(tok.itos).toEqual(["\n", " ", ",", "d", "e", "h", "l", "o", "r", "w"]);
    expect(tok.encode("hold")).toEqual([5, 7, 6, 3]);
    expect(tok.decode(tok.encode("hello, world\n"))).toBe("hello, world\n");
    expect(() => tok.encode("hey")).toThrow(/"y" is not in the vocabulary/);
    expect(tok.encode("hey", { unknown: "skip" })).toEqual([5, 4]);
    expect(() => tok.decode([10])).toThrow(LoomValueError);
    const dir = tmp("tok");
    tok.save_pretrained(dir);
    expect(existsSync(join(dir, "vocab.json"))).toBe(true);
    expect(JSON.parse(readFileSync(join(dir, "vocab.json"), "utf8"))["\n"]).toBe(0);
    expect(CharTokenizer.from_pretrained(dir).itos).toEqual(tok.itos);
    rmSync(dir, { recursive: true });
  });
});
