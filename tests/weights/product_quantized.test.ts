/**
 * ProductQuantized (src/weights/product_quantized.ts): k-means on hand-derived cases, exact
 * reconstruction when every sub-space holds at most C distinct sub-vectors, determinism for a
 * seed, the look-up-table linear against dequantize-then-linear on every backend, eager == lazy,
 * bytes, JSON round trip, and the errors.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { with_execution_mode } from "../../src/nn/execution.ts";
import { CompressedLinear, ProductQuantized, default_weight_cache, kmeans, weight_from_json } from "../../src/weights/index.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { expectClose } from "../nn/helpers.ts";
import { thrown } from "../thrown.ts";

const vals = (t: loom.Tensor) => Array.from(t.dataSync());
const close = (t: loom.Tensor, want: loom.Tensor, tol = 1e-5) => expectClose(t, { shape: [...want.shape], dtype: "float32", data: vals(want) }, { rtol: tol, atol: tol });

/**
 * W [8, 6] whose sub-vectors (d = 2, J = 3) take 4 distinct values per sub-space: centroids
 * A_j, B_j, C_j, D_j (all exact in float32). Rows n use pattern p = n % 4.
 */
function fourClusterWeight(): loom.Tensor {
  const cents = [[[0, 0], [1, 0], [0, 1], [4, 4]], [[-2, 1], [2, 2], [0.5, 0.5], [-1, -3]], [[3, 3], [-3, 3], [3, -3], [-3, -3]]];
  const rows = Array.from({ length: 8 }, (_, n) => cents.flatMap((c, j) => c[(n + j) % 4]!));
  return loom.tensor(rows, { dtype: "float32" });
}

describe("kmeans", () => {
  test("two separated 1-D groups: centroids are the group means (hand-derived)", () => {
    // {0, 0.5} and {10, 11}: whichever two points k-means++ seeds, Lloyd ends at the group means
    // 0.25 and 10.5 (seeds 0 and 0.5: {0} | {0.5, 10, 11} -> centroids 0, 7.17 -> the groups)
    const pts = Float64Array.from([0, 10, 0.5, 11]);
    const { centroids, assign } = kmeans(pts, 4, 1, 2, 10, new loom.Generator(7));
    const c = [...centroids].sort((a, b) => a - b);
    expect(c).toEqual([0.25, 10.5]);
    expect(assign[0]).toBe(assign[2]);
    expect(assign[1]).toBe(assign[3]);
    expect(assign[0]).not.toBe(assign[1]);
  });
});

describe.each(BACKENDS)("ProductQuantized on %s", (backend) => {
  useBackend(backend);
  test("four distinct sub-vectors per sub-space and C = 4: exact reconstruction", () => {
    const W = fourClusterWeight();
    const node = ProductQuantized.fit(W, { sub_dim: 2, bits: 2, seed: 1 });
    expect(node.n_centroids).toBe(4);
    expect([...node.codes.shape]).toEqual([8, 3]);
    expect(node.codes.dtype).toBe("uint8");
    expect(vals(node.materialize())).toEqual(vals(W));
    expect(node.nbytes()).toBe(8 * 3 + 3 * 4 * 2 * 4);
  });
  test("seeded and deterministic; more bits never reconstruct worse here", () => {
    const W = loom.randn([64, 16], { generator: new loom.Generator(5) });
    const a = ProductQuantized.fit(W, { sub_dim: 4, bits: 3, seed: 3 });
    const b = ProductQuantized.fit(W, { sub_dim: 4, bits: 3, seed: 3 });
    expect(vals(a.codes)).toEqual(vals(b.codes));
    expect(vals(a.codebooks)).toEqual(vals(b.codebooks));
    const err = (n: ProductQuantized) => W.sub(n.materialize()).norm().item() / W.norm().item();
    const e3 = err(a), e6 = err(ProductQuantized.fit(W, { sub_dim: 4, bits: 6, seed: 3 }));
    expect(e3).toBeGreaterThan(0);
    expect(e6).toBeLessThan(e3);
  });
  test("look-up-table linear (M ≤ d) and the dense path (M > d) equal dequantize-then-linear", () => {
    const W = loom.randn([24, 16], { generator: new loom.Generator(8) });
    const node = ProductQuantized.fit(W, { sub_dim: 4, bits: 4, seed: 0 });
    const b = loom.randn([24], { generator: new loom.Generator(9) });
    const dense = node.materialize();
    for (const M of [1, 4, 9]) {
      const x = loom.randn([M, 16], { generator: new loom.Generator(10 + M) });
      const misses = default_weight_cache().stats().misses;
      default_weight_cache().delete(node);
      const y = node.linear(x, b);
      if (M <= 4) expect(default_weight_cache().stats().misses).toBe(misses); // the table path builds no W
      close(y, loom.linear(x, dense, b));
    }
    const layer = new CompressedLinear(node, b);
    const x = loom.randn([2, 16], { generator: new loom.Generator(30) });
    const e = with_execution_mode("eager", () => layer.call(x));
    const l = with_execution_mode("lazy", () => layer.call(x));
    if (backend === "js") expect(l.tolist()).toEqual(e.tolist());
    else close(l, e, 1e-6);
  });
});

describe("ProductQuantized graph and errors", () => {
  test("JSON round trip", () => {
    const node = ProductQuantized.fit(fourClusterWeight(), { sub_dim: 2, bits: 2 });
    const { graph, tensors } = node.to_json("w");
    expect(graph).toMatchObject({ kind: "pq", attrs: { sub_dim: 2, n_centroids: 4 } });
    const back = weight_from_json(JSON.parse(JSON.stringify(graph)), (k) => tensors.get(k));
    expect(back.materialize().tolist()).toEqual(node.materialize().tolist());
  });
  test("bad parameters name the tensor and the value", () => {
    const W = loom.ones([8, 6]);
    const e1 = thrown(() => ProductQuantized.fit(W, { sub_dim: 4, name: "fc1.weight" }));
    expect(e1).toBeInstanceOf(loom.LoomShapeError);
    expect(e1.message).toBe("[ProductQuantized] fc1.weight: sub_dim 4 does not divide in_features K=6");
    const e2 = thrown(() => ProductQuantized.fit(W, { sub_dim: 2, bits: 9, name: "fc1.weight" }));
    expect(e2).toBeInstanceOf(loom.LoomValueError);
    expect(e2.message).toContain("bits 9");
    const codes = loom.tensor([[0], [5]], { dtype: "uint8" });
    const e3 = thrown(() => new ProductQuantized([2, 2], loom.zeros([1, 4, 2]), codes, "w"));
    expect(e3).toBeInstanceOf(loom.LoomFormatError);
    expect(e3.message).toContain("code 5");
  });
});
