/**
 * RMSprop and Adagrad against PyTorch 1.13 (optim_goldens_2.json from gen_optim_goldens_2.py), on
 * every backend, with eager gradients and with pending (lazy) ones: the same gradients are fed in
 * for 6 steps (one parameter has no gradient at step 2, so it is skipped), and the parameters
 * after every step and the final state must match torch's. A lazy step is one plan.
 * Also: a small model trained eagerly and lazily gives the same bits on js (one plan per lazy
 * step, compiled once), state_dict layout and round trip, validation, and Adam/AdamW's
 * `fused`/`foreach` flags.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { nn, optim } from "../../src/index.ts";
import { FLOAT32_TOLERANCE, type Contract } from "../../src/backends/catalog.ts";
import { pendingCount } from "../../src/lazy/deferred.ts";
import { planCacheStats } from "../../src/scheduler/compile.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { expectWithinContract } from "../catalog/helpers.ts";
import { expectClose, fromArr, readGolden, type Arr } from "../nn/helpers.ts";
import { expectState, type GoldenState } from "./helpers.ts";

interface OptCase {
  name: string;
  optimizer: "RMSprop" | "Adagrad";
  groups: Record<string, unknown>[];
  /** Constructor arguments besides the groups (Adagrad's initial_accumulator_value). */
  defaults?: Record<string, unknown>;
  group_of_param: number[];
  init: Arr[];
  steps: { grads: (Arr | null)[]; params: Arr[] }[];
  state: GoldenState;
}
const golden = readGolden<{ optimizers: OptCase[] }>(new URL("./optim_goldens_2.json", import.meta.url));

const CLASSES = { RMSprop: optim.RMSprop, Adagrad: optim.Adagrad } as const;
// float32 parameters; torch fuses some multiply-adds, Loom rounds each op: a few ulps apart
const TOL = { rtol: 2e-6, atol: 2e-7 };

function build(c: OptCase, params: loom.Tensor[], hyper = true): optim.Optimizer<any> {
  const groups = c.groups.map((h, gi) => ({ ...(hyper ? h : {}), params: params.filter((_, i) => c.group_of_param[i] === gi) }));
  return new CLASSES[c.optimizer](groups as never, c.defaults ?? {});
}

/** Set the gradients: eager tensors, or pending values (what a lazy backward leaves). */
function feed(params: loom.Tensor[], grads: (Arr | null)[], lazy: boolean): void {
  params.forEach((p, i) => {
    const g = grads[i];
    p.grad = g ? (lazy ? fromArr(g).lazy().mul(1).defer() : fromArr(g)) : null;
  });
}


describe.each(BACKENDS)("RMSprop and Adagrad match torch step by step on %s", (backend) => {
  useBackend(backend);
  for (const c of golden.optimizers) {
    for (const lazy of [false, true]) {
      test(`${c.name} (${lazy ? "pending" : "eager"} gradients)`, () => {
        const params = c.init.map((a, i) => (i === 0 ? new nn.Parameter(fromArr(a)) : fromArr(a).requires_grad_()));
        const opt = build(c, params);
        c.steps.forEach((s, k) => {
          feed(params, s.grads, lazy);
          const r0 = loom.realizeStats.realizes;
          opt.step();
          if (lazy) expect(params[0]!.is_pending).toBe(true); // nothing ran yet
          params.forEach((p, i) => expectClose(p, s.params[i]!, { ...TOL, what: `${c.name} step ${k + 1} param ${i}` }));
          // the whole update (every parameter and buffer) is one plan
          expect(loom.realizeStats.realizes - r0).toBe(1);
        });
        expectState(c.state, opt, params, TOL, c.name);
        expect(pendingCount()).toEqual({ writes: 0, values: 0 });
      });
    }
  }
});

