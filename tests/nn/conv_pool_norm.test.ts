/**
 * Convolution, pooling, BatchNorm and GroupNorm against PyTorch 1.13 goldens (conv_goldens.json
 * from gen_conv_goldens.py; inputs are rebuilt here from the generator's `pattern`): values and the
 * gradients of sum(out * grad_output) w.r.t. input, weight and bias, on every backend, eagerly and
 * lazily (bit-equal on js). BatchNorm running statistics after several steps (momentum and the
 * cumulative average), in both execution modes. A small CNN's lazy training step is one plan and
 * equals the eager step. Bad input raises typed errors naming the op and shapes.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { nn, optim } from "../../src/index.ts";
import { pendingCount } from "../../src/lazy/deferred.ts";
import { copyOnWriteStats } from "../../src/lazy/readers.ts";
import { planCacheStats } from "../../src/scheduler/compile.ts";
import { BACKENDS, WEBGPU, useBackend } from "../backends.ts";
import { thrown } from "../thrown.ts";
import { expectClose, readGolden, type Arr } from "./helpers.ts";

/** Golden arrays carry no dtype (all float32 but the int64 indices); expectClose does not read it. */
type G = Arr;
const F = nn.F;
interface ConvCase { name: string; fn: "conv1d" | "conv2d"; x: number[]; w: number[]; bias: boolean; options: Record<string, any>; output: G; input_grad: G; weight_grad: G; bias_grad?: G }
interface PoolCase { name: string; fn: string; x: number[]; coarse: boolean; args: any[]; options: Record<string, any>; output: G; input_grad: G; indices?: G }
interface Running { mean: G; var: G; n: number }
interface BNCase {
  name: string; cls: "BatchNorm1d" | "BatchNorm2d"; C: number; shape: number[]; steps: number; options: Record<string, any>;
  running: Running[]; output: G; input_grad: G; weight_grad?: G; bias_grad?: G; eval_output: G;
}
interface GNCase { name: string; G: number; shape: number[]; affine: boolean; eps: number; output: G; input_grad: G; weight_grad?: G; bias_grad?: G }
const golden = readGolden<{ conv: ConvCase[]; pool: PoolCase[]; batchnorm: BNCase[]; groupnorm: GNCase[] }>(new URL("./conv_goldens.json", import.meta.url));

/** The generator's inputs: element i = ((i·37 + seed·101) mod 113 − 56) / scale, float32 (exact). */
function pattern(shape: readonly number[], seed: number, scale = 64): loom.Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  const v = Float64Array.from({ length: n }, (_, i) => (((i * 37 + seed * 101) % 113) - 56) / scale);
  return loom.tensor(v, { dtype: "float32" }).reshape([...shape]);
}

const TOL = { rtol: 1e-5, atol: 1e-5 };
type AnyT = loom.Tensor | loom.LazyTensor;

/**
 * out = fn(...inputs) and the gradients of sum(out · grad_output) w.r.t. the inputs that are not
 * null, eagerly or over lazy lifts of the same eager tensors (gradients flow back to them).
 */
function run(fn: (...xs: any[]) => AnyT | AnyT[], inputs: (loom.Tensor | null)[], gseed: number, lazy: boolean) {
  const leaves = inputs.map((t) => (t ? t.clone().requires_grad_(true) : null));
  const args = leaves.map((t) => (t && lazy ? t.lazy() : t));
  const res = fn(...args);
  const out = Array.isArray(res) ? res[0]! : res;
  const extra = Array.isArray(res) ? res.slice(1) : [];
  const g = pattern(out.shape, gseed);
  (out as any).mul(lazy ? g.lazy() : g).sum().backward();
  const value = (t: AnyT) => (t.isLazy ? (t as loom.LazyTensor).eval() : (t as loom.Tensor));
  return { out: value(out).detach(), extra: extra.map((e) => value(e)), grads: leaves.map((l) => l?.grad ?? null) };
}

