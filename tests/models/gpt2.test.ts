/**
 * GPT-2 (HF layout) against PyTorch: forward logits, HF loss and every parameter gradient of a
 * tiny model whose weights and reference values come from fixtures/gen_gpt2_fixtures.py
 * (plain torch 1.13 following transformers' modeling_gpt2 formulas).
 */
import { describe, expect, test } from "bun:test";
import { tensor } from "../../src/lazy/creation.ts";
import { Conv1D } from "../../src/nn/conv1d.ts";
import { with_execution_mode } from "../../src/nn/execution.ts";
import { GPT2Config } from "../../src/models/gpt2_config.ts";
import { GPT2LMHeadModel, sample_logits } from "../../src/models/gpt2.ts";
import { Generator, manual_seed } from "../../src/tensor/rng.ts";
import { LoomShapeError, LoomValueError } from "../../src/tensor/errors.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { REF, TINY, TINY_OPENAI, expectBitwise, expectClose, ids, labels, maxAbsDiff } from "./helpers.ts";

describe.each(BACKENDS)("GPT2LMHeadModel vs PyTorch (tiny config) on %s", (backend) => {
  useBackend(backend);

  test("logits and HF loss (labels shifted inside, -100 ignored)", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    const { logits, loss } = model.call(ids(), { labels: labels() });
    expectClose(logits, REF.logits);
    expect(loss!.item()).toBeCloseTo(REF.loss, 5);
  });

  test("gradients of every parameter (wte includes the tied lm_head's)", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY).train();
    const { loss } = model.call(ids(), { labels: labels() });
    loss!.backward();
    const named = new Map(model.named_parameters());
    expect([...named.keys()].sort()).toEqual(Object.keys(REF.grads).sort()); // lm_head.weight is wte.weight: listed once
    for (const [k, g] of Object.entries(REF.grads)) expectClose(named.get(k)!.grad as never, g, 1e-5, 1e-3);
  });

  test("OpenAI's layout loads too: no transformer. prefix, attn.bias/attn.masked_bias buffers, no lm_head", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY_OPENAI);
    expectClose(model.call(ids()).logits, REF.logits);
  });

  test("targets (already shifted) give the same loss as labels", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    const x = ids();
    const byLabels = model.call(x, { labels: x }).loss!.item();
    const byTargets = model.call(x.narrow(1, 0, 6), { targets: x.narrow(1, 1, 6) }).loss!.item();
    expect(byTargets).toBeCloseTo(byLabels, 6);
    expect(() => model.call(x, { labels: x, targets: x })).toThrow(LoomValueError);
  });
});

describe("HF layout", () => {
  test("state_dict keys are HF's; Conv1D weights are [in, out]; lm_head is tied to wte", () => {
    const cfg = new GPT2Config({ vocab_size: 13, n_positions: 8, n_embd: 12, n_layer: 2, n_head: 3 });
    const model = new GPT2LMHeadModel(cfg);
    const keys = Object.keys(model.state_dict());
    expect(keys.slice(0, 2)).toEqual(["transformer.wte.weight", "transformer.wpe.weight"]);
    expect(keys.slice(2, 14)).toEqual([
      "transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias",
      "transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_attn.bias",
      "transformer.h.0.attn.c_proj.weight", "transformer.h.0.attn.c_proj.bias",
      "transformer.h.0.ln_2.weight", "transformer.h.0.ln_2.bias",
      "transformer.h.0.mlp.c_fc.weight", "transformer.h.0.mlp.c_fc.bias",
      "transformer.h.0.mlp.c_proj.weight", "transformer.h.0.mlp.c_proj.bias",
    ]);
    expect(keys.slice(-3)).toEqual(["transformer.ln_f.weight", "transformer.ln_f.bias", "lm_head.weight"]);
    expect(model.state_dict()["transformer.h.1.attn.c_attn.weight"]!.shape).toEqual([12, 36]); // [nx, nf]
    expect(model.state_dict()["transformer.h.1.mlp.c_proj.weight"]!.shape).toEqual([48, 12]);
    expect(model.lm_head.weight).toBe(model.transformer.wte.weight);
    expect(model.num_parameters()).toBe(model.parameters().reduce((n, p) => n + p.numel(), 0));
    expect(String(model.transformer.h.get(0).attn.c_attn)).toBe("Conv1D(nf=36, nx=12)");
  });

  test("HF initialization: N(0, 0.02²) weights, c_proj scaled by 1/√(2·n_layer), zero biases, unit LayerNorm", () => {
    manual_seed(0);
    const model = new GPT2LMHeadModel(new GPT2Config({ vocab_size: 50, n_positions: 16, n_embd: 64, n_layer: 8, n_head: 4 }));
    const std = (t: { dataSync(): Float64Array }) => {
      const d = t.dataSync();
      const m = d.reduce((a, b) => a + b, 0) / d.length;
      return Math.sqrt(d.reduce((a, b) => a + (b - m) ** 2, 0) / d.length);
    };
    const blk = model.transformer.h.get(0);
    expect(std((blk.attn.c_attn as Conv1D).weight)).toBeCloseTo(0.02, 2);
    expect(std((blk.mlp.c_proj as Conv1D).weight) / 0.005).toBeCloseTo(1, 1); // 0.02 / √16
    expect(std(model.transformer.wte.weight)).toBeCloseTo(0.02, 2);
    expect([...(blk.attn.c_attn as Conv1D).bias.dataSync()].every((v) => v === 0)).toBe(true);
    expect([...blk.ln_1.weight!.dataSync()].every((v) => v === 1)).toBe(true);
  });

  test("Conv1D is y = x W + b with W [nx, nf]", () => {
    const c = new Conv1D(3, 2);
    c.weight.detach().copy_(tensor([[1, 2, 3], [4, 5, 6]], { dtype: "float32" }));
    c.bias.detach().copy_(tensor([0.5, 0, -1]));
    // [1, 1] @ W = [5, 7, 9], + b
    const f32 = { dtype: "float32" as const };
    expect(c.call(tensor([[1, 1]], f32)).tolist()).toEqual([[5.5, 7, 8]]);
    expect(() => c.call(tensor([[1, 1, 1]], f32))).toThrow(LoomShapeError);
  });

  test("config validation and config.json round trip keep unknown fields", () => {
    expect(() => new GPT2Config({ n_embd: 10, n_head: 3 })).toThrow(/divisible/);
    expect(() => new GPT2Config({ activation_function: "mish" as never })).toThrow(/not supported/);
    expect(() => new GPT2Config({ resid_pdrop: 2 })).toThrow(LoomValueError);
    expect(() => GPT2Config.from_dict({ model_type: "llama" })).toThrow(/model_type/);
    const cfg = GPT2Config.from_pretrained(TINY);
    expect(cfg.n_embd).toBe(12);
    expect(cfg.extra.n_ctx).toBe(8);
    const back = JSON.parse(cfg.to_json_string());
    expect(back).toEqual(REF.config);
  });

  test("input checks: sequence longer than n_positions, non-2-D ids", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    expect(() => model.call(tensor([[1, 2, 3, 4, 5, 6, 7, 8, 9]], { dtype: "int64" }))).toThrow(/n_positions=8/);
    expect(() => model.call(tensor([1, 2, 3], { dtype: "int64" }))).toThrow(LoomShapeError);
  });
});

