/**
 * Sparse (src/weights/sparse.ts) and the spmm op against torch 1.13 (gen_lowrank_sparse_goldens.py):
 * torch.nn.utils.prune.l1_unstructured's mask, the CSR/COO pieces of to_sparse_csr()/to_sparse(),
 * linear through spmm and its input gradient on every backend (and webgpu when present), eager ==
 * lazy, spmm bit-equal between js and native, JSON round trips, bytes, and the errors.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { set_default_backend } from "../../src/lazy/device.ts";
import { with_execution_mode } from "../../src/nn/execution.ts";
import { CompressedLinear, Sparse, default_weight_cache, weight_from_json, type SparseFormat } from "../../src/weights/index.ts";
import { BACKENDS, WEBGPU, useBackend } from "../backends.ts";
import { expectClose, fromArr, readGolden, type Arr } from "../nn/helpers.ts";
import { thrown } from "../thrown.ts";

interface SG { mask: Arr; crow_indices: Arr; col_indices: Arr; values: Arr; coo_indices: Arr; y: Arr; dx: Arr }
interface G { W: Arr; b: Arr; x: Arr; g: Arr; sparse: Record<string, SG> }
const golden = readGolden<G>(new URL("./lowrank_sparse_goldens.json", import.meta.url));
const LEVELS = ["0.0", "0.5", "0.75"] as const;
const FORMATS: readonly SparseFormat[] = ["csr", "coo"];
const vals = (t: loom.Tensor) => Array.from(t.dataSync());

describe.each(BACKENDS)("Sparse on %s", (backend) => {
  useBackend(backend);
  for (const s of LEVELS) {
    const gs = golden.sparse[s]!;
    for (const format of FORMATS) {
      test(`sparsity ${s} ${format}: torch's l1_unstructured mask and sparse pieces`, () => {
        const node = Sparse.prune(fromArr(golden.W), Number(s), { format, name: "fc.weight" });
        const W = fromArr(golden.W);
        // decompose = W·mask exactly (kept values are copied, not recomputed)
        expect(vals(node.materialize())).toEqual(vals(W.mul(fromArr(gs.mask)).add(0))); // + 0: pruned entries are +0
        if (format === "csr") {
          expect(vals(node.crow_indices!)).toEqual(gs.crow_indices.data);
          expect(vals(node.col_indices!)).toEqual(gs.col_indices.data);
        } else {
          expect(vals(node.indices!)).toEqual(gs.coo_indices.data);
        }
        expect(vals(node.values)).toEqual(gs.values.data);
        const nnz = gs.values.data.length;
        expect(node.nnz).toBe(nnz);
        expect(node.nbytes()).toBe(format === "csr" ? 8 * nnz + 4 * 7 : 12 * nnz);
      });
      test(`sparsity ${s} ${format}: linear through spmm matches torch (values, dx), W never built`, () => {
        const node = Sparse.prune(fromArr(golden.W), Number(s), { format });
        const misses = default_weight_cache().stats().misses;
        const x = fromArr(golden.x).requires_grad_(true);
        const y = node.linear(x, fromArr(golden.b));
        expect(default_weight_cache().stats().misses).toBe(misses);
        expectClose(y, gs.y, { rtol: 1e-6, atol: 1e-6, what: "y" });
        y.mul(fromArr(golden.g)).sum().backward();
        expectClose(x.grad!, gs.dx, { rtol: 1e-6, atol: 1e-6, what: "dx" });
        const layer = new CompressedLinear(node, fromArr(golden.b));
        const e = with_execution_mode("eager", () => layer.call(fromArr(golden.x)));
        const l = with_execution_mode("lazy", () => layer.call(fromArr(golden.x)));
        expect(l.tolist()).toEqual(e.tolist());
        expect(loom.compile_plan([node.linear(fromArr(golden.x).lazy())]).explain()).toContain("spmm");
      });
    }
  }
  test("spmm is bit-equal to the js reference (both sum in float64), batched input", () => {
    const W = loom.randn([33, 70], { generator: new loom.Generator(3) });
    const node = Sparse.prune(W, 0.6);
    const x = loom.randn([2, 5, 70], { generator: new loom.Generator(4) });
    const got = vals(node.linear(x));
    const ref = vals(with_js(() => node.linear(x)));
    expect(got).toEqual(ref);
    expectClose(node.linear(x), { shape: [2, 5, 33], dtype: "float32", data: vals(loom.linear(x, node.materialize())) }, { rtol: 1e-5, atol: 1e-5 });
  });
});

/** Run fn with "cpu" on the js backend. */
function with_js<T>(fn: () => T): T {
  const prev = set_default_backend("js");
  try { return fn(); } finally { set_default_backend(prev as "js"); }
}

