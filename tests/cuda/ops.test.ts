/**
 * The cuda device itself: every dtype moved there and back, every registry elementwise op through
 * the backend against the js reference, reductions (NaN and signed-zero rules), matmul layouts
 * (cuBLAS and the tiled kernel), the composites (softmax, norms, attention), in-place writes,
 * quantized_linear in every format (tests/quantized/helpers.ts's float64 reference, QUANT_ERROR_BOUND),
 * one submission per realize, CPU runs counted, integer faults raised, asynchronous readback,
 * flat device memory over a loop, and set_memory_limit / estimate_memory per device.
 * Skipped (the reason printed by ./device.ts) where no CUDA device can be opened.
 * Expected values: the js backend (the registry's `ref` functions) on the same inputs, within
 * float32 rounding where float32 kernels sum in other orders; hand-derived where stated.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { cudaBackend } from "../../src/backends/cuda/index.ts";
import { jsBackend } from "../../src/backends/js/backend.ts";
import type { OpDef } from "../../src/graph/op.ts";
import { OPS } from "../../src/graph/registry.ts";
import { LoomOutOfMemoryError, set_memory_limit } from "../../src/scheduler/options.ts";
import { toFloat64, type TensorData } from "../../src/tensor/storage.ts";
import type { QuantFormat } from "../../src/graph/ops/quantized.ts";
import { QUANT_ERROR_BOUND, quantized_linear } from "../../src/lazy/quantized_ops.ts";
import { dense, operands, outOfBound, randomPacked, reference, rng } from "../quantized/helpers.ts";
import { CUDA, mismatch } from "./device.ts";

const C = (t: loom.Tensor) => t.to("cuda");
const close = (got: loom.Tensor | ArrayLike<number>, want: loom.Tensor | ArrayLike<number>, atol = 1e-6, rtol = 1e-5) => {
  const g = got instanceof loom.Tensor ? Array.from(got.dataSync()) : Array.from(got);
  const w = want instanceof loom.Tensor ? Array.from(want.dataSync()) : Array.from(want);
  expect(mismatch(g, w, atol, rtol)).toBeNull();
};

/** Uniform float32 values in [-2, 2). */
function randomX(n: number, seed: number): Float32Array {
  const r = rng(seed);
  return Float32Array.from({ length: n }, () => Math.fround(r() * 4 - 2));
}

/**
 * Where two results that are each within QUANT_ERROR_BOUND of the float64 reference (scale S,
 * kin reduced terms) differ by more than the sum of their bounds; the first few, as text.
 */
function apartBeyondBound(a: ArrayLike<number>, b: ArrayLike<number>, ref: Float64Array, S: Float64Array, kin: number): string[] {
  const bad: string[] = [];
  for (let i = 0; i < ref.length && bad.length < 5; i++) {
    const bound = 2 * (QUANT_ERROR_BOUND.rtol * Math.abs(ref[i]!) + (kin + QUANT_ERROR_BOUND.extra) * 2 ** -24 * S[i]!);
    if (!(Math.abs(a[i]! - b[i]!) <= bound)) bad.push(`[${i}] ${a[i]} vs ${b[i]} (bound ${bound})`);
  }
  return bad;
}

