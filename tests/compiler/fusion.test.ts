/**
 * Fusion is counted (expectKernels) and exact: every fused graph gives the same bits as the
 * unfused ops and as eager execution; patterns whose intermediates are used elsewhere do not fuse.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import type { LazyTensor } from "../../src/lazy/lazy_tensor.ts";
import { bits, expectKernels, expectSameAsUnfused, kernelNames, planOf, useJs } from "./helpers.ts";

useJs();
loom.manual_seed(7);
const T = (...s: number[]) => loom.randn(s);
const x = T(4, 6), y = T(4, 6), col = T(6), w = T(5, 6), b = T(5), res = T(4, 5);
const L = (t: loom.Tensor) => t.lazy();

/** The same function on lazy and eager inputs: fused == unfused == eager, and its kernel count. */
function check(fn: (...a: any[]) => any, inputs: loom.Tensor[], kernels: number, names?: string[]) {
  const outs = () => [fn(...inputs.map(L))].flat() as LazyTensor[];
  const plan = planOf(outs());
  expectKernels(plan, kernels);
  if (names) expect(kernelNames(plan)).toEqual(names);
  expectSameAsUnfused(outs, () => [fn(...inputs)].flat());
  return plan;
}

describe("elementwise", () => {
  test("a chain with broadcasting is one kernel: gelu(x·y + c)", () => {
    check((a, b, c) => a.mul(b).add(c).gelu(), [x, y, col], 1, ["fused_elementwise"]);
  });
  test("a tree with shared leaves and a value used twice is one kernel", () => {
    check((a, b) => { const d = a.sub(b); return a.exp().add(b.abs().log()).mul(d).div(d.mul(d).add(1)); }, [x, y], 1);
  });
  test("views inside the tree (transpose, unsqueeze/expand of a row) are index arithmetic", () => {
    check((a, c) => a.t().exp().t().add(c.unsqueeze(0).neg()), [x, col], 1);
    // an expensive op on a row is not recomputed for every element of the larger space
    check((a, c) => a.t().exp().t().add(c.unsqueeze(0).tanh()), [x, col], 2);
  });
  test("integer, bool and half dtypes round exactly as the unfused ops", () => {
    const i = loom.tensor([[1, -2, 3], [7, 0, -5]]).to("int32");
    check((a) => a.mul(3).add(a.floor_divide(2)).remainder(4).gt(1).logical_and(a.ne(0)), [i], 1);
    const h = T(3, 5).half();
    check((a) => a.mul(1.37).exp().add(a).mul(a.sigmoid()), [h], 1);
    const bf = T(3, 5).bfloat16();
    check((a) => a.add(0.1).mul(a).sqrt().add(1), [bf], 1);
  });
  test("negative: an intermediate that is also an output is materialized (two kernels)", () => {
    const p = planOf([L(x).exp(), L(x).exp().add(1)]);
    expectKernels(p, 2);
  });
});

describe("reductions", () => {
  test("sum(x·x) reads x once: one kernel", () => {
    check((a) => a.mul(a).sum(-1), [x], 1, ["fused_reduce"]);
  });
  test("prologue and epilogue: rsqrt(mean(x²) + eps) is one kernel", () => {
    check((a) => a.mul(a).mean(-1, true).add(1e-5).rsqrt(), [x], 1);
  });
  test("reductions over several and middle dims, amax and amin, keep their order", () => {
    const z = T(3, 4, 5);
    check((a) => a.exp().sum([0, 2]), [z], 1);
    check((a) => a.abs().amax(1).sub(a.amin(1)), [z], 2); // amin's epilogue reads the amax
  });
  test("negative: a reduce input used elsewhere is computed once and read twice", () => {
    const p = planOf([L(x).mul(L(x)), L(x).mul(L(x)).sum(-1)]);
    expectKernels(p, 2);
  });
});

describe("matmul epilogues", () => {
  test("linear + bias + GELU is one kernel", () => {
    check((a, W, c) => loom.linear(a, W, c).gelu(), [x, w, b], 1, ["fused_matmul"]);
  });
  test("linear + bias + residual is one kernel", () => {
    check((a, W, c, r) => r.add(loom.linear(a, W, c)), [x, w, b, res], 1, ["fused_matmul"]);
  });
  test("negative: a product also used elsewhere is not fused", () => {
    const p = planOf([L(x).matmul(L(w).t()), L(x).matmul(L(w).t()).relu()]);
    expect(kernelNames(p)).toEqual(["matmul", "fused_elementwise"]);
  });
});

