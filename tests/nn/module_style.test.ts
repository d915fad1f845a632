/**
 * Modules written as in PyTorch (issue 16): a plain typed `forward(x: Tensor): Tensor` that uses
 * its parameters directly (no generics, no `lift`) and makes a tensor inside forward (`arange`),
 * called with a typed `call`. It must give the same values and gradients eagerly (op by op) and
 * lazily (recorded: bit-equal on js), a lazy training step of it is one plan, hooks fire, and
 * ModuleDict / ModuleList members are typed. Values are checked against a hand-written reference
 * computed op by op on the host (float64) from the same weights.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { nn, optim, type Tensor } from "../../src/index.ts";
import { pendingCount } from "../../src/lazy/deferred.ts";
import { copyOnWriteStats } from "../../src/lazy/readers.ts";
import { BACKENDS, useBackend } from "../backends.ts";

/**
 * y = fc2(relu(fc1(x) + pos · scale)) · gain, with pos = arange(H) made inside forward and
 * `scale`, `gain` parameters used directly.
 */
class MLP extends nn.Module {
  fc1: nn.Linear;
  fc2: nn.Linear;
  scale: nn.Parameter;
  gain: nn.Parameter;
  /** Whether the last forward saw a LazyTensor (a plain field: not registered as state). */
  saw_lazy = false;
  constructor(d_in: number, hidden: number, d_out: number) {
    super();
    this.fc1 = new nn.Linear(d_in, hidden);
    this.fc2 = new nn.Linear(hidden, d_out);
    this.scale = new nn.Parameter(loom.full([hidden], 0.25));
    this.gain = new nn.Parameter(loom.full([d_out], 1.5));
  }
  override forward(x: Tensor): Tensor {
    this.saw_lazy = x.isLazy;
    const pos = loom.arange(0, this.scale.shape[0]!, 1, { dtype: "float32" }); // [hidden]
    const h = this.fc1.call(x).add(pos.mul(this.scale)).relu();
    return this.fc2.call(h).mul(this.gain);
  }
}

/** Two outputs and an optional argument: call is typed as forward. */
class TwoHeads extends nn.Module {
  a = new nn.Linear(3, 2);
  override forward(x: Tensor, shift: number | null = null): [Tensor, Tensor | null] {
    const y = this.a.call(x);
    return [y, shift === null ? null : y.add(shift)];
  }
}

/** forward on the host in float64 from the module's current weights (the reference). */
function reference(m: MLP, x: Tensor): number[] {
  const [N, D] = x.shape as [number, number];
  const H = m.fc1.out_features, O = m.fc2.out_features;
  const X = x.dataSync(), W1 = m.fc1.weight.dataSync(), b1 = m.fc1.bias!.dataSync();
  const W2 = m.fc2.weight.dataSync(), b2 = m.fc2.bias!.dataSync(), s = m.scale.dataSync(), g = m.gain.dataSync();
  const out: number[] = [];
  for (let n = 0; n < N; n++) {
    const h: number[] = [];
    for (let j = 0; j < H; j++) {
      let v = b1[j]!;
      for (let k = 0; k < D; k++) v += X[n * D + k]! * W1[j * D + k]!;
      h.push(Math.max(0, v + j * s[j]!));
    }
    for (let o = 0; o < O; o++) {
      let v = b2[o]!;
      for (let j = 0; j < H; j++) v += h[j]! * W2[o * H + j]!;
      out.push(v * g[o]!);
    }
  }
  return out;
}

const close = (a: ArrayLike<number>, b: ArrayLike<number>, tol = 1e-5) => {
  expect(a.length).toBe(b.length);
  for (let i = 0; i < a.length; i++) expect(Math.abs(a[i]! - b[i]!)).toBeLessThanOrEqual(tol + tol * Math.abs(b[i]!));
};

/** Output and every parameter's gradient of loss = Σ y·c, in `mode`. */
function run(mode: nn.ExecutionMode, m: MLP, x: Tensor, c: Tensor): { y: Float64Array; grads: Float64Array[] } {
  m.zero_grad();
  return nn.with_execution_mode(mode, () => {
    const y = m.call(x);
    y.mul(c).sum().backward();
    return { y: y.dataSync(), grads: m.parameters().map((p) => p.grad!.dataSync()) };
  });
}

