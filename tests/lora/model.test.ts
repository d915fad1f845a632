/**
 * LoRA on a whole GPT-2: target matching as PEFT, frozen base, PEFT key names, agreement with a
 * PyTorch reference adapter (fixtures written by tests/models/fixtures/gen_gpt2_fixtures.py),
 * merge / merge_and_unload, several adapters, and eager == lazy for forward and backward.
 */
import { describe, expect, test } from "bun:test";
import { with_execution_mode } from "../../src/nn/execution.ts";
import { Conv1D } from "../../src/nn/conv1d.ts";
import { no_grad } from "../../src/autograd/grad_mode.ts";
import { randn } from "../../src/lazy/creation.ts";
import { GPT2LMHeadModel } from "../../src/models/gpt2.ts";
import { LoraConfig, check_target_module_exists } from "../../src/lora/config.ts";
import { LoraLayer } from "../../src/lora/layer.ts";
import {
  active_adapter, add_adapter, delete_adapter, disable_adapter, inject_adapter_in_model,
  lora_layers, lora_parameters, merge_adapter, merge_and_unload, peft_config, set_adapter, unload, unmerge_adapter,
} from "../../src/lora/model.ts";
import { load_adapter } from "../../src/lora/save_load.ts";
import { PeftModel, get_peft_model } from "../../src/lora/peft_model.ts";
import { Generator, manual_seed } from "../../src/tensor/rng.ts";
import { LoomValueError } from "../../src/tensor/errors.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { REF, TINY, TINY_ADAPTER, expectBitwise, expectClose, ids, labels, maxAbsDiff } from "../models/helpers.ts";

const cfg = (fields: Partial<ConstructorParameters<typeof LoraConfig>[0]> = {}) =>
  new LoraConfig({ r: 2, lora_alpha: 4, target_modules: ["attn.c_attn", "attn.c_proj"], fan_in_fan_out: true, task_type: "CAUSAL_LM", ...fields });

function randomizeLora(model: GPT2LMHeadModel, seed: number, adapter = "default"): void {
  const g = new Generator(seed);
  no_grad(() => {
    for (const [, l] of lora_layers(model)) {
      if (!l.adapters.includes(adapter)) continue;
      const B = l.lora_B.get(adapter).weight;
      B.copy_(randn(B.shape as number[], { generator: g }).mul(0.3));
    }
  });
}