/** A 2-layer MLP trained for 5 steps: final parameters, optimizer buffers, losses, plans per step. */
function train(mode: nn.ExecutionMode, make: (ps: nn.Parameter[]) => optim.Optimizer<any>) {
  loom.manual_seed(3);
  const l1 = new nn.Linear(6, 8), l2 = new nn.Linear(8, 3);
  const params = [...l1.parameters(), ...l2.parameters()];
  const opt = make(params);
  const x = loom.randn([4, 6]), y = loom.randn([4, 3]);
  const losses: number[] = [], plansPerStep: number[] = [];
  let misses0 = 0;
  nn.with_execution_mode(mode, () => {
    for (let step = 0; step < 5; step++) {
      if (step === 2) misses0 = planCacheStats.misses;
      const r0 = loom.realizeStats.realizes;
      const out = l2.call((l1.call(x) as loom.Tensor).tanh()) as loom.Tensor;
      const loss = out.sub(y).pow(2).mean();
      opt.zero_grad();
      loss.backward();
      opt.step();
      losses.push(loss.item());
      if (step > 0) plansPerStep.push(loom.realizeStats.realizes - r0);
    }
  });
  const buffers = params.flatMap((p) => Object.values(opt.state.get(p)!).filter((v): v is loom.Tensor => v instanceof loom.Tensor));
  return { losses, values: [...params, ...buffers].map((t) => t.dataSync()), plansPerStep, laterMisses: planCacheStats.misses - misses0 };
}

const FLOAT32: Contract = { kind: "bound", ...(FLOAT32_TOLERANCE as { atol: number; rtol: number }), source: "torch.testing float32" };
const CONFIGS: [string, (ps: nn.Parameter[]) => optim.Optimizer<any>][] = [
  ["RMSprop centered+momentum+wd", (ps) => new optim.RMSprop(ps, { lr: 0.01, centered: true, momentum: 0.9, weight_decay: 0.01 })],
  ["RMSprop maximize", (ps) => new optim.RMSprop(ps, { lr: 0.01, maximize: true })],
  ["Adagrad lr_decay+wd+initial_accumulator_value", (ps) => new optim.Adagrad(ps, { lr: 0.1, lr_decay: 0.1, weight_decay: 0.01, initial_accumulator_value: 0.1 })],
  ["AdamW fused", (ps) => new optim.AdamW(ps, { lr: 0.01, fused: true })],
];

describe.each(BACKENDS)("a lazy training step is one plan, equal to eager, on %s", (backend) => {
  useBackend(backend);
  for (const [name, make] of CONFIGS) {
    test(name, () => {
      const exact = backend === "js";
      const run = (mode: nn.ExecutionMode) => (exact ? loom.with_compiler_options({ tolerance: "exact" }, () => train(mode, make)) : train(mode, make));
      const eager = run("eager"), lazy = run("lazy");
      expect(lazy.values.length).toBe(eager.values.length);
      if (exact) {
        expect(lazy.losses).toEqual(eager.losses);
        lazy.values.forEach((v, i) => expect(Array.from(v)).toEqual(Array.from(eager.values[i]!)));
      } else {
        lazy.values.forEach((v, i) => expectWithinContract(v, eager.values[i]!, FLOAT32, { float64: true, what: `value ${i}` }));
      }
      expect(lazy.plansPerStep).toEqual([1, 1, 1, 1]);
      expect(lazy.laterMisses).toBe(0);
      if (name.includes("maximize")) expect(lazy.losses.at(-1)!).toBeGreaterThan(lazy.losses[0]!);
      else expect(lazy.losses.at(-1)!).toBeLessThan(lazy.losses[0]!);
      expect(pendingCount()).toEqual({ writes: 0, values: 0 });
    });
  }
});

