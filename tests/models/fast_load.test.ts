/**
 * Fast checkpoint loading (issue 13): nn.init_empty_weights skips every init fill (the default
 * generator is not advanced); from_pretrained's parameters are the file's private mapping
 * (identical logits to a copying load, a training step never writes the file, ties kept);
 * torch_dtype / dtype ("auto" by default: the checkpoint's); the Hugging Face cache layout
 * given as its models--* folder (refs/main) and links that stay inside its blobs/.
 */
import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, readFileSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { read_header_file, save_sharded } from "../../src/io/index.ts";
import { no_grad } from "../../src/autograd/grad_mode.ts";
import { randn } from "../../src/lazy/creation.ts";
import { tensor_to_io } from "../../src/lora/tensor_io.ts";
import { GPT2Config } from "../../src/models/gpt2_config.ts";
import { GPT2LMHeadModel } from "../../src/models/gpt2.ts";
import { load_checkpoint, resolve_torch_dtype } from "../../src/models/hf_checkpoint.ts";
import { Embedding, Linear } from "../../src/nn/linear.ts";
import { init_empty_weights, is_init_empty, normal_ } from "../../src/nn/init.ts";
import * as nn from "../../src/nn/index.ts";
import { SGD } from "../../src/optim/sgd.ts";
import { halfToFloat } from "../../src/tensor/dtype.ts";
import { LoomFormatError, LoomValueError } from "../../src/tensor/errors.ts";
import { default_generator, manual_seed } from "../../src/tensor/rng.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { hubCache } from "../io/helpers.ts";
import { thrown } from "../thrown.ts";
import { REF, TINY, expectBitwise, expectClose, ids, labels, tmp } from "./helpers.ts";

const sha = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");
const WEIGHTS = join(TINY, "model.safetensors");
// A parameter whose array views the whole file's buffer rather than an array of its own, while the file is
// mapped (/proc/self/maps, on Linux): a plain whole-file read would pass the first check only.
const isMapped = (file: string) => process.platform !== "linux" || readFileSync("/proc/self/maps", "utf8").split("\n").some((l) => l.endsWith(realpathSync(file)));
const onMapping = (p: { _d: { data: { buffer: ArrayBufferLike } } }, file: string) => p._d.data.buffer.byteLength === statSync(file).size && isMapped(file);

describe("nn.init_empty_weights", () => {
  test("constructors draw nothing: the default generator's state is untouched and weights are zeros", () => {
    manual_seed(7);
    const state = default_generator.get_state();
    let lin!: Linear, emb!: Embedding, gpt!: GPT2LMHeadModel;
    {
      using _ = init_empty_weights();
      expect(is_init_empty()).toBe(true);
      lin = new Linear(5, 3);
      emb = new Embedding(4, 6);
      gpt = new GPT2LMHeadModel(GPT2Config.from_pretrained(TINY)); // init_weights runs, and draws nothing
    }
    expect(is_init_empty()).toBe(false);
    expect(default_generator.get_state()).toEqual(state);
    // every drawn weight is left as allocated (zeros); LayerNorm weights are made with ones() by its constructor, not drawn
    const named = [...lin.named_parameters(), ...emb.named_parameters(), ...gpt.named_parameters()];
    for (const [name, p] of named) expect([name, p.dataSync().every((v) => v === (/ln_(1|2|f)\.weight$/.test(name) ? 1 : 0))]).toEqual([name, true]);
    // outside the scope init draws again, exactly as without the scope
    manual_seed(7);
    const want = new Linear(5, 3).weight.dataSync();
    manual_seed(7);
    init_empty_weights(() => new Linear(5, 3));
    expect(Array.from(new Linear(5, 3).weight.dataSync())).toEqual(Array.from(want));
  });

  test("nn.utils.skip_init builds one module without drawing (torch.nn.utils.skip_init)", () => {
    manual_seed(11);
    const state = default_generator.get_state();
    const lin = nn.utils.skip_init(Linear, 4, 2, { bias: true });
    expect(default_generator.get_state()).toEqual(state);
    expect([...lin.weight.shape]).toEqual([2, 4]);
    expect(lin.weight.dataSync().every((v) => v === 0) && lin.bias!.dataSync().every((v) => v === 0)).toBe(true);
    expect(is_init_empty()).toBe(false);
  });

  test("scopes nest, a guard disposed twice ends only its own scope, and a throwing fn still ends it", () => {
    const outer = init_empty_weights();
    const inner = init_empty_weights();
    inner[Symbol.dispose]();
    inner[Symbol.dispose]();
    expect(is_init_empty()).toBe(true);
    outer[Symbol.dispose]();
    expect(is_init_empty()).toBe(false);
    expect(() => init_empty_weights(() => { throw new Error("boom"); })).toThrow("boom");
    expect(is_init_empty()).toBe(false);
    // argument checks still run inside
    expect(() => init_empty_weights(() => normal_(randn([2]).to("int32"), 0, 1))).toThrow(LoomValueError);
  });

  test("from_pretrained does not advance the default generator", () => {
    manual_seed(3);
    const state = default_generator.get_state();
    GPT2LMHeadModel.from_pretrained(TINY);
    expect(default_generator.get_state()).toEqual(state);
  });
});

