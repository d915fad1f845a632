/**
 * Loss functions and loss modules against PyTorch 1.13 goldens (loss_goldens.json from
 * gen_loss_goldens.py): values and the gradients of sum(out * grad_output) w.r.t. input and
 * target, every reduction and option, on every backend, eagerly and lazily (eager == lazy bit for
 * bit: the same kernels run). Modules equal their functional forms; float64 gradients match
 * finite differences; bad input raises typed errors naming the op, shapes and dtypes. Also the
 * small modules LeakyReLU, Softmax, LogSoftmax, Flatten and Unflatten.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { nn } from "../../src/index.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { thrown } from "../thrown.ts";
import { expectClose, expectSame, readGolden, type Arr } from "./helpers.ts";

/** A golden array; non-finite floats are written as the strings "nan", "inf", "-inf". */
interface GArr extends Omit<Arr, "data"> { data: (number | string)[] }
interface LossCase {
  name: string;
  fn: keyof typeof FNS;
  options: Record<string, GArr | number | string | boolean>;
  input: GArr;
  target: GArr;
  output: GArr;
  grad_output?: GArr;
  input_grad?: GArr;
  target_grad?: GArr;
}
interface ModuleCase { name: keyof typeof SMALL; args: any[]; input: GArr; output: GArr; grad_output: GArr; input_grad: GArr; repr: string }
const golden = readGolden<{ losses: LossCase[]; modules: ModuleCase[] }>(new URL("./loss_goldens.json", import.meta.url));

const num = (v: number | string) => (typeof v === "number" ? v : v === "inf" ? Infinity : v === "-inf" ? -Infinity : NaN);
const arr = (a: GArr): Arr => ({ ...a, data: a.data.map(num) });
function dec(a: GArr, dtype: loom.DType = a.dtype): loom.Tensor {
  return loom.tensor(Float64Array.from(a.data.map(num)), { dtype }).reshape(a.shape);
}
const isArr = (v: unknown): v is GArr => typeof v === "object" && v !== null && "shape" in v;

type AnyT = loom.Tensor | loom.LazyTensor;
type LossFn = (x: any, y: any, o?: any) => AnyT;
const FNS = {
  mse_loss: loom.mse_loss, l1_loss: loom.l1_loss, huber_loss: loom.huber_loss, smooth_l1_loss: loom.smooth_l1_loss,
  kl_div: loom.kl_div, binary_cross_entropy: loom.binary_cross_entropy,
  binary_cross_entropy_with_logits: loom.binary_cross_entropy_with_logits, nll_loss: loom.nll_loss, cross_entropy: loom.cross_entropy,
} satisfies Record<string, LossFn>;
const MODULES: Record<keyof typeof FNS, new (o: any) => nn._Loss<string>> = {
  mse_loss: nn.MSELoss, l1_loss: nn.L1Loss, huber_loss: nn.HuberLoss, smooth_l1_loss: nn.SmoothL1Loss, kl_div: nn.KLDivLoss,
  binary_cross_entropy: nn.BCELoss, binary_cross_entropy_with_logits: nn.BCEWithLogitsLoss, nll_loss: nn.NLLLoss,
  cross_entropy: nn.CrossEntropyLoss,
};

/** Tensor options (weight, pos_weight) decoded, lazy when `lazy`. */
function options(c: LossCase, lazy: boolean, dtype?: loom.DType): Record<string, unknown> {
  return Object.fromEntries(Object.entries(c.options).map(([k, v]) => {
    if (!isArr(v)) return [k, v];
    const t = dec(v, dtype);
    return [k, lazy ? t.lazy() : t];
  }));
}

interface Run { out: loom.Tensor; xg: loom.Tensor | null; yg: loom.Tensor | null }

/**
 * The functional loss (how: "eager" op by op, "lazy" on LazyTensors, or through the module),
 * then backward of sum(out * grad_output).
 */
function run(c: LossCase, how: "eager" | "lazy" | "module"): Run {
  const grads = !!c.grad_output;
  const x = dec(c.input).requires_grad_(grads);
  const y = dec(c.target).requires_grad_(grads && !!c.target_grad);
  let out: AnyT;
  if (how === "module") out = new MODULES[c.fn](options(c, false)).call(x, y);
  else if (how === "lazy") out = (FNS[c.fn] as LossFn)(x.lazy(), y.lazy(), options(c, true));
  else out = (FNS[c.fn] as LossFn)(x, y, options(c, false));
  if (grads) {
    const g = dec(c.grad_output!);
    (out as loom.Tensor).mul((how === "lazy" ? g.lazy() : g) as loom.Tensor).sum().backward();
  }
  const value = out instanceof loom.LazyTensor ? out.eval() : out;
  return { out: value, xg: x.grad as loom.Tensor | null, yg: y.grad as loom.Tensor | null };
}

