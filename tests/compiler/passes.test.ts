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
  cse, eliminateIdentities, foldConstants, foldViews, protectOutputs, simplify,
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

test("the full pipeline reaches a fixed point and changes no value", () => {
  const x = lz(2, 3);
  const y = x.mul(1).permute(1, 0).permute(1, 0).add(x.exp()).sub(0).mul(x.full_like(2).mul(0.5));
  const g = simplify(irOf(y), { evaluate });
  expect(opsOf(g)).toEqual(["exp", "add"]);
  expect(structuralKey(simplify(g, { evaluate }))).toBe(structuralKey(makeGraph(g.outputs)));
  expect(bits(y)).toEqual(bits(x.eval().mul(1).permute(1, 0).permute(1, 0).add(x.eval().exp()).sub(0).mul(2 * 0.5)));
});
