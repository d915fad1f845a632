/**
 * WeightNode base: the cache (LRU under a byte budget), Dense, CompressedLinear in eager and lazy
 * execution (equal to nn.Linear with the same weight), JSON round trip of a graph.
 */
import { describe, expect, test } from "bun:test";
import { tensor, randn } from "../../src/lazy/creation.ts";
import { manual_seed } from "../../src/tensor/rng.ts";
import { Linear } from "../../src/nn/linear.ts";
import { with_execution_mode } from "../../src/nn/execution.ts";
import { LoomFormatError, LoomShapeError, LoomValueError } from "../../src/tensor/errors.ts";
import { CompressedLinear, Dense, WeightCache, weight_from_json } from "../../src/weights/index.ts";
import { BACKENDS, useBackend } from "../backends.ts";

describe("WeightCache", () => {
  test("evicts least recently used entries to stay under the budget", () => {
    const c = new WeightCache<object>(3 * 16); // three [4] float32 tensors
    const keys = [{}, {}, {}, {}];
    const t = () => tensor(new Float32Array(4));
    c.put(keys[0]!, t());
    c.put(keys[1]!, t());
    c.put(keys[2]!, t());
    c.get(keys[0]!); // 0 is now most recent: 1 is the oldest
    c.put(keys[3]!, t());
    expect(c.has(keys[1]!)).toBe(false);
    expect(c.has(keys[0]!) && c.has(keys[2]!) && c.has(keys[3]!)).toBe(true);
    expect(c.stats()).toMatchObject({ bytes: 48, entries: 3, evictions: 1 });
    c.set_budget(16);
    expect(c.stats()).toMatchObject({ bytes: 16, entries: 1 });
    expect(c.has(keys[3]!)).toBe(true);
    c.put({}, tensor(new Float32Array(8))); // larger than the budget: not kept
    expect(c.stats().entries).toBe(1);
    expect(() => new WeightCache(-1)).toThrow(LoomValueError);
  });

  test("get_or_compute counts hits and misses", () => {
    const c = new WeightCache<object>(1024);
    const k = {};
    let calls = 0;
    const f = () => { calls++; return tensor(new Float32Array(2)); };
    c.get_or_compute(k, f);
    c.get_or_compute(k, f);
    expect(calls).toBe(1);
    expect(c.stats()).toMatchObject({ hits: 1, misses: 1 });
  });
});

for (const backend of BACKENDS) {
  describe(`CompressedLinear(Dense) on ${backend}`, () => {
    useBackend(backend);
    test("equals nn.Linear with the same weight, eager and lazy", () => {
      manual_seed(0);
      const lin = new Linear(6, 4);
      const cl = CompressedLinear.from_linear(lin);
      const x = randn([3, 6]);
      const want = with_execution_mode("eager", () => lin.call(x)).tolist();
      expect(with_execution_mode("eager", () => cl.call(x)).tolist()).toEqual(want);
      const lazy = with_execution_mode("lazy", () => cl.call(x)).tolist() as number[][];
      const tol = backend === "js" ? 0 : 1e-6;
      lazy.flat().forEach((v, i) => expect(Math.abs(v - (want as number[][]).flat()[i]!)).toBeLessThanOrEqual(tol));
      expect(() => cl.call(randn([3, 5]))).toThrow(LoomShapeError);
    });
  });
}

describe("graph JSON", () => {
  test("Dense round-trips through to_json / weight_from_json", () => {
    const w = tensor([[1, 2], [3, 4]], { dtype: "float32" });
    const { graph, tensors } = new Dense(w).to_json("layer.weight");
    expect(graph).toEqual({ kind: "dense", shape: [2, 2], dtype: "float32", attrs: {}, pieces: { weight: "layer.weight.weight" }, children: {} });
    const back = weight_from_json(JSON.parse(JSON.stringify(graph)), (k) => tensors.get(k));
    expect(back.materialize().tolist()).toEqual([[1, 2], [3, 4]]);
    expect(back.nbytes()).toBe(16);
    expect(back.dense_nbytes()).toBe(16);
    expect(() => weight_from_json({ ...graph, kind: "nope" }, (k) => tensors.get(k))).toThrow(LoomFormatError);
    expect(() => weight_from_json(graph, () => undefined)).toThrow(/not in the file/);
    expect(() => weight_from_json({ ...graph, shape: [2, 3] }, (k) => tensors.get(k))).toThrow(LoomFormatError);
  });
});
