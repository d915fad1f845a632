/**
 * The natural training loop as PyTorch users write it (issue 11):
 *   out = model.call(x, {targets}); opt.zero_grad(); loss.backward(); opt.step(); loss.item()
 * In lazy execution mode the forward's outputs, the gradients and the optimizer's writes are
 * pending until the loss is read; the read runs them as ONE plan (counted), compiled once.
 * Eager and lazy execution give the same parameters and optimizer state after 5 steps: bit-equal
 * on js at tolerance "exact", within float32 tolerance on native (and webgpu when present), with
 * gradient accumulation and zero_grad(set_to_none) both ways.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { lora, models, nn, optim } from "../../src/index.ts";
import { pendingCount } from "../../src/lazy/deferred.ts";
import { copyOnWriteStats } from "../../src/lazy/readers.ts";
import { planCacheStats } from "../../src/scheduler/compile.ts";
import { FLOAT32_TOLERANCE, type Contract } from "../../src/backends/catalog.ts";
import { BACKENDS, useBackend, WEBGPU } from "../backends.ts";
import { expectWithinContract } from "../catalog/helpers.ts";

const config = () => new models.GPT2Config({
  vocab_size: 23, n_positions: 8, n_embd: 16, n_layer: 2, n_head: 2,
  resid_pdrop: 0, embd_pdrop: 0, attn_pdrop: 0, activation_function: "gelu",
});

interface Run {
  losses: number[];
  /** Trainable parameters, then AdamW's exp_avg and exp_avg_sq of each, as float64 arrays. */
  state: Float64Array[];
  /** Plans realized per step, from the second step on. */
  plansPerStep: number[];
  /** Plan compiles (cache misses) from the third step on. */
  laterMisses: number;
  /** Copy-on-write copies from the third step on (private lifts and writes: none). */
  laterCopies: number;
}

/**
 * 5 LoRA AdamW steps of a tiny GPT-2 written the PyTorch way.
 * @param accumulate - micro-batches per step (gradients accumulated over several backward calls)
 * @param setToNone - zero_grad(set_to_none)
 */
function train(mode: nn.ExecutionMode, accumulate: number, setToNone: boolean): Run {
  loom.manual_seed(0);
  const model = new models.GPT2LMHeadModel(config());
  lora.get_peft_model(model, new lora.LoraConfig({ r: 4, lora_alpha: 8, lora_dropout: 0, target_modules: ["attn.c_attn", "attn.c_proj"], fan_in_fan_out: true }));
  // B starts at zero (PEFT); a non-zero B makes every LoRA gradient path count from step one
  for (const [name, p] of model.named_parameters()) if (name.includes("lora_B")) loom.no_grad(() => p.copy_(loom.randn(p.shape as number[]).mul(0.1)));
  const params = model.parameters().filter((p) => p.requires_grad);
  const opt = new optim.AdamW(params, { lr: 1e-2, weight_decay: 0.05 });
  const batches = Array.from({ length: accumulate }, () => [loom.randint(0, 23, [2, 8]), loom.randint(0, 23, [2, 8])] as const);
  model.train();
  const losses: number[] = [], plansPerStep: number[] = [];
  let misses0 = 0, copies0 = 0;
  nn.with_execution_mode(mode, () => {
    for (let step = 0; step < 5; step++) {
      // step 0 has no gradients to accumulate into (zero_grad(set_to_none=false) keeps them from step 1 on)
      if (step === 2) {
        misses0 = planCacheStats.misses;
        copies0 = copyOnWriteStats.copies;
      }
      const r0 = loom.realizeStats.realizes;
      opt.zero_grad(setToNone);
      const stepLosses = batches.map(([x, y]) => {
        const { loss } = model.call(x, { targets: y });
        loss!.div(accumulate).backward();
        return loss!;
      });
      opt.step();
      for (const l of stepLosses) losses.push(l.item());
      if (step > 0) plansPerStep.push(loom.realizeStats.realizes - r0);
    }
  });
  const state = params.flatMap((p) => {
    const s = opt.state.get(p)!;
    return [p, s.exp_avg as loom.Tensor, s.exp_avg_sq as loom.Tensor].map((t) => t.dataSync());
  });
  return { losses, state, plansPerStep, laterMisses: planCacheStats.misses - misses0, laterCopies: copyOnWriteStats.copies - copies0 };
}