describe("mmap-backed parameters", () => {
  test("parameters view the file's mapping; logits equal a copying load bit for bit and match PyTorch; ties kept", () => {
    const mapped = GPT2LMHeadModel.from_pretrained(TINY);
    const copied = GPT2LMHeadModel.from_pretrained(TINY, { mmap: false });
    const w = mapped.get_parameter("transformer.h.0.attn.c_attn.weight");
    expect(onMapping(w, WEIGHTS)).toBe(true);
    expect(onMapping(copied.get_parameter("transformer.h.0.attn.c_attn.weight"), WEIGHTS)).toBe(false);
    expect(mapped.lm_head.weight).toBe(mapped.transformer.wte.weight);
    expect(copied.lm_head.weight).toBe(copied.transformer.wte.weight);
    expect(w.requires_grad).toBe(true);
    expectBitwise(mapped.call(ids()).logits, copied.call(ids()).logits);
    expectClose(mapped.call(ids()).logits, REF.logits);
    // the pre-assign path (random init, then copy into it) agrees as well
    const old = new GPT2LMHeadModel(GPT2Config.from_pretrained(TINY));
    load_checkpoint(old, TINY, { base_model_prefix: "transformer", allow_missing: ["lm_head.weight"] });
    expectBitwise(old.eval().call(ids()).logits, mapped.call(ids()).logits);
  });

  describe.each(BACKENDS)("a training step on a mapped model never writes the file (%s)", (backend) => {
    useBackend(backend);
    test("SGD step and an in-place fill change the parameters, not model.safetensors", () => {
      const dir = tmp("gpt2-cow"); // a copy: a bug that wrote through would not damage the fixture
      for (const f of ["config.json", "model.safetensors"]) copyFileSync(join(TINY, f), join(dir, f));
      const file = join(dir, "model.safetensors");
      const before = sha(file);
      const model = GPT2LMHeadModel.from_pretrained(dir).train();
      const w = model.get_parameter("transformer.h.0.attn.c_attn.weight");
      const w0 = Array.from(w.dataSync());
      const opt = new SGD(model.parameters(), { lr: 0.1 });
      const loss = model.call(ids(), { labels: labels() }).loss!;
      expect(loss.item()).toBeCloseTo(REF.loss, 4);
      loss.backward();
      opt.step();
      expect(Array.from(w.dataSync())).not.toEqual(w0);
      no_grad(() => model.transformer.ln_f.bias!.fill_(5));
      expect(model.transformer.ln_f.bias!.dataSync()[0]).toBe(5);
      expect(sha(file)).toBe(before);
      // a fresh load sees the file's values
      expectClose(GPT2LMHeadModel.from_pretrained(dir).call(ids()).logits, REF.logits);
      rmSync(dir, { recursive: true });
    });
  });
});

test("save_pretrained over the directory a mapped model came from: the reload has the trained values", () => {
  const dir = tmp("gpt2-resave");
  for (const f of ["config.json", "model.safetensors"]) copyFileSync(join(TINY, f), join(dir, f));
  const model = GPT2LMHeadModel.from_pretrained(dir);
  no_grad(() => model.transformer.ln_f.bias!.fill_(0.25));
  model.save_pretrained(dir); // writes a new file and renames it over the mapped one
  expect(Array.from(model.transformer.ln_f.bias!.dataSync()).every((v) => v === 0.25)).toBe(true); // the old mapping is intact
  const back = GPT2LMHeadModel.from_pretrained(dir);
  expect(Array.from(back.transformer.ln_f.bias!.dataSync()).every((v) => v === 0.25)).toBe(true);
  expectBitwise(back.call(ids()).logits, model.call(ids()).logits);
  rmSync(dir, { recursive: true });
});

