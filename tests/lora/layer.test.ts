/**
 * LoraLayer on its own: PEFT's shapes, initialization and scaling, the fused path against the
 * decomposition base(x) + s·B(A(x)), dropout, merge/unmerge, and wrapping HF's Conv1D.
 */
import { describe, expect, test } from "bun:test";
import { no_grad } from "../../src/autograd/grad_mode.ts";
import { randn } from "../../src/lazy/creation.ts";
import type { Tensor } from "../../src/lazy/tensor.ts";
import type { LazyTensor } from "../../src/lazy/lazy_tensor.ts";
import { LayerNorm } from "../../src/nn/normalization.ts";
import { Conv1D } from "../../src/nn/conv1d.ts";
import { Linear } from "../../src/nn/linear.ts";
import { Identity, Dropout } from "../../src/nn/activation.ts";
import { LoraLayer } from "../../src/lora/layer.ts";
import { Generator, manual_seed } from "../../src/tensor/rng.ts";
import { LoomValueError } from "../../src/tensor/errors.ts";
import { expectBitwise, maxAbsDiff } from "../models/helpers.ts";
import { set_default_backend } from "../../src/lazy/device.ts";

const spec = (r: number, lora_alpha: number, extra: Partial<{ lora_dropout: number; init_lora_weights: boolean | "gaussian"; use_rslora: boolean }> = {}) => ({
  r, lora_alpha, lora_dropout: 0, init_lora_weights: true as boolean | "gaussian", use_rslora: false, ...extra,
});

/** base(x) + s · (x Aᵀ) Bᵀ written out with plain ops: the reference for the fused path. */
function decomposed(l: LoraLayer, x: Tensor, name = "default"): Tensor {
  return no_grad(() => {
    const base = l.base_layer.forward(x);
    const A = l.lora_A.get(name).weight, B = l.lora_B.get(name).weight;
    return base.add(x.matmul(A.t()).matmul(B.t()).mul(l.scaling[name]!));
  });
}

function randomizeB(l: LoraLayer, name = "default", seed = 1): void {
  const g = new Generator(seed);
  const B = l.lora_B.get(name).weight;
  no_grad(() => B.copy_(randn(B.shape as number[], { generator: g })));
}

