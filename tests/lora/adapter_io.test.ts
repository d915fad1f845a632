/**
 * PEFT adapter files: save_adapter writes PEFT's keys (no adapter name), shapes and config
 * fields; load_adapter reads them back into a fresh base model with identical outputs; bad
 * files are refused with the offending keys named.
 */
import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, readFileSync, readdirSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { no_grad } from "../../src/autograd/grad_mode.ts";
import { randn } from "../../src/lazy/creation.ts";
import { load_file, read_header_file, save_file } from "../../src/io/index.ts";
import { GPT2LMHeadModel } from "../../src/models/gpt2.ts";
import { LoraConfig } from "../../src/lora/config.ts";
import { lora_layers, peft_config, add_adapter, set_adapter } from "../../src/lora/model.ts";
import { PeftModel, get_peft_model } from "../../src/lora/peft_model.ts";
import { get_peft_model_state_dict, load_adapter, save_adapter } from "../../src/lora/save_load.ts";
import { Generator } from "../../src/tensor/rng.ts";
import { LoomFormatError, LoomValueError } from "../../src/tensor/errors.ts";
import { probeScript, runIsolated, srcPath } from "../io/helpers.ts";
import { REF, TINY, TINY_ADAPTER, expectBitwise, expectClose, ids, tmp } from "../models/helpers.ts";
import { thrown } from "../thrown.ts";

function trainedLike(seed: number, config: LoraConfig, adapter = "default") {
  const model = GPT2LMHeadModel.from_pretrained(TINY);
  const peft = get_peft_model(model, config, adapter);
  const g = new Generator(seed);
  no_grad(() => {
    for (const [, l] of lora_layers(model)) {
      const B = l.lora_B.get(adapter).weight;
      B.copy_(randn(B.shape as number[], { generator: g }).mul(0.2));
    }
  });
  return { model, peft };
}