/** Eager result vs golden, then lazy vs eager (bit-equal on js at the exact tolerance). */
function checkBoth(backend: string, what: string, fn: (...xs: any[]) => AnyT | AnyT[], inputs: (loom.Tensor | null)[], want: (G | undefined)[], extraWant: (G | undefined)[] = []) {
  const eager = run(fn, inputs, 7, false);
  expectClose(eager.out, want[0]!, { ...TOL, what: `${what} output` });
  eager.grads.forEach((g, i) => {
    if (want[i + 1]) expectClose(g!, want[i + 1]!, { ...TOL, what: `${what} grad ${i}` });
  });
  eager.extra.forEach((e, i) => {
    if (extraWant[i]) expect(Array.from(e.dataSync())).toEqual(extraWant[i]!.data);
  });
  const exact = backend === "js";
  const lazy = exact ? loom.with_compiler_options({ tolerance: "exact" }, () => run(fn, inputs, 7, true)) : run(fn, inputs, 7, true);
  const same = (a: loom.Tensor, b: loom.Tensor, w: string) => {
    if (exact) expect(Array.from(a.dataSync())).toEqual(Array.from(b.dataSync()));
    else expectClose(a, { shape: [...b.shape], dtype: b.dtype, data: Array.from(b.dataSync()) }, { ...TOL, what: w });
  };
  same(lazy.out, eager.out, `${what} lazy output`);
  lazy.grads.forEach((g, i) => {
    if (g) same(g, eager.grads[i]!, `${what} lazy grad ${i}`);
  });
  lazy.extra.forEach((e, i) => same(e, eager.extra[i]!, `${what} lazy extra ${i}`));
}

const POOL_FNS: Record<string, (x: any, ...a: any[]) => any> = {
  max_pool1d: F.max_pool1d, max_pool2d: F.max_pool2d, avg_pool1d: F.avg_pool1d, avg_pool2d: F.avg_pool2d,
  adaptive_avg_pool1d: F.adaptive_avg_pool1d, adaptive_avg_pool2d: F.adaptive_avg_pool2d,
  adaptive_max_pool1d: F.adaptive_max_pool1d, adaptive_max_pool2d: F.adaptive_max_pool2d, unfold: F.unfold, fold: F.fold,
};

/** Call a pooling golden's function with torch's positional args and keyword options mapped to Loom's. */
function poolCall(c: PoolCase, x: AnyT): AnyT | AnyT[] {
  const f = POOL_FNS[c.fn]!;
  const args = c.args;
  if (c.fn.startsWith("adaptive_max")) return f(x, args[0], c.options.return_indices ?? false);
  if (c.fn.startsWith("adaptive")) return f(x, args[0]);
  if (c.fn === "fold") return f(x, args[0], args[1], c.options);
  return f(x, args[0], c.options);
}