/** Learned positions as GPT-2 adds them: a generic child (nn.Embedding) called on `arange` made in forward. */
class Positions extends nn.Module {
  wpe = new nn.Embedding(6, 3);
  fc = new nn.Linear(3, 2);
  /** Whether the child's output was a LazyTensor in the last forward. */
  child_lazy = false;
  override forward(x: Tensor): Tensor {
    const p = this.wpe.call(loom.arange(0, x.shape[1]!, 1, { dtype: "int64" })); // [T, 3]
    this.child_lazy = p.isLazy;
    return this.fc.call(x.add(p));
  }
}

describe.each(BACKENDS)("a module with a plain forward on %s", (backend) => {
  useBackend(backend);

  test("eager and lazy give the same values and gradients (bit-equal on js), matching the host reference", () => {
    loom.manual_seed(0);
    const m = new MLP(4, 5, 3);
    const x = loom.randn([6, 4]), c = loom.randn([6, 3]);
    const run_ = (mode: nn.ExecutionMode) => (backend === "js" ? loom.with_compiler_options({ tolerance: "exact" }, () => run(mode, m, x, c)) : run(mode, m, x, c));
    const eager = run_("eager");
    expect(m.saw_lazy).toBe(false); // op by op
    const lazy = run_("lazy");
    expect(m.saw_lazy).toBe(true); // recorded
    close(eager.y, reference(m, x));
    if (backend === "js") {
      expect(Array.from(lazy.y)).toEqual(Array.from(eager.y));
      lazy.grads.forEach((g, i) => expect(Array.from(g)).toEqual(Array.from(eager.grads[i]!)));
    } else {
      close(lazy.y, eager.y);
      lazy.grads.forEach((g, i) => close(g, eager.grads[i]!));
    }
    // d(Σ y·c)/d gain_o = Σ_n c[n,o] · (y[n,o] / gain_o): hand-derived from y = z · gain
    const Y = eager.y, C = c.dataSync(), g = m.gain.dataSync();
    const dgain = [0, 1, 2].map((o) => [0, 1, 2, 3, 4, 5].reduce((s, n) => s + C[n * 3 + o]! * Y[n * 3 + o]! / g[o]!, 0));
    close(eager.grads[m.parameters().indexOf(m.gain)]!, dgain, 1e-4);
  });

  test("a lazy training step is one plan, compiled once, with no copy-on-write copies", () => {
    loom.manual_seed(1);
    const m = new MLP(4, 8, 2);
    const opt = new optim.AdamW(m.parameters(), { lr: 1e-2 });
    const x = loom.randn([5, 4]), t = loom.randn([5, 2]);
    const plans: number[] = [], losses: number[] = [];
    let copies0 = 0;
    nn.with_execution_mode("lazy", () => {
      for (let step = 0; step < 4; step++) {
        if (step === 2) copies0 = copyOnWriteStats.copies;
        const r0 = loom.realizeStats.realizes;
        opt.zero_grad();
        const loss = nn.functional.mse_loss(m.call(x), t);
        loss.backward();
        opt.step();
        losses.push(loss.item());
        if (step > 0) plans.push(loom.realizeStats.realizes - r0);
      }
    });
    expect(plans).toEqual([1, 1, 1]);
    expect(copyOnWriteStats.copies - copies0).toBe(0);
    expect(pendingCount()).toEqual({ writes: 0, values: 0 });
    expect(losses.at(-1)!).toBeLessThan(losses[0]!);
  });

  for (const mode of ["eager", "lazy"] as const) {
    test(`${mode}: forward hooks fire on the module and on its children, and may replace the output`, () => {
      loom.manual_seed(2);
      const m = new MLP(4, 5, 3);
      const seen: string[] = [];
      m.register_forward_pre_hook(() => { seen.push("pre"); });
      m.fc1.register_forward_hook(() => { seen.push("fc1"); });
      const h = m.register_forward_hook((_m, _args, out) => { seen.push("post"); return (out as Tensor).mul(0).abs(); });
      const x = loom.randn([2, 4]);
      const y = nn.with_execution_mode(mode, () => m.call(x));
      expect(seen).toEqual(["pre", "fc1", "post"]);
      expect(Array.from(y.dataSync())).toEqual([0, 0, 0, 0, 0, 0]);
      h.remove();
      close(nn.with_execution_mode(mode, () => m.call(x)).dataSync(), reference(m, x));
    });
  }

  test("a backward hook on a module with a plain forward sees grad_output", () => {
    loom.manual_seed(3);
    const m = new MLP(4, 5, 3);
    const x = loom.randn([2, 4]).requires_grad_(), c = loom.randn([2, 3]);
    let got: Float64Array | null = null;
    m.register_full_backward_hook((_m, _gi, go) => { got = go[0]!.dataSync(); });
    m.call(x).mul(c).sum().backward();
    close(got!, c.dataSync());
  });

  test("a generic child called on a tensor made inside a lazy forward records too (no eager kernel), with its gradient", () => {
    loom.manual_seed(5);
    const m = new Positions();
    const x = loom.randn([2, 4, 3]), c = loom.randn([2, 4, 2]);
    const run_ = (mode: nn.ExecutionMode) => nn.with_execution_mode(mode, () => {
      m.zero_grad();
      const r0 = loom.realizeStats.realizes;
      const y = m.call(x);
      const during = loom.realizeStats.realizes - r0; // the forward itself realizes nothing
      y.mul(c).sum().backward();
      return { y: y.dataSync(), g: m.wpe.weight.grad!.dataSync(), during, child: m.child_lazy };
    });
    const eager = run_("eager"), lazy = run_("lazy");
    expect(eager.child).toBe(false);
    expect(lazy.child).toBe(true);
    expect(lazy.during).toBe(0);
    close(lazy.y, eager.y);
    // d(Σ y·c)/d wpe[t] = Σ_b c[b,t,:] · W_fc (rows t < 4; rows 4, 5 unused: zero)
    const C = c.dataSync(), W = m.fc.weight.dataSync(), want: number[] = [];
    for (let t = 0; t < 6; t++) for (let j = 0; j < 3; j++) {
      let s = 0;
      if (t < 4) for (let b = 0; b < 2; b++) for (let o = 0; o < 2; o++) s += C[(b * 4 + t) * 2 + o]! * W[o * 3 + j]!;
      want.push(s);
    }
    close(eager.g, want, 1e-5);
    close(lazy.g, want, 1e-5);
  });

  test("inside Sequential, with LazyTensor inputs, and forward_eager", () => {
    loom.manual_seed(4);
    const m = new MLP(4, 5, 3);
    const seq = new nn.Sequential(m, new nn.ReLU());
    const x = loom.randn([2, 4]);
    const want = reference(m, x).map((v) => Math.max(0, v));
    close(seq.call(x).dataSync(), want);
    close(seq.call(x.lazy()).eval().dataSync(), want);
    close(m.forward_eager(x).relu().dataSync(), want);
  });
});

