/**
 * F.embedding / nn.Embedding options against torch 1.13 (embedding_goldens.json from
 * gen_embedding_goldens.py): max_norm renormalizes the looked-up rows of the weight in place
 * (torch.embedding_renorm_), norm_type picks the p-norm, scale_grad_by_freq divides each row's
 * gradient by its count in the batch. Checked: the output, the weight gradient of
 * sum(y * sin(arange)), and the weight after the call; eager and lazy (lazy == eager bit for bit
 * on js), functional and module, on every backend.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { nn } from "../../src/index.ts";
import { copyOnWriteStats } from "../../src/lazy/readers.ts";
import { planCacheStats } from "../../src/scheduler/compile.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { expectClose, readGolden } from "./helpers.ts";

interface Case {
  idx: number[] | number[][];
  idx_shape: number[];
  opts: { max_norm?: number; norm_type?: number | string; scale_grad_by_freq?: boolean; padding_idx?: number };
  y: number[];
  y_shape: number[];
  grad: number[];
  weight_after: number[];
}
const G = readGolden<Record<string, unknown>>(new URL("./embedding_goldens.json", import.meta.url));
const W0 = G.W0 as number[], W0_shape = G.W0_shape as number[];
const CASES = Object.entries(G).filter(([k]) => !k.startsWith("W0")) as [string, Case][];

const normType = (p: number | string | undefined): number | undefined => (p === "Infinity" || p === "inf" ? Infinity : (p as number | undefined));
const optsOf = (c: Case) => ({ ...c.opts, norm_type: normType(c.opts.norm_type) });

/** One functional call: [y, weight.grad, weight after] as eager tensors. */
function runFunctional(c: Case, lazy: boolean): [loom.Tensor, loom.Tensor, loom.Tensor] {
  const W = loom.tensor(W0).reshape(W0_shape).contiguous().requires_grad_(true);
  const idx = loom.tensor(c.idx.flat(), { dtype: "int64" }).reshape(c.idx_shape);
  const gy = loom.arange(c.y.length).to("float32").sin().reshape(c.y_shape);
  if (lazy) {
    const y = loom.embedding(idx.lazy(), W.lazy(), optsOf(c));
    y.mul(gy.lazy()).sum().backward();
    return [y.eval(), W.grad!, W];
  }
  const y = loom.embedding(idx, W, optsOf(c));
  y.mul(gy).sum().backward();
  return [y, W.grad!, W];
}

/** The same through nn.Embedding in an execution mode. */
function runModule(c: Case, mode: nn.ExecutionMode): [loom.Tensor, loom.Tensor, loom.Tensor] {
  const emb = nn.Embedding.from_pretrained(loom.tensor(W0).reshape(W0_shape).contiguous(), { freeze: false, ...optsOf(c) });
  const idx = loom.tensor(c.idx.flat(), { dtype: "int64" }).reshape(c.idx_shape);
  const gy = loom.arange(c.y.length).to("float32").sin().reshape(c.y_shape);
  const y = nn.with_execution_mode(mode, () => {
    const y = emb.call(idx);
    y.mul(gy).sum().backward();
    return y;
  });
  return [y, emb.weight.grad!, emb.weight];
}

const toArr = (t: loom.Tensor): number[] => Array.from(t.dataSync());

for (const backend of BACKENDS) {
  describe(`embedding options (${backend})`, () => {
    useBackend(backend);
    for (const [name, c] of CASES) {
      test(`${name}: functional, eager and lazy, match torch`, () => {
        const e = runFunctional(c, false), l = runFunctional(c, true);
        for (const [r, what] of [[e, "eager"], [l, "lazy"]] as const) {
          expectClose(toArr(r[0]), c.y, { rtol: 1e-5, atol: 1e-6, what: `${what} y` });
          expectClose(toArr(r[1]), c.grad, { rtol: 1e-5, atol: 1e-6, what: `${what} grad` });
          expectClose(toArr(r[2]), c.weight_after, { rtol: 1e-5, atol: 1e-6, what: `${what} weight after` });
        }
        if (backend === "js") for (let i = 0; i < 3; i++) expect(toArr(l[i]!)).toEqual(toArr(e[i]!));
      });
      test(`${name}: nn.Embedding, eager and lazy modes, match torch`, () => {
        const e = runModule(c, "eager"), l = runModule(c, "lazy");
        for (const [r, what] of [[e, "eager"], [l, "lazy"]] as const) {
          expectClose(toArr(r[0]), c.y, { rtol: 1e-5, atol: 1e-6, what: `${what} y` });
          expectClose(toArr(r[1]), c.grad, { rtol: 1e-5, atol: 1e-6, what: `${what} grad` });
          expectClose(toArr(r[2]), c.weight_after, { rtol: 1e-5, atol: 1e-6, what: `${what} weight after` });
        }
        if (backend === "js") for (let i = 0; i < 3; i++) expect(toArr(l[i]!)).toEqual(toArr(e[i]!));
      });
    }
  });
}