describe("state_dict", () => {
  test("layout: torch's keys; Adagrad has state for every parameter from the start", () => {
    const a = loom.zeros(2).requires_grad_(), b = loom.zeros(3).requires_grad_();
    const ada = new optim.Adagrad([a, b], { initial_accumulator_value: 0.25 });
    const sd0 = ada.state_dict();
    expect(Object.keys(sd0.state)).toEqual(["0", "1"]);
    expect(sd0.state[1]!.step).toBe(0);
    expect((sd0.state[1]!.sum as loom.Tensor).tolist()).toEqual([0.25, 0.25, 0.25]);
    expect(sd0.param_groups).toEqual([{ lr: 1e-2, lr_decay: 0, weight_decay: 0, initial_accumulator_value: 0.25, eps: 1e-10, maximize: false, params: [0, 1] }]);
    const rms = new optim.RMSprop([{ params: [a] }, { params: [b], centered: true, momentum: 0.5 }], { foreach: false });
    a.grad = loom.ones(2);
    b.grad = loom.ones(3);
    rms.step();
    const sd = rms.state_dict();
    expect(Object.keys(sd.state[0]!).sort()).toEqual(["square_avg", "step"]);
    expect(Object.keys(sd.state[1]!).sort()).toEqual(["grad_avg", "momentum_buffer", "square_avg", "step"]);
    expect(sd.state[1]!.step).toBe(1);
    expect(sd.param_groups[1]).toEqual({ lr: 1e-2, alpha: 0.99, eps: 1e-8, weight_decay: 0, momentum: 0.5, centered: true, maximize: false, foreach: false, params: [1] });
  });

  for (const name of ["rmsprop_centered_momentum_wd", "rmsprop_two_groups", "adagrad_lr_decay", "adagrad_two_groups"]) {
    test(`${name}: save after 3 steps, load into a fresh optimizer, continue = torch`, () => {
      const c = golden.optimizers.find((o) => o.name === name)!;
      const params = c.init.map((a) => fromArr(a).requires_grad_());
      const opt = build(c, params);
      for (const s of c.steps.slice(0, 3)) {
        feed(params, s.grads, false);
        opt.step();
      }
      const sd = opt.state_dict();
      const params2 = params.map((p) => p.detach().clone().requires_grad_());
      const opt2 = build(c, params2, false); // default hyperparameters until loaded
      opt2.load_state_dict(sd);
      expect(opt2.param_groups.map(({ params: _p, ...h }) => h)).toEqual(opt.param_groups.map(({ params: _p, ...h }) => h));
      feed(params, c.steps[3]!.grads, false);
      opt.step(); // the old optimizer moving on does not change the loaded copy
      c.steps.slice(3).forEach((s, k) => {
        feed(params2, s.grads, true);
        opt2.step();
        params2.forEach((p, i) => expectClose(p, s.params[i]!, { ...TOL, what: `${name} resumed step ${k + 4} param ${i}` }));
      });
      expectState(c.state, opt2, params2, TOL, `${name} resumed`);
    });
  }
});

