/**
 * nn.MultiheadAttention, nn.TransformerEncoderLayer and nn.TransformerEncoder against PyTorch 1.13
 * (transformer_goldens.json from gen_transformer_goldens.py): torch's state dict is loaded with
 * load_state_dict, then the outputs, the attention weights and the gradients of
 * sum(out · g_out) + sum(weights · g_weights) with respect to the inputs and every parameter must
 * match torch. Every case runs on every backend, eagerly and lazily; lazy equals eager bit for
 * bit on js (tolerance "exact") and within float32 tolerance on native.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { nn } from "../../src/index.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { thrown } from "../thrown.ts";
import { expectClose, expectSame, fromArr, readGolden, type Arr } from "./helpers.ts";

interface Case {
  name: string;
  kind: "mha" | "layer" | "encoder";
  ctor: Record<string, unknown>;
  self_attn?: boolean;
  num_layers?: number | null;
  with_norm?: boolean;
  state: Record<string, Arr>;
  query: Arr; key?: Arr; value?: Arr;
  fwd: Record<string, Arr | boolean>;
  output: Arr; g_output: Arr;
  weights?: Arr; g_weights?: Arr;
  query_grad: Arr; key_grad?: Arr; value_grad?: Arr;
  param_grads: Record<string, Arr | null>;
}
const golden = readGolden<{ torch: string; cases: Case[]; reprs: Record<string, string> }>(new URL("./transformer_goldens.json", import.meta.url));

/** The Loom module with the torch constructor arguments of the case (same names, options object). */
function build(c: Case): nn.Module {
  if (c.kind === "mha") {
    const { embed_dim, num_heads, ...opts } = c.ctor as unknown as { embed_dim: number; num_heads: number } & nn.MultiheadAttentionOptions;
    return new nn.MultiheadAttention(embed_dim, num_heads, opts);
  }
  const { d_model, nhead, ...opts } = c.ctor as unknown as { d_model: number; nhead: number } & nn.TransformerEncoderLayerOptions;
  const layer = new nn.TransformerEncoderLayer(d_model, nhead, opts);
  if (c.kind === "layer") return layer;
  const norm = c.with_norm ? new nn.LayerNorm(d_model, { eps: opts.layer_norm_eps ?? 1e-5 }) : null;
  return new nn.TransformerEncoder(layer, c.num_layers!, norm);
}

interface Run { out: loom.Tensor; weights: loom.Tensor | null; grads: Map<string, loom.Tensor | null> }

function run(c: Case, mode: nn.ExecutionMode): Run {
  const m = build(c);
  m.load_state_dict(Object.fromEntries(Object.entries(c.state).map(([k, v]) => [k, fromArr(v)])));
  const fwd = Object.fromEntries(Object.entries(c.fwd).map(([k, v]) => [k, typeof v === "object" ? fromArr(v) : v]));
  const q = fromArr(c.query).requires_grad_(true);
  const k = c.key ? fromArr(c.key).requires_grad_(true) : q;
  const v = c.value ? fromArr(c.value).requires_grad_(true) : q;
  let out: loom.Tensor, weights: loom.Tensor | null = null;
  nn.with_execution_mode(mode, () => {
    if (m instanceof nn.MultiheadAttention) [out, weights] = m.call(q, k, v, fwd);
    else out = (m as nn.TransformerEncoderLayer).call(q, fwd);
  });
  let loss = out!.mul(fromArr(c.g_output)).sum();
  if (weights) loss = loss.add((weights as loom.Tensor).mul(fromArr(c.g_weights!)).sum());
  loss.backward();
  const grads = new Map<string, loom.Tensor | null>([["query", q.grad as loom.Tensor | null]]);
  if (c.key) grads.set("key", k.grad as loom.Tensor | null).set("value", v.grad as loom.Tensor | null);
  for (const [n, p] of m.named_parameters()) grads.set(n, p.grad as loom.Tensor | null);
  return { out: out!, weights, grads };
}

