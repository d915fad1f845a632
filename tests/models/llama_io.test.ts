/**
 * Llama-family checkpoints and configs: save_pretrained / from_pretrained round trips (single file
 * and sharded, tied head not written), AutoConfig, typed errors for bad input (head counts, a tensor
 * of the wrong shape, unknown model_type: each names the key, the shapes and the file), the
 * attention mask (Mistral's sliding window, hand-derived), and LoRA with PEFT's names
 * ("all-linear", adapter keys base_model.model.model.layers.N...). Numbers against the torch goldens
 * are in llama.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { no_grad } from "../../src/autograd/grad_mode.ts";
import { read_header_file } from "../../src/io/safetensors.ts";
import { arange, tensor } from "../../src/lazy/creation.ts";
import type { Tensor } from "../../src/lazy/tensor.ts";
import { LoraConfig } from "../../src/lora/config.ts";
import { lora_layers } from "../../src/lora/model.ts";
import { PeftModel, get_peft_model } from "../../src/lora/peft_model.ts";
import { AutoConfig, AutoModelForCausalLM, GPT2Config, LlamaConfig, LlamaForCausalLM, LlamaRotaryEmbedding, MistralForCausalLM, llama_attention_mask } from "../../src/models/index.ts";
import { LoomShapeError, LoomValueError } from "../../src/tensor/errors.ts";
import { manual_seed } from "../../src/tensor/rng.ts";
import { FIXTURES, expectBitwise } from "./helpers.ts";

const tmp = () => mkdtempSync(join(tmpdir(), "loom-llama-"));
const ids = () => tensor([[1, 5, 7, 2, 9, 3], [4, 4, 0, 8, 1, 6]], { dtype: "int64" });
const logitsOf = (m: { call: (x: Tensor) => { logits: Tensor } }) => no_grad(() => m.call(ids()).logits);
const TINY = (over: Record<string, unknown> = {}) =>
  new LlamaConfig({ vocab_size: 16, hidden_size: 16, intermediate_size: 24, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, max_position_embeddings: 32, ...over });

/** Expect `fn` to throw `E` with a message containing every part. */
function expectThrows(fn: () => unknown, E: new (...a: never[]) => Error, parts: string[]): void {
  let err: unknown = null;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(E);
  for (const p of parts) expect((err as Error).message).toContain(p);
}

