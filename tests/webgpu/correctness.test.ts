/**
 * WebGPU results that used to be silently wrong (issue 9):
 * - reductions accumulated in one float32 sequence per output (lazy sum of 2^25 ones gave 2^24);
 * - index errors went to one global buffer: reported on the next unrelated read, then cleared;
 *   negative indices wrapped around; 0-d inputs to the index kernels read dim 0 of a 0-d shape;
 * - the fuser built kernels with more storage buffers than the adapter allows.
 * Expected values are hand-derived (derivations in comments) or float64 sums of the same inputs.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { webgpuBackend } from "../../src/backends/webgpu/index.ts";
import { OPS } from "../../src/graph/registry.ts";
import { compile_plan, type LazyTensor } from "../../src/lazy/lazy_tensor.ts";
import type { TensorData } from "../../src/tensor/storage.ts";
import { WEBGPU } from "../backends.ts";

const G = (t: loom.Tensor) => t.to("webgpu");
const relErr = (got: number, want: number) => Math.abs(got - want) / Math.abs(want);

/** float64 row sums (or maxima) of a float32 [rows, n] tensor's values. */
function rowsOf(x: loom.Tensor, f: (acc: number, v: number) => number, init: number): number[] {
  const [rows, n] = x.shape as [number, number];
  const d = x.dataSync();
  return Array.from({ length: rows }, (_, r) => {
    let acc = init;
    for (let j = 0; j < n; j++) acc = f(acc, d[r * n + j]!);
    return acc;
  });
}

describe.if(WEBGPU)("webgpu reductions use tree partial sums", () => {
  test("2^25 ones sum exactly, eager and lazy; their mean is 1", () => {
    // a float32 running sum stops at 2^24 (2^24 + 1 rounds to 2^24); pairwise/tree sums of ones are exact
    const o = G(loom.ones([2 ** 25]));
    expect(o.sum().item()).toBe(2 ** 25);
    expect(o.lazy().sum().item()).toBe(2 ** 25);
    expect(o.lazy().mean().item()).toBe(1);
  }, 120_000);

  test("1e7 × 0.1 sums within 1e-6 relative (eager, lazy, with prologue and epilogue)", () => {
    // the exact sum of 1e7 copies of fround(0.1) = 0.100000001490116...; float32 ulp there is 6e-8 relative
    const want = 1e7 * Math.fround(0.1);
    const p = G(loom.full([1e7], 0.1));
    expect(relErr(p.sum().item(), want)).toBeLessThan(1e-6);
    expect(relErr(p.lazy().sum().item(), want)).toBeLessThan(1e-6);
    expect(relErr(p.lazy().mul(2).sum().item(), 2 * want)).toBeLessThan(1e-6); // prologue
    expect(relErr(p.lazy().mean().item(), want / 1e7)).toBeLessThan(1e-6); // epilogue (÷ n)
  }, 120_000);

  test("rows longer than one tile: several passes, epilogue reading another input, NaN kept by amax", () => {
    loom.manual_seed(3);
    const x = loom.randn([3, 5000]), b = loom.randn([3]);
    // exp(x) summed in float64 over the same float32 inputs; WGSL exp is within a few ulp
    const want = rowsOf(x, (a, v) => a + Math.exp(v), 0).map((s, r) => s + b.dataSync()[r]!);
    const got = G(x).lazy().exp().sum(1).add(G(b).lazy()).tolist() as number[];
    got.forEach((g, r) => expect(relErr(g, want[r]!)).toBeLessThan(1e-5));
    const eager = G(x).sum(1).tolist() as number[];
    const sums = rowsOf(x, (a, v) => a + v, 0), abs = rowsOf(x, (a, v) => a + Math.abs(v), 0);
    eager.forEach((g, r) => expect(Math.abs(g - sums[r]!)).toBeLessThan(1e-6 * abs[r]!));
    // reduced dim 0 is strided: rows of 3000 with stride 4
    const xt = loom.randn([3000, 4]);
    const colSums = rowsOf(xt.t().contiguous(), (a, v) => a + v, 0), colAbs = rowsOf(xt.t().contiguous(), (a, v) => a + Math.abs(v), 0);
    (G(xt).sum(0).tolist() as number[]).forEach((g, c) => expect(Math.abs(g - colSums[c]!)).toBeLessThan(1e-6 * colAbs[c]!));
    const xn = x.clone();
    loom.no_grad(() => xn.index(1, 4321).fill_(NaN));
    const maxes = rowsOf(x, Math.max, -Infinity);
    expect(G(xn).amax(1).tolist()).toEqual([maxes[0], NaN, maxes[2]]);
    expect(G(xn).lazy().mul(1).amax(1).tolist()).toEqual([maxes[0], NaN, maxes[2]]);
  }, 120_000);
});