describe("target_modules matching (PEFT check_target_module_exists)", () => {
  const c = (t: string[] | string, extra: Partial<ConstructorParameters<typeof LoraConfig>[0]> = {}) => new LoraConfig({ target_modules: t, ...extra });
  test("suffix after a dot or the whole path; a string is a full-match regex; layers_to_transform", () => {
    expect(check_target_module_exists(c(["attn.c_proj"]), "transformer.h.0.attn.c_proj")).toBe(true);
    expect(check_target_module_exists(c(["attn.c_proj"]), "transformer.h.0.mlp.c_proj")).toBe(false);
    expect(check_target_module_exists(c(["c_proj"]), "transformer.h.0.mlp.c_proj")).toBe(true);
    expect(check_target_module_exists(c(["proj"]), "transformer.h.0.mlp.c_proj")).toBe(false); // not a dotted suffix
    expect(check_target_module_exists(c(["lm_head"]), "lm_head")).toBe(true);
    expect(check_target_module_exists(c(".*h\\.1\\.attn\\.c_attn"), "transformer.h.1.attn.c_attn")).toBe(true);
    expect(check_target_module_exists(c(".*attn"), "transformer.h.1.attn.c_attn")).toBe(true);
    expect(check_target_module_exists(c("h\\.1\\.attn\\.c_attn"), "transformer.h.1.attn.c_attn")).toBe(false); // fullmatch, not search
    const only1 = c(["c_attn"], { layers_to_transform: [1], layers_pattern: "h" });
    expect(check_target_module_exists(only1, "transformer.h.1.attn.c_attn")).toBe(true);
    expect(check_target_module_exists(only1, "transformer.h.0.attn.c_attn")).toBe(false);
  });

  test("a target_modules or pattern regex that does not compile, or that Python's re reads differently, is refused by name", () => {
    const refused = (fields: Partial<ConstructorParameters<typeof LoraConfig>[0]>, message: string) => {
      let err: unknown;
      try {
        new LoraConfig(fields);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(LoomValueError);
      expect((err as Error).message).toStartWith(message);
    };
    // (?P<n>...) is Python-only syntax; unbalanced: wrapped as ^(?:c_attn)|(.*)$ it would match every module (Python: "unbalanced parenthesis")
    refused({ target_modules: "c_attn)|(.*" }, '[LoraConfig] target_modules "c_attn)|(.*" does not compile as a JavaScript regular expression (');
    refused({ target_modules: "(?P<n>c_attn)" }, '[LoraConfig] target_modules "(?P<n>c_attn)" does not compile as a JavaScript regular expression (');
    refused({ target_modules: "[c_attn" }, '[LoraConfig] target_modules "[c_attn" does not compile as a JavaScript regular expression (');
    // JavaScript reads \Z as "Z" and \q as "q"; Python's re: end of string, and an error
    refused({ target_modules: ".*c_attn\\Z" }, '[LoraConfig] target_modules ".*c_attn\\\\Z" uses \\Z, which Python\'s re (PEFT) and JavaScript read differently');
    refused({ target_modules: ".*\\qkv" }, '[LoraConfig] target_modules ".*\\\\qkv" uses \\q');
    refused({ target_modules: ".*\\x4" }, '[LoraConfig] target_modules ".*\\\\x4" uses \\x');
    refused({ rank_pattern: { "h.(1": 4 } }, '[LoraConfig] rank_pattern key "h.(1" does not compile as a JavaScript regular expression (');
    refused({ alpha_pattern: { "c_attn\\A": 4 } }, '[LoraConfig] alpha_pattern key "c_attn\\\\A" uses \\A');
    refused({ target_modules: 7 as never }, "[LoraConfig] target_modules must be null, a regular expression string or a list of module names, got 7");
    // check_target_module_exists with a pattern that bypassed the constructor: typed, not a SyntaxError
    expect(() => check_target_module_exists(c(["c_attn"]), "transformer.h.0.attn.c_attn", "(")).toThrow(LoomValueError);
    // what both engines read alike still works
    expect(check_target_module_exists(c(".*\\.h\\.\\d\\.attn\\.c_\\w+"), "transformer.h.1.attn.c_attn")).toBe(true);
    expect(check_target_module_exists(c(".*\\x2ec_attn"), "transformer.h.1.attn.c_attn")).toBe(true); // \x2e is "."
  });

  test("injection wraps exactly the matched modules: attn.c_proj but not mlp.c_proj", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    inject_adapter_in_model(cfg(), model);
    expect(lora_layers(model).map(([p]) => p)).toEqual([
      "transformer.h.0.attn.c_attn", "transformer.h.0.attn.c_proj", "transformer.h.1.attn.c_attn", "transformer.h.1.attn.c_proj",
    ]);
    expect(model.transformer.h.get(0).mlp.c_proj).toBeInstanceOf(Conv1D);
    const both = GPT2LMHeadModel.from_pretrained(TINY);
    inject_adapter_in_model(cfg({ target_modules: ["c_proj"] }), both);
    expect(lora_layers(both).map(([p]) => p)).toEqual([
      "transformer.h.0.attn.c_proj", "transformer.h.0.mlp.c_proj", "transformer.h.1.attn.c_proj", "transformer.h.1.mlp.c_proj",
    ]);
  });

  test("errors: nothing matched, unsupported module type, duplicate adapter name; null targets use PEFT's gpt2 default", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    expect(() => inject_adapter_in_model(cfg({ target_modules: ["q_proj"] }), model)).toThrow(/Target modules \["q_proj"\] not found in the base model/);
    expect(() => inject_adapter_in_model(cfg({ target_modules: ["ln_1"] }), model)).toThrow(/LayerNorm at "transformer.h.0.ln_1" is not supported/);
    const dflt = GPT2LMHeadModel.from_pretrained(TINY);
    inject_adapter_in_model(cfg({ target_modules: null }), dflt);
    expect(lora_layers(dflt).map(([p]) => p)).toEqual(["transformer.h.0.attn.c_attn", "transformer.h.1.attn.c_attn"]);
    expect(() => inject_adapter_in_model(cfg(), dflt)).toThrow(/already exists/);
  });

  test("fan_in_fan_out is forced to true for Conv1D targets (with PEFT's warning)", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    const warn = console.warn;
    const seen: string[] = [];
    console.warn = (m: string) => seen.push(m);
    try {
      inject_adapter_in_model(cfg({ fan_in_fan_out: false }), model);
    } finally {
      console.warn = warn;
    }
    expect(seen.length).toBe(1);
    expect(seen[0]).toMatch(/fan_in_fan_out is set to false but the target module is `Conv1D`/);
    expect(peft_config(model).get("default")!.fan_in_fan_out).toBe(true);
  });
});