describe.each(BACKENDS)("conv / pool / norm goldens on %s", (backend) => {
  useBackend(backend);

  for (const c of golden.conv) {
    test(`${c.fn} ${c.name}`, () => {
      const x = pattern(c.x, 1), w = pattern(c.w, 2, 128), b = c.bias ? pattern([c.w[0]!], 3) : null;
      const fn = c.fn === "conv1d" ? F.conv1d : F.conv2d;
      checkBoth(backend, c.name, (x, w, b) => fn(x, w, b, c.options), [x, w, b], [c.output, c.input_grad, c.weight_grad, c.bias_grad]);
    });
  }

  for (const c of golden.pool) {
    test(`${c.fn} ${c.name}`, () => {
      let x = pattern(c.x, 4);
      if (c.coarse) x = x.mul(2).round().div(2);
      checkBoth(backend, c.name, (x) => poolCall(c, x), [x], [c.output, c.input_grad], [c.indices]);
    });
  }

  for (const c of golden.groupnorm) {
    test(`group_norm ${c.name}`, () => {
      const C = c.shape[1]!;
      const w = c.affine ? pattern([C], 5, 32).add(1) : null, b = c.affine ? pattern([C], 6) : null;
      checkBoth(backend, c.name, (x, w, b) => F.group_norm(x, c.G, w, b, c.eps), [pattern(c.shape, 8), w, b], [c.output, c.input_grad, c.weight_grad, c.bias_grad]);
    });
  }

  for (const mode of ["eager", "lazy"] as const) {
    for (const c of golden.batchnorm) {
      test(`${c.cls} ${c.name} (${mode} execution): step-0 output and gradients, running stats per step, eval`, () => {
        const opts = { ...c.options } as nn.BatchNormOptions;
        const m = new nn[c.cls](c.C, opts);
        if (m.affine) {
          loom.no_grad(() => {
            m.weight!.copy_(pattern([c.C], 5, 32).add(1));
            m.bias!.copy_(pattern([c.C], 6));
          });
        }
        m.train();
        nn.with_execution_mode(mode, () => {
          for (let s = 0; s < c.steps; s++) {
            const x = pattern(c.shape, s).requires_grad_(true);
            const y = m.call(x);
            if (s === 0) {
              y.mul(pattern(c.shape, 7)).sum().backward();
              expectClose(y, c.output, { ...TOL, what: "output" });
              expectClose(x.grad!, c.input_grad, { rtol: 1e-4, atol: 1e-5, what: "input grad" });
              if (c.weight_grad) expectClose(m.weight!.grad!, c.weight_grad, { rtol: 1e-4, atol: 1e-5, what: "weight grad" });
              if (c.bias_grad) expectClose(m.bias!.grad!, c.bias_grad, { ...TOL, what: "bias grad" });
            }
            const r = c.running[s];
            if (r) {
              expectClose(m.running_mean!, r.mean, { ...TOL, what: `running_mean step ${s}` });
              expectClose(m.running_var!, r.var, { ...TOL, what: `running_var step ${s}` });
              expect(m.num_batches_tracked!.item()).toBe(r.n);
            }
          }
          m.eval();
          expectClose(m.call(pattern(c.shape, 10)), c.eval_output, { ...TOL, what: "eval output" });
        });
        expect(pendingCount()).toEqual({ writes: 0, values: 0 });
      });
    }
  }
});

describe("gradients match finite differences (float64, js)", () => {
  useBackend("js");
  const f64 = (t: loom.Tensor | null) => (t ? t.to("float64") : null);
  for (const c of golden.conv) {
    test(`${c.fn} ${c.name}`, () => {
      const fn = c.fn === "conv1d" ? F.conv1d : F.conv2d;
      const ins = [f64(pattern(c.x, 1))!, f64(pattern(c.w, 2, 128))!, ...(c.bias ? [f64(pattern([c.w[0]!], 3))!] : [])];
      expect(loom.gradcheck((x: loom.Tensor, w: loom.Tensor, b?: loom.Tensor) => fn(x, w, b ?? null, c.options), ins)).toEqual([]);
    });
  }
  // max pooling is not differentiable at ties: the coarse case is checked against torch only
  for (const c of golden.pool.filter((k) => !k.coarse)) {
    test(`${c.fn} ${c.name}`, () => {
      const first = (r: AnyT | AnyT[]) => (Array.isArray(r) ? r[0]! : r) as loom.Tensor;
      expect(loom.gradcheck((x: loom.Tensor) => first(poolCall(c, x)), [f64(pattern(c.x, 4))!])).toEqual([]);
    });
  }
  test("batch_norm (training, batch statistics) and group_norm", () => {
    const x = f64(pattern([4, 3, 5], 1))!, w = f64(pattern([3], 5, 32).add(1))!, b = f64(pattern([3], 6))!;
    expect(loom.gradcheck((x: loom.Tensor, w: loom.Tensor, b: loom.Tensor) => F.batch_norm(x, null, null, w, b, true), [x, w, b])).toEqual([]);
    const g = f64(pattern([2, 6, 3], 8))!, gw = f64(pattern([6], 5, 32).add(1))!, gb = f64(pattern([6], 6))!;
    expect(loom.gradcheck((x: loom.Tensor, w: loom.Tensor, b: loom.Tensor) => F.group_norm(x, 3, w, b), [g, gw, gb])).toEqual([]);
  });
});

