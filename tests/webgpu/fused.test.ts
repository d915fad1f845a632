/**
 * The graph compiler's fusions on the webgpu device: each pattern compiles to the same fused
 * kernel as on the js backend (counted), its WGSL kernel matches the unfused GPU kernels within
 * float32 rounding (rtol 1e-5) and the js reference (float32 on the js backend) within 1e-5, and
 * a realize of a whole plan is one queue submit. Shapes stay small: lavapipe compiles every
 * kernel on first use.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { webgpuBackend } from "../../src/backends/webgpu/index.ts";
import { compile_plan, type LazyTensor } from "../../src/lazy/lazy_tensor.ts";
import { with_compiler_options } from "../../src/scheduler/options.ts";
import { WEBGPU } from "../backends.ts";

const TOL = { rtol: 1e-5, atol: 1e-5 };

function close(got: Float64Array, want: Float64Array, what: string): void {
  expect(got.length).toBe(want.length);
  const bad: string[] = [];
  for (let i = 0; i < want.length; i++) {
    const g = got[i]!, w = want[i]!;
    const ok = Number.isNaN(w) ? Number.isNaN(g) : !Number.isFinite(w) ? g === w : Math.abs(g - w) <= TOL.atol + TOL.rtol * Math.abs(w);
    if (!ok) bad.push(`${what}[${i}] ${g} vs ${w}`);
  }
  expect(bad.slice(0, 5)).toEqual([]);
}

/**
 * `fn` on webgpu lazy inputs must plan to `names` (the fused kernels), and give the unfused GPU
 * result and the js result within float32 tolerance; its realize is one submit.
 */
function check(fn: (...a: any[]) => any, inputs: loom.Tensor[], names: string[]) {
  const gpu = inputs.map((t) => t.to("webgpu"));
  const outs = () => [fn(...gpu.map((t) => t.lazy()))].flat() as LazyTensor[];
  const plan = compile_plan(outs());
  expect(plan.instructions.map((i) => i.op.name)).toEqual(names);
  const b = webgpuBackend();
  b.flush();
  const s0 = b.stats().submits;
  const fused = loom.realizeAll(outs());
  expect(b.stats().submits - s0).toBe(1);
  const unfused = with_compiler_options({ fuse: false, patterns: false }, () => loom.realizeAll(outs()));
  const js = [fn(...inputs)].flat() as loom.Tensor[];
  fused.forEach((t, i) => {
    expect(t.device).toBe("webgpu");
    close(t.dataSync(), unfused[i]!.dataSync(), "fused vs unfused");
    close(t.dataSync(), js[i]!.dataSync(), "webgpu vs js");
  });
}