describe("LoRA GPT-2", () => {
  test("PEFT in-memory keys; base frozen; only LoRA parameters get gradients", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY).train();
    const peft = get_peft_model(model, cfg());
    const keys = Object.keys(peft.state_dict());
    expect(keys).toContain("base_model.model.transformer.h.0.attn.c_attn.base_layer.weight");
    expect(keys).toContain("base_model.model.transformer.h.0.attn.c_attn.lora_A.default.weight");
    expect(keys).toContain("base_model.model.transformer.h.1.attn.c_proj.lora_B.default.weight");
    expect(keys).toContain("base_model.model.transformer.h.0.mlp.c_proj.weight");
    const trainable = peft.named_parameters().filter(([, p]) => p.requires_grad).map(([k]) => k);
    expect(trainable.length).toBe(8);
    expect(trainable.every((k) => /\.lora_[AB]\.default\.weight$/.test(k))).toBe(true);
    expect(peft.get_nb_trainable_parameters()).toEqual([2 * (2 * 12 + 36 * 2) + 2 * (2 * 12 + 12 * 2), model.num_parameters()]);
    const { loss } = peft.call(ids(), { labels: labels() });
    loss!.backward();
    for (const [k, p] of peft.named_parameters()) {
      if (k.includes("lora_")) expect(p.grad).not.toBeNull();
      else expect(p.grad).toBeNull();
    }
  });

  test("zero-initialized B: logits equal the base model's", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    const base = model.call(ids()).logits;
    inject_adapter_in_model(cfg(), model);
    expect(maxAbsDiff(model.call(ids()).logits.dataSync(), base.dataSync())).toBeLessThan(1e-5);
  });

  test("loaded without is_trainable: inference mode, nothing trains", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    const config = load_adapter(model, TINY_ADAPTER);
    expect(config.inference_mode).toBe(true);
    expect(model.parameters().some((p) => p.requires_grad)).toBe(false);
  });

  test("merged == unmerged logits; merged weights equal torch's W + (B·A)ᵀ·s; merge_and_unload gives the plain HF model", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    load_adapter(model, TINY_ADAPTER);
    const x = ids();
    const unmerged = model.call(x).logits;
    merge_adapter(model);
    expect(lora_layers(model).every(([, l]) => l.merged)).toBe(true);
    const merged = model.call(x).logits;
    const diff = maxAbsDiff(merged.dataSync(), unmerged.dataSync());
    expect(diff).toBeLessThan(1e-5);
    for (const [path, l] of lora_layers(model)) expectClose((l.base_layer as Conv1D).weight, REF.lora.merged_weights[`${path}.weight`]!, 1e-6, 1e-5);
    unmerge_adapter(model);
    expect(maxAbsDiff(model.call(x).logits.dataSync(), unmerged.dataSync())).toBeLessThan(1e-5);

    const peft = new PeftModel(model);
    const plain = peft.merge_and_unload();
    expect(plain).toBe(model);
    expect(lora_layers(plain)).toEqual([]);
    expect(plain.transformer.h.get(0).attn.c_attn).toBeInstanceOf(Conv1D);
    expect(Object.keys(plain.state_dict())).toEqual(Object.keys(GPT2LMHeadModel.from_pretrained(TINY).state_dict()));
    expect(maxAbsDiff(plain.call(x).logits.dataSync(), unmerged.dataSync())).toBeLessThan(1e-5);
    expect(() => set_adapter(plain, "default")).toThrow(/has no LoRA adapters/);
  });

  test("unload puts the base layers back without merging", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    const base = model.call(ids()).logits;
    load_adapter(model, TINY_ADAPTER);
    unload(model);
    expectBitwise(model.call(ids()).logits, base);
  });
});

describe.each(BACKENDS)("LoRA GPT-2 vs PyTorch on %s", (backend) => {
  useBackend(backend);
  test("a PEFT-format adapter written by PyTorch: logits, loss and LoRA gradients match torch", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY).train();
    const config = load_adapter(model, TINY_ADAPTER, "default", { is_trainable: true });
    expect(config.r).toBe(2);
    expect(config.extra.megatron_core).toBe("megatron.core"); // unknown PEFT fields are kept
    const { logits, loss } = model.call(ids(), { labels: labels() });
    expectClose(logits, REF.lora.logits);
    expect(loss!.item()).toBeCloseTo(REF.lora.loss, 5);
    loss!.backward();
    for (const [path, l] of lora_layers(model)) {
      expectClose(l.lora_A.get("default").weight.grad as never, REF.lora.grads[`${path}.lora_A.weight`]!, 1e-5, 1e-3);
      expectClose(l.lora_B.get("default").weight.grad as never, REF.lora.grads[`${path}.lora_B.weight`]!, 1e-5, 1e-3);
    }
  });
});

