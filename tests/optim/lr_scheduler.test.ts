/**
 * Learning-rate schedulers against PyTorch 1.13 (optim_goldens.json): the lrs of two param
 * groups (base 0.1 and 0.02) after construction and after every step, plus state_dict round
 * trips, the Hugging Face warmup helpers and argument errors.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { optim } from "../../src/index.ts";
import { readGolden } from "../nn/helpers.ts";

interface SchedCase { name: string; base_lrs: number[]; lrs: number[][] }
const golden = readGolden<{ schedulers: SchedCase[] }>(new URL("./optim_goldens.json", import.meta.url));

function sgd(lrs: number[] = [0.1, 0.02]): optim.SGD {
  return new optim.SGD(lrs.map((lr) => ({ params: [loom.zeros(1).requires_grad_()], lr })), { lr: lrs[0] });
}

type Make = (o: optim.SGD) => optim.LRScheduler;
const { LambdaLR, StepLR, CosineAnnealingLR, LinearLR, SequentialLR } = optim;
const BUILD: Record<string, Make> = {
  lambda_exp: (o) => new LambdaLR(o, (e) => 0.95 ** e),
  lambda_per_group: (o) => new LambdaLR(o, [(e) => 1 / (e + 1), (e) => 0.5 ** e]),
  step: (o) => new StepLR(o, 3, 0.5),
  cosine: (o) => new CosineAnnealingLR(o, 5, 0.001),
  linear: (o) => new LinearLR(o, { start_factor: 0.25, total_iters: 4 }),
  linear_default: (o) => new LinearLR(o),
  sequential_warmup_cosine: (o) => new SequentialLR(o, [new LinearLR(o, { start_factor: 0.1, total_iters: 3 }), new CosineAnnealingLR(o, 6)], [3]),
  sequential_three: (o) => new SequentialLR(o, [new LinearLR(o, { start_factor: 0.5, total_iters: 2 }), new StepLR(o, 2, 0.5), new CosineAnnealingLR(o, 4, 0.005)], [2, 6]),
  hf_cosine_warmup: (o) => optim.get_cosine_schedule_with_warmup(o, 3, 10),
  hf_cosine_warmup_cycles: (o) => optim.get_cosine_schedule_with_warmup(o, 2, 8, 1.0),
};

/** Same float64 formulas as torch; allow a couple of ulps for pow/cos implementations. */
function expectLrs(got: number[], want: number[], what: string): void {
  expect(got.length).toBe(want.length);
  got.forEach((g, i) => {
    if (Math.abs(g - want[i]!) > 1e-15 + 1e-13 * Math.abs(want[i]!)) throw new Error(`${what}: group ${i}: got ${g}, expected ${want[i]}`);
  });
}

describe("schedulers match torch", () => {
  test("every golden case has a builder", () => {
    expect(golden.schedulers.map((c) => c.name).sort()).toEqual(Object.keys(BUILD).sort());
  });
  for (const c of golden.schedulers) {
    test(c.name, () => {
      const opt = sgd(c.base_lrs);
      const s = BUILD[c.name]!(opt);
      c.lrs.forEach((want, k) => {
        if (k > 0) {
          opt.step();
          s.step();
        }
        expectLrs(s.get_last_lr(), want, `${c.name} after ${k} steps`);
        expectLrs(opt.param_groups.map((g) => g.lr), want, `${c.name} group lr after ${k} steps`);
      });
    });
  }
});