describe("torch_dtype / dtype", () => {
  test("a float16 checkpoint loads as float16 on the mapping by default; torch_dtype float32 converts exactly", () => {
    const dir = tmp("gpt2-f16");
    GPT2LMHeadModel.from_pretrained(TINY, { torch_dtype: "float16" }).save_pretrained(dir);
    const file = join(dir, "model.safetensors");
    expect(read_header_file(file).tensors.get("transformer.h.0.attn.c_attn.weight")!.dtype).toBe("float16");

    const half = GPT2LMHeadModel.from_pretrained(dir);
    const hw = half.get_parameter("transformer.h.0.attn.c_attn.weight");
    expect(hw.dtype).toBe("float16");
    expect(onMapping(hw, file)).toBe(true);
    expect(half.transformer.wte.weight.dtype).toBe("float16");

    // float32 on request: every value is the file's half, widened (bits read here with a DataView, not src/io)
    const full = GPT2LMHeadModel.from_pretrained(dir, { torch_dtype: "torch.float32" });
    const header = read_header_file(file);
    const bytes = readFileSync(file);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const info = header.tensors.get("transformer.h.0.attn.c_attn.weight")!;
    const want = [];
    for (let o = header.data_start + info.data_offsets[0]; o < header.data_start + info.data_offsets[1]; o += 2) want.push(halfToFloat(view.getUint16(o, true)));
    const fw = full.get_parameter("transformer.h.0.attn.c_attn.weight");
    expect(fw.dtype).toBe("float32");
    expect(Array.from(fw.dataSync())).toEqual(want);
    // half weights against PyTorch's float32 logits: within float16 rounding of the weights
    expectClose(full.call(ids()).logits, REF.logits, 5e-3, 5e-3);
    rmSync(dir, { recursive: true });
  });

  test("names: torch.bfloat16, half, auto; dtype and torch_dtype must agree; non-floating is refused", () => {
    expect(resolve_torch_dtype(TINY)).toBe("float32");
    expect(resolve_torch_dtype(TINY, { torch_dtype: "auto" })).toBe("float32");
    expect(resolve_torch_dtype(TINY, { torch_dtype: "half" })).toBe("float16");
    expect(resolve_torch_dtype(TINY, { dtype: "bfloat16", torch_dtype: "torch.bfloat16" })).toBe("bfloat16");
    expect(GPT2LMHeadModel.from_pretrained(TINY, { torch_dtype: "torch.bfloat16" }).lm_head.weight.dtype).toBe("bfloat16");
    let e = thrown(() => GPT2LMHeadModel.from_pretrained(TINY, { dtype: "float32", torch_dtype: "float16" }));
    expect(e).toBeInstanceOf(LoomValueError);
    expect(e.message).toBe('[from_pretrained] dtype "float32" and torch_dtype "float16" disagree: pass one');
    e = thrown(() => GPT2LMHeadModel.from_pretrained(TINY, { torch_dtype: "int8" }));
    expect(e).toBeInstanceOf(LoomValueError);
    expect(e.message).toBe('[from_pretrained] torch_dtype "int8": expected "auto" or a floating dtype (float16, bfloat16, float32, float64)');
  });
});

describe("missing and mismatched weights", () => {
  test("strict: false initializes the weights the file lacks (init_weights), not zeros", () => {
    const dir = tmp("gpt2-missing");
    copyFileSync(join(TINY, "config.json"), join(dir, "config.json"));
    const sd = Object.entries(GPT2LMHeadModel.from_pretrained(TINY).state_dict()).filter(([k]) => k !== "transformer.ln_f.weight" && k !== "lm_head.weight");
    save_sharded(new Map(sd.map(([k, t]) => [k, tensor_to_io(t)])), dir);
    expect(() => GPT2LMHeadModel.from_pretrained(dir)).toThrow("missing keys: transformer.ln_f.weight");
    const model = GPT2LMHeadModel.from_pretrained(dir, { strict: false });
    expect(Array.from(model.transformer.ln_f.weight!.dataSync()).every((v) => v === 1)).toBe(true); // HF: LayerNorm weight 1
    expectBitwise(model.get_parameter("transformer.h.0.attn.c_attn.weight"), GPT2LMHeadModel.from_pretrained(TINY).get_parameter("transformer.h.0.attn.c_attn.weight"));
    rmSync(dir, { recursive: true });
  });

  test("checkpoint keys named like Object's members are unexpected keys, not crashes", () => {
    const dir = tmp("gpt2-proto");
    copyFileSync(join(TINY, "config.json"), join(dir, "config.json"));
    const sd = new Map(Object.entries(GPT2LMHeadModel.from_pretrained(TINY).state_dict()).map(([k, t]) => [k, tensor_to_io(t)]));
    sd.set("constructor", sd.get("transformer.ln_f.bias")!);
    sd.set("__proto__", sd.get("transformer.ln_f.bias")!);
    save_sharded(sd, dir);
    expect(() => GPT2LMHeadModel.from_pretrained(dir)).toThrow("unexpected keys: __proto__, constructor");
    expectClose(GPT2LMHeadModel.from_pretrained(dir, { strict: false }).call(ids()).logits, REF.logits);
    rmSync(dir, { recursive: true });
  });

  test("a tensor of the wrong shape names the key, both shapes and the file, and loads nothing", () => {
    const dir = tmp("gpt2-shape");
    const cfg = JSON.parse(readFileSync(join(TINY, "config.json"), "utf8"));
    writeFileSync(join(dir, "config.json"), JSON.stringify({ ...cfg, n_embd: cfg.n_embd * 2 }));
    copyFileSync(WEIGHTS, join(dir, "model.safetensors"));
    const e = thrown(() => GPT2LMHeadModel.from_pretrained(dir));
    expect(e).toBeInstanceOf(LoomValueError);
    expect(e.message).toMatch(new RegExp(`^\\[from_pretrained\\] size mismatch for transformer\\.\\S+: \\[[\\d, ]+\\] in ${join(dir, "model.safetensors").replace(/[.]/g, "\\.")}, \\[[\\d, ]+\\] in GPT2LMHeadModel$`));
    rmSync(dir, { recursive: true });
  });
});