describe("save_adapter / load_adapter (PEFT format)", () => {
  test("files, keys, shapes, metadata and adapter_config.json fields", () => {
    const config = new LoraConfig({ r: 4, lora_alpha: 8, lora_dropout: 0.05, target_modules: ["attn.c_attn", "attn.c_proj"], fan_in_fan_out: true, task_type: "CAUSAL_LM" });
    const { model, peft } = trainedLike(1, config);
    const dir = tmp("adapter");
    const keys = save_adapter(peft, dir, { base_model_name_or_path: "checkpoints/char-gpt" });
    expect(readdirSync(dir).sort()).toEqual(["adapter_config.json", "adapter_model.safetensors"]);
    expect(keys).toEqual([
      "base_model.model.transformer.h.0.attn.c_attn.lora_A.weight", "base_model.model.transformer.h.0.attn.c_attn.lora_B.weight",
      "base_model.model.transformer.h.0.attn.c_proj.lora_A.weight", "base_model.model.transformer.h.0.attn.c_proj.lora_B.weight",
      "base_model.model.transformer.h.1.attn.c_attn.lora_A.weight", "base_model.model.transformer.h.1.attn.c_attn.lora_B.weight",
      "base_model.model.transformer.h.1.attn.c_proj.lora_A.weight", "base_model.model.transformer.h.1.attn.c_proj.lora_B.weight",
    ]);
    const header = read_header_file(join(dir, "adapter_model.safetensors"));
    expect(header.metadata).toEqual({ format: "pt" });
    expect(header.tensors.get("base_model.model.transformer.h.0.attn.c_attn.lora_A.weight")!.shape).toEqual([4, 12]); // [r, in]
    expect(header.tensors.get("base_model.model.transformer.h.0.attn.c_attn.lora_B.weight")!.shape).toEqual([36, 4]); // [out, r]
    expect(header.tensors.get("base_model.model.transformer.h.0.attn.c_proj.lora_B.weight")!.shape).toEqual([12, 4]);
    const ac = JSON.parse(readFileSync(join(dir, "adapter_config.json"), "utf8"));
    expect(ac).toMatchObject({
      peft_type: "LORA", r: 4, lora_alpha: 8, lora_dropout: 0.05, target_modules: ["attn.c_attn", "attn.c_proj"],
      fan_in_fan_out: true, bias: "none", task_type: "CAUSAL_LM", inference_mode: true, init_lora_weights: true,
      base_model_name_or_path: "checkpoints/char-gpt", use_rslora: false, use_dora: false, rank_pattern: {}, alpha_pattern: {},
      modules_to_save: null, layers_to_transform: null, layers_pattern: null, revision: null,
    });
    expect(Object.keys(ac)).toEqual(Object.keys(ac).slice().sort()); // PEFT writes sorted keys
    expect(peft_config(model).get("default")!.inference_mode).toBe(false); // saving does not flip the live config

    // round trip into a fresh base model: identical logits
    const fresh = GPT2LMHeadModel.from_pretrained(TINY);
    const loaded = load_adapter(fresh, dir);
    expect(loaded.r).toBe(4);
    expect(loaded.base_model_name_or_path).toBe("checkpoints/char-gpt");
    model.eval();
    expectBitwise(fresh.call(ids()).logits, model.call(ids()).logits);
    rmSync(dir, { recursive: true });
  });

  test("PeftModel.save_pretrained / PeftModel.from_pretrained (PEFT's method names)", () => {
    const { model, peft } = trainedLike(5, new LoraConfig({ r: 2, target_modules: ["attn.c_proj"], fan_in_fan_out: true }));
    const dir = tmp("adapter-peftmodel");
    peft.save_pretrained(dir);
    const back = PeftModel.from_pretrained(GPT2LMHeadModel.from_pretrained(TINY), dir);
    expect(back.peft_config.get("default")!.inference_mode).toBe(true);
    expect(back.get_nb_trainable_parameters()[0]).toBe(0);
    model.eval();
    expectBitwise(back.call(ids()).logits, model.call(ids()).logits);
    expect(Object.keys(back.state_dict())).toEqual(Object.keys(peft.state_dict()));
    rmSync(dir, { recursive: true });
  });

  test("saved values are the adapter's A and B, bit for bit; the name of a non-default adapter is not in the keys", () => {
    const { model } = trainedLike(2, new LoraConfig({ r: 2, target_modules: ["c_fc"], fan_in_fan_out: true }), "mine");
    const dir = tmp("adapter-named");
    save_adapter(model, dir, { adapter_name: "mine" });
    const { tensors } = load_file(join(dir, "adapter_model.safetensors"));
    const [path, l] = lora_layers(model)[0]!;
    expect([...tensors.keys()][0]).toBe(`base_model.model.${path}.lora_A.weight`);
    expect(Array.from(tensors.get(`base_model.model.${path}.lora_B.weight`)!.data)).toEqual(Array.from(l.lora_B.get("mine").weight.dataSync()));
    expect(get_peft_model_state_dict(model, "mine").size).toBe(4);
    expect(() => get_peft_model_state_dict(model, "default")).toThrow(/no adapter "default"/);
    rmSync(dir, { recursive: true });
  });

  test("re-saving the PyTorch-written fixture reproduces its tensors and keeps PEFT's extra config fields", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    load_adapter(model, TINY_ADAPTER);
    const dir = tmp("adapter-resave");
    save_adapter(model, dir);
    const a = load_file(join(TINY_ADAPTER, "adapter_model.safetensors")).tensors;
    const b = load_file(join(dir, "adapter_model.safetensors")).tensors;
    expect([...b.keys()].sort()).toEqual([...a.keys()].sort());
    for (const [k, t] of a) expect(Array.from(b.get(k)!.data)).toEqual(Array.from(t.data));
    const before = JSON.parse(readFileSync(join(TINY_ADAPTER, "adapter_config.json"), "utf8"));
    const after = JSON.parse(readFileSync(join(dir, "adapter_config.json"), "utf8"));
    expect(after).toEqual(before);
    rmSync(dir, { recursive: true });
  });

  test("a second adapter loads inactive next to the first; set_adapter switches", () => {
    const { model, peft } = trainedLike(3, new LoraConfig({ r: 2, target_modules: ["attn.c_attn"], fan_in_fan_out: true }));
    const dir = tmp("adapter-second");
    save_adapter(peft, dir);
    const x = ids();
    model.eval();
    const withDefault = model.call(x).logits;
    load_adapter(model, TINY_ADAPTER, "torch");
    expect([...peft_config(model).keys()]).toEqual(["default", "torch"]);
    expectBitwise(model.call(x).logits, withDefault);
    set_adapter(model, "torch");
    const ref = GPT2LMHeadModel.from_pretrained(TINY);
    load_adapter(ref, TINY_ADAPTER);
    expectBitwise(model.call(x).logits, ref.call(x).logits);
    // loading into an existing adapter overwrites its weights, so the files must fit it exactly
    load_adapter(model, TINY_ADAPTER, "torch");
    expect(() => load_adapter(model, dir, "torch")).toThrow(/missing LoRA weights: base_model.model.transformer.h.0.attn.c_proj.lora_A.weight/);
    expect(() => load_adapter(model, TINY_ADAPTER, "default")).toThrow(/unexpected key "base_model.model.transformer.h.0.attn.c_proj.lora_A.weight"/);
    rmSync(dir, { recursive: true });
  });

  test("refused: wrong rank, unknown keys, missing weights, missing files", () => {
    const dir = tmp("adapter-bad");
    const { peft } = trainedLike(4, new LoraConfig({ r: 2, target_modules: ["attn.c_attn", "attn.c_proj"], fan_in_fan_out: true }));
    save_adapter(peft, dir);
    const file = join(dir, "adapter_model.safetensors");
    const good = load_file(file, { copy: true }).tensors;

    const rank4 = GPT2LMHeadModel.from_pretrained(TINY);
    get_peft_model(rank4, new LoraConfig({ r: 4, target_modules: ["attn.c_attn", "attn.c_proj"], fan_in_fan_out: true }));
    expect(() => load_adapter(rank4, dir)).toThrow(/size mismatch for base_model.model.transformer.h.0.attn.c_attn.lora_A.weight: copying a param with shape \[2, 12\]/);

    const extra = new Map(good);
    extra.set("base_model.model.transformer.h.0.mlp.c_fc.lora_A.weight", good.get("base_model.model.transformer.h.0.attn.c_attn.lora_A.weight")!);
    save_file(extra, file, { format: "pt" });
    const victim = GPT2LMHeadModel.from_pretrained(TINY);
    expect(() => load_adapter(victim, dir)).toThrow(/unexpected key "base_model.model.transformer.h.0.mlp.c_fc.lora_A.weight"/);
    expect(lora_layers(victim)).toEqual([]); // rolled back: the plain model again

    const missing = new Map([...good].filter(([k]) => !k.includes("h.1.attn.c_proj.lora_B")));
    save_file(missing, file, { format: "pt" });
    expect(() => load_adapter(GPT2LMHeadModel.from_pretrained(TINY), dir)).toThrow(/missing LoRA weights: base_model.model.transformer.h.1.attn.c_proj.lora_B.weight/);

    rmSync(file);
    expect(() => load_adapter(GPT2LMHeadModel.from_pretrained(TINY), dir)).toThrow(/no adapter_model.safetensors/);
    rmSync(dir, { recursive: true });
  });
});