describe("types", () => {
  test("call is typed as forward; ModuleDict and ModuleList members are typed", () => {
    const heads = new TwoHeads();
    const [y, z] = heads.call(loom.ones(1, 3), 2);
    const yt: Tensor = y;
    expect(yt.shape).toEqual([1, 2]);
    close(z!.sub(y).dataSync(), [2, 2]);
    // @ts-expect-error: forward takes a Tensor, not a number
    expect(() => heads.call(3)).toThrow();
    // @ts-expect-error: call returns a tuple, not a Tensor
    const _wrong: Tensor = heads.call(loom.ones(1, 3));
    // built-in layers keep their generic signatures: Tensor in, Tensor out
    const lin: Tensor = new nn.Linear(3, 2).call(loom.ones(1, 3));
    expect(lin.shape).toEqual([1, 2]);

    const d = new nn.ModuleDict({ wte: new nn.Embedding(5, 3), h: new nn.ModuleList([new nn.Linear(3, 3), new nn.Linear(3, 3)]) });
    const wte: nn.Embedding = d.get("wte"); // typed by key: no cast
    expect(wte.embedding_dim).toBe(3);
    const layers: nn.ModuleList<nn.Linear> = d.get("h");
    const first: nn.Linear = layers[0]!;
    expect(first.in_features).toBe(3);
    for (const l of layers) expect(l.out_features).toBe(3);
    // a key not given at construction is a Module (a ModuleDict grows with set); absent keys throw
    expect(() => d.get("nope")).toThrow("no module under key 'nope'");
    // @ts-expect-error: "wte" is an Embedding, not a Linear
    const _bad: nn.Linear = d.get("wte");
    expect(d.keys()).toEqual(["wte", "h"]);
    expect(Object.keys(d.state_dict())).toEqual(["wte.weight", "h.0.weight", "h.0.bias", "h.1.weight", "h.1.bias"]);
  });
});