describe.each(BACKENDS)("losses match torch on %s", (backend) => {
  useBackend(backend);
  // float32 sums of up to 24 terms, rounded in another order than torch's
  const tol = { rtol: 2e-5, atol: 2e-6 };
  for (const c of golden.losses) {
    test(`${c.name}: values and gradients (eager and lazy)`, () => {
      for (const how of ["eager", "lazy"] as const) {
        const r = run(c, how);
        expectClose(r.out, arr(c.output), { ...tol, what: `${c.name} ${how} output` });
        if (c.input_grad) expectClose(r.xg!, arr(c.input_grad), { ...tol, what: `${c.name} ${how} input grad` });
        if (c.target_grad) expectClose(r.yg!, arr(c.target_grad), { ...tol, what: `${c.name} ${how} target grad` });
      }
    });
    test(`${c.name}: eager == lazy == module, bit for bit`, () => {
      const e = run(c, "eager");
      for (const how of ["lazy", "module"] as const) {
        const l = loom.with_compiler_options({ tolerance: "exact" }, () => run(c, how)); // eager's bits
        expectSame(l.out, e.out);
        if (e.xg) expectSame(l.xg!, e.xg);
        if (e.yg) expectSame(l.yg!, e.yg);
      }
    });
  }
  test("a target outside [0, C) raises LoomIndexError naming the loss, eagerly and when a lazy loss runs", () => {
    const x = loom.tensor([[0.5, 0.25, 0.125], [0.75, 0.5, 0.25]]);
    const t = loom.tensor([1, 7], { dtype: "int64" });
    for (const lazy of [false, true]) {
      const [xa, ta] = lazy ? [x.lazy(), t.lazy()] : [x, t];
      const e = thrown(() => loom.nll_loss(xa, ta).item());
      expect(e).toBeInstanceOf(loom.LoomIndexError);
      expect(e.message).toBe("[nll_loss] Target 7 is out of bounds.");
      expect(thrown(() => loom.cross_entropy(xa, ta).item()).message).toBe("[cross_entropy] Target 7 is out of bounds.");
    }
  });
});

describe("loss gradients match finite differences (float64, js)", () => {
  useBackend("js");
  for (const c of golden.losses.filter((k) => k.grad_output)) {
    test(c.name, () => {
      const fn = FNS[c.fn] as LossFn;
      const o = options(c, false, "float64");
      const y = dec(c.target, c.target.dtype === "float32" ? "float64" : c.target.dtype);
      const x = dec(c.input, "float64");
      const failures = c.target_grad
        ? loom.gradcheck((a: loom.Tensor, b: loom.Tensor) => fn(a, b, o) as loom.Tensor, [x, y])
        : loom.gradcheck((a: loom.Tensor) => fn(a, y, o) as loom.Tensor, [x]);
      expect(failures).toEqual([]);
    });
  }
});

describe("loss modules", () => {
  test("options are kept; weights are buffers in the state dict, as torch", () => {
    const w = loom.tensor([1.0, 2.0, 0.5]);
    const ce = new nn.CrossEntropyLoss({ weight: w, ignore_index: 1, label_smoothing: 0.1, reduction: "sum" });
    expect([ce.reduction, ce.ignore_index, ce.label_smoothing]).toEqual(["sum", 1, 0.1]);
    expect(Object.keys(ce.state_dict())).toEqual(["weight"]);
    expect(ce.parameters()).toEqual([]);
    expect(Object.keys(new nn.BCEWithLogitsLoss({ pos_weight: w }).state_dict())).toEqual(["pos_weight"]);
    expect(Object.keys(new nn.BCELoss().state_dict())).toEqual([]);
    expect(new nn.KLDivLoss({ reduction: "batchmean", log_target: true }).reduction).toBe("batchmean");
    expect(new nn.MSELoss().reduction).toBe("mean");
    expect(String(ce)).toBe("CrossEntropyLoss(label_smoothing=0.1)");
    expect(String(new nn.MSELoss())).toBe("MSELoss()");
  });

  test("a LazyTensor input gives a lazy loss; weights are lifted", () => {
    const x = loom.tensor([[0.5, -1.0, 2.0], [0.25, 0.0, -0.5]]);
    const t = loom.tensor([2, 0], { dtype: "int64" });
    const m = new nn.NLLLoss({ weight: loom.tensor([1.0, 2.0, 3.0]) });
    const l = m.call(x.lazy(), t.lazy());
    expect(l.isLazy).toBe(true);
    // -(3·2 + 1·0.25) / (3 + 1)
    expect(l.item()).toBeCloseTo(-(3 * 2 + 0.25) / 4, 6);
  });

  test("a Sequential ending in LogSoftmax feeds NLLLoss like cross_entropy on the logits", () => {
    const x = loom.tensor([[0.5, -1.0, 2.0, 0.0], [1.5, 0.25, -0.75, 3.0]]);
    const t = loom.tensor([3, 1], { dtype: "int64" });
    const seq = new nn.Sequential(new nn.Identity(), new nn.LogSoftmax(1));
    const a = new nn.NLLLoss().call(seq.call(x), t).item();
    expect(a).toBeCloseTo(loom.cross_entropy(x, t).item(), 6);
  });
});