describe("state", () => {
  test("initial_lr is recorded; base_lrs come from it", () => {
    const opt = sgd();
    const s = new StepLR(opt, 2);
    expect(opt.param_groups.map((g) => g.initial_lr)).toEqual([0.1, 0.02]);
    expect(s.base_lrs).toEqual([0.1, 0.02]);
    expect(s.last_epoch).toBe(0);
  });
  for (const name of ["cosine", "sequential_three", "hf_cosine_warmup"]) {
    test(`${name}: state_dict after 4 steps, loaded with the optimizer's, continues as torch`, () => {
      const c = golden.schedulers.find((x) => x.name === name)!;
      const opt = sgd(c.base_lrs);
      const s = BUILD[name]!(opt);
      for (let k = 0; k < 4; k++) { opt.step(); s.step(); }
      const ssd = s.state_dict(), osd = opt.state_dict();
      expect(ssd.last_epoch).toBe(4);
      expect("optimizer" in ssd).toBe(false);
      const opt2 = sgd(c.base_lrs);
      const s2 = BUILD[name]!(opt2);
      opt2.load_state_dict(osd);
      s2.load_state_dict(ssd);
      expectLrs(s2.get_last_lr(), c.lrs[4]!, `${name} restored`);
      for (let k = 5; k < c.lrs.length; k++) {
        opt2.step();
        s2.step();
        expectLrs(s2.get_last_lr(), c.lrs[k]!, `${name} resumed step ${k}`);
      }
    });
  }
  test("LambdaLR's state dict leaves the functions out (as torch)", () => {
    const sd = new LambdaLR(sgd(), (e) => e).state_dict();
    expect(sd.lr_lambdas).toEqual([null, null]);
    expect(sd.base_lrs).toEqual([0.1, 0.02]);
  });
  test("resuming (last_epoch >= 0) needs initial_lr", () => {
    expect(() => new StepLR(sgd(), 2, 0.1, 3)).toThrow("[StepLR] param 'initial_lr' is not specified in param_groups[0] when resuming an optimizer");
  });
});

describe("helpers and errors", () => {
  test("get_cosine_schedule_with_warmup by hand: W = 2, N = 6, base 1", () => {
    // t < 2: t/2 → 0, 0.5; then 0.5·(1 + cos(π·(t-2)/4)) → t=2: 1, t=3: 0.853553, t=4: 0.5, t=5: 0.146447,
    // t=6: 0, and past N the cosine rises again as in transformers (t=7: 0.5·(1 + cos(5π/4)) = 0.146447)
    const opt = sgd([1]);
    const s = optim.get_cosine_schedule_with_warmup(opt, 2, 6);
    const got = [s.get_last_lr()[0]!];
    for (let k = 0; k < 7; k++) { s.step(); got.push(s.get_last_lr()[0]!); }
    const want = [0, 0.5, 1, 0.8535533905932737, 0.5, 0.14644660940672627, 0, 0.14644660940672627];
    got.forEach((g, i) => expect(g).toBeCloseTo(want[i]!, 14));
  });
  test("get_linear_schedule_with_warmup by hand: W = 2, N = 4, base 1 → 0, 0.5, 1, 0.5, 0, 0", () => {
    const opt = sgd([1]);
    const s = optim.get_linear_schedule_with_warmup(opt, 2, 4);
    const got = [s.get_last_lr()[0]];
    for (let k = 0; k < 5; k++) { s.step(); got.push(s.get_last_lr()[0]); }
    expect(got).toEqual([0, 0.5, 1, 0.5, 0, 0]);
  });
  test("argument errors (torch's messages)", () => {
    expect(() => new LambdaLR(sgd(), [(e) => e])).toThrow("[LambdaLR] Expected 2 lr_lambdas, but got 1");
    expect(() => new LinearLR(sgd(), { start_factor: 1.5 })).toThrow("[LinearLR] Starting multiplicative factor expected to be between 0 and 1.");
    expect(() => new LinearLR(sgd(), { end_factor: -1 })).toThrow("[LinearLR] Ending multiplicative factor expected to be between 0 and 1.");
    const o = sgd();
    expect(() => new SequentialLR(o, [new StepLR(o, 2), new StepLR(o, 3)], [])).toThrow(
      "[SequentialLR] Sequential Schedulers expects number of schedulers provided to be one more than the number of milestone points, but got number of schedulers 2 and the number of milestones to be equal to 0",
    );
    expect(() => new SequentialLR(o, [new StepLR(o, 2), new StepLR(sgd(), 3)], [2])).toThrow(
      "[SequentialLR] Sequential Schedulers expects all schedulers to belong to the same optimizer, but got schedulers at index 1 to be different than the optimizer passed in.",
    );
  });
  test("step(epoch) uses the closed form", () => {
    const s = new StepLR(sgd([1]), 2, 0.5);
    s.step(5); // 0.5^⌊5/2⌋ = 0.25
    expect(s.get_last_lr()).toEqual([0.25]);
  });
});