describe("untrusted adapter files", () => {

  test("tensors named constructor, __proto__, toString... are unexpected keys, not Object.prototype members", () => {
    const dir = tmp("adapter-proto");
    const { peft } = trainedLike(5, new LoraConfig({ r: 2, target_modules: ["attn.c_attn"], fan_in_fan_out: true }));
    save_adapter(peft, dir);
    const file = join(dir, "adapter_model.safetensors");
    const good = load_file(file, { copy: true }).tensors;
    const some = good.values().next().value!;
    for (const name of ["constructor", "__proto__", "toString", "hasOwnProperty", "base_model.model.constructor"]) {
      save_file(new Map([...good, [name, some]]), file, { format: "pt" }); // a Map keeps "__proto__" a key
      expect(read_header_file(file).tensors.has(name)).toBe(true);
      const victim = GPT2LMHeadModel.from_pretrained(TINY);
      const e = thrown(() => load_adapter(victim, dir));
      expect(e).toBeInstanceOf(LoomValueError);
      expect(e.message).toBe(`[set_peft_model_state_dict] Error(s) loading adapter "default":\n\tunexpected key "${name}" (no such LoRA weight or parameter for adapter "default")`);
      expect(lora_layers(victim)).toEqual([]); // rolled back
    }
    rmSync(dir, { recursive: true });
  });

  test("an invalid target_modules regex in adapter_config.json is a typed error naming it", () => {
    const dir = tmp("adapter-regex");
    copyFileSync(join(TINY_ADAPTER, "adapter_model.safetensors"), join(dir, "adapter_model.safetensors"));
    const config = JSON.parse(readFileSync(join(TINY_ADAPTER, "adapter_config.json"), "utf8"));
    writeFileSync(join(dir, "adapter_config.json"), JSON.stringify({ ...config, target_modules: "c_attn)|(.*" }));
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    const e = thrown(() => load_adapter(model, dir));
    expect(e).toBeInstanceOf(LoomValueError);
    expect(e.message).toStartWith('[LoraConfig] target_modules "c_attn)|(.*" does not compile as a JavaScript regular expression (');
    expect(lora_layers(model)).toEqual([]);
    rmSync(dir, { recursive: true });
  });

  test('a "__proto__" field of adapter_config.json is kept as a field, not made the prototype of extra', () => {
    const c = LoraConfig.from_dict(JSON.parse('{"r": 4, "__proto__": {"megatron_core": "x"}}'));
    expect(Object.hasOwn(c.extra, "__proto__")).toBe(true);
    expect(c.extra.megatron_core).toBeUndefined();
    expect(JSON.parse(c.to_json_string()).__proto__).toEqual({ megatron_core: "x" });
  });

  test("a directory or a FIFO named as an adapter file is refused with its path", () => {
    const dir = tmp("adapter-dir");
    mkdirSync(join(dir, "adapter_model.safetensors"));
    copyFileSync(join(TINY_ADAPTER, "adapter_config.json"), join(dir, "adapter_config.json"));
    let e = thrown(() => load_adapter(GPT2LMHeadModel.from_pretrained(TINY), dir));
    expect(e).toBeInstanceOf(LoomFormatError);
    expect(e.message).toBe(`[safetensors] ${join(dir, "adapter_model.safetensors")}: file: is a directory, expected a regular file`);
    const cdir = tmp("adapter-cfgdir");
    mkdirSync(join(cdir, "adapter_config.json"));
    e = thrown(() => LoraConfig.from_pretrained(cdir));
    expect(e).toBeInstanceOf(LoomFormatError);
    expect(e.message).toBe(`[LoraConfig.from_pretrained] ${join(cdir, "adapter_config.json")}: is a directory, expected a regular file`);

    // FIFOs, in a child process (opening one for a blocking read waits for a writer forever)
    const fifoW = tmp("adapter-fifo-w");
    execFileSync("mkfifo", [join(fifoW, "adapter_model.safetensors")]);
    copyFileSync(join(TINY_ADAPTER, "adapter_config.json"), join(fifoW, "adapter_config.json"));
    const fifoC = tmp("adapter-fifo-c");
    copyFileSync(join(TINY_ADAPTER, "adapter_model.safetensors"), join(fifoC, "adapter_model.safetensors"));
    execFileSync("mkfifo", [join(fifoC, "adapter_config.json")]);
    const out = runIsolated(probeScript([
      `import { GPT2LMHeadModel } from ${JSON.stringify(srcPath("models/gpt2.ts"))};`,
      `import { load_adapter } from ${JSON.stringify(srcPath("lora/save_load.ts"))};`,
    ].join("\n"), {
      weights: `load_adapter(GPT2LMHeadModel.from_pretrained(${JSON.stringify(TINY)}), ${JSON.stringify(fifoW)})`,
      config: `load_adapter(GPT2LMHeadModel.from_pretrained(${JSON.stringify(TINY)}), ${JSON.stringify(fifoC)})`,
    }));
    expect(JSON.parse(out)).toEqual([
      ["weights", "LoomFormatError", `[safetensors] ${join(fifoW, "adapter_model.safetensors")}: file: is a FIFO (named pipe), expected a regular file`],
      ["config", "LoomFormatError", `[LoraConfig.from_pretrained] ${join(fifoC, "adapter_config.json")}: is a FIFO (named pipe), expected a regular file`],
    ]);
    for (const d of [dir, cdir, fifoW, fifoC]) rmSync(d, { recursive: true });
  }, 60_000); // the child process may be slow to start on a loaded machine; it is killed after 20 s

  test("an adapter in the Hugging Face cache layout (links into ../../blobs/) loads; a link out of the cache is refused", () => {
    const repo = join(realpathSync(tmp("adapter-hub")), "models--org--tiny-lora");
    const snapshot = join(repo, "snapshots", "rev0");
    mkdirSync(join(repo, "blobs"), { recursive: true });
    mkdirSync(snapshot, { recursive: true });
    for (const [i, name] of ["adapter_config.json", "adapter_model.safetensors"].entries()) {
      copyFileSync(join(TINY_ADAPTER, name), join(repo, "blobs", `blob${i}`));
      symlinkSync(join("..", "..", "blobs", `blob${i}`), join(snapshot, name));
    }
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    load_adapter(model, snapshot);
    expectClose(model.forward(ids()).logits, REF.lora.logits); // PyTorch + PEFT logits of this adapter

    const outside = realpathSync(tmp("adapter-outside"));
    copyFileSync(join(TINY_ADAPTER, "adapter_model.safetensors"), join(outside, "w.safetensors"));
    rmSync(join(snapshot, "adapter_model.safetensors"));
    symlinkSync(join(outside, "w.safetensors"), join(snapshot, "adapter_model.safetensors"));
    const e = thrown(() => load_adapter(GPT2LMHeadModel.from_pretrained(TINY), snapshot));
    expect(e).toBeInstanceOf(LoomFormatError);
    expect(e.message).toBe(`[load_adapter] ${join(snapshot, "adapter_model.safetensors")}: resolves to ${join(outside, "w.safetensors")}, outside the Hugging Face cache folder ${repo}`);
  });
});