describe("bad input raises typed errors naming op, shapes and dtypes", () => {
  const x = loom.tensor([[0.5, 0.25, 0.125], [0.75, 0.5, 0.25]]);
  const pointwise = ["mse_loss", "l1_loss", "huber_loss", "smooth_l1_loss", "kl_div", "binary_cross_entropy", "binary_cross_entropy_with_logits"] as const;

  test("shape mismatch (no silent broadcast)", () => {
    for (const f of pointwise) {
      const e = thrown(() => (FNS[f] as LossFn)(x, loom.tensor([0.5, 0.25, 0.125])));
      expect(e).toBeInstanceOf(loom.LoomShapeError);
      expect(e.message).toBe(`[${f}] target [3] must have the same shape as input [2, 3]`);
    }
  });

  test("non-floating target or input", () => {
    for (const f of pointwise) {
      const e = thrown(() => (FNS[f] as LossFn)(x, loom.tensor([[1, 0, 1], [0, 1, 0]])));
      expect(e).toBeInstanceOf(loom.LoomDtypeError);
      expect(e.message).toBe(`[${f}] expected floating input and target, got input float32 [2, 3] and target int64 [2, 3]`);
    }
    const e = thrown(() => loom.nll_loss(x, loom.tensor([0, 1], { dtype: "float32" })));
    expect(e).toBeInstanceOf(loom.LoomDtypeError);
    expect(e.message).toBe("[nll_loss] expected a class-index target of dtype int64 or int32, got float32 [2] (input float32 [2, 3])");
    const ei = thrown(() => loom.nll_loss(loom.tensor([[1, 2]]), loom.tensor([0])));
    expect(ei).toBeInstanceOf(loom.LoomDtypeError);
    expect(ei.message).toBe("[nll_loss] expected floating log-probabilities, got input int64 [1, 2]");
  });

  test("unknown reduction, in functions and module constructors", () => {
    for (const f of [...pointwise, "nll_loss", "cross_entropy"] as const) {
      const t = f === "nll_loss" || f === "cross_entropy" ? loom.tensor([0, 1]) : x;
      const e = thrown(() => (FNS[f] as LossFn)(x, t, { reduction: "avg" }));
      expect(e).toBeInstanceOf(loom.LoomValueError);
      expect(e.message).toStartWith(`[${f}] reduction must be one of "none", "mean", "sum"`);
      expect(e.message).toEndWith(`got "avg"`);
    }
    expect(thrown(() => loom.mse_loss(x, x, { reduction: "batchmean" } as any)).message).toBe(`[mse_loss] reduction must be one of "none", "mean", "sum", got "batchmean"`);
    expect(thrown(() => new nn.MSELoss({ reduction: "avg" as any })).message).toBe(`[MSELoss] reduction must be one of "none", "mean", "sum", got "avg"`);
    expect(thrown(() => new nn.KLDivLoss({ reduction: "avg" as any })).message).toBe(`[KLDivLoss] reduction must be one of "none", "mean", "sum", "batchmean", got "avg"`);
  });

  test("class-index targets: shape, weight shape", () => {
    const e1 = thrown(() => loom.nll_loss(x, loom.tensor([0, 1, 2])));
    expect(e1).toBeInstanceOf(loom.LoomShapeError);
    expect(e1.message).toBe("[nll_loss] expected target of shape [2] for input [2, 3], got [3]");
    const e2 = thrown(() => loom.nll_loss(x, loom.tensor([0, 1]), { weight: loom.tensor([1.0, 2.0]) }));
    expect(e2).toBeInstanceOf(loom.LoomShapeError);
    expect(e2.message).toBe("[nll_loss] weight must have one entry per class, [3] for input [2, 3], got [2]");
    expect(thrown(() => loom.cross_entropy(x, loom.tensor([0, 1]), { weight: loom.tensor([1.0]) })).message)
      .toBe("[cross_entropy] weight must have one entry per class, [3] for input [2, 3], got [1]");
    expect(thrown(() => loom.nll_loss(loom.tensor(1.5), loom.tensor(0))).message).toBe("[nll_loss] input must have a class dim, got a 0-d input");
  });

  test("weights that do not broadcast; bad delta, beta, label_smoothing", () => {
    const e = thrown(() => loom.binary_cross_entropy(x, x, { weight: loom.tensor([1.0, 2.0]) }));
    expect(e).toBeInstanceOf(loom.LoomShapeError);
    expect(e.message).toBe("[binary_cross_entropy] weight [2] does not broadcast to input [2, 3]");
    expect(thrown(() => loom.binary_cross_entropy_with_logits(x, x, { pos_weight: loom.tensor([[1.0], [2.0], [3.0]]) })).message)
      .toBe("[binary_cross_entropy_with_logits] pos_weight [3, 1] does not broadcast to input [2, 3]");
    expect(thrown(() => loom.huber_loss(x, x, { delta: 0 }))).toBeInstanceOf(loom.LoomValueError);
    expect(thrown(() => loom.huber_loss(x, x, { delta: 0 })).message).toBe("[huber_loss] delta must be positive, got 0");
    expect(thrown(() => loom.smooth_l1_loss(x, x, { beta: -1 })).message).toBe("[smooth_l1_loss] beta must be non-negative, got -1");
    expect(thrown(() => loom.cross_entropy(x, loom.tensor([0, 1]), { label_smoothing: 1.5 })).message)
      .toBe("[cross_entropy] label_smoothing must be between 0.0 and 1.0, got 1.5");
    expect(thrown(() => new nn.HuberLoss({ delta: -1 })).message).toBe("[HuberLoss] delta must be positive, got -1");
    expect(thrown(() => new nn.SmoothL1Loss({ beta: -1 })).message).toBe("[SmoothL1Loss] beta must be non-negative, got -1");
    expect(thrown(() => new nn.CrossEntropyLoss({ label_smoothing: 2 })).message).toBe("[CrossEntropyLoss] label_smoothing must be between 0.0 and 1.0, got 2");
  });

  test("mse_loss still takes the reduction alone (as Loom did)", () => {
    expect(loom.mse_loss(x, x.mul(0), "sum").item()).toBeCloseTo(0.25 + 0.0625 + 0.015625 + 0.5625 + 0.25 + 0.0625, 6);
  });
});

