/**
 * ExponentialLR, MultiStepLR, OneCycleLR and ReduceLROnPlateau against PyTorch 1.13
 * (optim_goldens_2.json from gen_optim_goldens_2.py): the lr of two param groups (base 0.1 and
 * 0.02) after construction and after every step, the momentum OneCycleLR cycles (SGD/RMSprop
 * `momentum`, Adam `betas[0]`), ReduceLROnPlateau's best / bad-step count / cooldown after each
 * metric; state_dict round trips, resuming, and torch's argument errors.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { optim } from "../../src/index.ts";
import { readGolden } from "../nn/helpers.ts";

interface SchedCase {
  name: string;
  optimizer: "SGD" | "Adam" | "RMSprop" | "Adagrad";
  hyper: Record<string, unknown>;
  base_lrs: number[];
  lrs: number[][];
  momentum?: number[][];
  metrics?: number[];
  plateau?: [number, number, number][];
}
const golden = readGolden<{ schedulers: SchedCase[] }>(new URL("./optim_goldens_2.json", import.meta.url));

const OPTS = { SGD: optim.SGD, Adam: optim.Adam, RMSprop: optim.RMSprop, Adagrad: optim.Adagrad } as const;

function makeOpt(c: Pick<SchedCase, "optimizer" | "hyper" | "base_lrs">): optim.Optimizer<any> {
  const groups = c.base_lrs.map((lr) => ({ params: [loom.zeros(1).requires_grad_()], lr }));
  return new OPTS[c.optimizer](groups as never, c.hyper as never);
}

type Sched = optim.LRScheduler | optim.ReduceLROnPlateau;
const { ExponentialLR, MultiStepLR, OneCycleLR, ReduceLROnPlateau } = optim.lr_scheduler;
const BUILD: Record<string, (o: optim.Optimizer<any>) => Sched> = {
  exponential: (o) => new ExponentialLR(o, 0.8),
  multistep: (o) => new MultiStepLR(o, [2, 5, 5, 9], 0.5),
  multistep_unsorted: (o) => new MultiStepLR(o, new Set([6, 1]), 0.3),
  onecycle_cos_sgd: (o) => new OneCycleLR(o, [1.0, 0.2], { total_steps: 20 }),
  onecycle_linear_three_phase_adam: (o) => new OneCycleLR(o, 0.5, {
    epochs: 4, steps_per_epoch: 5, pct_start: 0.25, anneal_strategy: "linear", div_factor: 10, final_div_factor: 100, three_phase: true,
  }),
  onecycle_cos_three_phase_adam_lists: (o) => new OneCycleLR(o, [0.3, 0.1], { total_steps: 17, pct_start: 0.4, three_phase: true, base_momentum: [0.8, 0.7], max_momentum: [0.9, 0.95] }),
  onecycle_linear_rmsprop: (o) => new OneCycleLR(o, 0.05, { total_steps: 12, anneal_strategy: "linear", pct_start: 0.5 }),
  onecycle_no_momentum_adagrad: (o) => new OneCycleLR(o, 0.2, { total_steps: 10, cycle_momentum: false }),
  plateau_min_rel: (o) => new ReduceLROnPlateau(o, { patience: 2, factor: 0.5, cooldown: 1, min_lr: [0.01, 0.005] }),
  plateau_min_abs: (o) => new ReduceLROnPlateau(o, { threshold_mode: "abs", threshold: 0.02, patience: 1, factor: 0.3 }),
  plateau_max_abs_cooldown: (o) => new ReduceLROnPlateau(o, { mode: "max", threshold_mode: "abs", threshold: 0.05, patience: 1, cooldown: 2, factor: 0.2 }),
  plateau_max_rel_eps: (o) => new ReduceLROnPlateau(o, { mode: "max", threshold: 0.1, patience: 0, factor: 0.9, eps: 0.005 }),
};

/** Same float64 formulas as torch; allow a couple of ulps for pow/cos implementations. */
function expectNums(got: number[], want: number[], what: string): void {
  expect(got.length).toBe(want.length);
  got.forEach((g, i) => {
    if (Math.abs(g - want[i]!) > 1e-15 + 1e-13 * Math.abs(want[i]!)) throw new Error(`${what}: group ${i}: got ${g}, expected ${want[i]}`);
  });
}

function momentumOf(o: optim.Optimizer<any>): number[] {
  return o.param_groups.map((g) => ("betas" in g ? (g.betas as number[])[0]! : g.momentum as number));
}

