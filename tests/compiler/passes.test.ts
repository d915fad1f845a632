/**
 * Each simplification pass on small graphs: the structure before and after, and that the values
 * are unchanged (bit for bit) when the whole pipeline runs.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { OPS } from "../../src/graph/registry.ts";
import { makeGraph, structuralKey, type Graph } from "../../src/graph/passes/ir.ts";
import { legalizeViews } from "../../src/graph/passes/layout.ts";
import {
  cse, eliminateIdentities, foldConstants, foldViews, mergeSliceBackwards, protectOutputs, simplify,
} from "../../src/graph/passes/simplify.ts";
import { jsBackend } from "../../src/backends/js/backend.ts";
import { bits, irOf, opsOf, useJs } from "./helpers.ts";

useJs();
const evaluate = jsBackend.run.bind(jsBackend);
const lz = (...s: number[]) => loom.randn(s).lazy();
const leafCount = (g: Graph) => g.nodes.filter((n) => !n.op).length;

describe("view folding", () => {
  test("reshape of a reshape is one reshape; back to the original shape is none", () => {
    const x = lz(2, 3, 4);
    expect(opsOf(foldViews(irOf(x.reshape(6, 4).reshape(3, 8))))).toEqual(["reshape"]);
    expect(opsOf(foldViews(irOf(x.reshape(6, 4).reshape(2, 3, 4).exp())))).toEqual(["exp"]);
  });

  test("permute of a permute composes; the identity disappears", () => {
    const x = lz(2, 3, 4);
    const g = foldViews(irOf(x.permute(2, 0, 1).permute(2, 0, 1)));
    expect(opsOf(g)).toEqual(["permute"]);
    expect((g.outputs[0]!.attrs as { dims: number[] }).dims).toEqual([1, 2, 0]);
    expect(opsOf(foldViews(irOf(x.transpose(0, 2).transpose(0, 2).neg())))).toEqual(["neg"]);
  });

  test("expand of an expand is one expand; a full slice and contiguous() vanish", () => {
    const x = lz(3, 1);
    expect(opsOf(foldViews(irOf(x.expand(3, 4).expand(2, 3, 4))))).toEqual(["expand"]);
    const y = x._apply(OPS.slice, [], { dim: 0, start: 0, end: 3, step: 1 }).exp();
    expect(opsOf(foldViews(irOf(y)))).toEqual(["exp"]);
    expect(opsOf(foldViews(irOf(x.exp().contiguous().neg())))).toEqual(["exp", "neg"]);
  });
});

describe("identity elimination", () => {
  const f = () => lz(2, 3);
  test("x·1, 1·x, x/1, x^1, x-0, x+(-0), -(-x) become x", () => {
    for (const mk of [(x: any) => x.mul(1), (x: any) => x.mul(1).mul(1), (x: any) => x.div(1), (x: any) => x.pow(1),
      (x: any) => x.sub(0), (x: any) => x.add(-0), (x: any) => x.neg().neg()]) {
      const x = f();
      const g = eliminateIdentities(irOf(mk(x).exp()));
      expect(opsOf(g)).toEqual(["exp"]);
      expect(g.nodes[0]!.leaf).toBe(x.node.realized); // the exp reads x itself
    }
    const one = loom.ones(1).lazy(); // not a literal (a tensor): kept
    expect(opsOf(eliminateIdentities(irOf(f().mul(one))))).toEqual(["mul"]);
  });

  test("x + 0 stays for floats (-0 + 0 is +0) and goes for integers", () => {
    expect(opsOf(eliminateIdentities(irOf(f().add(0))))).toEqual(["add"]);
    const i = loom.tensor([1, -2, 3]).lazy();
    expect(opsOf(eliminateIdentities(irOf(i.add(0).neg())))).toEqual(["neg"]);
    // and the values say why: -0 + 0 = +0
    expect(Object.is(loom.tensor([-0]).lazy().add(0).item(), 0)).toBe(true);
  });

  test("an identity that would lose a broadcast or a promotion is kept", () => {
    const x = lz(3);
    expect(opsOf(eliminateIdentities(irOf(x.mul(loom.ones(2, 3).lazy().mul(1)))))).toEqual(["mul"]);
    expect(opsOf(eliminateIdentities(irOf(x.mul(x.ones_like().expand(2, 3)))))).toContain("mul"); // [3]·1[2,3] -> [2,3]
    const i = loom.tensor([1, 2]).lazy();
    expect(opsOf(eliminateIdentities(irOf(i.mul(1.0 + 0.5 - 0.5).div(1))))).toEqual(["div"]); // int/1 promotes to float
  });
});

describe("constant folding", () => {
  test("ops whose inputs are all constants are computed at compile time", () => {
    const x = lz(4);
    const c = x.full_like(2).mul(3).add(1); // all literals: [4] of 7
    const g = foldConstants(irOf(x.mul(c)), evaluate);
    expect(opsOf(g)).toEqual(["mul"]);
    const k = g.nodes.find((n) => !n.op && n.constant)!;
    expect(Array.from(k.leaf!.data).slice(0, 1)).toEqual([7]);
  });

  test("tensors are inputs, not constants; large results are not folded", () => {
    const x = lz(4);
    expect(opsOf(foldConstants(irOf(x.mul(3).add(1)), evaluate))).toEqual(["mul", "add"]);
    const big = lz(300, 300).full_like(1).exp(); // 90,000 elements > the fold limit (4096)
    expect(opsOf(foldConstants(irOf(big), evaluate))).toEqual(["exp"]);
  });

  test("the causal mask's logical_not is folded in attention", () => {
    const q = lz(1, 1, 4, 2);
    const a = loom.scaled_dot_product_attention(q, q, q, { is_causal: true });
    expect(opsOf(irOf(a))).toContain("logical_not");
    expect(opsOf(foldConstants(irOf(a), evaluate))).not.toContain("logical_not");
  });
});

describe("common subexpressions and dead nodes", () => {
  test("equal ops on the same inputs are computed once", () => {
    const x = lz(3);
    const g = cse(irOf(x.exp().add(x.exp())));
    expect(opsOf(g)).toEqual(["exp", "add"]);
    expect(g.outputs[0]!.inputs[0]).toBe(g.outputs[0]!.inputs[1]);
  });

  test("a tensor lifted twice is one leaf; structural constants merge, arbitrary values do not", () => {
    const t = loom.randn([3]);
    const g = cse(irOf(t.lazy().mul(0.5).add(t.lazy().mul(0.5))));
    expect(opsOf(g)).toEqual(["mul", "add"]);
    expect(leafCount(g)).toBe(2);
    // 0.1 is not merged: an Adam bias correction equal to 1 - β at step 1 must not change the plan
    expect(leafCount(cse(irOf(t.lazy().mul(0.1).add(t.lazy().mul(0.1)))))).toBe(3);
  });

  test("rewrites leave no dead nodes", () => {
    const x = lz(3);
    const g = eliminateIdentities(irOf(x.mul(1).exp()));
    expect(g.nodes.map((n) => n.op?.name ?? "leaf")).toEqual(["leaf", "exp"]);
  });
});

describe("outputs and layouts", () => {
  test("an output simplified into an input gets a copy (x·1 is a new tensor)", () => {
    const src = loom.tensor([1, 2, 3]);
    const g0 = irOf(src.lazy().mul(1));
    const g = protectOutputs(g0, eliminateIdentities(g0));
    expect(opsOf(g)).toEqual(["contiguous"]);
    const y = src.lazy().mul(1).eval();
    src.add_(10);
    expect(y.tolist()).toEqual([1, 2, 3]);
  });

  test("a view the strides cannot express gets a copy before it", () => {
    const x = lz(3, 4);
    const g = legalizeViews(irOf(x.t().reshape(12)));
    expect(opsOf(g)).toEqual(["permute", "contiguous", "reshape"]);
    expect(bits(x.t().reshape(12))).toEqual(bits(x.eval().t().reshape(12)));
  });
});

describe("sums of slice_backward", () => {
  /** slice_backward of `t` into zeros of `shape` at [start, end) of `dim` (a split piece's gradient). */
  const sb = (t: any, shape: number[], dim: number, start: number, end: number) =>
    t._apply(OPS.slice_backward, [], { dim, start, end, step: 1, input_shape: shape });
  const f32 = { dtype: "float32" as const };

  test("a split's gradient (q, k, v) becomes one cat plus 0, and the bits stay", () => {
    const shape = [3, 12];
    const [q, k, v] = [0, 1, 2].map(() => loom.randn([3, 4]));
    q!.dataSync(); // values on the host
    const make = (a: any, b: any, c: any) => sb(a, shape, 1, 0, 4).add(sb(b, shape, 1, 4, 8)).add(sb(c, shape, 1, 8, 12));
    const y = make(q!.lazy(), k!.lazy(), v!.lazy());
    const g = mergeSliceBackwards(irOf(y));
    expect(opsOf(g)).toEqual(["cat", "add"]);
    expect(bits(y)).toEqual(bits(make(q, k, v)));
    // any order of the adds and pieces, a run that is not the whole dim: a slice_backward of the cat
    const z = sb(v!.lazy(), shape, 1, 6, 10).add(sb(q!.lazy(), shape, 1, 2, 6));
    expect(opsOf(mergeSliceBackwards(irOf(z)))).toEqual(["cat", "slice_backward", "add"]);
    expect(bits(z)).toEqual(bits(sb(v, shape, 1, 6, 10).add(sb(q, shape, 1, 2, 6))));
  });

  test("−0 in a piece comes out +0, as the sum makes it", () => {
    const a = loom.tensor([[-0, 1], [2, -0]], f32), b = loom.tensor([[-0, -3], [4, 5]], f32);
    const y = sb(a.lazy(), [2, 4], 1, 0, 2).add(sb(b.lazy(), [2, 4], 1, 2, 4));
    expect(opsOf(mergeSliceBackwards(irOf(y)))).toEqual(["cat", "add"]);
    const got = Array.from(y.eval().dataSync());
    expect(got).toEqual([0, 1, 0, -3, 2, 0, 4, 5]);
    expect(got.map((v) => Object.is(v, -0))).toEqual(new Array(8).fill(false));
  });

  test("left alone: overlapping ranges, a gap, other dims, a piece used elsewhere", () => {
    const shape = [2, 8], [a, b] = [loom.randn([2, 4]).lazy(), loom.randn([2, 4]).lazy()];
    const c = loom.randn([1, 8]).lazy();
    expect(opsOf(mergeSliceBackwards(irOf(sb(a, shape, 1, 0, 4).add(sb(b, shape, 1, 3, 7)))))).toEqual(["slice_backward", "slice_backward", "add"]);
    expect(opsOf(mergeSliceBackwards(irOf(sb(a, shape, 1, 0, 4).add(sb(b, [2, 9], 1, 5, 9).narrow(1, 0, 8)))))).not.toContain("cat");
    expect(opsOf(mergeSliceBackwards(irOf(sb(a, [3, 8], 1, 0, 4).add(sb(c, [3, 8], 0, 2, 3)))))).not.toContain("cat");
    const p = sb(a, shape, 1, 0, 4);
    expect(opsOf(mergeSliceBackwards(irOf(p.add(sb(b, shape, 1, 4, 8)), p)))).not.toContain("cat");
  });

  test("a lazy fused-qkv backward: no slice_backward left in the plan, gradients as the eager ones", () => {
    loom.manual_seed(4);
    const x = loom.randn([5, 6]), w = loom.randn([6, 9]);
    const grad = (lazy: boolean) => {
      const X = lazy ? x.lazy().requires_grad_(true) : x.clone().requires_grad_(true);
      const [q, k, v] = (X as any).matmul(lazy ? w.lazy() : w).split(3, -1);
      const loss = q.mul(k).add(v.tanh()).sum();
      return loom.autograd.grad(loss, [X])[0] as any;
    };
    const g = grad(true);
    const ops = g.plan().instructions.map((i: { op: { name: string } }) => i.op.name);
    expect(ops).toContain("cat");
    expect(ops).not.toContain("slice_backward");
    expect(bits(g)).toEqual(bits(grad(false)));
  });
});

test("the full pipeline reaches a fixed point and changes no value", () => {
  const x = lz(2, 3);
  const y = x.mul(1).permute(1, 0).permute(1, 0).add(x.exp()).sub(0).mul(x.full_like(2).mul(0.5));
  const g = simplify(irOf(y), { evaluate });
  expect(opsOf(g)).toEqual(["exp", "add"]);
  expect(structuralKey(simplify(g, { evaluate }))).toBe(structuralKey(makeGraph(g.outputs)));
  expect(bits(y)).toEqual(bits(x.eval().mul(1).permute(1, 0).permute(1, 0).add(x.eval().exp()).sub(0).mul(2 * 0.5)));
});
