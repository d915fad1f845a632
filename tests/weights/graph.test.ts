/**
 * Composite nodes (Delta, Scaled), optimize passes, memory_usage, and the safetensors round trip
 * of weight graphs (exact; loading materializes nothing).
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randn, tensor } from "../../src/lazy/creation.ts";
import { linear as F_linear } from "../../src/lazy/functional.ts";
import type { Tensor } from "../../src/lazy/tensor.ts";
import { Linear } from "../../src/nn/linear.ts";
import { Sequential } from "../../src/nn/container.ts";
import { with_execution_mode } from "../../src/nn/execution.ts";
import { manual_seed } from "../../src/tensor/rng.ts";
import { LoomFormatError, LoomShapeError } from "../../src/tensor/errors.ts";
import {
  CompressedLinear, Delta, Dense, Quantized, Scaled, WeightCache, load_model_weights, load_weights, load_weights_file,
  memory_usage, model_weights, optimize, save_weights, save_weights_file, set_default_weight_cache, type WeightNode,
} from "../../src/weights/index.ts";
import { BACKENDS, useBackend } from "../backends.ts";

const bitsOf = (t: Tensor) => [...new Uint32Array(Float32Array.from(t.contiguous().dataSync()).buffer)];
const close = (a: Tensor, b: Tensor, tol: number) => {
  const x = a.dataSync(), y = b.dataSync();
  expect(x.length).toBe(y.length);
  for (let i = 0; i < x.length; i++) expect(Math.abs(x[i]! - y[i]!)).toBeLessThanOrEqual(tol * (1 + Math.abs(y[i]!)));
};

describe("Delta and Scaled", () => {
  test("hand-derived values", () => {
    const b = new Dense(tensor([[1, 2], [3, 4]], { dtype: "float32" }));
    const d = new Dense(tensor([[0.5, -1], [0, 0.25]], { dtype: "float32" }));
    expect(new Delta(b, d).materialize(new WeightCache(0)).tolist()).toEqual([[1.5, 1], [3, 4.25]]);
    expect(new Scaled(b, -2).materialize(new WeightCache(0)).tolist()).toEqual([[-2, -4], [-6, -8]]);
    expect(() => new Delta(b, new Dense(tensor([[1, 2, 3]], { dtype: "float32" })))).toThrow(LoomShapeError);
  });
});

for (const backend of BACKENDS) {
  describe(`linear through weight graphs on ${backend}`, () => {
    useBackend(backend);
    test("Quantized, Delta(q8_0 base, int8 delta), Scaled: eager == lazy, == dense linear", () => {
      manual_seed(3);
      const W = randn([8, 64]), D = randn([8, 64]).mul(0.01);
      const base = Quantized.quantize(W, "q8_0");
      const nodes: WeightNode[] = [Quantized.quantize(W, "q4_0"), Quantized.quantize(W, "nf4"), new Delta(base, Quantized.quantize(D, "int8")), new Scaled(base, 0.5)];
      const x = randn([3, 64]), bias = randn([8]);
      for (const n of nodes) {
        const cl = new CompressedLinear(n, bias);
        const eager = with_execution_mode("eager", () => cl.call(x));
        const lazy = with_execution_mode("lazy", () => cl.call(x));
        if (backend === "js") expect(bitsOf(lazy)).toEqual(bitsOf(eager));
        else close(lazy, eager, 1e-5);
        close(eager, F_linear(x, n.materialize(new WeightCache(0)), bias), 1e-5);
      }
    });

    test("the default (materialize, memoized) path: float64 input, eager == lazy; trainable pieces get gradients", () => {
      manual_seed(6);
      const q = Quantized.quantize(randn([4, 32]), "q4_0");
      const cl = new CompressedLinear(q);
      const x = randn([2, 32]).double();
      const eager = with_execution_mode("eager", () => cl.call(x));
      const lazy = with_execution_mode("lazy", () => cl.call(x));
      expect(eager.dtype).toBe("float64");
      close(lazy, eager, 1e-12);
      close(eager, F_linear(x, q.materialize().double()), 1e-12);
      const p = randn([4, 32]).requires_grad_(true);
      const layer = new CompressedLinear(new Delta(q, new Dense(p)));
      with_execution_mode("lazy", () => layer.call(randn([3, 32]).add(1))).sum().backward();
      expect(p.grad).not.toBeNull();
      expect(p.grad!.shape).toEqual([4, 32]);
    });

    test("gradients reach the input and bias through a quantized weight", () => {
      manual_seed(4);
      const W = randn([4, 32]);
      const q = Quantized.quantize(W, "q4_0");
      const cl = new CompressedLinear(q, randn([4]));
      const x = randn([2, 32]).requires_grad_(true);
      with_execution_mode("lazy", () => cl.call(x)).sum().backward();
      const want = q.materialize().sum(0); // d/dx sum(x Wᵀ) = column sums of W, per row of x
      close(x.grad!.narrow(0, 0, 1).reshape([32]), want, 1e-6);
      expect(cl.bias!.grad!.tolist()).toEqual([2, 2, 2, 2]);
    });
  });
}

describe("optimize", () => {
  const W = tensor(Float32Array.from({ length: 2 * 64 }, (_, i) => Math.sin(i))).reshape([2, 64]);
  test("fuses consecutive scales, drops α = 1, folds a scale into per-channel scales", () => {
    const q = Quantized.quantize(W, "int8");
    const s = optimize(new Scaled(new Scaled(q, 2), 3)); // → q with scales × 6
    expect(s).toBeInstanceOf(Quantized);
    expect((s as Quantized).qweight).toBe(q.qweight);
    expect([...(s as Quantized).scales!.dataSync()]).toEqual([...q.scales!.dataSync()].map((v) => Math.fround(v * 6)));
    close(s.materialize(new WeightCache(0)), q.materialize(new WeightCache(0)).mul(6), 1e-6);
    const q8 = Quantized.quantize(W, "q8_0");
    const t = optimize(new Scaled(new Scaled(q8, 2), 3));
    expect(t).toBeInstanceOf(Scaled);
    expect((t as Scaled).alpha).toBe(6);
    expect((t as Scaled).child).toBe(q8);
    expect(optimize(new Scaled(q8, 1))).toBe(q8);
    // a power-of-two scale folded into the scales is exact
    expect(bitsOf(optimize(new Scaled(q, 0.5)).materialize(new WeightCache(0)))).toEqual(bitsOf(new Scaled(q, 0.5).materialize(new WeightCache(0))));
  });

  test("folds Dense-only composites; folds deltas only when asked", () => {
    const a = new Dense(tensor([[1, 2]], { dtype: "float32" })), b = new Dense(tensor([[3, 4]], { dtype: "float32" }));
    const f = optimize(new Delta(a, b));
    expect(f).toBeInstanceOf(Dense);
    expect(f.materialize().tolist()).toEqual([[4, 6]]);
    const qd = new Delta(Quantized.quantize(W, "q8_0"), Quantized.quantize(W.mul(0.01), "q4_0"));
    expect(optimize(qd)).toBe(qd);
    const merged = optimize(qd, { fold_deltas: true });
    expect(merged).toBeInstanceOf(Dense);
    expect(bitsOf(merged.materialize())).toEqual(bitsOf(qd.materialize(new WeightCache(0))));
    const model = new Sequential(new CompressedLinear(new Scaled(a, 1)));
    optimize(model);
    expect((model.get(0) as CompressedLinear).weight).toBe(a);
  });
});

describe("memory_usage and the cache", () => {
  test("compressed vs dense bytes per weight and per model", () => {
    manual_seed(5);
    const model = new Sequential(CompressedLinear.from_linear(new Linear(64, 16), (w) => Quantized.quantize(w, "q4_0")), new Linear(16, 4));
    const u = memory_usage(model);
    expect(u.weights.map((w) => [w.name, w.nbytes, w.dense_nbytes])).toEqual([
      ["0.weight", 16 * 2 * 18, 16 * 64 * 4], ["0.bias", 64, 64], ["1.weight", 256, 256], ["1.bias", 16, 16],
    ]);
    expect(u.nbytes).toBe(16 * 2 * 18 + 64 + 256 + 16);
    expect(u.dense_nbytes).toBe(16 * 64 * 4 + 64 + 256 + 16);
  });

  test("materialize is memoized under the budget", () => {
    const prev = set_default_weight_cache(new WeightCache(2 * 64 * 4));
    try {
      const W = randn([2, 64]);
      const q1 = Quantized.quantize(W, "q8_0"), q2 = Quantized.quantize(W, "nf4");
      const m1 = q1.materialize();
      expect(q1.materialize()).toBe(m1); // hit
      q2.materialize(); // evicts q1 (budget = one [2, 64] float32)
      expect(q1.materialize()).not.toBe(m1);
    } finally {
      set_default_weight_cache(prev);
    }
  });
});

describe("serialization", () => {
  const W = tensor(Float32Array.from({ length: 4 * 128 }, (_, i) => Math.cos(i * 0.37))).reshape([4, 128]);
  const base = Quantized.quantize(W, "nf4");
  const graph = new Delta(base, new Scaled(Quantized.quantize(W.mul(0.01), "int8"), 0.1));
  const nodes = { "a.weight": graph, "b.weight": new Delta(base, new Dense(W)) }; // base shared

  test("round trip is exact and materializes nothing", () => {
    const bytes = save_weights(nodes, { note: "test" });
    const prev = set_default_weight_cache(new WeightCache(1 << 20));
    try {
      const back = load_weights(bytes);
      expect(set_default_weight_cache(new WeightCache(1 << 20)).stats()).toMatchObject({ misses: 0, entries: 0 });
      for (const k of Object.keys(nodes)) {
        const n = nodes[k as keyof typeof nodes];
        expect(back[k]!.to_json(k).graph).toEqual(n.to_json(k).graph);
        expect(bitsOf(back[k]!.materialize(new WeightCache(0)))).toEqual(bitsOf(n.materialize(new WeightCache(0))));
      }
      // the shared base is one piece in the file and one node's tensors after loading
      const a = back["a.weight"] as Delta, b = back["b.weight"] as Delta;
      expect((a.base as Quantized).qweight).toBe((b.base as Quantized).qweight);
      expect([...((a.base as Quantized).qweight._d.data as Uint8Array)]).toEqual([...(base.qweight._d.data as Uint8Array)]);
    } finally {
      set_default_weight_cache(prev);
    }
  });

  test("file round trip of a model's compressed layers", () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-weights-"));
    try {
      const model = new Sequential(new CompressedLinear(graph), new CompressedLinear(Quantized.quantize(W.narrow(1, 0, 64).contiguous(), "q4_0")));
      save_weights_file(model, join(dir, "w.safetensors"));
      const loaded = load_weights_file(join(dir, "w.safetensors"));
      expect(Object.keys(loaded)).toEqual(["0.weight", "1.weight"]);
      const fresh = new Sequential(new CompressedLinear(new Dense(W)), new CompressedLinear(new Dense(W.narrow(1, 0, 64).contiguous())));
      expect(load_model_weights(fresh, loaded)).toEqual({ missing_keys: [], unexpected_keys: [] });
      const w0 = model_weights(fresh)["0.weight"]!;
      expect(bitsOf(w0.materialize(new WeightCache(0)))).toEqual(bitsOf(graph.materialize(new WeightCache(0))));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("bad files give LoomFormatError", () => {
    const bytes = save_weights(nodes);
    expect(() => load_weights(new Uint8Array([8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32]))).toThrow(LoomFormatError);
    const text = new TextDecoder().decode(bytes);
    const swap = (from: string, to: string) => {
      const i = text.indexOf(from);
      const out = bytes.slice();
      out.set(new TextEncoder().encode(to), i);
      return out;
    };
    expect(() => load_weights(swap('\\"kind\\":\\"delta\\"', '\\"kind\\":\\"delt4\\"'))).toThrow(/unknown weight node kind "delt4"/);
    expect(() => load_weights(swap('\\"format\\":\\"nf4\\"', '\\"format\\":\\"nf5\\"'))).toThrow(LoomFormatError);
    expect(() => load_weights(swap('\\"shape\\":[4,128]', '\\"shape\\":[4,120]'))).toThrow(LoomFormatError);
  });

  test("random corruption of the graph JSON: loads or throws LoomFormatError", () => {
    const good = save_weights(nodes);
    const hdr = Number(new DataView(good.buffer).getBigUint64(0, true)) + 8;
    let seed = 99;
    const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296);
    let rejected = 0;
    for (let trial = 0; trial < 400; trial++) {
      const b = good.slice();
      for (let k = 0; k < 2; k++) b[8 + Math.floor(rand() * (hdr - 8))] = "0123456789[]{},:\"-. e".charCodeAt(Math.floor(rand() * 21));
      try {
        const back = load_weights(b);
        for (const n of Object.values(back)) n.to_json();
      } catch (e) {
        if (!(e instanceof LoomFormatError)) throw new Error(`trial ${trial}: ${(e as Error).name}: ${(e as Error).message}`);
        rejected++;
      }
    }
    expect(rejected).toBeGreaterThan(100);
  });
});