describe("modules", () => {
  test("Conv1d/Conv2d: torch's parameter names and shapes, kaiming_uniform(a=√5) bounds, repr, forward = F.conv", () => {
    const c = new nn.Conv2d(4, 8, [3, 2], { padding: "same", groups: 4, dilation: 2 });
    expect(c.named_parameters().map(([n, p]) => [n, [...p.shape]])).toEqual([["weight", [8, 1, 3, 2]], ["bias", [8]]]);
    const bound = 1 / Math.sqrt(1 * 3 * 2); // fan_in = in/groups · kH · kW
    for (const p of [c.weight, c.bias!]) expect(Math.max(...Array.from(p.dataSync()).map(Math.abs))).toBeLessThanOrEqual(bound);
    expect(String(c)).toBe("Conv2d(4, 8, kernel_size=(3, 2), stride=(1, 1), padding=same, dilation=(2, 2), groups=4)");
    expect(String(new nn.Conv1d(4, 6, 3, { stride: 2, padding: 1, bias: false }))).toBe("Conv1d(4, 6, kernel_size=(3,), stride=(2,), padding=(1,), bias=False)");
    expect(String(new nn.Conv2d(2, 3, 3, { padding: 1, padding_mode: "reflect" }))).toBe("Conv2d(2, 3, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), padding_mode=reflect)");
    const x = pattern([2, 4, 5, 6], 1);
    const y = c.call(x), want = F.conv2d(x, c.weight, c.bias, { padding: "same", groups: 4, dilation: 2 });
    expect([...y.shape]).toEqual([2, 8, 5, 6]);
    expectClose(y, { shape: [...want.shape], dtype: "float32", data: Array.from(want.dataSync()) }, { rtol: 0, atol: 0, what: "module" });
  });

  test("pooling and norm module reprs and state_dict keys are torch's", () => {
    expect(String(new nn.MaxPool2d(3, { stride: 2, padding: 1, ceil_mode: true }))).toBe("MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=True)");
    expect(String(new nn.MaxPool1d(2))).toBe("MaxPool1d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)");
    expect(String(new nn.AvgPool1d(3, { stride: 2 }))).toBe("AvgPool1d(kernel_size=(3,), stride=(2,), padding=(0,))");
    expect(String(new nn.AvgPool2d([3, 2], { padding: 1 }))).toBe("AvgPool2d(kernel_size=(3, 2), stride=(3, 2), padding=1)");
    expect(String(new nn.AdaptiveAvgPool2d([null, 4]))).toBe("AdaptiveAvgPool2d(output_size=(None, 4))");
    expect(String(new nn.AdaptiveAvgPool1d(3))).toBe("AdaptiveAvgPool1d(output_size=3)");
    expect(String(new nn.AdaptiveMaxPool2d(2))).toBe("AdaptiveMaxPool2d(output_size=2)");
    expect(String(new nn.BatchNorm2d(3))).toBe("BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)");
    expect(String(new nn.BatchNorm1d(4, { momentum: null, affine: false }))).toBe("BatchNorm1d(4, eps=1e-05, momentum=None, affine=False, track_running_stats=True)");
    expect(String(new nn.GroupNorm(2, 6))).toBe("GroupNorm(2, 6, eps=1e-05, affine=True)");
    const bn = new nn.BatchNorm1d(2);
    expect(Object.keys(bn.state_dict())).toEqual(["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]);
    expect(bn.num_batches_tracked!.dtype).toBe("int64");
    expect(new nn.BatchNorm2d(2, { track_running_stats: false }).buffers()).toEqual([]);
  });

  test("MaxPool2d({return_indices: true}) returns [values, indices] as F.max_pool2d", () => {
    const x = pattern([1, 2, 5, 5], 4);
    const [v, i] = new nn.MaxPool2d(2, { return_indices: true }).call(x);
    const [fv, fi] = F.max_pool2d(x, 2, { return_indices: true });
    expect(Array.from(v.dataSync())).toEqual(Array.from(fv.dataSync()));
    expect(Array.from(i.dataSync())).toEqual(Array.from(fi.dataSync()));
    expect(i.dtype).toBe("int64");
  });

  test("F.batch_norm writes the running stats in place, eagerly and through lazy lifts (one deferred plan)", () => {
    const c = golden.batchnorm.find((k) => k.name === "bn1d_2d")!;
    const w = pattern([4], 5, 32).add(1), b = pattern([4], 6);
    for (const lazy of [false, true]) {
      const rm = loom.zeros([4]), rv = loom.ones([4]);
      for (let s = 0; s < 3; s++) {
        const r0 = loom.realizeStats.realizes;
        const x = pattern(c.shape, s);
        const y = lazy ? F.batch_norm(x.lazy(), rm.lazy(), rv.lazy(), w.lazy(), b.lazy(), true) : F.batch_norm(x, rm, rv, w, b, true);
        if (s === 0) expectClose(lazy ? (y as loom.LazyTensor).eval() : y, c.output, { ...TOL, what: "output" });
        expectClose(rm, c.running[s]!.mean, { ...TOL, what: `running_mean ${s}` });
        expectClose(rv, c.running[s]!.var, { ...TOL, what: `running_var ${s}` });
        if (lazy && s > 0) expect(loom.realizeStats.realizes - r0).toBe(1);
      }
    }
  });

  test("GroupNorm module = F.group_norm with its weight and bias", () => {
    const g = new nn.GroupNorm(2, 4);
    loom.no_grad(() => g.weight!.copy_(pattern([4], 5, 32)));
    const x = pattern([2, 4, 3], 8);
    expect(Array.from(g.call(x).dataSync())).toEqual(Array.from(F.group_norm(x, 2, g.weight, g.bias).dataSync()));
  });
});

describe("bad input raises typed errors naming the op and shapes", () => {
  const x = pattern([2, 4, 8, 8], 1);
  test("conv", () => {
    let e = thrown(() => F.conv2d(x, pattern([8, 3, 3, 3], 2)));
    expect(e).toBeInstanceOf(loom.LoomShapeError);
    expect(e.message).toBe("[conv2d] Given groups=1, weight of size [8, 3, 3, 3], expected input[2, 4, 8, 8] to have 3 channels, but got 4 channels instead");
    e = thrown(() => F.conv2d(x, pattern([3, 2, 3, 3], 2), null, { groups: 2 }));
    expect(e).toBeInstanceOf(loom.LoomShapeError);
    expect(e.message).toContain("[conv2d] Given groups=2, expected weight to be divisible by 2 at dimension 0, but got weight of size [3, 2, 3, 3]");
    e = thrown(() => F.conv1d(pattern([1, 2, 3], 1), pattern([4, 2, 5], 2)));
    expect(e).toBeInstanceOf(loom.LoomShapeError);
    expect(e.message).toContain("[conv1d] Calculated padded input size per channel: (3). Kernel size: (5). Kernel size can't be greater than actual input size");
    expect(e.message).toContain("[1, 2, 3]");
    e = thrown(() => F.conv2d(x, pattern([4, 4, 3, 3], 2), pattern([3], 3)));
    expect(e.message).toContain("expected bias to be 1-dimensional with 4 elements, but got bias of size [3]");
    expect(thrown(() => F.conv2d(x, pattern([4, 4, 3, 3], 2), null, { padding: "same", stride: 2 }))).toBeInstanceOf(loom.LoomValueError);
    expect(thrown(() => F.conv2d(pattern([4, 8], 1), pattern([4, 4, 3, 3], 2)))).toBeInstanceOf(loom.LoomShapeError);
    expect(thrown(() => F.conv2d(x, pattern([4, 4, 3, 3], 2).to("float64")))).toBeInstanceOf(loom.LoomDtypeError);
    expect(thrown(() => F.conv1d(pattern([1, 2, 3], 1), pattern([4, 2, 2], 2), null, { padding: 3, padding_mode: "reflect" }))).toBeInstanceOf(loom.LoomValueError);
    expect(thrown(() => new nn.Conv2d(4, 6, 3, { groups: 4 })).message).toContain("out_channels must be divisible by groups");
    expect(thrown(() => new nn.Conv2d(3, 6, 3, { groups: 2 })).message).toContain("in_channels must be divisible by groups");
    expect(thrown(() => new nn.Conv1d(3, 6, 3, { padding_mode: "mirror" as any }))).toBeInstanceOf(loom.LoomValueError);
    // lazily the same errors come at record time
    expect(thrown(() => F.conv2d(x.lazy(), pattern([8, 3, 3, 3], 2).lazy())).message).toContain("to have 3 channels, but got 4 channels instead");
  });
  test("pooling", () => {
    let e = thrown(() => F.max_pool2d(pattern([1, 1, 2, 2], 1), 3));
    expect(e).toBeInstanceOf(loom.LoomShapeError);
    expect(e.message).toContain("[max_pool2d] Given input size: (1x2x2). Calculated output size: (1x0x0). Output size is too small");
    e = thrown(() => F.avg_pool1d(pattern([1, 1, 8], 1), 3, { padding: 2 }));
    expect(e).toBeInstanceOf(loom.LoomValueError);
    expect(e.message).toContain("[avg_pool1d] pad should be at most half of kernel size");
    expect(thrown(() => F.max_pool1d(pattern([8], 1), 2))).toBeInstanceOf(loom.LoomShapeError);
    expect(thrown(() => F.max_pool1d(loom.zeros([1, 2, 4], { dtype: "int64" }), 2))).toBeInstanceOf(loom.LoomDtypeError);
    expect(thrown(() => F.adaptive_avg_pool2d(x, [0, 2]))).toBeInstanceOf(loom.LoomValueError);
    expect(thrown(() => F.fold(pattern([1, 12, 11], 1), [5, 4], [2, 3], { stride: [2, 1], padding: 1 })).message).toContain("calculated number of sliding blocks 12");
  });
  test("norms", () => {
    let e = thrown(() => F.group_norm(pattern([2, 6, 4], 1), 4));
    expect(e).toBeInstanceOf(loom.LoomShapeError);
    expect(e.message).toBe("[group_norm] Expected number of channels in input to be divisible by num_groups, but got input of shape [2, 6, 4] and num_groups=4");
    e = thrown(() => new nn.BatchNorm2d(3).call(pattern([2, 4, 3, 3], 1)));
    expect(e).toBeInstanceOf(loom.LoomShapeError);
    expect(e.message).toContain("[BatchNorm2d] expected input with 3 channels (dim 1), got [2, 4, 3, 3]");
    expect(thrown(() => new nn.BatchNorm1d(3).call(pattern([2, 3, 3, 3], 1))).message).toContain("[BatchNorm1d] expected 2D or 3D input (got 4D input");
    e = thrown(() => new nn.BatchNorm1d(3).call(pattern([1, 3], 1)));
    expect(e).toBeInstanceOf(loom.LoomValueError);
    expect(e.message).toContain("Expected more than 1 value per channel when training, got input size [1, 3]");
    expect(thrown(() => F.batch_norm(pattern([2, 3], 1), pattern([4], 1), pattern([4], 2))).message).toContain("[batch_norm] running_mean should contain 3 elements not 4");
    expect(thrown(() => new nn.GroupNorm(4, 6))).toBeInstanceOf(loom.LoomValueError);
  });
});

/** Conv1d -> ReLU -> MaxPool1d -> Flatten -> Linear (optionally with BatchNorm1d), cross entropy, Adam. */
function trainCnn(mode: nn.ExecutionMode, withBn: boolean) {
  loom.manual_seed(3);
  const layers: nn.Module[] = [new nn.Conv1d(3, 4, 3, { padding: 1 })];
  if (withBn) layers.push(new nn.BatchNorm1d(4));
  layers.push(new nn.ReLU(), new nn.MaxPool1d(2), new nn.Flatten(), new nn.Linear(4 * 4, 2));
  const model = new nn.Sequential(...layers);
  const opt = new optim.Adam(model.parameters(), { lr: 1e-2 });
  const x = pattern([5, 3, 8], 1), y = loom.tensor([0, 1, 1, 0, 1]);
  const losses: number[] = [], plans: number[] = [];
  let misses0 = 0, copies0 = 0;
  model.train();
  nn.with_execution_mode(mode, () => {
    for (let step = 0; step < 4; step++) {
      if (step === 2) {
        misses0 = planCacheStats.misses;
        copies0 = copyOnWriteStats.copies;
      }
      const r0 = loom.realizeStats.realizes;
      const loss = F.cross_entropy(model.call(x), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
      losses.push(loss.item());
      plans.push(loom.realizeStats.realizes - r0);
    }
  });
  const state = model.state_dict();
  return { losses, plans, laterMisses: planCacheStats.misses - misses0, laterCopies: copyOnWriteStats.copies - copies0, state: Object.fromEntries(Object.entries(state).map(([k, v]) => [k, Array.from(v.dataSync())])) };
}

describe.each(BACKENDS)("a small CNN training step on %s", (backend) => {
  useBackend(backend);
  for (const withBn of [false, true]) {
    test(`Conv1d${withBn ? " -> BatchNorm1d" : ""} -> ReLU -> MaxPool1d -> Linear: lazy is one plan per step and equals eager`, () => {
      const exact = backend === "js";
      const go = (m: nn.ExecutionMode) => (exact ? loom.with_compiler_options({ tolerance: "exact" }, () => trainCnn(m, withBn)) : trainCnn(m, withBn));
      const eager = go("eager"), lazy = go("lazy");
      expect(lazy.plans.slice(1)).toEqual([1, 1, 1]);
      // compiled once; the running-stat writes need no copy-on-write copies
      expect(lazy.laterMisses).toBe(0);
      expect(lazy.laterCopies).toBe(0);
      expect(Object.keys(lazy.state)).toEqual(Object.keys(eager.state));
      for (const k of Object.keys(eager.state)) {
        if (exact) expect(lazy.state[k]).toEqual(eager.state[k]!);
        else expectClose(lazy.state[k]!, eager.state[k]!, { rtol: 1e-4, atol: 1e-5, what: k });
      }
      if (exact) expect(lazy.losses).toEqual(eager.losses);
      else expectClose(lazy.losses, eager.losses, { rtol: 1e-4, atol: 1e-5, what: "losses" });
      expect(lazy.losses.at(-1)!).toBeLessThan(lazy.losses[0]!);
      if (withBn) expect(lazy.state["1.num_batches_tracked"]).toEqual([4]);
      expect(pendingCount()).toEqual({ writes: 0, values: 0 });
    });
  }
});

// webgpu: the OpInfo suite (tests/opinfo) runs conv, unfold, the pools, batch_norm and group_norm
// there; fold has no OpInfo entry in torch 1.13 and OpInfo reads no running statistics, so these two
// run here against the js results (float32 tolerance; lavapipe on CI).
describe.if(WEBGPU)("conv/pool/norm on webgpu", () => {
  const GPU_TOL = { rtol: 1e-4, atol: 1e-5 };
  test("fold: values and input gradient equal js", () => {
    const run = (gpu: boolean) => {
      let x = pattern([2, 6, 12], 3);
      if (gpu) x = x.to("webgpu");
      x.requires_grad_(true);
      const y = F.fold(x, [5, 4], [2, 3], { stride: [2, 1], padding: 1 });
      let g = pattern(y.shape, 4);
      if (gpu) g = g.to("webgpu");
      y.mul(g).sum().backward();
      return { y: Array.from(y.dataSync()), gx: Array.from(x.grad!.dataSync()) };
    };
    const js = run(false), gpu = run(true);
    expectClose(gpu.y, js.y, GPU_TOL);
    expectClose(gpu.gx, js.gx, GPU_TOL);
  });
  test("batch_norm in training updates running_mean/var as on js", () => {
    const run = (gpu: boolean) => {
      const dev = (t: loom.Tensor) => (gpu ? t.to("webgpu") : t);
      const rm = dev(loom.zeros([3])), rv = dev(loom.ones([3]));
      const y = F.batch_norm(dev(pattern([4, 3, 5], 5)), rm, rv, null, null, true, 0.1, 1e-5);
      return [y, rm, rv].map((t) => Array.from(t.dataSync()));
    };
    const js = run(false), gpu = run(true);
    for (let i = 0; i < 3; i++) expectClose(gpu[i]!, js[i]!, { ...GPU_TOL, what: ["out", "running_mean", "running_var"][i] });
  });
});
