/**
 * A whole GPT-like LoRA training step (functional API: embedding, layer_norm, linear with LoRA,
 * causal scaled_dot_product_attention, gelu, cross_entropy, backward, AdamW) compiled as one plan:
 * bit-equal to eager with every pass on, compiled once for repeated steps (plan cache hits),
 * and listed by explain() / LOOM_EXPLAIN=1.
 */
import { describe, expect, spyOn, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { batch, block, gptLoss, initAdam, initGpt, trainStep, trainedNames, type GptConfig } from "../../bench/lib/gpt.ts";
import { compile_plan } from "../../src/lazy/lazy_tensor.ts";
import { clear_plan_cache, planCacheStats } from "../../src/scheduler/compile.ts";
import { with_compiler_options } from "../../src/scheduler/options.ts";
import { bits, expectKernels, kernelNames, useJs } from "./helpers.ts";

useJs();
const cfg: GptConfig = { vocab: 13, layers: 2, d: 16, heads: 2, ctx: 8, mlp: 64, lora: { r: 2, alpha: 4 } };

describe("GPT LoRA training step", () => {
  const p0 = initGpt(cfg, 3);
  const names = trainedNames(p0, cfg);
  const { idx, targets } = batch(cfg, 2, 4);

  test("lazy (one plan, all passes) equals eager bit for bit over two steps", () => {
    let pe = p0, se = initAdam(p0, names), pl = p0, sl = initAdam(p0, names);
    for (let step = 0; step < 2; step++) {
      const e = trainStep(pe, se, idx, targets, cfg, false);
      const l = trainStep(pl, sl, idx, targets, cfg, true);
      expect(bits(l.loss)).toEqual(bits(e.loss));
      for (const k of names) {
        expect(bits(l.params.get(k)!)).toEqual(bits(e.params.get(k)!));
        expect(bits(l.state.m.get(k)!)).toEqual(bits(e.state.m.get(k)!));
        expect(bits(l.state.v.get(k)!)).toEqual(bits(e.state.v.get(k)!));
      }
      [pe, se, pl, sl] = [e.params, e.state, l.params, l.state];
    }
  });

  test("the same step built again is a plan-cache hit (compiled once)", () => {
    clear_plan_cache();
    let p = p0, s = initAdam(p0, names);
    for (let step = 0; step < 3; step++) {
      const r = trainStep(p, s, idx, targets, cfg, true);
      [p, s] = [r.params, r.state];
    }
    expect(planCacheStats.misses).toBe(1);
    expect(planCacheStats.hits).toBe(2);
    // other shapes are another graph
    trainStep(p, s, batch({ ...cfg, ctx: 4 }, 2).idx, batch({ ...cfg, ctx: 4 }, 2).targets, cfg, true);
    expect(planCacheStats.misses).toBe(2);
  });

  test("fusion halves the kernels of a training step; planning cuts its transient memory", () => {
    const roots = () => {
      // build the lazy step's roots without running it: trainStep realizes, so rebuild its graph here
      const lift = (t: loom.Tensor) => t.lazy().detach();
      const P = new Map([...p0].map(([k, t]) => [k, names.includes(k) ? lift(t).requires_grad_() : lift(t)]));
      const loss = gptLoss(lift(idx), lift(targets), (k: string) => P.get(k)!, cfg);
      loss.backward();
      return [loss, ...names.map((k) => P.get(k)!.grad!)];
    };
    const fused = compile_plan(roots());
    const unfused = with_compiler_options({ fuse: false, patterns: false }, () => compile_plan(roots()));
    expect(fused.kernelCount).toBeLessThan(unfused.kernelCount * 0.55);
    expect(fused.workspaceBytes).toBeLessThan(unfused.memory.naive / 2);
  });
});

describe("GPT block forward", () => {
  const p = initGpt({ ...cfg, lora: null }, 5);
  const x = loom.randn([2, 8, 16]);
  const fwd = (t: any, P: (k: string) => any) => block(t, P, 0, { ...cfg, lora: null });

  test("10 kernels: 2 layer norms, q/k/v, attention, head merge, projection+residual, fc+GELU, proj+residual", () => {
    const y = fwd(x.lazy(), (k) => p.get(k)!.lazy());
    const plan = y.plan();
    expectKernels(plan, 10);
    expect(kernelNames(plan)).toEqual(["fused_layer_norm", "fused_matmul", "fused_matmul", "fused_matmul", "fused_attention",
      "fused_elementwise", "fused_matmul", "fused_layer_norm", "fused_matmul", "fused_matmul"]);
    // the recorded graph: the two layer norms are recorded as fused nodes already (no gradient is
    // recorded: LazyTensor._fusedNorm), the rest op by op
    expect(plan.unfusedKernels).toBeGreaterThan(25);
    expect(bits(y)).toEqual(bits(fwd(x, (k) => p.get(k)!)));
  });

  test("explain lists kernels, fused groups, buffer sizes and the peak workspace", () => {
    const y = fwd(x.lazy(), (k) => p.get(k)!.lazy());
    const text = y.explain();
    expect(text).toMatch(/^CompiledPlan [0-9a-f]{8} on cpu: 10 kernels \(\d+ unfused\), workspace [\d.]+ KiB/);
    expect(text).toContain("fused_attention");
    expect(text).toContain("fused_matmul [matmul add mul add mul erf add mul]"); // fc + bias + GELU
    expect(text).toContain("outputs: out");
  });

  test("LOOM_EXPLAIN=1 prints each newly compiled plan", () => {
    const spy = spyOn(console, "error").mockImplementation(() => {});
    const prev = process.env.LOOM_EXPLAIN;
    process.env.LOOM_EXPLAIN = "1";
    try {
      clear_plan_cache();
      loom.randn([3]).lazy().exp().mul(2).eval();
      expect(spy).toHaveBeenCalledTimes(1);
      expect(String(spy.mock.calls[0]![0])).toContain("fused_elementwise [exp mul]");
      loom.randn([3]).lazy().exp().mul(2).eval(); // cached: not printed again
      expect(spy).toHaveBeenCalledTimes(1);
    } finally {
      if (prev === undefined) delete process.env.LOOM_EXPLAIN;
      else process.env.LOOM_EXPLAIN = prev;
      spy.mockRestore();
    }
  });
});