describe.if(WEBGPU)("webgpu index errors belong to the tensors whose kernel failed", () => {
  const W = () => G(loom.arange(15).float().reshape(5, 3));
  // embedding's bounds errors name embedding (IndexAttrs.caller), as the js reference's
  const msg7 = "[embedding] index 7 is out of bounds for dimension 0 with size 5 (detected on the webgpu device)";

  test("an out-of-range index raises on every read of its result and of what is computed from it, not elsewhere", () => {
    const w = W();
    const bad = loom.embedding(G(loom.tensor([1, 7], { dtype: "int64" })).lazy(), w.lazy()).eval();
    const other = G(loom.ones([3])).lazy().add(1).eval();
    expect(other.tolist()).toEqual([2, 2, 2]); // an unrelated plan read next is fine
    expect(() => bad.tolist()).toThrow(msg7);
    expect(() => bad.tolist()).toThrow(msg7); // and again: the error is not cleared by the first read
    expect(() => bad.lazy().mul(2).sum().item()).toThrow(msg7); // lazy from it
    expect(() => (bad as unknown as loom.Tensor).add(1).tolist()).toThrow(msg7); // eager from it
    const eager = loom.embedding(G(loom.tensor([7], { dtype: "int64" })), w);
    const good = loom.embedding(G(loom.tensor([4, 0], { dtype: "int64" })), w);
    expect(good.tolist()).toEqual([[12, 13, 14], [0, 1, 2]]);
    expect(() => eager.tolist()).toThrow(msg7);
    expect(() => eager.tolist()).toThrow(msg7);
  });

  test("async reads raise too", async () => {
    const bad = loom.embedding(G(loom.tensor([7], { dtype: "int64" })), W());
    await expect(bad.data()).rejects.toThrow(msg7);
    await expect(bad.data()).rejects.toThrow(msg7);
  });

  test("errors survive the reuse of the error ring (16384 cells: one per index dispatch)", () => {
    const x = G(loom.tensor([1, 2], { dtype: "float32" }));
    const bad = x.index_select(0, G(loom.tensor([5], { dtype: "int64" })));
    const i1 = G(loom.tensor([1], { dtype: "int64" }));
    const kept: loom.Tensor[] = [];
    for (let k = 0; k < 17_000; k++) {
      const y = x.index_select(0, i1);
      if (k % 4000 === 0) kept.push(y);
    }
    for (const y of kept) expect(y.tolist()).toEqual([2]);
    expect(() => bad.tolist()).toThrow("[index_select] index 5 is out of bounds for dimension 0 with size 2");
    expect(() => x.index_select(0, G(loom.tensor([6], { dtype: "int64" }))).tolist()).toThrow("[index_select] index 6 is out of bounds");
    expect(x.index_select(0, i1).tolist()).toEqual([2]);
  }, 60_000);

  test("negative indices raise (PyTorch rejects them), eager and lazy", () => {
    const w = W(), neg = G(loom.tensor([-1], { dtype: "int64" }));
    const sel = "[index_select] index -1 is out of bounds for dimension 0 with size 5";
    const emb = "[embedding] index -1 is out of bounds for dimension 0 with size 5";
    expect(() => loom.embedding(neg, w).tolist()).toThrow(emb);
    expect(() => loom.embedding(neg.lazy(), w.lazy()).tolist()).toThrow(emb);
    expect(() => w.index_select(0, neg).tolist()).toThrow(sel);
    const gi = G(loom.tensor([[0], [-1], [0], [0], [0]], { dtype: "int64" }));
    expect(() => w.gather(1, gi).tolist()).toThrow("[gather] index -1 is out of bounds for dimension 1 with size 3");
    expect(() => w.lazy().gather(1, gi.lazy()).tolist()).toThrow("[gather] index -1 is out of bounds for dimension 1 with size 3");
    expect(() => w.scatter_add(1, gi, G(loom.ones([5, 1]))).tolist()).toThrow("[scatter_add] index -1 is out of bounds for dimension 1 with size 3");
    expect(() => w.index_add(0, neg, G(loom.ones([1, 3]))).tolist()).toThrow("[index_add] index -1 is out of bounds for dimension 0 with size 5");
  });

  test("0-d inputs to gather/index_select/scatter_add/index_add (kernels as PyTorch's shapes give them)", () => {
    const b = webgpuBackend();
    const up = (v: number | number[], dtype: "float32" | "int64" = "float32"): TensorData => {
      const vs = Array.isArray(v) ? v : [v];
      const data = dtype === "int64" ? new Float64Array(vs) : new Float32Array(vs);
      return b.upload({ dtype, shape: Array.isArray(v) ? [vs.length] : [], strides: Array.isArray(v) ? [1] : [], offset: 0, data } as TensorData);
    };
    const run = (op: keyof typeof OPS, ins: TensorData[], shape: number[]) => {
      const r = b.run(OPS[op], ins, { dim: 0 }, shape, "float32");
      return { shape: [...r.shape], values: Array.from(b.download(r).data) };
    };
    const x = up(5), i0 = up(0, "int64"), src = up(2);
    // torch.gather(tensor(5.), 0, tensor(0)) = tensor(5.); index_select likewise
    expect(run("gather", [x, i0], [])).toEqual({ shape: [], values: [5] });
    expect(run("gather", [x, up([0, 0], "int64")], [2])).toEqual({ shape: [2], values: [5, 5] });
    expect(run("index_select", [x, i0], [])).toEqual({ shape: [], values: [5] });
    // index_select([4,5,6], 0, tensor(2)) = [6] (a 0-d index selects one row)
    expect(run("index_select", [up([4, 5, 6]), up(2, "int64")], [1])).toEqual({ shape: [1], values: [6] });
    // scatter_add / index_add of 0-d: 5 + 2
    expect(run("scatter_add", [x, i0, src], [])).toEqual({ shape: [], values: [7] });
    expect(run("index_add", [x, i0, src], [])).toEqual({ shape: [], values: [7] });
    // index_add([4,5,6], 0, tensor(1), tensor(2.)) = [4, 7, 6]
    expect(run("index_add", [up([4, 5, 6]), up(1, "int64"), src], [3])).toEqual({ shape: [3], values: [4, 7, 6] });
    // a 0-d tensor has size 1 along dim 0: index 1 is out of range
    expect(() => run("gather", [x, up(1, "int64")], [])).toThrow("[gather] index 1 is out of bounds for dimension 0 with size 1");
  });
});

