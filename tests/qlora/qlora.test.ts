/**
 * QLoRA: PEFT LoRA adapters on a frozen quantized base (loom.compress to NF4 / Q8_0 / Q4_0, then
 * get_peft_model), on js and native.
 * - The LoRA gradients equal those of the same model whose base is the dequantized weight in
 *   float32 (an independent dense path: plain Conv1D layers holding dequantize()ᵀ), within float32
 *   tolerance; eager == lazy (bit-equal on js at tolerance "exact").
 * - The dense base is never built: no float32 buffer of a compressed weight's size in any lazy
 *   plan of the step, and the weight cache stays empty (no materialize()).
 * - merge on a quantized base = dequantize, add ΔW, requantize (PEFT Linear4bit.merge), checked
 *   against Quantized.quantize of W + s·B·A; unmerge restores the node exactly.
 * - An adapter trained on the NF4 base saves in PEFT's format and loads onto the float32 base.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as loom from "../../src/index.ts";
import { lora, models, nn, optim } from "../../src/index.ts";
import { Conv1D } from "../../src/nn/conv1d.ts";
import { Parameter } from "../../src/nn/parameter.ts";
import { cachedPlans, clear_plan_cache } from "../../src/scheduler/compile.ts";
import { CompressedLinear, LowRank, Quantized, WeightCache, set_default_weight_cache } from "../../src/weights/index.ts";
import { LoomValueError } from "../../src/tensor/errors.ts";
import { BACKENDS, useBackend } from "../backends.ts";

const FORMATS = ["nf4", "q8_0", "q4_0"] as const;
type Fmt = (typeof FORMATS)[number];
const TARGETS = ["attn.c_attn", "attn.c_proj"];
const B = 3, T = 8, V = 23; // batch 3: no activation has the numel of a compressed weight (checked below)

/** A tiny GPT-2 (n_embd 64: every linear's K is a multiple of NF4's block of 64). */
function gpt(): models.GPT2LMHeadModel {
  loom.manual_seed(0);
  return new models.GPT2LMHeadModel(new models.GPT2Config({
    vocab_size: V, n_positions: T, n_embd: 64, n_layer: 1, n_head: 2,
    resid_pdrop: 0, embd_pdrop: 0, attn_pdrop: 0, activation_function: "gelu",
  }));
}

const loraConfig = () => new lora.LoraConfig({ r: 4, lora_alpha: 8, lora_dropout: 0, target_modules: TARGETS, fan_in_fan_out: true });

/** B starts at zero (PEFT): make it non-zero so every gradient path counts. Same values for the same seed. */
function randomizeLoraB(model: nn.Module, seed: number): void {
  const g = new loom.Generator(seed);
  for (const [name, p] of model.named_parameters()) {
    if (name.includes("lora_B")) loom.no_grad(() => p.copy_(loom.randn(p.shape as number[], { generator: g }).mul(0.1)));
  }
}

interface Pair {
  /** Base compressed to `format` (every Linear/Conv1D but the tied head), LoRA on TARGETS. */
  q: models.GPT2LMHeadModel;
  /** The same model with every compressed layer back as a float32 Conv1D holding the dequantized weight. */
  f: models.GPT2LMHeadModel;
  /** Logical [N, K] of the compressed weights. */
  shapes: number[][];
}

function pair(format: Fmt): Pair {
  const q = gpt(), f = gpt();
  const report = loom.compress(q, { method: format });
  for (const l of report.layers) {
    const cl = q.get_submodule(l.name) as CompressedLinear;
    const conv = f.get_submodule(l.name) as Conv1D;
    loom.no_grad(() => conv.weight.copy_(cl.dequantize().t().contiguous())); // Conv1D keeps [in, out]
  }
  for (const m of [q, f]) {
    lora.get_peft_model(m, loraConfig(), "default", { generator: new loom.Generator(3) });
    randomizeLoraB(m, 5);
  }
  return { q, f, shapes: report.layers.map((l) => l.shape) };
}

const data = () => {
  const g = new loom.Generator(11);
  return { x: loom.randint(0, V, [B, T], { generator: g }), y: loom.randint(0, V, [B, T], { generator: g }) };
};

/** Loss and the LoRA gradients (A, B of each layer, in lora_parameters order) of one backward. */
function lossAndGrads(model: models.GPT2LMHeadModel, mode: nn.ExecutionMode): { loss: number; grads: Float64Array[] } {
  const { x, y } = data();
  const params = lora.lora_parameters(model);
  for (const p of params) p.grad = null;
  model.train();
  return nn.with_execution_mode(mode, () => {
    const { loss } = model.call(x, { targets: y });
    loss!.backward();
    return { loss: loss!.item(), grads: params.map((p) => Float64Array.from(p.grad!.dataSync())) };
  });
}