describe("LoraLayer (PEFT lora.Linear)", () => {
  test("shapes, PEFT init (A kaiming-uniform a=√5 = U(±1/√in), B zeros), scaling = lora_alpha / r", () => {
    manual_seed(0);
    const l = new LoraLayer(new Linear(16, 6), "default", spec(4, 8));
    expect(l.lora_A.get("default").weight.shape).toEqual([4, 16]);
    expect(l.lora_B.get("default").weight.shape).toEqual([6, 4]);
    expect(l.lora_A.get("default").bias).toBeNull();
    expect(l.scaling.default).toBe(2);
    const A = l.lora_A.get("default").weight.dataSync();
    expect(Math.max(...A.map(Math.abs))).toBeLessThanOrEqual(0.25); // 1/√16
    expect(Math.max(...A.map(Math.abs))).toBeGreaterThan(0.2);
    expect([...l.lora_B.get("default").weight.dataSync()].every((v) => v === 0)).toBe(true);
    expect(l.lora_dropout.get("default")).toBeInstanceOf(Identity);
    expect(Object.keys(l.state_dict())).toEqual(["base_layer.weight", "base_layer.bias", "lora_A.default.weight", "lora_B.default.weight"]);
    expect(new LoraLayer(new Linear(4, 4), "x", spec(4, 8, { use_rslora: true })).scaling.x).toBe(4); // 8 / √4
    const gauss = new LoraLayer(new Linear(64, 4), "g", spec(8, 8, { init_lora_weights: "gaussian" }));
    const ga = gauss.lora_A.get("g").weight.dataSync();
    const sd = Math.sqrt(ga.reduce((a, v) => a + v * v, 0) / ga.length);
    expect(sd).toBeGreaterThan(0.1); // N(0, (1/8)²)
    expect(sd).toBeLessThan(0.15);
  });

  test("zero-initialized B: the wrapped layer's output equals the base layer's", () => {
    manual_seed(1);
    const base = new Linear(8, 5);
    const x = randn([3, 4, 8]);
    const want = base.call(x);
    const l = new LoraLayer(base, "default", spec(2, 4));
    expect(maxAbsDiff(l.call(x).dataSync(), want.dataSync())).toBeLessThan(1e-6);
  });

  test("fused forward equals base(x) + s·(x Aᵀ)Bᵀ for Linear and for Conv1D (transposed weight)", () => {
    manual_seed(2);
    for (const base of [new Linear(8, 5), new Conv1D(5, 8)]) {
      const l = new LoraLayer(base, "default", spec(3, 6));
      randomizeB(l);
      const x = randn([2, 3, 8]);
      expect(l.fan_in_fan_out).toBe(base instanceof Conv1D);
      expect(l.in_features).toBe(8);
      expect(l.out_features).toBe(5);
      expect(maxAbsDiff(l.call(x).dataSync(), decomposed(l, x).dataSync())).toBeLessThan(1e-5);
      // one node: the registry's fused lora_linear op, reading the Conv1D weight through a transpose view
      const node = (l.forward_lazy(x.lazy()) as LazyTensor).node;
      expect(node.op!.name).toBe("lora_linear");
      expect(node.attrs).toEqual({ scaling: 2, has_bias: true });
      expect(node.inputs[1]!.op?.name ?? "source").toBe(base instanceof Conv1D ? "permute" : "source");
    }
  });

  test("lora_dropout: active only while training (then the decomposed path), identity in eval", () => {
    manual_seed(3);
    const l = new LoraLayer(new Linear(8, 4), "default", spec(2, 2, { lora_dropout: 0.5 }));
    randomizeB(l);
    expect(l.lora_dropout.get("default")).toBeInstanceOf(Dropout);
    const x = randn([64, 8]);
    l.eval();
    expect(maxAbsDiff(l.call(x).dataSync(), decomposed(l, x).dataSync())).toBeLessThan(1e-5);
    l.train();
    const y = l.call(x);
    expect(maxAbsDiff(y.dataSync(), decomposed(l, x).dataSync())).toBeGreaterThan(1e-3); // some inputs dropped
  });

  test("merge: same outputs, W += s·B·A (transposed for Conv1D); unmerge restores W", () => {
    manual_seed(4);
    for (const base of [new Linear(6, 4), new Conv1D(4, 6)]) {
      const l = new LoraLayer(base, "default", spec(2, 4));
      randomizeB(l);
      const x = randn([5, 6]);
      const W0 = base.weight.dataSync().slice();
      const before = l.call(x);
      const delta = l.get_delta_weight("default");
      expect(delta.shape).toEqual(base.weight.shape);
      l.merge();
      expect(l.merged).toBe(true);
      expect(l.merged_adapters).toEqual(["default"]);
      const W1 = base.weight.dataSync();
      const d = delta.dataSync();
      expect(maxAbsDiff(W1, W0.map((w, i) => w + d[i]!))).toBeLessThan(1e-6);
      expect(maxAbsDiff(l.call(x).dataSync(), before.dataSync())).toBeLessThan(1e-5);
      l.merge(); // already merged: no second addition
      expect(maxAbsDiff(base.weight.dataSync(), W1)).toBe(0);
      l.unmerge();
      expect(l.merged).toBe(false);
      expect(maxAbsDiff(base.weight.dataSync(), W0)).toBeLessThan(1e-6);
    }
  });

  test("safe_merge refuses a non-finite result", () => {
    const l = new LoraLayer(new Linear(3, 2), "default", spec(1, 1));
    no_grad(() => l.lora_B.get("default").weight.fill_(Infinity));
    expect(() => l.merge({ safe_merge: true })).toThrow(/NaNs detected/);
    expect(l.merged).toBe(false);
  });

  test("several adapters on one layer: active ones are summed, inactive ones frozen; delete", () => {
    manual_seed(5);
    const l = new LoraLayer(new Linear(6, 3), "a", spec(2, 2));
    l.update_layer("b", spec(4, 8));
    randomizeB(l, "a", 1);
    randomizeB(l, "b", 2);
    expect(l.adapters).toEqual(["a", "b"]);
    expect(l.active_adapters).toEqual(["a"]);
    expect(l.lora_A.get("b").weight.requires_grad).toBe(false);
    expect(l.lora_A.get("a").weight.requires_grad).toBe(true);
    const x = randn([2, 6]);
    expect(maxAbsDiff(l.call(x).dataSync(), decomposed(l, x, "a").dataSync())).toBeLessThan(1e-5);
    l.set_adapter(["a", "b"]);
    const both = no_grad(() => decomposed(l, x, "a").add(x.matmul(l.lora_A.get("b").weight.t()).matmul(l.lora_B.get("b").weight.t()).mul(2)));
    expect(maxAbsDiff(l.call(x).dataSync(), both.dataSync())).toBeLessThan(1e-5);
    l.enable_adapters(false);
    expect(maxAbsDiff(l.call(x).dataSync(), l.base_layer.call(x).dataSync())).toBe(0);
    expect(l.lora_A.get("a").weight.requires_grad).toBe(false);
    l.enable_adapters(true);
    l.delete_adapter("a");
    expect(l.adapters).toEqual(["b"]);
    expect(l.active_adapters).toEqual(["b"]);
    expect(Object.keys(l.state_dict())).toEqual(["base_layer.weight", "base_layer.bias", "lora_A.b.weight", "lora_B.b.weight"]);
    expect(() => l.set_adapter("a")).toThrow(/adapter "a" not found/);
    expect(() => l.delete_adapter("a")).toThrow(LoomValueError);
  });

  test("errors: unsupported base layer, bad rank", () => {
    expect(() => new LoraLayer(new LayerNorm(4), "default", spec(2, 2))).toThrow(/LayerNorm is not supported/);
    expect(() => new LoraLayer(new Linear(4, 4), "default", spec(0, 2))).toThrow(/`r` should be a positive integer/);
  });

  test("eager == lazy, bitwise on the js backend, forward and LoRA gradients (fused op)", () => {
    const prev = set_default_backend("js");
    try {
      manual_seed(6);
      const l = new LoraLayer(new Conv1D(5, 7), "default", spec(3, 3));
      randomizeB(l);
      const x = randn([2, 4, 7]);
      const run = (eager: boolean) => {
        l.zero_grad();
        const y = eager ? l.forward_eager(x) : l.call(x);
        y.mul(y).sum().backward();
        return [y, l.lora_A.get("default").weight.grad!, l.lora_B.get("default").weight.grad!] as Tensor[];
      };
      const e = run(true), z = run(false);
      e.forEach((t, i) => expectBitwise(t, z[i]!));
    } finally {
      set_default_backend(prev as "js" | "native");
    }
  });
});