/** Logits, loss and every parameter gradient of one training step, run eagerly or lazily. */
function step(mode: "eager" | "lazy") {
  return with_execution_mode(mode, () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY).train();
    const { logits, loss } = model.call(ids(), { labels: labels() });
    loss!.backward();
    return { logits, loss: loss!, grads: model.named_parameters().map(([k, p]) => [k, p.grad] as const) };
  });
}

describe("eager == lazy (js backend, bitwise)", () => {
  useBackend("js");
  test("whole GPT forward and backward: logits, loss and every gradient", () => {
    const e = step("eager"), l = step("lazy");
    expectBitwise(e.logits, l.logits);
    expectBitwise(e.loss, l.loss);
    expect(e.grads.length).toBe(l.grads.length);
    e.grads.forEach(([k, g], i) => {
      expect(l.grads[i]![0]).toBe(k);
      expectBitwise(g as never, l.grads[i]![1] as never);
    });
  });
});

describe.each(BACKENDS.filter((b) => b !== "js"))("eager == lazy on %s (float32 tolerance: kernels may differ per path)", (backend) => {
  useBackend(backend);
  test("whole GPT forward and backward", () => {
    const e = step("eager"), l = step("lazy");
    expect(maxAbsDiff(e.logits.dataSync(), l.logits.dataSync())).toBeLessThan(1e-5);
    e.grads.forEach(([, g], i) => expect(maxAbsDiff((g as never as { dataSync(): Float64Array }).dataSync(), (l.grads[i]![1] as never as { dataSync(): Float64Array }).dataSync())).toBeLessThan(1e-5));
  });
});

describe("generate", () => {
  test("shape, determinism per generator seed, greedy = argmax, top_k=1 = greedy", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    const prompt = tensor([[1, 2], [3, 4]], { dtype: "int64" });
    const a = model.generate(prompt, 10, { generator: new Generator(7) });
    const b = model.generate(prompt, 10, { generator: new Generator(7) });
    expect(a.shape).toEqual([2, 12]);
    expect(a.dtype).toBe("int64");
    expect(a.tolist()).toEqual(b.tolist());
    expect((a.tolist() as number[][]).map((r) => r.slice(0, 2))).toEqual([[1, 2], [3, 4]]);
    const greedy = model.generate(prompt, 3, { temperature: 0 });
    const logits = model.call(prompt).logits; // [2, 2, V]
    const first = (logits.narrow(1, 1, 1).argmax(-1).tolist() as number[][]).map((r) => r[0]);
    expect((greedy.tolist() as number[][]).map((r) => r[2])).toEqual(first);
    expect(model.generate(prompt, 3, { top_k: 1, generator: new Generator(1) }).tolist()).toEqual(greedy.tolist());
    expect(model.training).toBe(false);
    // context longer than n_positions is cropped, not an error
    expect(model.generate(prompt, 9, { temperature: 0 }).shape).toEqual([2, 11]);
    expect(() => model.generate(prompt, 1, { top_k: 0 })).toThrow(LoomValueError);
  });

  test("sample_logits: temperature and top-k restrict the support", () => {
    const row = [0, 5, 1, 4];
    let u = 0;
    const seq = [0.01, 0.5, 0.99];
    const draws = seq.map(() => sample_logits(row, 1, 2, () => seq[u++]!));
    expect(draws.every((d) => d === 1 || d === 3)).toBe(true);
    expect(sample_logits(row, 0, null, () => 0.3)).toBe(1);
  });
});