describe.if(CUDA)("cuda device", () => {
  test("every dtype moves to the device and back unchanged", () => {
    const vals = [0, 1, -2, 3.5, -0.25, 100];
    for (const dtype of ["float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8", "bool"] as const) {
      const c = loom.tensor(vals, { dtype });
      const g = C(c);
      expect([g.device, g.dtype]).toEqual(["cuda", dtype]);
      expect(g.to("cpu").tolist()).toEqual(c.tolist());
      expect(g.tolist()).toEqual(c.tolist());
      // a device copy (contiguous of a strided view) keeps the values too
      expect(g.flip(0).contiguous().to("cpu").tolist()).toEqual(c.flip(0).tolist());
    }
  });

  test("every registry elementwise op equals the js reference (float32 and float64, broadcast operands)", () => {
    const b = cudaBackend();
    loom.manual_seed(0);
    const skip = new Set(["cast", "contiguous"]); // need attrs; covered by the dtype and copy tests
    for (const dtype of ["float32", "float64"] as const) {
      const x = loom.randn([3, 5], { dtype }).mul(2), y = loom.randn([5], { dtype }).abs().add(0.5);
      const cond = loom.randn([3, 5]).gt(0);
      for (const op of Object.values(OPS) as OpDef[]) {
        if (op.kind !== "elementwise" || skip.has(op.name)) continue;
        const arity = (op as { arity: number }).arity;
        const ins: TensorData[] = arity === 1 ? [x._data()] : arity === 2 ? [x._data(), y._data()] : [cond._data(), x._data(), y._data()];
        const meta = ins.map((t) => ({ shape: t.shape, dtype: t.dtype }));
        const shape = (op as any).shape(meta, {}), out = (op as any).dtype(meta, {});
        const want = jsBackend.run(op, ins, {}, shape, out);
        const got = b.download(b.run(op, ins.map((t) => b.upload(t)), {}, shape, out));
        const tol = out === "float64" ? [1e-14, 1e-14] : [1e-7, 2 ** -23];
        const m = mismatch(toFloat64(got), toFloat64(want), tol[0]!, tol[1]!);
        if (m) throw new Error(`${op.name} (${dtype}): ${m}`);
      }
    }
  });

  test("reductions: sum/amax/amin over dims, keepdim; NaN wins, of equal zeros the first; int sums are int64", () => {
    loom.manual_seed(1);
    const x = loom.randn([4, 6, 5]);
    for (const dim of [[0], [1], [2], [0, 2], [0, 1, 2]]) {
      for (const keepdim of [false, true]) {
        close(C(x).sum(dim, keepdim), x.sum(dim, keepdim), 1e-5, 1e-5);
        close(C(x).amax(dim, keepdim), x.amax(dim, keepdim), 0, 0);
        close(C(x).lazy().amin(dim, keepdim).eval(), x.amin(dim, keepdim), 0, 0);
        close(C(x).mean(dim, keepdim), x.mean(dim, keepdim), 1e-6, 1e-5);
      }
    }
    // amax([1, NaN, 3]) = NaN; amax([-0, +0]) = -0 (the first of equal values, nanMax's fold)
    expect(Number.isNaN(C(loom.tensor([1, NaN, 3])).amax().item())).toBe(true);
    expect(Object.is(C(loom.tensor([-0, 0])).amax().item(), -0)).toBe(true);
    expect(Object.is(C(loom.tensor([0, -0])).amin().item(), 0)).toBe(true);
    const s = C(loom.tensor([2 ** 31 - 1, 5], { dtype: "int32" })).sum();
    expect([s.dtype, s.item()]).toEqual(["int64", 2 ** 31 + 4]);
    // a long row: 2^20 ones sum exactly (double accumulation)
    expect(C(loom.ones([2 ** 20])).sum().item()).toBe(2 ** 20);
  });

  test("matmul: plain, transposed operands, batched with broadcast, one row, float64, float16 (tiled), K = 0", () => {
    loom.manual_seed(2);
    const a = loom.randn([7, 5]), b = loom.randn([5, 9]);
    close(C(a).matmul(C(b)), a.matmul(b), 1e-5, 1e-5);
    close(C(b).t().matmul(C(a).t()), b.t().matmul(a.t()), 1e-5, 1e-5); // column-major operands (op T)
    const A = loom.randn([2, 1, 4, 5]), B = loom.randn([3, 5, 6]);
    close(C(A).matmul(C(B)), A.matmul(B), 1e-5, 1e-5);
    close(C(A).lazy().matmul(C(B).lazy()).eval(), A.matmul(B), 1e-5, 1e-5);
    close(C(a.narrow(0, 2, 1)).matmul(C(b)), a.narrow(0, 2, 1).matmul(b), 1e-5, 1e-5);
    close(C(a.double()).matmul(C(b.double())), a.double().matmul(b.double()), 1e-12, 1e-12);
    // float16 (the tiled kernel: double accumulation, one rounding): the float64 product of the
    // same half values rounded once to half, i.e. within 2^-11 relative (4e-3 absolute near 0)
    const [ah, bh] = [a.half(), b.half()];
    close(C(ah).matmul(C(bh)).double(), ah.double().matmul(bh.double()), 4e-3, 2 ** -11);
    expect(C(loom.ones([3, 0])).matmul(C(loom.ones([0, 2]))).tolist()).toEqual([[0, 0], [0, 0], [0, 0]]);
  });

  const QFORMATS: readonly [QuantFormat, number][] = [["q8_0", 96], ["q4_0", 96], ["nf4", 128], ["int8", 45]];
  for (const [format, K] of QFORMATS) {
    test(`quantized_linear ${format} K=${K} runs on the device (M = 1: registers; 5, 20: dense temporary + matmul): within QUANT_ERROR_BOUND of the float64 reference and of the CPU backend, eager == lazy, gradient to x (transposed form)`, () => {
      const b = cudaBackend();
      const N = 19;
      const p = randomPacked(format, N, K, 31);
      const W = dense(p);
      const ops = operands(p);
      const qweight = C(ops.qweight), scales = ops.scales ? C(ops.scales) : null;
      const bv = randomX(N, 2);
      const bias = C(loom.tensor(bv));
      const launched0 = b.deviceCounters().byOp.get("quantized_linear") ?? 0;
      for (const M of [1, 5, 20]) {
        const xs = randomX(M * K, M);
        const x = C(loom.tensor(xs).reshape([M, K])).requires_grad_(true);
        const y = quantized_linear(x, qweight, { format, scales, bias });
        expect(y.device).toBe("cuda");
        const { ref, S } = reference(xs, M, W, N, K, bv);
        const got = y.dataSync();
        expect(outOfBound(got, ref, S, K)).toEqual([]);
        // the CPU backend (quant.c on native) on the same operands
        const cpu = quantized_linear(loom.tensor(xs).reshape([M, K]), ops.qweight, { format, scales: ops.scales, bias: loom.tensor(bv) }).dataSync();
        expect(apartBeyondBound(got, cpu, ref, S, K)).toEqual([]);
        // lazy: the same instruction in a plan, the same kernels: the same bits
        const yl = quantized_linear(C(loom.tensor(xs).reshape([M, K])).lazy(), qweight, { format, scales, bias }).eval();
        expect(Array.from(yl.dataSync())).toEqual(Array.from(got));
        // gradient to x: the transposed form on the device, g · dequant(W)
        const gs = randomX(M * N, 7 + M);
        y.mul(C(loom.tensor(gs).reshape([M, N]))).sum().backward();
        const t = reference(gs, M, W, N, K, null, true);
        expect(outOfBound(x.grad!.dataSync(), t.ref, t.S, N)).toEqual([]);
      }
      // M = 1, 5, 20: forward eager, lazy, and the transposed gradient each ran on the device
      expect((b.deviceCounters().byOp.get("quantized_linear") ?? 0) - launched0).toBeGreaterThanOrEqual(9);
      expect([...b.stats.fallbackByOp.keys()].filter((k) => k.startsWith("quantized_linear"))).toEqual([]);
    }, 60_000);
  }

  test("quantized_linear: qweight as int32 words, a strided x, and batch dims that do not collapse into rows (both paths: M ≤ 4 decodes in registers, larger M through a dense temporary)", () => {
    const K = 128, N = 6;
    for (const [format] of QFORMATS) {
      const p = randomPacked(format, N, K, 9);
      const ops = operands(p);
      const scales = ops.scales ? C(ops.scales) : null;
      const xs = randomX(2 * K, 4);
      const x = C(loom.tensor(xs).reshape([2, K]));
      const words = loom.packed_words(ops.qweight).to("cuda");
      const { ref, S } = reference(xs, 2, dense(p), N, K, null);
      expect(outOfBound(quantized_linear(x, words, { format, scales }).dataSync(), ref, S, K)).toEqual([]);
    }
    // x = a transposed view [M, K] with strides [1, M]
    const M = 3;
    const p = randomPacked("q4_0", N, K, 8);
    const W = dense(p);
    const xs = randomX(K * M, 1);
    const xt = Float32Array.from({ length: M * K }, (_, i) => xs[(i % K) * M + Math.floor(i / K)]!);
    const y = quantized_linear(C(loom.tensor(xs).reshape([K, M])).transpose(0, 1), C(operands(p).qweight), { format: "q4_0" });
    let r = reference(xt, M, W, N, K, null);
    expect(outOfBound(y.dataSync(), r.ref, r.S, K)).toEqual([]);
    // x [2, 3, K] viewed from a [3, 2, K] buffer: strides [K, 2K, 1] do not collapse (a dense copy on the device)
    const base = randomX(3 * 2 * K, 5);
    const xb = C(loom.tensor(base).reshape([3, 2, K])).transpose(0, 1);
    const rows = Float32Array.from({ length: 6 * K }, (_, i) => {
      const [a, c, k] = [Math.floor(i / (3 * K)), Math.floor(i / K) % 3, i % K];
      return base[(c * 2 + a) * K + k]!;
    });
    const yb = quantized_linear(xb, C(operands(p).qweight), { format: "q4_0" });
    expect(yb.shape).toEqual([2, 3, N]);
    r = reference(rows, 6, W, N, K, null);
    expect(outOfBound(yb.dataSync(), r.ref, r.S, K)).toEqual([]);
    // the same with 4 rows (the small-M kernel after the dense copy), with a bias
    const base4 = randomX(2 * 2 * K, 6), bv = randomX(N, 3);
    const x4 = C(loom.tensor(base4).reshape([2, 2, K])).transpose(0, 1);
    const rows4 = Float32Array.from({ length: 4 * K }, (_, i) => {
      const [a, c, k] = [Math.floor(i / (2 * K)), Math.floor(i / K) % 2, i % K];
      return base4[(c * 2 + a) * K + k]!;
    });
    const y4 = quantized_linear(x4, C(operands(p).qweight), { format: "q4_0", bias: C(loom.tensor(bv)) });
    r = reference(rows4, 4, W, N, K, bv);
    expect(outOfBound(y4.dataSync(), r.ref, r.S, K)).toEqual([]);
  }, 60_000);

  test("softmax, log_softmax, layer_norm, rms_norm and attention (composites) match the CPU, eager and lazy", () => {
    loom.manual_seed(3);
    const x = loom.randn([2, 3, 8, 16]), w = loom.randn([16]), bias = loom.randn([16]);
    for (const lazy of [false, true]) {
      const L = (t: loom.Tensor) => (lazy ? C(t).lazy() : C(t));
      close(loom.softmax(L(x), -1).eval(), loom.softmax(x, -1), 1e-7, 1e-5);
      close(loom.log_softmax(L(x), 1).eval(), loom.log_softmax(x, 1), 1e-6, 1e-5);
      close(loom.layer_norm(L(x), [16], L(w), L(bias)).eval(), loom.layer_norm(x, [16], w, bias), 1e-5, 1e-5);
      close(loom.rms_norm(L(x), [16], L(w)).eval(), loom.rms_norm(x, [16], w), 1e-5, 1e-5);
      const [q, k, v] = [loom.randn([2, 3, 8, 16]), loom.randn([2, 3, 8, 16]), loom.randn([2, 3, 8, 16])];
      close(loom.scaled_dot_product_attention(L(q), L(k), L(v), { is_causal: true }).eval(), loom.scaled_dot_product_attention(q, k, v, { is_causal: true }), 1e-5, 1e-5);
    }
  });

  test("in-place writes into device views", () => {
    const x = C(loom.zeros([3, 4]));
    x.add_(1);
    x.narrow(1, 1, 2).mul_(5);
    expect(x.tolist()).toEqual([[1, 5, 5, 1], [1, 5, 5, 1], [1, 5, 5, 1]]);
    x.copy_(loom.arange(4).float());
    expect(x.tolist()).toEqual([[0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3]]);
  });

  test("one realize is one submission; ops without a CUDA kernel run on the CPU, counted with the reason", () => {
    const b = cudaBackend();
    const x = C(loom.randn([64, 64]));
    x.sum().item(); // warm: first-use uploads
    const s0 = b.stats.submits;
    const y = x.lazy().exp().mul(2).matmul(x.lazy()).tanh().sum(-1).eval();
    expect(b.stats.submits - s0).toBe(1);
    expect(y.device).toBe("cuda");
    const f0 = b.stats.fallbacks;
    const picked = C(loom.arange(10).float()).index_select(0, C(loom.tensor([3, 1], { dtype: "int64" })));
    expect(picked.tolist()).toEqual([3, 1]);
    expect(picked.device).toBe("cuda");
    expect(b.stats.fallbacks).toBe(f0 + 1);
    expect(b.stats.fallbackByOp.get("index_select: no CUDA kernel for index_select")).toBeGreaterThan(0);
    process.env.LOOM_CUDA_STRICT = "1";
    try {
      expect(() => C(loom.arange(10).float()).index_select(0, C(loom.tensor([3], { dtype: "int64" })))).toThrow("[cuda] index_select would run on the CPU (no CUDA kernel for index_select) and LOOM_CUDA_STRICT=1");
    } finally {
      delete process.env.LOOM_CUDA_STRICT;
    }
  });

  test("integer division by zero raises the reference's error (never a silent value)", () => {
    const a = C(loom.tensor([4, 5], { dtype: "int64" })), z = C(loom.tensor([2, 0], { dtype: "int64" }));
    expect(() => a.floor_divide(z).tolist()).toThrow(loom.LoomValueError);
    expect(() => a.floor_divide(z).tolist()).toThrow("ZeroDivisionError");
  });

  test("await t.data() reads back without blocking and sees pending work", async () => {
    const x = C(loom.arange(6).float()).lazy().mul(3).eval();
    expect(Array.from(await x.data())).toEqual([0, 3, 6, 9, 12, 15]);
  });

  test("device memory stays flat over a long eager loop (buffers return to the pool)", () => {
    const b = cudaBackend();
    const floor = b.pool.sweepFloor;
    b.pool.sweepFloor = 16 * 2 ** 20; // sweep after 16 MiB handed out (default 256 MiB: more than this loop allocates)
    let x = C(loom.randn([256, 256]));
    for (let i = 0; i < 50; i++) x = x.mul(0.5).add(1);
    x.sum().item();
    const pooled = b.pool.stats.pooledBytes;
    for (let i = 0; i < 400; i++) x = x.mul(0.5).add(1);
    x.sum().item();
    // 400 iterations × 2 × 256 KiB = 200 MiB handed out; what the pool holds grows by far less
    expect(b.pool.stats.pooledBytes - pooled).toBeLessThan(64 * 2 ** 20);
    expect(b.pool.stats.reused).toBeGreaterThan(0);
    b.pool.sweepFloor = floor;
  });

  test("set_memory_limit and estimate_memory apply per device", () => {
    const graph = () => {
      const x = C(loom.randn([32, 32])).lazy();
      return x.exp().matmul(x).tanh().matmul(x.t()).sum(-1);
    };
    const plan = graph().plan();
    const est = plan.estimate_memory();
    expect(Object.keys(est)).toEqual(["cuda"]);
    expect(est.cuda).toBe(plan.workspaceBytes + plan.outputBytes);
    try {
      set_memory_limit(est.cuda! - 1, "cuda");
      const y = graph();
      expect(() => y.eval()).toThrow(LoomOutOfMemoryError);
      // the cpu device's limit is another one
      set_memory_limit(null, "cuda");
      set_memory_limit(1, "cpu");
      expect(graph().eval().shape).toEqual([32]);
    } finally {
      set_memory_limit(null, "cuda");
      set_memory_limit(null, "cpu");
    }
  });
});