describe("several adapters", () => {
  test("add_adapter (inactive, frozen), set_adapter, disable_adapter, delete_adapter", () => {
    manual_seed(0);
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    const x = ids();
    const base = model.call(x).logits;
    const peft = get_peft_model(model, cfg());
    randomizeLora(model, 1, "default");
    const outA = model.call(x).logits;
    expect(maxAbsDiff(outA.dataSync(), base.dataSync())).toBeGreaterThan(1e-3);

    add_adapter(model, "other", cfg({ r: 3, target_modules: ["mlp.c_fc"] }));
    randomizeLora(model, 2, "other");
    expect(active_adapter(model)).toBe("default");
    expect([...peft_config(model).keys()]).toEqual(["default", "other"]);
    expect(lora_parameters(model, "other").every((p) => !p.requires_grad)).toBe(true);
    expectBitwise(model.call(x).logits, outA); // "other" is not active: no effect

    peft.set_adapter("other");
    expect(lora_parameters(model, "other").every((p) => p.requires_grad)).toBe(true);
    expect(lora_parameters(model, "default").every((p) => !p.requires_grad)).toBe(true);
    const outB = model.call(x).logits;
    expect(maxAbsDiff(outB.dataSync(), outA.dataSync())).toBeGreaterThan(1e-3);

    const off = peft.disable_adapter(() => model.call(x).logits);
    expectBitwise(off, base);
    expectBitwise(model.call(x).logits, outB); // re-enabled afterwards
    expect(() => disable_adapter(model, () => { throw new Error("boom"); })).toThrow("boom");
    expectBitwise(model.call(x).logits, outB); // re-enabled even after a throw

    set_adapter(model, ["default", "other"]); // both at once
    const outAB = model.call(x).logits;
    expect(maxAbsDiff(outAB.dataSync(), outB.dataSync())).toBeGreaterThan(1e-3);

    expect(() => set_adapter(model, "nope")).toThrow(/Adapter nope not found/);
    delete_adapter(model, "other");
    expect([...peft_config(model).keys()]).toEqual(["default"]);
    expect(active_adapter(model)).toBe("default");
    expect(lora_layers(model).map(([p]) => p).some((p) => p.includes("mlp"))).toBe(true); // wrappers stay, empty
    expect(Object.keys(model.state_dict()).some((k) => k.includes(".other."))).toBe(false);
    expect(maxAbsDiff(model.call(x).logits.dataSync(), outA.dataSync())).toBeLessThan(1e-6);
    expect(() => delete_adapter(model, "other")).toThrow(LoomValueError);
  });

  test("disable_adapter while merged unmerges (PEFT) and gives the base output", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    const base = model.call(ids()).logits;
    load_adapter(model, TINY_ADAPTER);
    merge_adapter(model);
    const off = disable_adapter(model, () => model.call(ids()).logits);
    expect(maxAbsDiff(off.dataSync(), base.dataSync())).toBeLessThan(1e-5);
    expect(lora_layers(model).some(([, l]) => l.merged)).toBe(false);
  });
});

describe("eager == lazy with LoRA (js backend, bitwise)", () => {
  useBackend("js");
  test("whole GPT forward, loss and the gradient of every LoRA parameter", () => {
    const run = (mode: "eager" | "lazy") => with_execution_mode(mode, () => {
      const model = GPT2LMHeadModel.from_pretrained(TINY).train();
      load_adapter(model, TINY_ADAPTER, "default", { is_trainable: true });
      const { logits, loss } = model.call(ids(), { labels: labels() });
      loss!.backward();
      const grads = lora_layers(model).flatMap(([, l]: [string, LoraLayer]) => [l.lora_A.get("default").weight.grad, l.lora_B.get("default").weight.grad]);
      return { logits, loss: loss!, grads };
    });
    const e = run("eager"), l = run("lazy");
    expectBitwise(e.logits, l.logits);
    expectBitwise(e.loss, l.loss);
    expect(e.grads.length).toBe(8);
    e.grads.forEach((g, i) => expectBitwise(g as never, l.grads[i] as never));
  });
});