/** The error of `fn` has class `cls` and a message containing `msg`. */
function expectThrown(fn: () => unknown, cls: new (...a: any[]) => Error, msg: string): void {
  const e = thrown(fn);
  expect(e).toBeInstanceOf(cls);
  expect(e.message).toContain(msg);
}

/** Within float32 rounding of torch: sums over the model dim and softmax reorder. */
const TOL = { rtol: 1e-4, atol: 2e-5 };

describe.each(BACKENDS)("transformer modules match torch %s on %s".replace("%s", golden.torch), (backend) => {
  useBackend(backend);
  for (const c of golden.cases) {
    test(`${c.name}: outputs, weights and gradients (lazy and eager)`, () => {
      for (const mode of ["lazy", "eager"] as const) {
        const r = run(c, mode);
        const what = `${c.name} (${mode})`;
        expectClose(r.out, c.output, { ...TOL, what: `${what} output` });
        expect(r.weights === null).toBe(c.weights === undefined);
        if (c.weights) expectClose(r.weights!, c.weights, { ...TOL, what: `${what} weights` });
        expectClose(r.grads.get("query")!, c.query_grad, { ...TOL, what: `${what} query grad` });
        if (c.key_grad) expectClose(r.grads.get("key")!, c.key_grad, { ...TOL, what: `${what} key grad` });
        if (c.value_grad) expectClose(r.grads.get("value")!, c.value_grad, { ...TOL, what: `${what} value grad` });
        expect(Object.keys(c.param_grads).every((n) => r.grads.has(n))).toBe(true);
        for (const [n, g] of Object.entries(c.param_grads)) expectClose(r.grads.get(n)!, g!, { ...TOL, what: `${what} ${n}.grad` });
      }
    });
    test(`${c.name}: eager equals lazy`, () => {
      const exact = backend === "js";
      const lazy = exact ? loom.with_compiler_options({ tolerance: "exact" }, () => run(c, "lazy")) : run(c, "lazy");
      const eager = run(c, "eager");
      const same = (a: loom.Tensor, b: loom.Tensor, what: string) => {
        if (exact) expectSame(a, b);
        else expectClose(a, { shape: [...b.shape], dtype: "float32", data: Array.from(b.dataSync()) }, { rtol: 1.3e-6, atol: 1e-5, what });
      };
      same(lazy.out, eager.out, "output");
      if (eager.weights) same(lazy.weights!, eager.weights, "weights");
      for (const [n, g] of eager.grads) same(lazy.grads.get(n)!, g!, `${n}.grad`);
    });
  }
});

describe("MultiheadAttention on js in float64", () => {
  useBackend("js");
  test("gradients of query, key, value and masked scores match central finite differences (float64, js)", () => {
    loom.manual_seed(11);
    const m = new nn.MultiheadAttention(4, 2, { kdim: 3, vdim: 5, add_bias_kv: true, dtype: "float64" });
    const q = loom.randn([3, 2, 4], { dtype: "float64" }).requires_grad_(true);
    const k = loom.randn([2, 2, 3], { dtype: "float64" }).requires_grad_(true);
    const v = loom.randn([2, 2, 5], { dtype: "float64" }).requires_grad_(true);
    const attn_mask = loom.randn([3, 2], { dtype: "float64" });
    const key_padding_mask = loom.tensor([[false, true], [false, false]]);
    const prev = loom.nn.get_execution_mode();
    nn.set_execution_mode("eager");
    try {
      const fails = loom.gradcheck((a, b, c) => {
        const [o, w] = m.call(a, b, c, { attn_mask, key_padding_mask, average_attn_weights: false });
        return [o, w!];
      }, [q, k, v]);
      expect(fails).toEqual([]);
    } finally {
      nn.set_execution_mode(prev);
    }
  });
});