/** torch.testing's float32 tolerance as a contract: |a − b| ≤ 1e-5 + 1.3e-6·|b|. */
const FLOAT32: Contract = { kind: "bound", ...(FLOAT32_TOLERANCE as { atol: number; rtol: number }), source: "torch.testing float32" };

const CASES = [
  { accumulate: 1, setToNone: true },
  { accumulate: 2, setToNone: true },
  { accumulate: 2, setToNone: false },
];

describe.each(BACKENDS)("the natural training loop on %s", (backend) => {
  useBackend(backend);
  for (const c of CASES) {
    test(`lazy == eager after 5 steps (${c.accumulate} micro-batch(es), zero_grad(set_to_none=${c.setToNone}))`, () => {
      const exact = backend === "js";
      const run = (mode: nn.ExecutionMode) => (exact ? loom.with_compiler_options({ tolerance: "exact" }, () => train(mode, c.accumulate, c.setToNone)) : train(mode, c.accumulate, c.setToNone));
      const eager = run("eager"), lazy = run("lazy");
      expect(lazy.state.length).toBe(eager.state.length);
      if (exact) {
        expect(lazy.losses).toEqual(eager.losses);
        lazy.state.forEach((s, i) => expect(Array.from(s)).toEqual(Array.from(eager.state[i]!)));
      } else {
        lazy.state.forEach((s, i) => expectWithinContract(s, eager.state[i]!, FLOAT32, { float64: true, what: `state ${i}` }));
        expectWithinContract(lazy.losses, eager.losses, FLOAT32, { float64: true, what: "losses" });
      }
      // lazy: forward, backward and update of a step are ONE plan, compiled once
      expect(lazy.plansPerStep).toEqual([1, 1, 1, 1]);
      expect(lazy.laterMisses).toBe(0);
      // nothing outside Loom read the parameters or the optimizer state: no copy-on-write copies
      expect(lazy.laterCopies).toBe(0);
      expect(pendingCount()).toEqual({ writes: 0, values: 0 });
      // and the loss decreases
      expect(lazy.losses.at(-1)!).toBeLessThan(lazy.losses[0]!);
    });
  }
});

describe.each(BACKENDS)("a failing step on %s", (backend) => {
  useBackend(backend);
  test("an out-of-range target raises at loss.item(); the step's writes are dropped, later steps work", () => {
    loom.manual_seed(0);
    const model = new models.GPT2LMHeadModel(config());
    lora.get_peft_model(model, new lora.LoraConfig({ r: 4, lora_alpha: 8, target_modules: ["attn.c_attn"], fan_in_fan_out: true }));
    const params = model.parameters().filter((p) => p.requires_grad);
    const opt = new optim.AdamW(params, { lr: 1e-2 });
    const x = loom.randint(0, 23, [2, 8]), y = loom.randint(0, 23, [2, 8]);
    const step = (targets: loom.Tensor) => nn.with_execution_mode("lazy", () => {
      const { loss } = model.call(x, { targets });
      opt.zero_grad();
      loss!.backward();
      opt.step();
      return loss!.item();
    });
    step(y);
    const before = params.map((p) => Array.from(p.dataSync()));
    const bad = y.clone();
    bad.set([0, 0], 99); // vocab 23: out of range
    expect(() => step(bad)).toThrow(loom.LoomIndexError);
    expect(params.map((p) => Array.from(p.dataSync()))).toEqual(before); // as if step() never ran
    expect(pendingCount()).toEqual({ writes: 0, values: 0 });
    step(y);
    expect(params.some((p, i) => Array.from(p.dataSync()).some((v, k) => v !== before[i]![k]))).toBe(true);
  });
});