describe.if(WEBGPU)("fused kernels on webgpu", () => {
  loom.manual_seed(7);
  const T = (...s: number[]) => loom.randn(s);
  const x = T(4, 6), y = T(4, 6), col = T(6), w = T(5, 6), b = T(5), res = T(4, 5);

  test("elementwise trees, reductions with prologue and epilogue, matmul epilogues", () => {
    check((a, c, d) => a.mul(c).add(d).gelu(), [x, y, col], ["fused_elementwise"]);
    check((a) => a.mul(a).sum(-1), [x], ["fused_reduce"]);
    check((a) => a.mul(a).mean(-1, true).add(1e-5).rsqrt(), [x], ["fused_reduce"]);
    check((a, W, c) => loom.linear(a, W, c).gelu(), [x, w, b], ["fused_matmul"]);
    check((a, W, c, r) => r.add(loom.linear(a, W, c)), [x, w, b, res], ["fused_matmul"]);
  }, 120_000);

  test("softmax (with scale and mask), layer_norm, rms_norm", () => {
    const mask = loom.tensor([[1, 1, 0, 1, 0, 1], [1, 0, 1, 1, 1, 1], [0, 1, 1, 1, 1, 0], [1, 1, 1, 0, 1, 1]]).bool();
    check((a) => a.softmax(-1), [x], ["fused_softmax"]);
    check((a) => a.softmax(0), [x], ["fused_softmax"]);
    check((a, m) => a.mul(0.125).masked_fill(m.logical_not(), -Infinity).softmax(-1), [x, mask], ["fused_softmax"]);
    check((a, g, c) => loom.layer_norm(a, [6], g, c), [x, col, T(6)], ["fused_layer_norm"]);
    check((a) => loom.layer_norm(a.t(), [4]), [x], ["fused_layer_norm"]); // strided rows
    check((a, g) => loom.rms_norm(a, [6], g, 1e-5), [x, col], ["fused_rms_norm"]);
  }, 120_000);

  test("LoRA linear and attention", () => {
    const A = T(2, 6), B = T(5, 2);
    check((a, W, c, An, Bn) => loom.linear(a, W, c).add(loom.linear(loom.linear(a, An), Bn).mul(2)), [x, w, b, A, B], ["fused_lora_linear"]);
    const q = T(2, 3, 5, 4), k = T(2, 3, 5, 4), v = T(2, 3, 5, 4);
    check((a, b2, c) => loom.scaled_dot_product_attention(a, b2, c, { is_causal: true }), [q, k, v], ["fused_attention"]);
    check((a, b2, c) => loom.scaled_dot_product_attention(a, b2, c), [q, k, v], ["fused_attention"]);
  }, 120_000);

  test("a plan's workspace maps to pooled GPU buffers reused across runs", () => {
    const b = webgpuBackend();
    const [a, e] = [x.to("webgpu"), loom.eye(6).to("webgpu")];
    const run = () => {
      let h = a.lazy();
      for (let i = 0; i < 4; i++) h = h.matmul(e.lazy()).tanh().softmax(-1).mul(2);
      return h.sum().eval();
    };
    const first = run().item();
    const { created, workspaceBuffers } = b.stats().memory;
    expect(workspaceBuffers).toBeGreaterThan(0);
    for (let i = 0; i < 5; i++) expect(run().item()).toBe(first);
    // the same plan reuses its workspace buffers; each run allocates only its output
    expect(b.stats().memory.workspaceBuffers).toBe(workspaceBuffers);
    expect(b.stats().memory.created - created).toBeLessThanOrEqual(5);
  }, 120_000);
});

describe.if(WEBGPU)("fused_attention on webgpu: long rows", () => {
  test("the row softmax sums S = 4096 exponentials in blocks: float32 accuracy (js float64 and by hand)", () => {
    // E = 1 (scale 1), k = [0, -1, -1, ...], q = [1, 0.1]: row l has one score 0 (the max) and
    // 4095 scores -q_l, so z_l = 1 + 4095·e^(-q_l). v is one-hot at s = 0, so out_l = P[l, 0] =
    // 1/z_l and the GEMM adds zeros only. A serial float32 sum of the 4095 equal terms is off by
    // 2e-5 (q = 1) and 4e-5 (q = 0.1) relative; blocks of 32 keep it below 1.1e-6.
    const S = 4096;
    const q = loom.tensor([[[1], [0.1]]], { dtype: "float64" });
    const k = loom.tensor([Array.from({ length: S }, (_, s) => [s === 0 ? 0 : -1])], { dtype: "float64" });
    const v = loom.tensor([Array.from({ length: S }, (_, s) => [s === 0 ? 1 : 0])], { dtype: "float64" });
    const want = Array.from(loom.scaled_dot_product_attention(q, k, v).dataSync());
    const hand = [1, 0.1].map((ql) => 1 / (1 + (S - 1) * Math.exp(-ql)));
    want.forEach((w, i) => expect(Math.abs(w - hand[i]!) / hand[i]!).toBeLessThan(1e-12));
    const [gq, gk, gv] = [q, k, v].map((t) => t.float().to("webgpu").lazy());
    const out = loom.scaled_dot_product_attention(gq, gk, gv) as LazyTensor;
    expect(compile_plan([out]).instructions.map((i) => i.op.name)).toEqual(["fused_attention"]);
    const got = Array.from(out.dataSync());
    got.forEach((g, i) => expect(Math.abs(g - want[i]!) / want[i]!).toBeLessThan(3e-6));
  }, 60_000);
});