describe.if(WEBGPU)("webgpu kernels stay within the adapter's storage-buffer limit", () => {
  const limit = () => webgpuBackend().maxKernelInputs;

  test("a sum of 20 distinct inputs is split into kernels of at most maxKernelInputs inputs", () => {
    loom.manual_seed(5);
    const xs = Array.from({ length: 20 }, () => loom.randn([4]));
    const f = (ts: any[]) => ts.reduce((a, t) => a.add(t));
    const lz = xs.map((t) => G(t).lazy());
    const plan = compile_plan([f(lz)] as LazyTensor[]);
    for (const I of plan.instructions) expect(new Set(I.args.map((a) => a.slot)).size).toBeLessThanOrEqual(limit());
    const want = f(xs) as loom.Tensor, got = f(lz) as LazyTensor;
    const g = got.dataSync(), w = want.dataSync();
    w.forEach((v, i) => expect(Math.abs(g[i]! - v)).toBeLessThan(1e-5));
  });

  test("chunk into 17 pieces, then backward (lazy), matches eager js gradients", () => {
    loom.manual_seed(9);
    const x = loom.randn([17, 4]);
    const f = (t: any) => (t.chunk(17, 0) as any[]).map((c, i) => c.mul(0.1 * (i + 1)).exp()).reduce((a, c) => a.add(c)).sum();
    const xg = G(x).requires_grad_();
    f(xg.lazy()).backward();
    const xc = x.clone().requires_grad_();
    f(xc).backward();
    // d/dx_i of Σ_i exp(0.1(i+1)·x_i) = 0.1(i+1)·exp(0.1(i+1)·x_i), row i
    const want = xc.grad!.dataSync(), got = xg.grad!.dataSync();
    want.forEach((v, k) => expect(relErr(got[k]!, v)).toBeLessThan(1e-5));
    const d = x.dataSync();
    want.forEach((v, k) => expect(relErr(v, 0.1 * (Math.floor(k / 4) + 1) * Math.exp(0.1 * (Math.floor(k / 4) + 1) * d[k]!))).toBeLessThan(1e-5));
  });
});
