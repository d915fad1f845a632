/**
 * LowRank (src/weights/lowrank.ts) against torch 1.13 (gen_lowrank_sparse_goldens.py): the
 * rank-r truncation, its relative error (also the Eckart–Young value √(Σ_{i>r} σ²)/‖W‖_F), the
 * two-GEMM linear and its input gradient on every backend, eager == lazy, no materialization,
 * trainable factors, JSON round trip, byte count, and the out-of-range rank error.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { describeWithLapack } from "../lapack.ts";
import { with_execution_mode } from "../../src/nn/execution.ts";
import { CompressedLinear, LowRank, default_weight_cache, weight_from_json } from "../../src/weights/index.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { expectClose, fromArr, readGolden, type Arr } from "../nn/helpers.ts";
import { thrown } from "../thrown.ts";

interface G { W: Arr; b: Arr; x: Arr; g: Arr; lowrank: Record<string, { W_r: Arr; y: Arr; dx: Arr; rel_error: number }> }
const golden = readGolden<G>(new URL("./lowrank_sparse_goldens.json", import.meta.url));
const maybe = describeWithLapack("LowRank");
const RANKS = ["1", "3", "6"] as const;

maybe.each(BACKENDS)("LowRank on %s", (backend) => {
  useBackend(backend);
  for (const r of RANKS) {
    const gr = golden.lowrank[r]!;
    test(`rank ${r}: truncation and error match torch`, () => {
      const node = LowRank.from_dense(fromArr(golden.W), Number(r), "layer.weight");
      expect(node.rank).toBe(Number(r));
      expect([...node.U.shape, ...node.S.shape, ...node.Vh.shape]).toEqual([6, Number(r), Number(r), Number(r), 8]);
      expectClose(node.materialize(), gr.W_r, { rtol: 0, atol: 2e-5, what: `W_${r}` });
      // Eckart–Young: ‖W − W_r‖_F² = Σ_{i>r} σ_i², with σ from the full SVD
      const s = Array.from(loom.linalg.svdvals(fromArr(golden.W)).dataSync());
      const tail = Math.sqrt(s.slice(Number(r)).reduce((a, v) => a + v * v, 0) / s.reduce((a, v) => a + v * v, 0));
      expect(Math.abs(tail - gr.rel_error)).toBeLessThan(1e-5);
      expect(node.nbytes()).toBe((6 + 8 + 1) * Number(r) * 4);
      expect(node.dense_nbytes()).toBe(6 * 8 * 4);
    });
    test(`rank ${r}: linear is two GEMMs (W never materialized), values and dx match torch, eager == lazy`, () => {
      const node = LowRank.from_dense(fromArr(golden.W), Number(r));
      const before = default_weight_cache().stats().misses;
      const x = fromArr(golden.x).requires_grad_(true);
      const y = node.linear(x, fromArr(golden.b));
      expect(default_weight_cache().stats().misses).toBe(before); // no materialize()
      expectClose(y, gr.y, { rtol: 1e-5, atol: 2e-5, what: "y" });
      y.mul(fromArr(golden.g)).sum().backward();
      expectClose(x.grad!, gr.dx, { rtol: 1e-5, atol: 2e-5, what: "dx" });
      const layer = new CompressedLinear(node, fromArr(golden.b));
      const e = with_execution_mode("eager", () => layer.call(fromArr(golden.x)));
      const l = with_execution_mode("lazy", () => layer.call(fromArr(golden.x)));
      if (backend === "js") expect(l.tolist()).toEqual(e.tolist());
      else expectClose(l, { shape: [...e.shape], dtype: "float32", data: Array.from(e.dataSync()) }, { rtol: 1e-6, atol: 1e-6 });
      // the lazy plan has no [N, K] (or transposed) operand: only x, the factors and [M, r]/[M, N]
      const text = loom.compile_plan([node.linear(fromArr(golden.x).lazy())]).explain();
      expect(text).toMatch(/#1 matmul/);
      if (Number(r) < 6) expect(text).not.toMatch(/\[6, 8\]|\[8, 6\]/); // at r = N, Vhᵀ is [8, 6] itself
      expect(loom.compile_plan([loom.linear(fromArr(golden.x).lazy(), fromArr(golden.W).lazy())]).explain()).toContain("[8, 6]"); // the check can see a dense W
    });
  }
  test("trainable factors get gradients through the two GEMMs", () => {
    const node = LowRank.from_dense(fromArr(golden.W), 3);
    node.U.requires_grad_(true);
    const x = fromArr(golden.x), g = fromArr(golden.g);
    node.linear(x).mul(g).sum().backward();
    // dL/dU = gᵀ·(x·Vhᵀ·diag(S)) [N, r], written out with plain ops
    const want = g.t().matmul(x.matmul(node.Vh.t()).mul(node.S));
    expectClose(node.U.grad!, { shape: [6, 3], dtype: "float32", data: Array.from(want.dataSync()) }, { rtol: 1e-5, atol: 1e-5 });
  });
});

maybe("LowRank graph and errors", () => {
  test("JSON round trip keeps the factors", () => {
    const node = LowRank.from_dense(fromArr(golden.W), 2);
    const { graph, tensors } = node.to_json("fc.weight");
    expect(graph).toMatchObject({ kind: "lowrank", shape: [6, 8], attrs: { rank: 2 }, pieces: { U: "fc.weight.U", S: "fc.weight.S", Vh: "fc.weight.Vh" } });
    const back = weight_from_json(JSON.parse(JSON.stringify(graph)), (k) => tensors.get(k)) as LowRank;
    expect(back.materialize().tolist()).toEqual(node.materialize().tolist());
    expect(() => weight_from_json({ ...graph, attrs: { rank: 3 } }, (k) => tensors.get(k))).toThrow(loom.LoomFormatError);
  });
  test("an out-of-range rank names the tensor and the value", () => {
    for (const r of [0, 7, 2.5, -1]) {
      const e = thrown(() => LowRank.from_dense(fromArr(golden.W), r, "h.0.mlp.c_fc"));
      expect(e).toBeInstanceOf(loom.LoomValueError);
      expect(e.message).toBe(`[LowRank] h.0.mlp.c_fc: rank ${r} is out of range [1, 6] for weight [6, 8]`);
    }
    expect(thrown(() => LowRank.from_dense(loom.ones([2, 2, 2]), 1))).toBeInstanceOf(loom.LoomShapeError);
    expect(thrown(() => new LowRank(loom.ones([3, 2]), loom.ones([3]), loom.ones([2, 4])))).toBeInstanceOf(loom.LoomShapeError);
  });
});