describe("behaviour", () => {
  test("hyperparameter validation (torch's messages)", () => {
    const p = [loom.zeros(1).requires_grad_()];
    expect(() => new optim.RMSprop(p, { lr: -1 })).toThrow("[RMSprop] Invalid learning rate: -1");
    expect(() => new optim.RMSprop(p, { eps: -1e-8 })).toThrow("[RMSprop] Invalid epsilon value: -1e-8");
    expect(() => new optim.RMSprop(p, { momentum: -0.5 })).toThrow("[RMSprop] Invalid momentum value: -0.5");
    expect(() => new optim.RMSprop(p, { weight_decay: -1 })).toThrow("[RMSprop] Invalid weight_decay value: -1");
    expect(() => new optim.RMSprop(p, { alpha: -0.1 })).toThrow("[RMSprop] Invalid alpha value: -0.1");
    expect(() => new optim.RMSprop(p, { lr: NaN })).toThrow(loom.LoomValueError);
    expect(() => new optim.Adagrad(p, { lr: -1 })).toThrow("[Adagrad] Invalid learning rate: -1");
    expect(() => new optim.Adagrad(p, { lr_decay: -1 })).toThrow("[Adagrad] Invalid lr_decay value: -1");
    expect(() => new optim.Adagrad(p, { weight_decay: -1 })).toThrow("[Adagrad] Invalid weight_decay value: -1");
    expect(() => new optim.Adagrad(p, { initial_accumulator_value: -1 })).toThrow("[Adagrad] Invalid initial_accumulator_value value: -1");
    expect(() => new optim.Adagrad(p, { eps: -1 })).toThrow("[Adagrad] Invalid epsilon value: -1");
    expect(() => new optim.Adagrad([])).toThrow("[Adagrad] optimizer got an empty parameter list");
  });

  test("defaults are torch's", () => {
    const p = [loom.zeros(1).requires_grad_()];
    expect(new optim.RMSprop(p).defaults).toEqual({ lr: 1e-2, alpha: 0.99, eps: 1e-8, weight_decay: 0, momentum: 0, centered: false, maximize: false });
    expect(new optim.Adagrad(p).defaults).toEqual({ lr: 1e-2, lr_decay: 0, weight_decay: 0, initial_accumulator_value: 0, eps: 1e-10, maximize: false });
  });

  test("RMSprop first step by hand: p - lr·g / (√((1-α) g²) + eps)", () => {
    // α = 0.75, g = [2, -1]: v = 0.25·g² = [1, 0.25], √v = [1, 0.5]; p = 1 - 0.1·[2/1, -1/0.5] = [0.8, 1.2]
    const p = loom.tensor([1, 1]).float().requires_grad_();
    const opt = new optim.RMSprop([p], { lr: 0.1, alpha: 0.75, eps: 0 });
    p.grad = loom.tensor([2, -1]).float();
    opt.step();
    expectClose(p, [0.8, 1.2], { rtol: 1e-6, what: "rmsprop by hand" });
  });

  test("Adagrad two steps by hand: lr / (1 + (t-1)·lr_decay) · g / √Σg²", () => {
    // g = 3 then 4, lr 1, lr_decay 1: t=1: p = 0 - 3/3 = -1; t=2: clr = 1/2, Σ = 25, p = -1 - 0.5·4/5 = -1.4
    const p = loom.zeros(1).requires_grad_();
    const opt = new optim.Adagrad([p], { lr: 1, lr_decay: 1, eps: 0 });
    p.grad = loom.tensor([3]).float();
    opt.step();
    p.grad = loom.tensor([4]).float();
    opt.step();
    expectClose(p, [-1.4], { rtol: 1e-6, what: "adagrad by hand" });
    expect(opt.state.get(p)!.step).toBe(2);
  });

  test("a group added later, and options switched on after the first step, get their state", () => {
    const a = loom.zeros(1).requires_grad_(), b = loom.zeros(1).requires_grad_();
    const ada = new optim.Adagrad([a], { lr: 1, initial_accumulator_value: 16, eps: 0 });
    ada.add_param_group({ params: [b], initial_accumulator_value: 100 }); // the group's value is not used (torch)
    b.grad = loom.tensor([3]).float();
    ada.step(); // Σ = 16 + 9: b = -3/5
    expectClose(b, [-0.6], { rtol: 1e-6, what: "adagrad added group" });
    const rms = new optim.RMSprop([a], { lr: 0.1 });
    a.grad = loom.ones(1);
    rms.step();
    rms.param_groups[0]!.momentum = 0.9;
    rms.param_groups[0]!.centered = true;
    rms.step();
    expect(Object.keys(rms.state.get(a)!).sort()).toEqual(["grad_avg", "momentum_buffer", "square_avg", "step"]);
  });
});

describe("Adam/AdamW fused and foreach", () => {
  test("accepted, kept in the groups when given, no effect on the values", () => {
    const run = (opts: Partial<optim.AdamHyperparams>) => {
      const p = loom.tensor([1, -2, 3]).float().requires_grad_();
      const opt = new optim.AdamW([p], { lr: 0.1, ...opts });
      for (const g of [[0.5, -1, 2], [1, 1, -3]]) {
        p.grad = loom.tensor(g).float();
        opt.step();
      }
      return { values: p.tolist(), group: opt.param_groups[0]! };
    };
    const plain = run({}), fused = run({ fused: true }), foreach = run({ foreach: true, fused: false });
    expect(fused.values).toEqual(plain.values);
    expect(foreach.values).toEqual(plain.values);
    expect("fused" in plain.group).toBe(false);
    expect(fused.group.fused).toBe(true);
    expect([foreach.group.foreach, foreach.group.fused]).toEqual([true, false]);
  });

  test("fused with a non-floating parameter raises (as torch)", () => {
    const ok = loom.zeros(2).requires_grad_(), ints = loom.zeros(2, { dtype: "int64" });
    expect(() => new optim.AdamW([ok, ints], { fused: true })).toThrow(loom.LoomDtypeError);
    expect(() => new optim.Adam([{ params: [ok] }, { params: [ints], fused: true }])).toThrow(
      "[Adam] `fused=True` requires all the params to be floating point Tensors, but param 0 of group 1 is int64",
    );
    expect(() => new optim.AdamW([ok, ints])).not.toThrow(); // only fused checks
  });
});
