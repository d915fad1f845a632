/**
 * Whole models on one device (webgpu or cuda): the tiny GPT-2 (and its PEFT LoRA adapter)
 * forward and backward, eager and lazy (lazy runs the compiler's fused kernels), against the
 * PyTorch reference; LoRA linear (the fused registry op) and an AdamW training step vs the js
 * backend. Written once here, called by tests/webgpu/models.test.ts and tests/cuda/models.test.ts.
 * Tolerances: float32 kernels with other summation orders than torch, |Δ| <= atol + rtol·|ref|.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { load_adapter } from "../../src/lora/save_load.ts";
import { lora_layers } from "../../src/lora/model.ts";
import { GPT2LMHeadModel } from "../../src/models/gpt2.ts";
import { with_execution_mode } from "../../src/nn/execution.ts";
import { REF, TINY, TINY_ADAPTER, expectClose, ids, labels } from "./helpers.ts";

/** Options of {@link describeModelsOn}: `timeout` (ms) for the long tests (first use of each kernel compiles it). */
export interface DeviceModelsOptions { timeout: number }

/**
 * Registers the model tests on `device`; `available` false skips them (describe.if).
 */
export function describeModelsOn(device: string, available: boolean, opts: DeviceModelsOptions): void {
  const { timeout } = opts;
  describe.if(available)(`GPT-2 on ${device}`, () => {
    const run = (mode: "eager" | "lazy", lora: boolean) => with_execution_mode(mode, () => {
      const model = GPT2LMHeadModel.from_pretrained(TINY).train();
      if (lora) load_adapter(model, TINY_ADAPTER, "default", { is_trainable: true });
      model.to(device);
      const { logits, loss } = model.call(ids().to(device), { labels: labels().to(device) });
      loss!.backward();
      const grads = lora
        ? lora_layers(model).flatMap(([path, l]) => [
          [`${path}.lora_A.weight`, l.lora_A.get("default").weight.grad] as const,
          [`${path}.lora_B.weight`, l.lora_B.get("default").weight.grad] as const,
        ])
        : model.named_parameters().map(([k, p]) => [k, p.grad] as const);
      return { model, logits, loss: loss!, grads };
    });

    test("forward and backward match PyTorch, eager and lazy (fused kernels)", () => {
      const e = run("eager", false), l = run("lazy", false);
      expect(e.model.parameters().every((p) => p.device === device)).toBe(true);
      expect(e.logits.device).toBe(device);
      expectClose(e.logits, REF.logits);
      expect(e.loss.item()).toBeCloseTo(REF.loss, 4);
      for (const [k, g] of e.grads) expectClose(g as never, REF.grads[k]!, 1e-5, 1e-3);
      expectClose(l.logits, REF.logits);
      expect(l.loss.item()).toBeCloseTo(REF.loss, 4);
      l.grads.forEach(([k, g], i) => {
        expect(e.grads[i]![0]).toBe(k);
        expectClose(g as never, REF.grads[k]!, 1e-5, 1e-3);
      });
    }, timeout);

    test("PEFT LoRA adapter: logits, loss and LoRA gradients match PyTorch, eager and lazy", () => {
      const e = run("eager", true), l = run("lazy", true);
      expectClose(e.logits, REF.lora.logits);
      expect(e.loss.item()).toBeCloseTo(REF.lora.loss, 4);
      for (const [k, g] of e.grads) expectClose(g as never, REF.lora.grads[k]!, 1e-5, 1e-3);
      expectClose(l.logits, REF.lora.logits);
      expect(l.loss.item()).toBeCloseTo(REF.lora.loss, 4);
      for (const [k, g] of l.grads) expectClose(g as never, REF.lora.grads[k]!, 1e-5, 1e-3);
    }, timeout);
  });

  describe.if(available)(`fused ops and optimizers on ${device}`, () => {
    test("lora_linear equals its decomposition and the js float64 reference (values and gradients)", () => {
      loom.manual_seed(3);
      const shapes = [[2, 3, 6], [5, 6], [2, 6], [5, 2], [5]];
      const ref = shapes.map((s) => loom.randn(s, { dtype: "float64" }));
      const grads = (xs: loom.Tensor[]) => {
        const leaves = xs.map((x) => x.detach().requires_grad_());
        const y = loom.lora_linear(leaves[0]!, leaves[1]!, leaves[2]!, leaves[3]!, 4, leaves[4]!);
        const dec = loom.linear(leaves[0]!, leaves[1]!, leaves[4]!).add(loom.linear(loom.linear(leaves[0]!, leaves[2]!), leaves[3]!).mul(4));
        return { y, dec, g: loom.autograd.grad(y.mul(y).sum(), leaves) };
      };
      const want = grads(ref);
      const got = grads(ref.map((x) => x.float().to(device)));
      expect(got.y.device).toBe(device);
      expectClose(got.y, Array.from(want.y.dataSync()), 1e-5, 1e-4);
      expectClose(got.dec, Array.from(want.y.dataSync()), 1e-5, 1e-4);
      got.g.forEach((g, i) => expectClose(g!, Array.from(want.g[i]!.dataSync()), 1e-4, 1e-4));
    }, timeout);

    test("lora_linear with B = 0 equals the base linear; strided (transposed) weights", () => {
      const x = loom.randn([4, 3]).to(device);
      const W = loom.randn([3, 2]).to(device).t(); // [2, 3] view
      const y = loom.lora_linear(x, W, loom.randn([2, 3]).to(device), loom.zeros(2, 2).to(device), 8);
      expectClose(y, Array.from(loom.linear(x.to("cpu"), W.to("cpu")).dataSync()), 1e-6, 1e-5);
    });

    test(`AdamW training steps on ${device} follow the js backend; each step is one plan equal to the op-by-op update`, () => {
      loom.manual_seed(1);
      const W0 = loom.randn([8, 4]), x = loom.randn([16, 8]), t = loom.randn([16, 4]);
      const train = (dev: string) => {
        const W = (dev === "cpu" ? W0.clone() : W0.to(dev)).requires_grad_();
        const opt = new loom.optim.AdamW([W], { lr: 1e-2, weight_decay: 0.1 });
        const [xd, td] = [x.to(dev), t.to(dev)];
        let stepPlans = 0;
        for (let i = 0; i < 5; i++) {
          opt.zero_grad();
          xd.matmul(W).sub(td).pow(2).mean().backward();
          const r0 = loom.realizeStats.realizes;
          opt.step();
          stepPlans = loom.realizeStats.realizes - r0;
        }
        return Object.assign(W, { stepPlans });
      };
      const cpu = train("cpu"), gpu = train(device);
      expect(gpu.device).toBe(device);
      expect(gpu.stepPlans).toBe(1); // the update of p, m and v: one plan (writes last)
      expectClose(gpu.to("cpu"), Array.from(cpu.dataSync()), 1e-6, 1e-5);

      // the optimizer's plan equals torch's op-by-op order (to float32 rounding)
      const [p, g, m, v] = [loom.randn([300]), loom.randn([300]), loom.randn([300]).mul(0.1), loom.rand([300]).mul(0.01)];
      const ref = { p: p.clone(), m: m.clone(), v: v.clone() };
      const h = { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.01 };
      loom.no_grad(() => {
        ref.p.mul_(1 - h.lr * h.weight_decay);
        ref.m.mul_(h.beta1).add_(g, { alpha: 1 - h.beta1 });
        ref.v.mul_(h.beta2).add_(g.mul(g), { alpha: 1 - h.beta2 });
        const denom = ref.v.sqrt().div(Math.sqrt(1 - h.beta2)).add(h.eps);
        ref.p.add_(ref.m.div(denom), { alpha: -(h.lr / (1 - h.beta1)) });
      });
      const gp = p.to(device).requires_grad_();
      gp.grad = g.to(device);
      const opt = new loom.optim.AdamW([gp], { lr: h.lr, betas: [h.beta1, h.beta2], eps: h.eps, weight_decay: h.weight_decay });
      const st = opt.state as Map<loom.Tensor, Record<string, unknown>>;
      st.set(gp, { step: 0, exp_avg: m.to(device), exp_avg_sq: v.to(device) });
      opt.step();
      const s = st.get(gp)!;
      expectClose(gp, Array.from(ref.p.dataSync()), 1e-7, 1e-6);
      expectClose(s.exp_avg as loom.Tensor, Array.from(ref.m.dataSync()), 1e-7, 1e-6);
      expectClose(s.exp_avg_sq as loom.Tensor, Array.from(ref.v.dataSync()), 1e-9, 1e-6);
    }, timeout);
  });
}