describe("MultiheadAttention API", () => {
  test("parameter names, shapes and order are torch's (state dict keys of the goldens)", () => {
    for (const c of golden.cases) {
      const sd = build(c).state_dict();
      expect(Object.keys(sd)).toEqual(Object.keys(c.state));
      for (const [k, v] of Object.entries(c.state)) expect([...sd[k]!.shape]).toEqual(v.shape);
    }
  });
  test("torch's init: xavier-uniform projections within ±√(6/(fan_in+fan_out)), zero biases", () => {
    loom.manual_seed(3);
    const m = new nn.MultiheadAttention(8, 2);
    const bound = Math.sqrt(6 / (8 + 24)); // in_proj_weight [24, 8]
    const w = m.in_proj_weight!.dataSync();
    expect(w.every((x) => Math.abs(x) <= bound)).toBe(true);
    expect(Math.max(...w.map(Math.abs))).toBeGreaterThan(bound * 0.8);
    expect(Array.from(m.in_proj_bias!.dataSync()).every((x) => x === 0)).toBe(true);
    expect(Array.from(m.out_proj.bias!.dataSync()).every((x) => x === 0)).toBe(true);
  });
  test("need_weights false returns null; weights rows sum to 1", () => {
    loom.manual_seed(0);
    const m = new nn.MultiheadAttention(4, 2, { batch_first: true });
    const x = loom.randn([2, 3, 4]);
    const [o, w] = m.call(x, x, x, { need_weights: false });
    expect(o.shape).toEqual([2, 3, 4]);
    expect(w).toBeNull();
    const [, w2] = m.call(x, x, x, { average_attn_weights: false });
    expect(w2!.shape).toEqual([2, 2, 3, 3]);
    expectClose(w2!.sum(-1), Array(12).fill(1), { rtol: 0, atol: 1e-6, what: "row sums" });
  });
  test("a LazyTensor input gives lazy outputs equal to the eager ones", () => {
    loom.manual_seed(0);
    const m = new nn.MultiheadAttention(4, 2);
    const x = loom.randn([3, 2, 4]);
    const [o, w] = m.call(x.lazy(), x.lazy(), x.lazy());
    expect(o.isLazy && w!.isLazy).toBe(true);
    const [oe, we] = m.forward_eager(x, x, x);
    expectClose(o.eval(), { shape: [3, 2, 4], dtype: "float32", data: Array.from(oe.dataSync()) }, { rtol: 1e-6, atol: 1e-7, what: "lazy output" });
    expectClose(w!.eval(), { shape: [2, 3, 3], dtype: "float32", data: Array.from(we!.dataSync()) }, { rtol: 1e-6, atol: 1e-7, what: "lazy weights" });
  });
  test("a fully masked query row gives NaN, as torch (both paths)", () => {
    loom.manual_seed(0);
    const m = new nn.MultiheadAttention(4, 2, { batch_first: true });
    const x = loom.randn([1, 2, 4]);
    const kpm = loom.tensor([[true, true]]);
    const [o, w] = m.call(x, x, x, { key_padding_mask: kpm });
    const [o2] = m.call(x, x, x, { key_padding_mask: kpm, need_weights: false });
    for (const t of [o, w!, o2]) expect(Array.from(t.dataSync()).every(Number.isNaN)).toBe(true);
  });
  test("typed errors name the module and the shapes", () => {
    expectThrown(() => new nn.MultiheadAttention(6, 4), loom.LoomValueError, "[MultiheadAttention] embed_dim (6) must be divisible by num_heads (4)");
    const m = new nn.MultiheadAttention(4, 2);
    const x = loom.randn([3, 2, 4]);
    expectThrown(() => m.call(x, loom.randn([3, 2, 5]), x), loom.LoomShapeError, "[MultiheadAttention] key [3, 2, 5] must end in 4");
    expectThrown(() => m.call(x, x, loom.randn([4, 2, 4])), loom.LoomShapeError, "same sequence length");
    expectThrown(() => m.call(x, x, x, { attn_mask: loom.zeros([3, 4], { dtype: "bool" }) }), loom.LoomShapeError, "The shape of the 2D attn_mask is [3, 4], but should be [3, 3].");
    expectThrown(() => m.call(x, x, x, { key_padding_mask: loom.zeros([3, 2], { dtype: "bool" }) }), loom.LoomShapeError, "expecting key_padding_mask shape of [2, 3], but got [3, 2]");
    expectThrown(() => m.call(x, x, x, { attn_mask: loom.zeros([3, 3], { dtype: "int64" }) }), loom.LoomDtypeError, "only bool and floating types of attn_mask are supported, got int64");
    expectThrown(() => m.call(loom.randn([2, 3, 2, 4]), x, x), loom.LoomShapeError, "query should be unbatched 2D or batched 3D");
  });
});

