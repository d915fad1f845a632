/**
 * Every layer against PyTorch 1.13 goldens (nn_goldens.json from gen_nn_goldens.py): the torch
 * module's state dict is loaded with load_state_dict, then forward values and the gradients of
 * sum(out * grad_output) w.r.t. the input and every parameter must match torch. Each case runs in
 * both execution modes, and lazy results must equal eager ones bit for bit (same kernels).
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { nn } from "../../src/index.ts";
import { expectClose, expectSame, fromArr, readGolden, type Arr } from "./helpers.ts";

interface LayerCase {
  name: string;
  state: Record<string, Arr>;
  input: Arr;
  output: Arr;
  grad_output: Arr;
  input_grad?: Arr;
  param_grads: Record<string, Arr | null>;
}
const golden = readGolden<{ layers: LayerCase[]; reprs: Record<string, string> }>(new URL("./nn_goldens.json", import.meta.url));

/** The Loom module for each golden case (same constructor arguments as the torch script). */
const BUILD: Record<string, () => nn.Module> = {
  linear: () => new nn.Linear(4, 3),
  linear_nobias: () => new nn.Linear(4, 3, { bias: false }),
  linear_1d: () => new nn.Linear(3, 2),
  embedding_padding: () => new nn.Embedding(6, 3, { padding_idx: 2 }),
  embedding: () => new nn.Embedding(5, 4),
  layer_norm: () => new nn.LayerNorm(5),
  layer_norm_2d_eps: () => new nn.LayerNorm([2, 3], { eps: 1e-3 }),
  layer_norm_no_affine: () => new nn.LayerNorm(4, { elementwise_affine: false }),
  rms_norm: () => new nn.RMSNorm(6),
  rms_norm_eps: () => new nn.RMSNorm([2, 2], { eps: 1e-2 }),
  relu: () => new nn.ReLU(),
  gelu: () => new nn.GELU(),
  gelu_tanh: () => new nn.GELU("tanh"),
  silu: () => new nn.SiLU(),
  tanh: () => new nn.Tanh(),
  sigmoid: () => new nn.Sigmoid(),
  identity: () => new nn.Identity(),
  dropout_eval: () => new nn.Dropout(0.5).eval(),
  attention: () => new nn.CausalSelfAttention(8, 2),
  attention_nobias: () => new nn.CausalSelfAttention(6, 3, { bias: false }),
  sequential_mlp: () => new nn.Sequential(new nn.Linear(3, 5), new nn.GELU("tanh"), new nn.Linear(5, 2)),
};

interface RunResult { out: loom.Tensor; inputGrad: loom.Tensor | null; paramGrads: Map<string, loom.Tensor | null> }

function run(c: LayerCase, mode: nn.ExecutionMode): RunResult {
  const m = BUILD[c.name]!();
  m.load_state_dict(Object.fromEntries(Object.entries(c.state).map(([k, v]) => [k, fromArr(v)])));
  const x = fromArr(c.input);
  if (x.is_floating_point()) x.requires_grad_(true);
  const out = nn.with_execution_mode(mode, () => m.call(x)) as loom.Tensor;
  expect(out.isLazy).toBe(false);
  out.mul(fromArr(c.grad_output)).sum().backward();
  return {
    out,
    inputGrad: x.grad as loom.Tensor | null,
    paramGrads: new Map(m.named_parameters().map(([n, p]) => [n, p.grad as loom.Tensor | null])),
  };
}