describe("bias options", () => {
  test('bias "lora_only" trains and saves the wrapped layers\' biases; "all" every bias', () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    const peft = get_peft_model(model, new LoraConfig({ r: 2, target_modules: ["attn.c_attn"], fan_in_fan_out: true, bias: "lora_only" }));
    const trainable = peft.named_parameters().filter(([, p]) => p.requires_grad).map(([k]) => k);
    expect(trainable.filter((k) => k.endsWith("bias"))).toEqual([
      "base_model.model.transformer.h.0.attn.c_attn.base_layer.bias", "base_model.model.transformer.h.1.attn.c_attn.base_layer.bias",
    ]);
    no_grad(() => lora_layers(model)[0]![1].base_layer.bias!.fill_(0.5));
    const dir = tmp("adapter-bias");
    const keys = save_adapter(peft, dir);
    expect(keys).toContain("base_model.model.transformer.h.0.attn.c_attn.base_layer.bias");
    expect(keys.length).toBe(6);
    const fresh = GPT2LMHeadModel.from_pretrained(TINY);
    load_adapter(fresh, dir);
    expect([...lora_layers(fresh)[0]![1].base_layer.bias!.dataSync()].every((v) => v === 0.5)).toBe(true);
    rmSync(dir, { recursive: true });

    const all = GPT2LMHeadModel.from_pretrained(TINY);
    get_peft_model(all, new LoraConfig({ r: 2, target_modules: ["attn.c_attn"], fan_in_fan_out: true, bias: "all" }));
    const biases = all.named_parameters().filter(([k]) => k.endsWith("bias"));
    expect(biases.length).toBe(2 * 6 + 1); // per block: ln_1, c_attn, c_proj, ln_2, c_fc, mlp.c_proj; plus ln_f
    expect(biases.every(([, p]) => p.requires_grad)).toBe(true);
    expect(get_peft_model_state_dict(all).size).toBe(4 + biases.length);
  });
});