describe("TransformerEncoder API", () => {
  test("modules print as torch's", () => {
    expect(new nn.MultiheadAttention(8, 2).toString()).toBe(golden.reprs.mha!);
    expect(new nn.TransformerEncoderLayer(8, 2, { dim_feedforward: 16, dropout: 0 }).toString()).toBe(golden.reprs.layer!);
    const enc = new nn.TransformerEncoder(new nn.TransformerEncoderLayer(8, 2, { dim_feedforward: 16 }), 2, new nn.LayerNorm(8));
    expect(enc.toString()).toBe(golden.reprs.encoder!);
  });
  test("layers are deep copies: equal values, distinct parameters, the given layer unused", () => {
    loom.manual_seed(1);
    const layer = new nn.TransformerEncoderLayer(8, 2, { dim_feedforward: 16, dropout: 0 });
    const enc = new nn.TransformerEncoder(layer, 3);
    expect(enc.layers.length).toBe(3);
    const sd = layer.state_dict();
    for (const [i, l] of [...enc.layers].entries()) {
      expect(l).toBeInstanceOf(nn.TransformerEncoderLayer);
      for (const [k, p] of l.named_parameters()) {
        expect(p).not.toBe(layer.get_parameter(k));
        expect(p.requires_grad).toBe(true);
        expect(Array.from(p.dataSync())).toEqual(Array.from(sd[k]!.dataSync()));
        if (i > 0) expect(p).not.toBe(enc.layers[0]!.get_parameter(k));
      }
    }
    // writing one copy leaves the others and the original alone
    loom.no_grad(() => enc.layers[0]!.linear1.weight.fill_(0));
    expect(enc.layers[1]!.linear1.weight.dataSync().some((x) => x !== 0)).toBe(true);
    expect(layer.linear1.weight.dataSync().some((x) => x !== 0)).toBe(true);
    expect(enc.parameters().length).toBe(3 * layer.parameters().length);
  });
  test("deepcopy_module keeps ties within the module and the training flag", () => {
    const seq = new nn.Sequential(new nn.Linear(2, 2), new nn.Linear(2, 2)).eval();
    (seq.get(1) as nn.Linear).weight = (seq.get(0) as nn.Linear).weight;
    const c = nn.deepcopy_module(seq);
    expect((c.get(0) as nn.Linear).weight).toBe((c.get(1) as nn.Linear).weight);
    expect((c.get(0) as nn.Linear).weight).not.toBe((seq.get(0) as nn.Linear).weight);
    expect(c.training).toBe(false);
    expect(c.parameters().length).toBe(3);
  });
  test("dropout is active in training only; bad options raise", () => {
    loom.manual_seed(2);
    const layer = new nn.TransformerEncoderLayer(4, 2, { dim_feedforward: 8, dropout: 0.5 });
    const x = loom.randn([3, 2, 4]);
    const a = layer.call(x).dataSync(), b = layer.call(x).dataSync();
    expect(Array.from(a)).not.toEqual(Array.from(b));
    layer.eval();
    expect(Array.from(layer.call(x).dataSync())).toEqual(Array.from(layer.call(x).dataSync()));
    expectThrown(() => new nn.TransformerEncoderLayer(4, 2, { activation: "tanh" as "relu" }), loom.LoomValueError, "activation should be relu/gelu, not tanh");
    expectThrown(() => new nn.TransformerEncoder(layer, -1), loom.LoomValueError, "num_layers must be a non-negative integer");
  });
});