/** Check step k (0 = after construction) of case c against torch. */
function check(c: SchedCase, o: optim.Optimizer<any>, s: Sched, k: number, what: string): void {
  expectNums(s.get_last_lr(), c.lrs[k]!, `${what} lr after ${k} steps`);
  expectNums(o.param_groups.map((g) => g.lr), c.lrs[k]!, `${what} group lr after ${k} steps`);
  if (c.momentum) expectNums(momentumOf(o), c.momentum[k]!, `${what} momentum after ${k} steps`);
  if (c.plateau && k > 0) {
    const p = s as optim.ReduceLROnPlateau;
    expect([p.best, p.num_bad_epochs, p.cooldown_counter]).toEqual(c.plateau[k - 1]!);
  }
}

function advance(c: SchedCase, o: optim.Optimizer<any>, s: Sched, k: number): void {
  o.step();
  if (s instanceof ReduceLROnPlateau) s.step(c.metrics![k - 1]!);
  else s.step();
}

describe("schedulers match torch", () => {
  test("every golden case has a builder", () => {
    expect(golden.schedulers.map((c) => c.name).sort()).toEqual(Object.keys(BUILD).sort());
  });
  for (const c of golden.schedulers) {
    test(c.name, () => {
      const o = makeOpt(c);
      const s = BUILD[c.name]!(o);
      for (let k = 0; k < c.lrs.length; k++) {
        if (k > 0) advance(c, o, s, k);
        check(c, o, s, k, c.name);
      }
    });
  }
});

describe("state", () => {
  for (const name of ["multistep", "onecycle_cos_three_phase_adam_lists", "onecycle_linear_rmsprop", "plateau_min_rel", "plateau_max_abs_cooldown"]) {
    test(`${name}: state_dict after 5 steps, loaded with the optimizer's, continues as torch`, () => {
      const c = golden.schedulers.find((x) => x.name === name)!;
      const o = makeOpt(c);
      const s = BUILD[name]!(o);
      for (let k = 1; k <= 5; k++) advance(c, o, s, k);
      const ssd = s.state_dict(), osd = o.state_dict();
      expect(ssd.last_epoch).toBe(5);
      expect("optimizer" in ssd).toBe(false);
      const o2 = makeOpt(c);
      const s2 = BUILD[name]!(o2);
      o2.load_state_dict(osd);
      s2.load_state_dict(ssd);
      check(c, o2, s2, 5, `${name} restored`);
      for (let k = 6; k < c.lrs.length; k++) {
        advance(c, o2, s2, k);
        check(c, o2, s2, k, `${name} resumed`);
      }
    });
  }

  test("OneCycleLR keeps torch's group keys and resumes from last_epoch", () => {
    const c = golden.schedulers.find((x) => x.name === "onecycle_cos_sgd")!;
    const o = makeOpt(c);
    const s = BUILD[c.name]!(o);
    const g = o.param_groups[0] as Record<string, unknown>;
    expect([g.initial_lr, g.max_lr, g.min_lr, g.max_momentum, g.base_momentum]).toEqual([1 / 25, 1, 1 / 25 / 1e4, 0.95, 0.85]);
    for (let k = 1; k <= 4; k++) advance(c, o, s, k);
    // a new scheduler over the same optimizer, told 4 steps were taken, takes step 5
    const resumed = new OneCycleLR(o, [1.0, 0.2], { total_steps: 20, last_epoch: 4 });
    check(c, o, resumed, 5, "onecycle resumed");
  });

  test("ReduceLROnPlateau: a 0-d tensor metric, get_last_lr before any step, best starts at ±Infinity", () => {
    const o = makeOpt({ optimizer: "SGD", hyper: {}, base_lrs: [0.1] });
    const s = new ReduceLROnPlateau(o, { patience: 0 });
    expect(s.get_last_lr()).toEqual([0.1]);
    expect(s.best).toBe(Infinity);
    expect(new ReduceLROnPlateau(o, { mode: "max" }).best).toBe(-Infinity);
    s.step(loom.tensor([0.5]).float().sum());
    s.step(loom.tensor([0.7]).float().sum()); // worse, patience 0: cut
    expect(s.best).toBe(0.5);
    expect(s.get_last_lr()[0]).toBeCloseTo(0.01, 15);
  });

  test("step(epoch) uses the closed form: ExponentialLR γ^epoch, MultiStepLR γ^(milestones ≤ epoch)", () => {
    const e = new ExponentialLR(makeOpt({ optimizer: "SGD", hyper: {}, base_lrs: [1] }), 0.5);
    e.step(3);
    expect(e.get_last_lr()).toEqual([0.125]);
    const m = new MultiStepLR(makeOpt({ optimizer: "SGD", hyper: {}, base_lrs: [1] }), [2, 4, 4], 0.5);
    m.step(4);
    expect(m.get_last_lr()).toEqual([0.125]);
  });
});