/** Elements outside torch.testing's float32 tolerance |a − b| ≤ 1e-5 + 1.3e-6·|b| (as "tensor i, element j"). */
function outsideF32(a: Float64Array[], b: Float64Array[]): string[] {
  const bad: string[] = [];
  a.forEach((ai, i) => {
    expect(ai.length).toBe(b[i]!.length);
    for (let j = 0; j < ai.length; j++) if (!(Math.abs(ai[j]! - b[i]![j]!) <= 1e-5 + 1.3e-6 * Math.abs(b[i]![j]!))) bad.push(`${i}:${j}`);
  });
  return bad;
}

let cache: WeightCache<object>;
let prevCache: WeightCache<object>;
beforeAll(() => {
  cache = new WeightCache(Infinity);
  prevCache = set_default_weight_cache(cache);
});
afterAll(() => {
  set_default_weight_cache(prevCache);
});

describe.each(BACKENDS)("QLoRA on %s", (backend) => {
  useBackend(backend);
  for (const format of FORMATS) {
    test(`${format}: LoRA gradients through the fused dequantize-matmul == those of the dequantized float32 base; eager == lazy`, () => {
      const { q, f } = pair(format);
      expect(lora.lora_layers(q).every(([, l]) => l.compressed_base && !l.fan_in_fan_out)).toBe(true);
      expect(lora.get_nb_trainable_parameters(q)).toEqual(lora.get_nb_trainable_parameters(f).map((n, i) => (i === 0 ? n : q.num_parameters())) as [number, number]);
      const ref = lossAndGrads(f, "eager");
      const exact = backend === "js";
      const run = (mode: nn.ExecutionMode) => (exact ? loom.with_compiler_options({ tolerance: "exact" }, () => lossAndGrads(q, mode)) : lossAndGrads(q, mode));
      const eager = run("eager"), lazy = run("lazy");
      // against the dense float32 base: the kernels sum in another order (float32 rounding only;
      // measured ≤ 4e-8 absolute on gradients of magnitude ≤ 0.13)
      expect(Math.abs(eager.loss - ref.loss)).toBeLessThan(1e-5 * Math.abs(ref.loss));
      expect(outsideF32(eager.grads, ref.grads)).toEqual([]);
      if (exact) {
        expect(lazy.loss).toBe(eager.loss);
        lazy.grads.forEach((g, i) => expect(Array.from(g)).toEqual(Array.from(eager.grads[i]!)));
      } else {
        expect(Math.abs(lazy.loss - eager.loss)).toBeLessThan(1e-5 * Math.abs(eager.loss));
        expect(outsideF32(lazy.grads, eager.grads)).toEqual([]);
      }
    });
  }

  test("nf4: a lazy AdamW step never builds the dense base (no [N, K] float buffer in any plan; weight cache empty)", () => {
    const { q, shapes } = pair("nf4");
    cache.clear();
    clear_plan_cache();
    const opt = new optim.AdamW(q.parameters().filter((p) => p.requires_grad), { lr: 1e-2 });
    const { x, y } = data();
    q.train();
    const loss = nn.with_execution_mode("lazy", () => {
      opt.zero_grad();
      const { loss } = q.call(x, { targets: y });
      loss!.backward();
      opt.step();
      return loss!.item();
    });
    expect(Number.isFinite(loss)).toBe(true);
    const dense = new Set(shapes.map(([n, k]) => n! * k!));
    const slots = cachedPlans().flatMap((p) => p.slots);
    expect(slots.length).toBeGreaterThan(0);
    const bad = slots.filter((s) => s.dtype === "float32" && dense.has(s.shape.reduce((a, b) => a * b, 1)));
    expect(bad.map((s) => s.shape)).toEqual([]);
    const impls = cachedPlans().flatMap((p) => p.instructions.map((i) => i.op.name));
    expect(impls).toContain("quantized_linear");
    const st = cache.stats();
    expect([st.entries, st.misses, st.hits]).toEqual([0, 0, 0]);
  });
});