describe("save_pretrained / from_pretrained", () => {
  test("single file: HF config names, every weight, same logits after reload", () => {
    const model = AutoModelForCausalLM.from_pretrained(join(FIXTURES, "tiny_llama")) as LlamaForCausalLM;
    const dir = tmp();
    model.save_pretrained(dir);
    expect(readdirSync(dir).sort()).toEqual(["config.json", "model.safetensors"]);
    const cfg = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
    for (const k of ["hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "rms_norm_eps", "rope_theta", "max_position_embeddings", "tie_word_embeddings", "attention_bias", "head_dim", "vocab_size", "num_hidden_layers"]) {
      expect(cfg, k).toHaveProperty(k);
    }
    expect(cfg.model_type).toBe("llama");
    expect(read_header_file(join(dir, "model.safetensors")).tensors.has("lm_head.weight")).toBe(true);
    expectBitwise(logitsOf(LlamaForCausalLM.from_pretrained(dir)), logitsOf(model));
  });

  test("sharded with a tied head: index + shards, lm_head.weight not written, Qwen2 fields kept", () => {
    const model = AutoModelForCausalLM.from_pretrained(join(FIXTURES, "tiny_qwen2")) as LlamaForCausalLM;
    const dir = tmp();
    model.save_pretrained(dir, { max_shard_size: 20_000 });
    const files = readdirSync(dir).sort();
    expect(files).toContain("model.safetensors.index.json");
    expect(files.filter((f) => /^model-\d{5}-of-\d{5}\.safetensors$/.test(f)).length).toBeGreaterThan(1);
    const index = JSON.parse(readFileSync(join(dir, "model.safetensors.index.json"), "utf8"));
    expect(Object.keys(index.weight_map)).not.toContain("lm_head.weight");
    expect(Object.keys(index.weight_map)).toContain("model.layers.1.self_attn.k_proj.bias");
    const cfg = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
    expect([cfg.model_type, cfg.tie_word_embeddings, cfg.use_sliding_window, cfg.max_window_layers]).toEqual(["qwen2", true, false, 2]);
    const back = AutoModelForCausalLM.from_pretrained(dir) as LlamaForCausalLM;
    expect(back.lm_head.weight).toBe(back.model.embed_tokens.weight);
    expectBitwise(logitsOf(back), logitsOf(model));
  });

  test.each(["bfloat16", "float16"] as const)("from_pretrained(dtype: %s): half weights, float32 loss, cached decoding in the same dtype", (dtype) => {
    const R = JSON.parse(readFileSync(join(import.meta.dir, "llama_goldens.json"), "utf8")).models.tiny_qwen2;
    const model = AutoModelForCausalLM.from_pretrained(join(FIXTURES, "tiny_qwen2"), { dtype }) as LlamaForCausalLM;
    expect(model.parameters().every((p) => p.dtype === dtype)).toBe(true);
    const input_ids = tensor(R.input_ids, { dtype: "int64" });
    const { logits, loss } = no_grad(() => model.call(input_ids, { labels: tensor(R.labels, { dtype: "int64" }) }));
    expect([logits.dtype, loss!.dtype]).toEqual([dtype, "float32"]);
    // |logits| <= 7: bfloat16 keeps 8 significant bits (measured max |diff| 0.056), float16 11 (0.010)
    const got = logits.float().dataSync();
    const tol = dtype === "bfloat16" ? 0.15 : 0.03;
    expect(Math.max(...Array.from(got, (v, i) => Math.abs(v - R.logits.data[i])))).toBeLessThan(tol);
    expect(Math.abs(loss!.item() - R.loss)).toBeLessThan(tol / 10);
    const cache = model.make_cache(input_ids, 12);
    expect(cache.dtype).toBe(dtype);
    const step = no_grad(() => {
      model.call(input_ids.narrow(1, 0, 5).contiguous(), { past_key_values: cache });
      return model.call(input_ids.narrow(1, 5, 1).contiguous(), { past_key_values: cache }).logits;
    });
    expect(step.dtype).toBe(dtype);
    expect(Math.max(...step.float().sub(logits.float().narrow(1, 5, 1)).abs().dataSync())).toBeLessThan(tol);
  });

  test("the Hugging Face cache layout (snapshot files linking into blobs/) loads", () => {
    const root = join(tmp(), "models--tiny--qwen2");
    const snap = join(root, "snapshots", "0123abc");
    mkdirSync(join(root, "blobs"), { recursive: true });
    mkdirSync(snap, { recursive: true });
    for (const [f, blob] of [["config.json", "b1"], ["model.safetensors", "b2"]] as const) {
      cpSync(join(FIXTURES, "tiny_qwen2", f), join(root, "blobs", blob));
      symlinkSync(join("..", "..", "blobs", blob), join(snap, f));
    }
    const model = AutoModelForCausalLM.from_pretrained(snap);
    expectBitwise(logitsOf(model as LlamaForCausalLM), logitsOf(AutoModelForCausalLM.from_pretrained(join(FIXTURES, "tiny_qwen2")) as LlamaForCausalLM));
  });

  test("AutoConfig dispatches on model_type (gpt2 too)", () => {
    expect(AutoConfig.from_pretrained(join(FIXTURES, "tiny_gpt2"))).toBeInstanceOf(GPT2Config);
    const c = AutoConfig.from_pretrained(join(FIXTURES, "tiny_qwen2")) as LlamaConfig;
    expect([c.model_type, c.num_key_value_groups, c.qkv_bias, c.o_bias, c.head_dim]).toEqual(["qwen2", 2, true, false, 8]);
  });

  test("from_pretrained does not run HF's random initialization (init: false)", () => {
    const orig = LlamaForCausalLM.prototype.init_weights;
    let calls = 0;
    LlamaForCausalLM.prototype.init_weights = function (this: LlamaForCausalLM, ...a) {
      calls++;
      return orig.apply(this, a);
    };
    try {
      LlamaForCausalLM.from_pretrained(join(FIXTURES, "tiny_llama"));
      expect(calls).toBe(0);
      new LlamaForCausalLM(TINY());
      expect(calls).toBe(1);
    } finally {
      LlamaForCausalLM.prototype.init_weights = orig;
    }
  });
});

describe("bad input: typed errors naming the key, the shapes and the file", () => {
  test("inconsistent head counts", () => {
    expectThrows(() => TINY({ hidden_size: 18 }), LoomValueError, ["hidden_size=18", "num_attention_heads=4"]);
    expectThrows(() => TINY({ num_key_value_heads: 3 }), LoomValueError, ["num_attention_heads=4", "num_key_value_heads=3"]);
    expect(TINY({ hidden_size: 18, head_dim: 4 }).head_dim).toBe(4); // HF: an explicit head_dim need not divide hidden_size
    expectThrows(() => TINY({ rope_scaling: { rope_type: "yarn", factor: 8 } }), LoomValueError, ["rope_scaling", "yarn"]);
    expectThrows(() => TINY({ rope_scaling: { rope_type: "llama3", factor: 8 } }), LoomValueError, ["rope_scaling.low_freq_factor"]);
    expectThrows(() => TINY({ hidden_act: "gelu" }), LoomValueError, ["hidden_act"]);
    const dir = tmp();
    cpSync(join(FIXTURES, "tiny_llama"), dir, { recursive: true });
    const cfg = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
    writeFileSync(join(dir, "config.json"), JSON.stringify({ ...cfg, num_key_value_heads: 3 }));
    expectThrows(() => AutoModelForCausalLM.from_pretrained(dir), LoomValueError, ["num_key_value_heads=3", join(dir, "config.json")]);
  });

  test("a tensor of the wrong shape", () => {
    const dir = tmp();
    manual_seed(0);
    new LlamaForCausalLM(TINY({ num_key_value_heads: 4 })).save_pretrained(dir, { max_shard_size: 8_000 });
    writeFileSync(join(dir, "config.json"), TINY().to_json_string()); // the config says 2 KV heads
    const index = JSON.parse(readFileSync(join(dir, "model.safetensors.index.json"), "utf8"));
    const shard = index.weight_map["model.layers.0.self_attn.k_proj.weight"];
    expectThrows(() => LlamaForCausalLM.from_pretrained(dir), LoomShapeError, ["model.layers.0.self_attn.k_proj.weight", "[16, 16]", "[8, 16]", join(dir, shard)]);
  });

  test("unknown or missing model_type", () => {
    const dir = tmp();
    writeFileSync(join(dir, "config.json"), JSON.stringify({ model_type: "bert", hidden_size: 8 }));
    expectThrows(() => AutoModelForCausalLM.from_pretrained(dir), LoomValueError, ["model_type", "bert", join(dir, "config.json")]);
    expectThrows(() => AutoConfig.from_pretrained(dir), LoomValueError, ["model_type", "bert", join(dir, "config.json")]);
    writeFileSync(join(dir, "config.json"), JSON.stringify({ hidden_size: 8 }));
    expectThrows(() => AutoModelForCausalLM.from_pretrained(dir), LoomValueError, ["model_type", join(dir, "config.json")]);
    expectThrows(() => new LlamaConfig({ model_type: "gpt2" }), LoomValueError, ["model_type", "gpt2"]);
  });

  test("attention_mask, cache and labels of the wrong shape", () => {
    manual_seed(0);
    const model = new LlamaForCausalLM(TINY());
    expectThrows(() => model.call(ids(), { attention_mask: tensor([[1, 1, 1]], { dtype: "int64" }) }), LoomShapeError, ["attention_mask", "[1, 3]"]);
    const cache = model.make_cache({ shape: [1, 6], device: "cpu" }, 8);
    expectThrows(() => model.call(ids(), { past_key_values: cache }), LoomShapeError, ["batch 2", "batch 1"]);
    expectThrows(() => model.call(ids(), { labels: tensor([[1, 2]], { dtype: "int64" }) }), LoomShapeError, ["labels", "[1, 2]"]);
  });
});

describe("RoPE scaling", () => {
  const G = JSON.parse(readFileSync(join(import.meta.dir, "llama_goldens.json"), "utf8")).rope_scaling;
  test.each(["default", "linear", "llama3"])("inv_freq for rope_type %s equals HF's (float32)", (type) => {
    const ref = type === "default" ? { rope_scaling: null, inv_freq: G.default } : G[type];
    const config = new LlamaConfig({ hidden_size: 64, num_attention_heads: 4, head_dim: G.head_dim, rope_theta: G.rope_theta, rope_scaling: ref.rope_scaling, num_hidden_layers: 0 });
    const got = new LlamaRotaryEmbedding(config).inv_freq.dataSync();
    expect(got.length).toBe(ref.inv_freq.length);
    // float32 against torch's float32: the wavelength is 2π/f here and (2π)·(1/f) in Loom (one more rounding)
    ref.inv_freq.forEach((v: number, i: number) => expect(Math.abs(got[i]! - v)).toBeLessThanOrEqual(2e-7 * Math.abs(v)));
    if (type === "llama3") expect(new Set(G.llama3.bands)).toEqual(new Set(["kept", "interpolated", "divided"]));
  });
});

describe("attention mask", () => {
  test("Mistral's sliding window, hand-derived: query t attends keys s with t - window < s <= t, padding removed", () => {
    const pos = arange(0, 5, 1, { dtype: "int64" });
    const m = llama_attention_mask(pos, pos, "float32", tensor([[0, 1, 1, 1, 1]], { dtype: "int64" }), 2);
    const allowed = Array.from(m.dataSync(), (v) => (v === 0 ? 1 : 0));
    expect(allowed).toEqual([
      0, 0, 0, 0, 0, // t=0: key 0 is padding
      0, 1, 0, 0, 0,
      0, 1, 1, 0, 0,
      0, 0, 1, 1, 0, // window 2: keys 2, 3
      0, 0, 0, 1, 1,
    ]);
    expect(Math.min(...m.dataSync())).toBe(-3.4028234663852886e38);
  });

  test("a Mistral model: a window >= T changes nothing; with a window, cached decoding equals the full forward", () => {
    manual_seed(1);
    const llama = new LlamaForCausalLM(TINY());
    const sd = llama.state_dict();
    const mistral = (w: number | null) => {
      const m = new MistralForCausalLM(TINY({ model_type: "mistral", sliding_window: w }), { init: false });
      m.load_state_dict(sd);
      return m;
    };
    expectBitwise(logitsOf(mistral(6)), logitsOf(llama));
    const windowed = mistral(2);
    const full = logitsOf(windowed);
    expect(Math.max(...full.sub(logitsOf(llama)).abs().dataSync())).toBeGreaterThan(1e-3);
    const cache = windowed.make_cache(ids(), 8);
    const parts = no_grad(() => [[0, 3], [3, 1], [4, 1], [5, 1]].map(([s, n]) => windowed.call(ids().narrow(1, s!, n!).contiguous(), { past_key_values: cache }).logits));
    parts.forEach((p, i) => {
      const [s, n] = [[0, 3], [3, 1], [4, 1], [5, 1]][i]!;
      expect(Math.max(...p.sub(full.narrow(1, s!, n!)).abs().dataSync())).toBeLessThan(1e-5);
    });
  });
});

describe("LoRA with PEFT's names", () => {
  test('"all-linear" wraps every projection but lm_head; the adapter saves with PEFT keys and reloads', () => {
    const base = () => AutoModelForCausalLM.from_pretrained(join(FIXTURES, "tiny_llama")) as LlamaForCausalLM;
    manual_seed(3);
    const peft = get_peft_model(base(), new LoraConfig({ r: 2, lora_alpha: 4, target_modules: "all-linear", init_lora_weights: false }));
    const paths = lora_layers(peft).map(([p]) => p);
    expect(paths.length).toBe(2 * 7);
    expect(paths.filter((p) => p.startsWith("model.layers.0.")).map((p) => p.split(".").at(-1)).sort()).toEqual(["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]);
    expect(paths).not.toContain("lm_head");
    const dir = tmp();
    peft.save_pretrained(dir);
    const keys = [...read_header_file(join(dir, "adapter_model.safetensors")).tensors.keys()];
    expect(keys).toContain("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
    expect(keys).toContain("base_model.model.model.layers.1.mlp.down_proj.lora_B.weight");
    expect(keys.length).toBe(2 * 7 * 2);
    const cfg = JSON.parse(readFileSync(join(dir, "adapter_config.json"), "utf8"));
    expect([...cfg.target_modules].sort()).toEqual(["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]);
    const back = PeftModel.from_pretrained(base(), dir);
    expectBitwise(logitsOf(back as never), logitsOf(peft as never));
    expect(Math.max(...logitsOf(peft as never).sub(logitsOf(base())).abs().dataSync())).toBeGreaterThan(1e-4); // the adapter is not a no-op
  });

  test('"all-linear" on GPT-2: every Conv1D (c_attn, c_proj, c_fc), not the tied lm_head', () => {
    const peft = get_peft_model(AutoModelForCausalLM.from_pretrained(join(FIXTURES, "tiny_gpt2")), new LoraConfig({ r: 2, target_modules: "all-linear", fan_in_fan_out: true }));
    expect(new Set(lora_layers(peft).map(([p]) => p.split(".").at(-1)))).toEqual(new Set(["c_attn", "c_proj", "c_fc"]));
    expect(lora_layers(peft).some(([p]) => p === "lm_head")).toBe(false);
  });

  test("default target_modules for llama are PEFT's q_proj, v_proj", () => {
    const peft = get_peft_model(AutoModelForCausalLM.from_pretrained(join(FIXTURES, "tiny_llama")), new LoraConfig({ r: 2 }));
    expect(lora_layers(peft).map(([p]) => p.split(".").at(-1))).toEqual(["q_proj", "v_proj", "q_proj", "v_proj"]);
  });
});