describe("LoraConfig", () => {
  test("PEFT defaults and validation", () => {
    const c = new LoraConfig();
    expect(c).toMatchObject({ r: 8, lora_alpha: 8, lora_dropout: 0, bias: "none", fan_in_fan_out: false, init_lora_weights: true, peft_type: "LORA", target_modules: null });
    expect(() => new LoraConfig({ r: 0 })).toThrow(/`r` should be a positive integer/);
    expect(() => new LoraConfig({ lora_dropout: 1 })).toThrow(LoomValueError);
    expect(() => new LoraConfig({ bias: "some" as never })).toThrow(LoomValueError);
    expect(() => new LoraConfig({ use_dora: true })).toThrow(/not supported/);
    expect(() => new LoraConfig({ peft_type: "IA3" as never })).toThrow(/peft_type/);
    expect(() => new LoraConfig({ target_modules: ".*", layers_to_transform: [0] })).toThrow(/layers_to_transform/);
    expect(LoraConfig.from_dict(JSON.parse(c.to_json_string())).to_dict()).toEqual(c.to_dict());
  });

  test("rank_pattern / alpha_pattern override r and alpha per module; use_rslora scales by α/√r", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    get_peft_model(model, new LoraConfig({
      r: 2, lora_alpha: 4, target_modules: ["c_attn"], fan_in_fan_out: true,
      rank_pattern: { "h.1.attn.c_attn": 3 }, alpha_pattern: { "h.1.attn.c_attn": 12 },
    }));
    const [l0, l1] = lora_layers(model).map(([, l]) => l);
    expect([l0!.r.default, l0!.scaling.default]).toEqual([2, 2]);
    expect([l1!.r.default, l1!.scaling.default, l1!.lora_A.get("default").weight.shape[0]]).toEqual([3, 4, 3]);
    add_adapter(model, "rs", new LoraConfig({ r: 4, lora_alpha: 4, target_modules: ["c_attn"], fan_in_fan_out: true, use_rslora: true }));
    expect(l0!.scaling.rs).toBe(2);
  });
});