/** The small modules' builders, by torch class name, with the golden constructor arguments. */
const SMALL = {
  LeakyReLU: (...a: any[]) => new nn.LeakyReLU(...a),
  Softmax: (d: number) => new nn.Softmax(d),
  LogSoftmax: (d: number) => new nn.LogSoftmax(d),
  Flatten: (...a: any[]) => new nn.Flatten(...a),
  Unflatten: (d: number, s: number[]) => new nn.Unflatten(d, s),
};

describe.each(BACKENDS)("small modules match torch on %s", (backend) => {
  useBackend(backend);
  for (const c of golden.modules) {
    const label = `${c.name}(${c.args.map((a) => JSON.stringify(a)).join(", ")})`;
    test(`${label}: values, gradients, eager == lazy, repr`, () => {
      const m = (SMALL[c.name] as (...a: any[]) => nn.TensorModule)(...c.args);
      expect(String(m)).toBe(c.repr);
      const runIt = (mode: nn.ExecutionMode) => {
        const x = dec(c.input).requires_grad_(true);
        const out = nn.with_execution_mode(mode, () => m.call(x));
        out.mul(dec(c.grad_output)).sum().backward();
        return { out, g: x.grad as loom.Tensor };
      };
      const e = runIt("eager");
      expectClose(e.out, arr(c.output), { what: `${label} output` });
      expectClose(e.g, arr(c.input_grad), { what: `${label} input grad` });
      const l = loom.with_compiler_options({ tolerance: "exact" }, () => runIt("lazy"));
      expectSame(l.out, e.out);
      expectSame(l.g, e.g);
    });
  }

  test("F.leaky_relu: slope below 0, identity above, slope at 0 (torch's gradient)", () => {
    const x = loom.tensor([-2, 0, 3], { dtype: "float32" }).requires_grad_(true);
    const y = loom.leaky_relu(x, 0.1);
    y.sum().backward();
    expect(Array.from(y.dataSync())).toEqual([Math.fround(-0.2), 0, 3]);
    expect(Array.from(x.grad!.dataSync())).toEqual([Math.fround(0.1), Math.fround(0.1), 1]);
  });

  test("Flatten and Unflatten reject bad dims and sizes", () => {
    const x = loom.zeros([2, 6]);
    expect(thrown(() => new nn.Flatten(0, 3).call(x))).toBeInstanceOf(loom.LoomIndexError);
    expect(thrown(() => new nn.Unflatten(1, [4, 2]).call(x))).toBeInstanceOf(loom.LoomShapeError);
    expect([...new nn.Unflatten(1, [3, -1]).call(x).shape]).toEqual([2, 3, 2]);
  });
});