describe("named patterns", () => {
  const mask = loom.tensor([[true, false, true, true, false, true]]).expand(4, 6);
  test("softmax, with scale and mask", () => {
    check((a) => a.softmax(-1), [x], 1, ["fused_softmax"]);
    check((a) => a.softmax(0), [x], 1, ["fused_softmax"]);
    check((a, m) => a.mul(0.125).masked_fill(m.logical_not(), -Infinity).softmax(-1), [x, mask], 1, ["fused_softmax"]);
  });
  test("layer_norm with and without affine, rms_norm", () => {
    check((a, g, c) => loom.layer_norm(a, [6], g, c), [x, col, T(6)], 1, ["fused_layer_norm"]);
    check((a) => loom.layer_norm(a, [6]), [x], 1, ["fused_layer_norm"]);
    check((a) => loom.layer_norm(a, [4, 6]), [x], 1, ["fused_layer_norm"]);
    check((a, g) => loom.rms_norm(a, [6], g, 1e-5), [x, col], 1, ["fused_rms_norm"]);
    check((a, g) => a.mul(a.mul(a).mean(-1, true).add(1e-5).rsqrt()).mul(g), [x, col], 1, ["fused_rms_norm"]); // W4's spelling
  });
  test("LoRA linear: x Wᵀ + b + s·(x Aᵀ) Bᵀ, with and without bias", () => {
    const A = T(2, 6), B = T(5, 2);
    const lora = (a: any, W: any, c: any, An: any, Bn: any) => loom.linear(a, W, c).add(loom.linear(loom.linear(a, An), Bn).mul(2));
    check(lora, [x, w, b, A, B], 1, ["fused_lora_linear"]);
    check((a, W, An, Bn) => a.matmul(W.t()).add(a.matmul(An.t()).matmul(Bn.t()).mul(0.5)), [x, w, A, B], 1, ["fused_lora_linear"]);
  });
  test("attention: softmax(q kᵀ · scale + causal mask) v is one kernel; with the residual of its projection, two", () => {
    const q = T(2, 3, 5, 4), k = T(2, 3, 5, 4), v = T(2, 3, 5, 4);
    check((a, b2, c) => loom.scaled_dot_product_attention(a, b2, c, { is_causal: true }), [q, k, v], 1, ["fused_attention"]);
    check((a, b2, c) => loom.scaled_dot_product_attention(a, b2, c), [q, k, v], 1, ["fused_attention"]);
    // a causal mask too large to fold at compile time: its logical_not runs inside the kernel
    const ql = T(1, 1, 80, 2);
    check((a) => loom.scaled_dot_product_attention(a, a, a, { is_causal: true }), [ql], 1, ["fused_attention"]);
    const Wo = T(12, 12), bo = T(12), r = T(2, 5, 12);
    check((a, b2, c, W2, c2, rr) => {
      const att = loom.scaled_dot_product_attention(a, b2, c, { is_causal: true }).transpose(1, 2).reshape([2, 5, 12]);
      return rr.add(loom.linear(att, W2, c2));
    }, [q, k, v, Wo, bo, r], 3, ["fused_attention", "fused_elementwise", "fused_matmul"]);
  });
  test("negative: a pattern whose intermediate is used elsewhere is not matched", () => {
    // softmax whose exp is also returned (as backward does): no fused_softmax
    const sm = (a: LazyTensor) => {
      const e = a.sub(a.amax(-1, true)).exp();
      return [e.div(e.sum(-1, true)), e];
    };
    expect(kernelNames(planOf(sm(L(x))))).not.toContain("fused_softmax");
    expectSameAsUnfused(() => sm(L(x)));
    // layer_norm whose centered x is an output
    const ln = (a: LazyTensor) => {
      const d = a.sub(a.mean(-1, true));
      return [d.mul(d.mul(d).mean(-1, true).add(1e-5).rsqrt()), d];
    };
    expect(kernelNames(planOf(ln(L(x))))).not.toContain("fused_layer_norm");
    expectSameAsUnfused(() => ln(L(x)));
    // LoRA whose base product is also used
    const A = T(2, 6), B = T(5, 2);
    const lo = () => {
      const base = L(x).matmul(L(w).t());
      return [base.add(L(x).matmul(L(A).t()).matmul(L(B).t()).mul(2)), base];
    };
    expect(kernelNames(planOf(lo()))).not.toContain("fused_lora_linear");
    expectSameAsUnfused(lo);
  });
  test("a softmax in a training graph (its pieces feed backward) still fuses generically", () => {
    const a = L(x).detach().requires_grad_();
    const s = a.mul(0.5).softmax(-1);
    const loss = s.mul(L(y)).sum();
    loss.backward();
    const p = planOf([loss, a.grad as LazyTensor]);
    expect(kernelNames(p)).not.toContain("fused_softmax");
    expect(p.kernelCount).toBeLessThan(p.unfusedKernels / 2);
  });
});

test("every fused kernel of the unfused baseline count is an op of the graph", () => {
  const p = planOf(L(x).mul(L(y)).add(L(col)).gelu(), { fuse: false, patterns: false });
  expect(p.kernelCount).toBe(p.unfusedKernels);
  expect(bits(L(x).exp())).toEqual(bits(x.exp()));
});