(WEBGPU ? describe : describe.skip)("Sparse on webgpu", () => {
  test("spmm on the GPU matches torch within float32 rounding", () => {
    const gs = golden.sparse["0.5"]!;
    const node = Sparse.prune(fromArr(golden.W), 0.5);
    const y = node.linear(fromArr(golden.x).to("webgpu"), fromArr(golden.b).to("webgpu"));
    expect(y.device).toBe("webgpu");
    expectClose(y.to("cpu"), gs.y, { rtol: 1e-5, atol: 1e-5 });
  });
});

describe("Sparse graph and errors", () => {
  test("JSON round trips for CSR and COO", () => {
    for (const format of FORMATS) {
      const node = Sparse.prune(fromArr(golden.W), 0.5, { format });
      const { graph, tensors } = node.to_json("fc.weight");
      expect(graph).toMatchObject({ kind: "sparse", shape: [6, 8], attrs: { format } });
      const back = weight_from_json(JSON.parse(JSON.stringify(graph)), (k) => tensors.get(k));
      expect(back.materialize().tolist()).toEqual(node.materialize().tolist());
    }
  });
  test("ties go lower flat index first; the count rounds half to even as Python's round", () => {
    // |w| = [1, 1, 1, 2, .5, .5], sparsity 0.5: drop round(3) = 3 -> both .5s, then the first 1 (index 0)
    const a = Sparse.prune(loom.tensor([[1, -1, 1], [2, 0.5, -0.5]], { dtype: "float32" }), 0.5);
    expect(a.materialize().tolist()).toEqual([[0, -1, 1], [2, 0, 0]]);
    // 5 entries at 0.5: round(2.5) = 2 (even) -> the two 1s go, 3 entries stay
    const b = Sparse.prune(loom.tensor([[3, 1, 2, 1, 5]], { dtype: "float32" }), 0.5);
    expect(b.nnz).toBe(3);
    expect(vals(b.values)).toEqual([3, 2, 5]);
    // NaN counts as the largest magnitude: kept
    const c = Sparse.prune(loom.tensor([[NaN, 1, 2]], { dtype: "float32" }), 0.6);
    expect(vals(c.values)).toEqual([NaN]);
  });
  test("a sparsity outside [0, 1) names the tensor and the value", () => {
    for (const s of [-0.1, 1, 1.5, NaN]) {
      const e = thrown(() => Sparse.prune(fromArr(golden.W), s, { name: "h.3.attn.c_proj" }));
      expect(e).toBeInstanceOf(loom.LoomValueError);
      expect(e.message).toBe(`[Sparse] h.3.attn.c_proj: sparsity ${s} is outside [0, 1)`);
    }
  });
  test("malformed structures are refused when wrapped, and by spmm when run", () => {
    const v = loom.tensor([1, 2], { dtype: "float32" });
    const i32 = (a: number[]) => loom.tensor(a, { dtype: "int32" });
    const csr = (crow: number[], col: number[]) => thrown(() => new Sparse("csr", [2, 3], v, { crow_indices: i32(crow), col_indices: i32(col) }, "w"));
    expect(csr([0, 1, 3], [0, 1]).message).toContain("crow_indices[2] = 3");
    expect(csr([0, 1, 2], [0, 3]).message).toBe("[Sparse csr] w: column 3 of entry 1 is outside [0, 3)");
    expect(csr([0, 2, 2], [1, 1])).toBeInstanceOf(loom.LoomFormatError); // duplicate
    const coo = thrown(() => new Sparse("coo", [2, 3], v, { indices: i32([1, 0, 0, 0]).reshape([2, 2]) }, "w"));
    expect(coo.message).toContain("sorted row-major");
    const x = loom.ones([1, 3]);
    const e = thrown(() => x._apply(loom.OPS.spmm, [i32([0, 1, 2]), i32([0, 5]), v, i32([0, 1])], {}).dataSync());
    expect(e).toBeInstanceOf(loom.LoomIndexError);
    expect(e.message).toBe("[spmm] col_indices[1] = 5 is out of bounds for K = 3");
    expect(thrown(() => x._apply(loom.OPS.spmm, [i32([0, 1, 2]), i32([0, 1]), v.double(), i32([0, 1])], {}))).toBeInstanceOf(loom.LoomDtypeError);
    expect(thrown(() => x._apply(loom.OPS.spmm, [i32([0, 1, 2]), i32([0, 1, 2]), v, i32([0, 1])], {}))).toBeInstanceOf(loom.LoomShapeError);
  });
});