describe("layers match torch", () => {
  test("every golden case has a builder", () => {
    expect(golden.layers.map((c) => c.name).sort()).toEqual(Object.keys(BUILD).sort());
  });
  for (const c of golden.layers) {
    // attention sums over more terms, so float32 rounding differs a little more from torch
    const tol = c.name.startsWith("attention") || c.name.startsWith("layer_norm") || c.name.startsWith("rms") ? { rtol: 1e-4, atol: 1e-5 } : { rtol: 1e-5, atol: 1e-6 };
    test(`${c.name}: forward and gradients (lazy, default)`, () => {
      const r = run(c, "lazy");
      expectClose(r.out, c.output, { ...tol, what: `${c.name} output` });
      if (c.input_grad) expectClose(r.inputGrad!, c.input_grad, { ...tol, what: `${c.name} input grad` });
      expect([...r.paramGrads.keys()]).toEqual(Object.keys(c.param_grads));
      for (const [n, g] of Object.entries(c.param_grads)) expectClose(r.paramGrads.get(n)!, g!, { ...tol, what: `${c.name} ${n}.grad` });
    });
    test(`${c.name}: eager equals lazy (values and gradients)`, () => {
      const lazy = loom.with_compiler_options({ tolerance: "exact" }, () => run(c, "lazy")); // eager's bits
      const eager = run(c, "eager");
      expectSame(eager.out, lazy.out);
      if (c.input_grad) expectSame(eager.inputGrad!, lazy.inputGrad!);
      for (const [n, g] of lazy.paramGrads) expectSame(eager.paramGrads.get(n)!, g!);
    });
  }
});

describe("layers on LazyTensor inputs", () => {
  test("a LazyTensor input gives a LazyTensor output equal to the eager result", () => {
    const c = golden.layers.find((l) => l.name === "attention")!;
    const m = BUILD.attention!();
    m.load_state_dict(Object.fromEntries(Object.entries(c.state).map(([k, v]) => [k, fromArr(v)])));
    const x = fromArr(c.input);
    const y = m.call(x.lazy());
    expect(y.isLazy).toBe(true);
    expectClose(y.eval(), c.output, { rtol: 1e-4, atol: 1e-5, what: "lazy attention" });
    // bit for bit at "exact" (the default tolerance may run bounded kernels: fused_attention.f32x)
    loom.with_compiler_options({ tolerance: "exact" }, () => expectSame(m.call(x.lazy()).eval(), m.forward_eager(x)));
  });
  test("gradients reach eager parameters through a user-built lazy graph", () => {
    const lin = new nn.Linear(2, 1, { bias: false });
    lin.load_state_dict({ weight: loom.tensor([[2, -1]]) });
    // loss = sum(x W^T) over rows x = [1, 3], [2, 5]: dL/dW = sum of rows = [3, 8]
    const loss = lin.call(loom.tensor([[1, 3], [2, 5]]).float().lazy()).sum();
    expect(loss.isLazy).toBe(true);
    loss.eval().backward();
    expect(lin.weight.grad!.isLazy).toBe(false);
    expect(lin.weight.grad!.tolist()).toEqual([[3, 8]]);
  });
});

describe("torch reprs", () => {
  const R = golden.reprs;
  test("leaf modules", () => {
    expect(new nn.Linear(4, 3).toString()).toBe(R.linear!);
    expect(new nn.Linear(2, 5, { bias: false }).toString()).toBe(R.linear_nobias!);
    expect(new nn.Embedding(10, 4, { padding_idx: 0 }).toString()).toBe(R.embedding!);
    expect(new nn.LayerNorm(8).toString()).toBe(R.layer_norm!);
    expect(new nn.LayerNorm([2, 3], { eps: 1e-6, elementwise_affine: false }).toString()).toBe(R.layer_norm_2d!);
  });
  test("containers and attention", () => {
    expect(new nn.Sequential(new nn.Linear(2, 3), new nn.GELU("tanh"), new nn.Dropout(0.1), new nn.ReLU()).toString()).toBe(R.sequential!);
    expect(new nn.CausalSelfAttention(8, 2).toString()).toBe(R.attention!);
    expect(new nn.ModuleList([new nn.Tanh(), new nn.Sigmoid()]).toString()).toBe(R.module_list!);
    expect(new nn.ModuleDict({ act: new nn.SiLU(), proj: new nn.Linear(1, 1) }).toString()).toBe(R.module_dict!);
  });
});