describe("argument errors (torch's messages, naming the value)", () => {
  const sgd = () => makeOpt({ optimizer: "SGD", hyper: { momentum: 0.9 }, base_lrs: [0.1, 0.02] });
  test("OneCycleLR", () => {
    expect(() => new OneCycleLR(sgd(), 1)).toThrow("[OneCycleLR] You must define either total_steps OR (epochs AND steps_per_epoch)");
    expect(() => new OneCycleLR(sgd(), 1, { total_steps: 0 })).toThrow("[OneCycleLR] Expected positive integer total_steps, but got 0");
    expect(() => new OneCycleLR(sgd(), 1, { total_steps: 2.5 })).toThrow("[OneCycleLR] Expected positive integer total_steps, but got 2.5");
    expect(() => new OneCycleLR(sgd(), 1, { epochs: -1, steps_per_epoch: 3 })).toThrow("[OneCycleLR] Expected positive integer epochs, but got -1");
    expect(() => new OneCycleLR(sgd(), 1, { epochs: 2 })).toThrow("[OneCycleLR] Expected positive integer steps_per_epoch, but got undefined");
    expect(() => new OneCycleLR(sgd(), 1, { total_steps: 10, pct_start: 1.5 })).toThrow("[OneCycleLR] Expected float between 0 and 1 pct_start, but got 1.5");
    expect(() => new OneCycleLR(sgd(), 1, { total_steps: 10, anneal_strategy: "exp" as never })).toThrow("[OneCycleLR] anneal_strategy must by one of 'cos' or 'linear', instead got exp");
    expect(() => new OneCycleLR(sgd(), [1, 2, 3], { total_steps: 10 })).toThrow("[OneCycleLR] expected 2 values for max_lr, got 3");
    expect(() => new OneCycleLR(sgd(), 1, { total_steps: 10, base_momentum: [0.8] })).toThrow("[OneCycleLR] expected 2 values for base_momentum, got 1");
    const ada = makeOpt({ optimizer: "Adagrad", hyper: {}, base_lrs: [0.1] });
    expect(() => new OneCycleLR(ada, 1, { total_steps: 10 })).toThrow("[OneCycleLR] optimizer must support momentum with `cycle_momentum` option enabled (Adagrad has neither momentum nor betas)");
    const fresh = sgd();
    fresh.param_groups.forEach((g) => { g.initial_lr = g.lr; });
    expect(() => new OneCycleLR(fresh, 1, { total_steps: 10, last_epoch: 3 })).toThrow(
      "[OneCycleLR] resuming (last_epoch 3) needs max_lr, min_lr, max_momentum, base_momentum in param_groups[0] (set by the OneCycleLR that started the cycle)",
    );
    const s = new OneCycleLR(sgd(), 1, { total_steps: 3 });
    for (let k = 0; k < 3; k++) s.step(); // last_epoch 3 = total_steps: still allowed, as torch
    expect(() => s.step()).toThrow("[OneCycleLR] Tried to step 5 times. The specified number of total steps is 3");
  });
  test("MultiStepLR", () => {
    expect(() => new MultiStepLR(sgd(), [2, 2.5])).toThrow("[MultiStepLR] milestones must be non-negative integer epochs, but got 2.5");
    expect(() => new MultiStepLR(sgd(), [-1])).toThrow(loom.LoomValueError);
  });
  test("ReduceLROnPlateau", () => {
    expect(() => new ReduceLROnPlateau(sgd(), { factor: 1 })).toThrow("[ReduceLROnPlateau] Factor should be < 1.0, but got 1");
    expect(() => new ReduceLROnPlateau(sgd(), { min_lr: [0.1] })).toThrow("[ReduceLROnPlateau] expected 2 min_lrs, got 1");
    expect(() => new ReduceLROnPlateau(sgd(), { mode: "avg" as never })).toThrow("[ReduceLROnPlateau] mode avg is unknown!");
    expect(() => new ReduceLROnPlateau(sgd(), { threshold_mode: "pct" as never })).toThrow("[ReduceLROnPlateau] threshold mode pct is unknown!");
    const s = new ReduceLROnPlateau(sgd());
    expect(() => s.load_state_dict({ ...s.state_dict(), mode: "avg" })).toThrow("[ReduceLROnPlateau] mode avg is unknown!");
  });
});

describe("StepLR arguments", () => {
  test("a step_size that is not a positive integer (an options object, 0, 1.5) raises instead of never stepping", () => {
    const opt = new optim.SGD([loom.zeros([1]).requires_grad_()], { lr: 1 });
    expect(() => new optim.lr_scheduler.StepLR(opt, { step_size: 2 } as unknown as number)).toThrow(/\[StepLR\] step_size must be a positive integer, got object/);
    expect(() => new optim.lr_scheduler.StepLR(opt, 0)).toThrow(loom.LoomValueError);
    expect(() => new optim.lr_scheduler.StepLR(opt, 1.5)).toThrow(loom.LoomValueError);
  });
});