describe.each([...BACKENDS, ...(WEBGPU ? ["webgpu"] : [])])("pending state keeps eager semantics on %s", (where) => {
  if (where !== "webgpu") useBackend(where as (typeof BACKENDS)[number]);
  for (const device of [where === "webgpu" ? "webgpu" : "cpu"]) {
    test("a deferred write, a lazy graph recorded before it, and a view read after it", () => {
      const p = loom.tensor([1, 2, 3, 4], { dtype: "float32" }).to(device);
      const view = p.view([2, 2]);
      const before = p.lazy().mul(10); // recorded before the write: keeps the old values
      const g = loom.tensor([1, 1, 1, 1], { dtype: "float32" }).to(device).lazy().defer(); // a pending value
      loom.no_grad(() => p.sub_(g.mul(0.5))); // a pending write (nothing runs)
      expect(p.is_pending).toBe(true);
      expect(view.tolist()).toEqual([[0.5, 1.5], [2.5, 3.5]]); // a read through a view flushes first
      expect(p.is_pending).toBe(false);
      expect(before.tolist()).toEqual([10, 20, 30, 40]);
      expect(p.lazy().mul(10).tolist()).toEqual([5, 15, 25, 35]);
      // an eager write (eager source) while a lazy graph reading p is pending: the graph keeps the old values
      const pending = p.lazy().add(1);
      loom.no_grad(() => p.mul_(2));
      expect(pending.tolist()).toEqual([1.5, 2.5, 3.5, 4.5]);
      expect(p.tolist()).toEqual([1, 3, 5, 7]);
    });
  }

  test("a write through an eager op on a pending write composes: x.copy_(a) then x.mul_(2)", () => {
    const x = loom.zeros(3);
    const a = loom.tensor([1, 2, 3], { dtype: "float32" }).lazy().defer();
    x.copy_(a);
    x.mul_(2); // reads x's pending value: still one pending write
    expect(pendingCount().writes).toBe(1);
    expect(x.tolist()).toEqual([2, 4, 6]);
  });

  test("a pending value written in place: the write is a new value; views of it share one buffer", () => {
    const g = loom.tensor([1, 2, 3, 4], { dtype: "float32" }).lazy().defer();
    g.mul_(2); // nothing else aliases it: rebinds
    expect(g.is_pending).toBe(true);
    expect(g.tolist()).toEqual([2, 4, 6, 8]);
    const h = loom.tensor([1, 2, 3, 4], { dtype: "float32" }).lazy().defer();
    const hv = h.view([2, 2]);
    hv.add_(1); // a view of a pending value: h gets a buffer first, then hv writes it
    expect(h.tolist()).toEqual([2, 3, 4, 5]);
  });

  test("a value written into a tensor stays its own value when that tensor is written again", () => {
    const p = loom.zeros(3);
    const y = loom.tensor([1, 2, 3], { dtype: "float32" }).lazy().mul(2).defer();
    p.copy_(y);
    expect(p.tolist()).toEqual([2, 4, 6]); // the flush wrote y's value into p
    loom.no_grad(() => p.add_(100));
    expect(y.tolist()).toEqual([2, 4, 6]);
    const l = loom.tensor([1, 2, 3], { dtype: "float32" }).lazy().mul(3);
    const q = loom.zeros(3);
    q.copy_(l as never); // a lazy value into an eager tensor: a deferred write
    expect(q.tolist()).toEqual([3, 6, 9]);
    const e = l.eval();
    loom.no_grad(() => q.add_(100));
    expect([e.tolist(), l.tolist()]).toEqual([[3, 6, 9], [3, 6, 9]]);
  });

  test("a module's pending output is computed before an eager write of a weight it read", () => {
    loom.manual_seed(0);
    const lin = new nn.Linear(4, 3);
    const x = loom.randn([2, 4]);
    const want = lin.forward_eager(x).dataSync();
    const out = lin.call(x) as loom.Tensor; // pending: reads the weight through a private lift
    expect(out.is_pending).toBe(true);
    loom.no_grad(() => lin.weight.add_(1));
    expect(Array.from(out.dataSync())).toEqual(Array.from(want));
  });

  test("a privately lifted value kept past a write of its tensor raises (never the new contents)", () => {
    const w = loom.tensor([1, 2, 3], { dtype: "float32" });
    let kept: loom.LazyTensor | null = null;
    class Keeper extends nn.TensorModule {
      forward_lazy<S extends loom.TensorOps<S>>(x: S): S {
        const lw = nn.lift(w, x);
        kept = lw as unknown as loom.LazyTensor; // a module author keeping a lift: misuse
        return x.mul(lw);
      }
    }
    const m = new Keeper();
    expect((m.call(loom.ones(3)) as loom.Tensor).tolist()).toEqual([1, 2, 3]);
    loom.no_grad(() => w.mul_(10));
    expect(() => kept!.mul(1).tolist()).toThrow(loom.LoomValueError);
    expect(() => kept!.mul(1).tolist()).toThrow(/written in place/);
  });

  test("zero_grad(set_to_none=false) of pending gradients runs nothing (they become pending zeros)", () => {
    const w = loom.randn([3]).requires_grad_(true);
    const opt = new optim.SGD([w], { lr: 0.1 });
    w.lazy().mul(2).sum().backward();
    expect(w.grad!.is_pending).toBe(true);
    const r0 = loom.realizeStats.realizes;
    opt.zero_grad(false);
    expect(loom.realizeStats.realizes).toBe(r0);
    expect(w.grad!.tolist()).toEqual([0, 0, 0]);
  });

  test("copy_ of a wrong shape raises at record time, naming both shapes", () => {
    const x = loom.zeros(3);
    const a = loom.tensor([1, 2], { dtype: "float32" }).lazy().defer();
    expect(() => x.copy_(a)).toThrow(/\[2\].*\[3\]|\[3\].*\[2\]/);
    expect(pendingCount().writes).toBe(0);
  });

  test("an in-place op whose pending result cannot be cast to the destination raises at record time, naming both dtypes", () => {
    const x = loom.zeros(3, { dtype: "int64" });
    const a = loom.tensor([0.5, 1.5, 2.5], { dtype: "float32" }).lazy().defer();
    expect(() => x.add_(a)).toThrow(/float32.*int64/);
    expect(pendingCount().writes).toBe(0);
    expect(x.tolist()).toEqual([0, 0, 0]);
  });

  test("a destination inside a larger buffer (rows of a matrix, at an offset) is written there, deferred", () => {
    const dev = where === "webgpu" ? "webgpu" : "cpu";
    const p = loom.zeros(5, 3).to(dev);
    const rows = p.narrow(0, 2, 2);
    rows.copy_(loom.ones(2, 3).to(dev).lazy().mul(7).defer());
    expect(rows.is_pending).toBe(true);
    expect(p.tolist()).toEqual([[0, 0, 0], [0, 0, 0], [7, 7, 7], [7, 7, 7], [0, 0, 0]]);
    const big = loom.zeros(3000, 16); // large enough for the native backend's pooled memory
    big.narrow(0, 1000, 1000).copy_(loom.ones(1000, 16).lazy().mul(2).defer());
    const v = big.dataSync();
    expect([v[1000 * 16 - 1], v[1000 * 16], v[2000 * 16 - 1], v[2000 * 16]]).toEqual([0, 2, 2, 0]);
  });

  test("a strided destination is written at once (the plan writes dense buffers)", () => {
    const x = loom.zeros(2, 3);
    const a = loom.tensor([1, 2], { dtype: "float32" }).lazy().defer();
    x.t().index(0).copy_(a); // column 0 of x: [2] with stride 3
    expect(pendingCount().writes).toBe(0);
    expect(x.tolist()).toEqual([[1, 0, 0], [2, 0, 0]]);
  });
});