describe("Hugging Face cache folder (models--org--name)", () => {
  const fill = (d: string) => ["config.json", "model.safetensors"].forEach((f) => copyFileSync(join(TINY, f), join(d, f)));

  test("the models-- folder loads its refs/main snapshot; a commit hash as revision loads that snapshot", () => {
    const { repo, snapshot } = hubCache(fill);
    mkdirSync(join(repo, "refs"));
    writeFileSync(join(repo, "refs", "main"), "0123abcd"); // huggingface_hub writes the hash without a newline
    const model = GPT2LMHeadModel.from_pretrained(repo);
    expectClose(model.call(ids()).logits, REF.logits);
    expectClose(GPT2LMHeadModel.from_pretrained(repo, { revision: "0123abcd" }).call(ids()).logits, REF.logits);
    // weights are mapped from the blob the snapshot links to
    expect(onMapping(model.get_parameter("transformer.h.0.attn.c_attn.weight"), join(snapshot, "model.safetensors"))).toBe(true);
  });

  test("bad refs: missing, not a hash, naming an absent snapshot; a bad revision", () => {
    const { repo } = hubCache(fill);
    let e = thrown(() => GPT2LMHeadModel.from_pretrained(repo));
    expect(e).toBeInstanceOf(LoomFormatError);
    expect(e.message).toBe(`[from_pretrained] ${repo}: a Hugging Face cache folder without refs/main or snapshots/main (revision "main" was never downloaded)`);
    mkdirSync(join(repo, "refs"));
    writeFileSync(join(repo, "refs", "main"), "../../../etc");
    e = thrown(() => GPT2LMHeadModel.from_pretrained(repo));
    expect(e).toBeInstanceOf(LoomFormatError);
    expect(e.message).toBe(`[from_pretrained] ${repo}: ${join(repo, "refs", "main")} holds "../../../etc", not a commit hash`);
    writeFileSync(join(repo, "refs", "main"), "fedcba98\n");
    e = thrown(() => GPT2LMHeadModel.from_pretrained(repo));
    expect(e).toBeInstanceOf(LoomFormatError);
    expect(e.message).toBe(`[from_pretrained] ${repo}: refs/main names snapshot fedcba98, which is not in ${join(repo, "snapshots")}`);
    e = thrown(() => GPT2LMHeadModel.from_pretrained(repo, { revision: "../x" }));
    expect(e).toBeInstanceOf(LoomFormatError);
    expect(e.message).toBe(`[from_pretrained] ${repo}: revision "../x" is not a branch, tag or commit name`);
  });

  test("a snapshot link into the same models-- folder but outside blobs/ is refused", () => {
    const { repo, snapshot } = hubCache(fill);
    const other = join(repo, "snapshots", "other");
    mkdirSync(other);
    copyFileSync(WEIGHTS, join(other, "model.safetensors"));
    rmSync(join(snapshot, "model.safetensors"));
    symlinkSync(join("..", "other", "model.safetensors"), join(snapshot, "model.safetensors"));
    const e = thrown(() => GPT2LMHeadModel.from_pretrained(snapshot));
    expect(e).toBeInstanceOf(LoomFormatError);
    expect(e.message).toBe(`[safetensors] ${join(snapshot, "model.safetensors")}: file: resolves to ${join(other, "model.safetensors")}, inside the Hugging Face cache folder ${repo} but outside its blobs/ and the snapshot ${snapshot}`);
  });
});