/**
 * 4 Adam steps of Embedding(max_norm, scale_grad_by_freq) -> Linear -> MSE: the weight after each
 * step, plans per step, plan compiles and copy-on-write copies from step 2 on.
 */
function trainLoop(mode: nn.ExecutionMode) {
  loom.manual_seed(5);
  const emb = new nn.Embedding(7, 4, { max_norm: 1, scale_grad_by_freq: true, padding_idx: 0 });
  const head = new nn.Linear(4, 1);
  const opt = new loom.optim.Adam([...emb.parameters(), ...head.parameters()], { lr: 0.05 });
  const x = loom.tensor([[1, 3, 3, 0], [6, 2, 3, 5]], { dtype: "int64" });
  const t = loom.randn([2, 4, 1]);
  const weights: number[][] = [], plans: number[] = [];
  let misses0 = 0, copies0 = 0;
  nn.with_execution_mode(mode, () => {
    for (let step = 0; step < 4; step++) {
      if (step === 2) [misses0, copies0] = [planCacheStats.misses, copyOnWriteStats.copies];
      const r0 = loom.realizeStats.realizes;
      opt.zero_grad();
      const loss = loom.mse_loss(head.call(emb.call(x)), t);
      loss.backward();
      opt.step();
      loss.item();
      plans.push(loom.realizeStats.realizes - r0);
      weights.push(toArr(emb.weight));
    }
  });
  return { weights, plans: plans.slice(1), misses: planCacheStats.misses - misses0, copies: copyOnWriteStats.copies - copies0 };
}

for (const backend of BACKENDS) {
  describe(`Embedding(max_norm) in a training loop (${backend})`, () => {
    useBackend(backend);
    test("lazy == eager step after step; lazy: one plan per step, compiled once, no copy-on-write", () => {
      const exact = backend === "js";
      const run = (mode: nn.ExecutionMode) => (exact ? loom.with_compiler_options({ tolerance: "exact" }, () => trainLoop(mode)) : trainLoop(mode));
      const eager = run("eager"), lazy = run("lazy");
      eager.weights.forEach((w, i) => {
        if (exact) expect(lazy.weights[i]).toEqual(w);
        else expectClose(lazy.weights[i]!, w, { rtol: 1e-5, atol: 1e-6, what: `step ${i}` });
      });
      expect(lazy.plans).toEqual([1, 1, 1]);
      expect(lazy.misses).toBe(0);
      expect(lazy.copies).toBe(0);
    });
  });
}

describe("embedding options: edges", () => {
  test("max_norm leaves rows not looked up untouched, and a lookup reads the renormalized weight", () => {
    // row 0 = [3, 4] (norm 5) is looked up, row 1 = [6, 8] is not; max_norm 1: row 0 -> [3, 4] / (5 + 1e-7)
    const W = loom.tensor([[3, 4], [6, 8]]).to("float32");
    const y = loom.embedding(loom.tensor([0], { dtype: "int64" }), W, { max_norm: 1 });
    expectClose(toArr(y), [0.6, 0.8], { rtol: 1e-6 });
    expectClose(toArr(W), [0.6, 0.8, 6, 8], { rtol: 1e-6 });
  });
  test("a positional padding_idx still works, and bad options throw typed errors", () => {
    const W = loom.tensor([[1, 2], [3, 4]]).to("float32");
    expect(toArr(loom.embedding(loom.tensor([1], { dtype: "int64" }), W, 1))).toEqual([3, 4]);
    expect(() => loom.embedding(loom.tensor([1], { dtype: "int64" }), W, { max_norm: -1 })).toThrow(loom.LoomValueError);
    expect(() => new nn.Embedding(3, 2, { sparse: true })).toThrow("[Embedding] sparse");
    expect(() => loom.embedding(loom.tensor([2], { dtype: "int64" }), W, { max_norm: 1 }).tolist()).toThrow("out of bounds");
  });
  test("repr lists the options as torch does", () => {
    expect(new nn.Embedding(5, 3, { max_norm: 1, scale_grad_by_freq: true }).toString()).toBe("Embedding(5, 3, max_norm=1.0, scale_grad_by_freq=True)");
  });
});