describe("QLoRA merge, adapter files, prepare_model_for_kbit_training", () => {
  test("merge on an NF4 base = requantize(dequant(W) + s·B·A) (PEFT Linear4bit.merge); unmerge restores the node exactly", () => {
    const { q } = pair("nf4");
    const { x } = data();
    q.eval();
    const before = loom.no_grad(() => q.call(x).logits.dataSync());
    const layers = lora.lora_layers(q);
    const nodes = layers.map(([, l]) => (l.base_layer as CompressedLinear).weight);
    // independent reference: quantize W + s·B·A ourselves, into a copy without LoRA
    const want = layers.map(([, l]) => loom.no_grad(() => {
      const base = l.base_layer as CompressedLinear;
      const dW = l.lora_B.get("default").weight.matmul(l.lora_A.get("default").weight).mul(l.scaling.default!);
      return Quantized.quantize(base.dequantize().add(dW), "nf4");
    }));
    lora.merge_adapter(q);
    layers.forEach(([, l], i) => {
      const got = (l.base_layer as CompressedLinear).weight as Quantized;
      expect(got).toBeInstanceOf(Quantized);
      expect(Array.from(got.qweight.dataSync())).toEqual(Array.from(want[i]!.qweight.dataSync()));
      expect(Array.from(got.scales!.dataSync())).toEqual(Array.from(want[i]!.scales!.dataSync()));
    });
    const merged = loom.no_grad(() => q.call(x).logits.dataSync());
    let d = 0;
    for (let i = 0; i < merged.length; i++) d = Math.max(d, Math.abs(merged[i]! - before[i]!));
    expect(d).toBeGreaterThan(0); // one more quantization's rounding
    expect(d).toBeLessThan(0.5);
    lora.unmerge_adapter(q);
    layers.forEach(([, l], i) => expect((l.base_layer as CompressedLinear).weight).toBe(nodes[i]!));
    expect(Array.from(loom.no_grad(() => q.call(x).logits.dataSync()))).toEqual(Array.from(before));
    // merge_and_unload gives the plain model with requantized CompressedLinear layers
    const plain = lora.merge_and_unload<models.GPT2LMHeadModel>(q);
    expect(plain.get_submodule("transformer.h.0.attn.c_attn")).toBeInstanceOf(CompressedLinear);
    expect(lora.lora_layers(plain)).toEqual([]);
  });

  test("merge refuses a node kind it cannot re-make (low-rank) with a typed error; the layer is unchanged", () => {
    const m = gpt();
    loom.compress(m, { method: "lowrank", rank: 4, target_modules: TARGETS });
    lora.get_peft_model(m, loraConfig());
    const [[, l]] = lora.lora_layers(m) as [[string, lora.LoraLayer]];
    const node = (l.base_layer as CompressedLinear).weight;
    expect(node).toBeInstanceOf(LowRank);
    expect(() => lora.merge_adapter(m)).toThrow(LoomValueError);
    expect(() => lora.merge_adapter(m)).toThrow(/cannot re-make a "lowrank" weight \[192, 64\]/);
    expect((l.base_layer as CompressedLinear).weight).toBe(node);
    expect(l.merged).toBe(false);
  });

  test("an adapter trained on the NF4 base saves in PEFT format and loads onto the float32 base", () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-qlora-"));
    try {
      const q = gpt();
      loom.compress(q, { method: "nf4" });
      const peft = lora.get_peft_model(q, loraConfig());
      const opt = new optim.AdamW(q.parameters().filter((p) => p.requires_grad), { lr: 1e-2 });
      const { x, y } = data();
      q.train();
      for (let s = 0; s < 3; s++) {
        opt.zero_grad();
        q.call(x, { targets: y }).loss!.backward();
        opt.step();
      }
      lora.save_adapter(peft, dir);
      const f = gpt(); // the float32 base (same init)
      lora.load_adapter(f, dir);
      const lq = lora.lora_layers(q), lf = lora.lora_layers(f);
      expect(lf.map(([p]) => p)).toEqual(lq.map(([p]) => p));
      expect(lf.every(([, l]) => l.base_layer instanceof Conv1D && l.fan_in_fan_out)).toBe(true);
      lf.forEach(([, l], i) => {
        for (const k of ["lora_A", "lora_B"] as const) {
          expect(Array.from(l[k].get("default").weight.dataSync())).toEqual(Array.from(lq[i]![1][k].get("default").weight.dataSync()));
        }
      });
      // trained B is non-zero, so the adapter changes the float model's output; and the float
      // model with the adapter is close to the NF4 model with it (NF4 rounding only)
      q.eval();
      f.eval();
      const withA = loom.no_grad(() => f.call(x).logits.dataSync());
      const without = lora.disable_adapter(f, () => loom.no_grad(() => f.call(x).logits.dataSync()));
      const onQ = loom.no_grad(() => q.call(x).logits.dataSync());
      let dA = 0, dQ = 0;
      for (let i = 0; i < withA.length; i++) {
        dA = Math.max(dA, Math.abs(withA[i]! - without[i]!));
        dQ = Math.max(dQ, Math.abs(withA[i]! - onQ[i]!));
      }
      expect(dA).toBeGreaterThan(1e-4);
      expect(dQ).toBeLessThan(0.2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("prepare_model_for_kbit_training freezes every parameter and casts float16/bfloat16 ones to float32, keeping ties", () => {
    const m = gpt();
    loom.compress(m, { method: "q8_0" });
    m.get_submodule("transformer.ln_f").to("float16");
    const wte = m.get_submodule("transformer.wte") as nn.Module & { weight: Parameter };
    lora.prepare_model_for_kbit_training(m);
    const ps = m.named_parameters();
    expect(ps.every(([, p]) => !p.requires_grad && p.dtype === "float32")).toBe(true);
    expect((m.get_submodule("lm_head") as nn.Module & { weight: Parameter }).weight).toBe(wte.weight);
    lora.get_peft_model(m, loraConfig());
    expect(m.named_parameters().filter(([, p]) => p.requires_grad).every(([n]) => n.includes("lora_"))).toBe(true);
  });
});
