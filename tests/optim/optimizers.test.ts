/**
 * SGD, Adam and AdamW against PyTorch 1.13 (optim_goldens.json from gen_optim_goldens.py): the
 * same gradients are fed in for 6 steps (one parameter has no gradient at step 2, so it must be
 * skipped), and the parameters after every step and the final state must match torch's.
 * Also: state_dict structure and round trip, load errors, hyperparameter validation, zero_grad,
 * lazy gradients, closures.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { nn, optim } from "../../src/index.ts";
import { expectClose, fromArr, readGolden, type Arr } from "../nn/helpers.ts";
import { expectState, type GoldenState } from "./helpers.ts";

interface OptCase {
  name: string;
  optimizer: "SGD" | "Adam" | "AdamW";
  groups: Record<string, unknown>[];
  group_of_param: number[];
  init: Arr[];
  steps: { grads: (Arr | null)[]; params: Arr[] }[];
  state: GoldenState;
}
const golden = readGolden<{ optimizers: OptCase[] }>(new URL("./optim_goldens.json", import.meta.url));

const CLASSES = { SGD: optim.SGD, Adam: optim.Adam, AdamW: optim.AdamW } as const;
// float32 parameters; torch fuses some multiply-adds, Loom rounds each op: a few ulps apart
const TOL = { rtol: 2e-6, atol: 2e-7 };

function build(c: OptCase, params: loom.Tensor[]): optim.Optimizer<any> {
  const groups = c.groups.map((h, gi) => ({ ...h, params: params.filter((_, i) => c.group_of_param[i] === gi) }));
  return new CLASSES[c.optimizer](groups as never);
}

function feed(params: loom.Tensor[], grads: (Arr | null)[]): void {
  params.forEach((p, i) => { p.grad = grads[i] ? fromArr(grads[i]!) : null; });
}

describe("optimizers match torch step by step", () => {
  for (const c of golden.optimizers) {
    test(c.name, () => {
      // nn.Parameter for the first parameter, a plain requires-grad Tensor for the second
      const params = c.init.map((a, i) => (i === 0 ? new nn.Parameter(fromArr(a)) : fromArr(a).requires_grad_()));
      const opt = build(c, params);
      c.steps.forEach((s, k) => {
        feed(params, s.grads);
        opt.step();
        params.forEach((p, i) => expectClose(p, s.params[i]!, { ...TOL, what: `${c.name} step ${k + 1} param ${i}` }));
      });
      expectState(c.state, opt, params, TOL, c.name);
      for (const p of params) expect(p.requires_grad && p.is_leaf).toBe(true);
    });
  }
});

describe("state_dict", () => {
  test("layout: state by parameter index, groups with hyperparameters and indices", () => {
    const a = loom.zeros(2).requires_grad_(), b = loom.zeros(3).requires_grad_(), c = loom.zeros(1).requires_grad_();
    const opt = new optim.AdamW([{ params: [a, b] }, { params: [c], lr: 0.5 }], { lr: 0.1, betas: [0.9, 0.95] });
    b.grad = loom.ones(3);
    c.grad = loom.ones(1);
    opt.step(); // a has no grad: no state for index 0
    const sd = opt.state_dict();
    expect(Object.keys(sd.state)).toEqual(["1", "2"]);
    expect(Object.keys(sd.state[1]!).sort()).toEqual(["exp_avg", "exp_avg_sq", "step"]);
    expect(sd.state[1]!.step).toBe(1);
    expect(sd.param_groups).toEqual([
      { lr: 0.1, betas: [0.9, 0.95], eps: 1e-8, weight_decay: 0.01, amsgrad: false, maximize: false, params: [0, 1] },
      { lr: 0.5, betas: [0.9, 0.95], eps: 1e-8, weight_decay: 0.01, amsgrad: false, maximize: false, params: [2] },
    ]);
  });

  for (const name of ["sgd_momentum", "adam_amsgrad_betas", "adamw_two_groups"]) {
    test(`${name}: save after 3 steps, load into a fresh optimizer, continue = torch`, () => {
      const c = golden.optimizers.find((o) => o.name === name)!;
      const params = c.init.map((a) => fromArr(a).requires_grad_());
      const opt = build(c, params);
      for (const s of c.steps.slice(0, 3)) {
        feed(params, s.grads);
        opt.step();
      }
      const sd = opt.state_dict();
      // a fresh model with the saved parameter values and a fresh optimizer with default hyperparameters
      const params2 = params.map((p) => p.detach().clone().requires_grad_());
      const opt2 = new CLASSES[c.optimizer](c.groups.map((_, gi) => ({ params: params2.filter((__, i) => c.group_of_param[i] === gi) })) as never);
      opt2.load_state_dict(sd);
      expect(opt2.param_groups.map(({ params: _p, ...h }) => h)).toEqual(opt.param_groups.map(({ params: _p, ...h }) => h));
      // the loaded state is a copy: the old optimizer moving on does not change it
      feed(params, c.steps[3]!.grads);
      opt.step();
      c.steps.slice(3).forEach((s, k) => {
        feed(params2, s.grads);
        opt2.step();
        params2.forEach((p, i) => expectClose(p, s.params[i]!, { ...TOL, what: `${name} resumed step ${k + 4} param ${i}` }));
      });
    });
  }

  test("load errors: group count and group sizes", () => {
    const a = loom.zeros(1).requires_grad_(), b = loom.zeros(1).requires_grad_();
    const one = new optim.SGD([a, b], { lr: 0.1 });
    const two = new optim.SGD([{ params: [a] }, { params: [b] }], { lr: 0.1 });
    expect(() => one.load_state_dict(two.state_dict())).toThrow(
      "[SGD.load_state_dict] loaded state dict has a different number of parameter groups (2 saved, 1 in the optimizer)",
    );
    const single = new optim.SGD([a], { lr: 0.1 });
    expect(() => single.load_state_dict(one.state_dict())).toThrow(
      "[SGD.load_state_dict] loaded state dict contains a parameter group that doesn't match the size of optimizer's group (group 0: 2 saved, 1 in the optimizer)",
    );
  });

  test("floating state is converted to the parameter's dtype, step is kept", () => {
    const p = loom.zeros(2, { dtype: "float64" }).requires_grad_();
    const opt = new optim.Adam([p]);
    opt.load_state_dict({
      state: { 0: { step: 3, exp_avg: loom.ones(2), exp_avg_sq: loom.ones(2) } },
      param_groups: [{ lr: 0.1, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0, amsgrad: false, maximize: false, params: [0] }],
    });
    const st = opt.state.get(p)!;
    expect((st.exp_avg as loom.Tensor).dtype).toBe("float64");
    expect(st.step).toBe(3);
    expect(opt.param_groups[0]!.lr).toBe(0.1);
  });
});

describe("behaviour", () => {
  test("hyperparameter validation (torch's messages)", () => {
    const p = [loom.zeros(1).requires_grad_()];
    expect(() => new optim.SGD(p, { lr: -1 })).toThrow("[SGD] Invalid learning rate: -1");
    expect(() => new optim.SGD(p, { momentum: -0.1 })).toThrow("[SGD] Invalid momentum value: -0.1");
    expect(() => new optim.SGD(p, { nesterov: true })).toThrow("[SGD] Nesterov momentum requires a momentum and zero dampening");
    expect(() => new optim.Adam(p, { betas: [0.9, 1] })).toThrow("[Adam] Invalid beta parameter at index 1: 1");
    expect(() => new optim.AdamW(p, { eps: -1 })).toThrow("[AdamW] Invalid epsilon value: -1");
    expect(() => new optim.AdamW(p, { weight_decay: -1 })).toThrow("[AdamW] Invalid weight_decay value: -1");
    expect(() => new optim.SGD([])).toThrow("[SGD] optimizer got an empty parameter list");
    expect(() => new optim.SGD([{ params: p }, { params: p }])).toThrow("[SGD] some parameters appear in more than one parameter group");
    const nonLeaf = loom.ones(1).requires_grad_().mul(2);
    expect(() => new optim.SGD([nonLeaf])).toThrow("[SGD] can't optimize a non-leaf Tensor");
    expect(() => new optim.SGD([loom.ones(1).lazy() as never])).toThrow("[SGD] optimizer can only optimize eager Tensors");
  });

  test("defaults: AdamW weight_decay 1e-2, Adam 0, lr 1e-3", () => {
    const p = [loom.zeros(1).requires_grad_()];
    expect(new optim.AdamW(p).defaults).toEqual({ lr: 1e-3, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 1e-2, amsgrad: false, maximize: false });
    expect(new optim.Adam(p).defaults.weight_decay).toBe(0);
    expect(new optim.SGD(p).defaults).toEqual({ lr: 1e-3, momentum: 0, dampening: 0, weight_decay: 0, nesterov: false, maximize: false });
  });

  test("SGD by hand: p ← p - lr·(g + λp)", () => {
    // p = [1, -2], g = [0.5, 0.5], lr = 0.1, λ = 0.1: p - 0.1·([0.5, 0.5] + [0.1, -0.2]) = [0.94, -2.03]
    const p = loom.tensor([1, -2]).float().requires_grad_();
    const opt = new optim.SGD([p], { lr: 0.1, weight_decay: 0.1 });
    p.grad = loom.tensor([0.5, 0.5]).float();
    opt.step();
    expectClose(p, [0.94, -2.03], { rtol: 1e-6, what: "sgd by hand" });
  });

  test("AdamW first step by hand: p·(1 - lr·λ) - lr·sign(g) (m̂/√v̂ = g/|g| at t = 1)", () => {
    // t=1: m = 0.1g, v = 0.001g², m̂ = g, v̂ = g², so the step is lr·g/(|g| + eps) ≈ lr·sign(g)
    const p = loom.tensor([1, 1]).float().requires_grad_();
    const opt = new optim.AdamW([p], { lr: 0.1, weight_decay: 0.5 });
    p.grad = loom.tensor([3, -0.2]).float();
    opt.step();
    expectClose(p, [1 * (1 - 0.05) - 0.1, 1 * (1 - 0.05) + 0.1], { rtol: 1e-6, what: "adamw by hand" });
  });

  test("AdamW follows torch's operation order exactly (op-by-op float32 emulation, 4 steps)", () => {
    // torch 1.13 _single_tensor_adamw, each op rounded to float32 (f), scalars cast to float32:
    //   p = f(p·f(1 - lr·wd)); m = f(f(m·β1) + f(g·f(1-β1))); v = f(f(v·β2) + f(f(g·g)·f(1-β2)))
    //   denom = f(f(f(√v) / f(√bc2)) + f(eps)); p = f(p + f(f(m / denom)·f(-lr/bc1)))
    // Reordering (e.g. √(v/bc2), or (m/bc1)/denom) changes the last bits of some of the 1000 values.
    const f = Math.fround;
    const N = 1000;
    const [lr, b1, b2, eps, wd] = [0.01, 0.9, 0.95, 1e-6, 0.3];
    const gen = new loom.Generator(11);
    const p0 = Array.from({ length: N }, () => f(gen.normal()));
    const grads = [0, 1, 2, 3].map((k) => Array.from({ length: N }, () => f(gen.normal() * 10 ** (k - 1))));
    const p = loom.tensor(Float32Array.from(p0)).requires_grad_();
    const opt = new optim.AdamW([p], { lr, betas: [b1, b2], eps, weight_decay: wd });
    const ref = [...p0], m = Array(N).fill(0), v = Array(N).fill(0);
    grads.forEach((g, k) => {
      p.grad = loom.tensor(Float32Array.from(g));
      opt.step();
      const t = k + 1, bc1 = 1 - b1 ** t, bc2 = 1 - b2 ** t;
      for (let i = 0; i < N; i++) {
        ref[i] = f(ref[i]! * f(1 - lr * wd));
        m[i] = f(f(m[i]! * f(b1)) + f(g[i]! * f(1 - b1)));
        v[i] = f(f(v[i]! * f(b2)) + f(f(g[i]! * g[i]!) * f(1 - b2)));
        const denom = f(f(f(Math.sqrt(v[i]!)) / f(Math.sqrt(bc2))) + f(eps));
        ref[i] = f(ref[i]! + f(f(m[i]! / denom) * f(-lr / bc1)));
      }
    });
    expect(Array.from(p.dataSync())).toEqual(ref);
  });

  test("zero_grad: null by default, zeros with set_to_none false", () => {
    const p = loom.zeros(2).requires_grad_();
    const opt = new optim.SGD([p], { lr: 1 });
    p.grad = loom.ones(2);
    opt.zero_grad(false);
    expect(p.grad!.tolist()).toEqual([0, 0]);
    opt.zero_grad();
    expect(p.grad).toBeNull();
  });

  test("a LazyTensor gradient is realized; results equal the eager gradient's", () => {
    const mk = () => loom.tensor([1, 2]).float().requires_grad_();
    const [a, b] = [mk(), mk()];
    const [oa, ob] = [new optim.Adam([a], { lr: 0.1 }), new optim.Adam([b], { lr: 0.1 })];
    a.grad = loom.tensor([0.3, -0.7]).float();
    (b as { grad: unknown }).grad = loom.tensor([0.3, -0.7]).float().lazy().mul(1);
    oa.step();
    ob.step();
    expect(b.isLazy).toBe(false);
    expect(b.tolist()).toEqual(a.tolist());
  });

  test("step(closure) re-evaluates with grad enabled and returns the loss", () => {
    const p = loom.tensor([3]).float().requires_grad_();
    const opt = new optim.SGD([p], { lr: 0.25 });
    const closure = () => {
      opt.zero_grad();
      const loss = p.mul(p).sum(); // d/dp p² = 2p = 6
      loss.backward();
      return loss;
    };
    const loss = loom.no_grad(() => opt.step(closure)) as loom.Tensor;
    expect(loss.item()).toBe(9);
    expect(p.tolist()).toEqual([1.5]); // 3 - 0.25·6
  });

  test("add_param_group adds a group with defaults filled in", () => {
    const a = loom.zeros(1).requires_grad_(), b = loom.zeros(1).requires_grad_();
    const opt = new optim.SGD([a], { lr: 0.1, momentum: 0.9 });
    opt.add_param_group({ params: [b], lr: 0.01 });
    expect(opt.param_groups[1]!.lr).toBe(0.01);
    expect(opt.param_groups[1]!.momentum).toBe(0.9);
    expect(() => opt.add_param_group({ params: b })).toThrow("some parameters appear in more than one parameter group");
  });
});
