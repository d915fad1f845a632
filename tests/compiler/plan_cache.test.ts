/**
 * The plan cache's fast path (scheduler/fingerprint.ts): a lazy graph whose fingerprint was seen
 * before binds the cached plan without running the passes. Graphs that differ in anything
 * simplification looks at (scalars it folds or eliminates, folded values, leaves sharing storage,
 * roots, kept values, compiler options) must not share a recipe; results are compared with the
 * eager ops bit for bit (tolerance "exact").
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { clear_plan_cache, planCacheStats } from "../../src/scheduler/compile.ts";
import { get_compiler_options, set_compiler_options, with_compiler_options } from "../../src/scheduler/options.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { bits } from "./helpers.ts";

describe.each(BACKENDS)("plan cache fast path (%s)", (name) => {
  useBackend(name);
  let prev = get_compiler_options();
  beforeAll(() => {
    prev = get_compiler_options();
    set_compiler_options({ tolerance: "exact" });
  });
  afterAll(() => set_compiler_options(prev, true));

  test("the same graph over other buffers is a fast hit and computes the new values", () => {
    clear_plan_cache();
    for (let i = 0; i < 3; i++) {
      const x = loom.randn([5, 7]), w = loom.randn([7]);
      const y = x.lazy().mul(w.lazy()).exp().sum(-1).eval();
      expect(bits(y)).toEqual(bits(x.mul(w).exp().sum(-1)));
    }
    expect(planCacheStats.misses).toBe(1);
    expect(planCacheStats.fastHits).toBe(2);
  });

  test("scalars that simplification removes (x·1, x+(-0), x-0) are part of the fingerprint", () => {
    const x = loom.randn([6]);
    const f = (t: any, s: number) => t.mul(s).add(s).sub(s);
    const scalars = [1, -0, 0, 2, 0.3];
    // every order: the first graph's recipe must never compute the second (x·1 has no mul, x·2 has one)
    for (const a of scalars) {
      for (const b of scalars) {
        clear_plan_cache();
        expect(bits(f(x.lazy(), a).eval())).toEqual(bits(f(x, a)));
        expect(bits(f(x.lazy(), b).eval())).toEqual(bits(f(x, b)));
      }
    }
    // float32 x^2 becomes x·x, x^1 becomes x: exponents are part of the fingerprint too
    const pos = x.abs().add(0.5);
    for (const a of [2, 1, 3, 0.5]) {
      for (const b of [2, 1, 3, 0.5]) {
        clear_plan_cache();
        expect(bits(pos.lazy().pow(a).eval())).toEqual(bits(pos.pow(a)));
        expect(bits(pos.lazy().pow(b).eval())).toEqual(bits(pos.pow(b)));
      }
    }
    // 0.3 and 0.7 are values simplification never looks at: one recipe serves both
    clear_plan_cache();
    x.lazy().mul(0.3).eval();
    const y = x.lazy().mul(0.7).eval();
    expect(planCacheStats.fastHits).toBe(1);
    expect(bits(y)).toEqual(bits(x.mul(0.7)));
  });

  test("a folded constant that simplifies otherwise this time is computed by the full path", () => {
    const x = loom.randn([6]);
    const f = (a: number, b: number) => {
      const y = x.lazy();
      return y.mul(y.full_like(a).add(b)).eval();
    };
    clear_plan_cache();
    // 0.1 + 0.9 folds to exactly 1 in float32 (0.1f + 0.9 = 1.0000000015 rounds to 1): x·1 is x
    expect(bits(f(0.1, 0.9))).toEqual(bits(x));
    // the same fingerprint, but 0.2 + 0.7 folds to 0.9: the recipe made for 1 must not be used
    const r2 = f(0.2, 0.7);
    expect(planCacheStats.fastHits).toBe(0);
    expect(bits(r2)).toEqual(bits(x.mul(x.full_like(0.2).add(0.7))));
    expect(bits(r2)).not.toEqual(bits(x));
    // 0.3 + 0.4 folds to another value simplification ignores: the new recipe serves it
    const r3 = f(0.3, 0.4);
    expect(planCacheStats.fastHits).toBe(1);
    expect(bits(r3)).toEqual(bits(x.mul(x.full_like(0.3).add(0.4))));
  });

  test("leaves over one buffer are one leaf (CSE): a graph over two buffers is another fingerprint", () => {
    const x = loom.randn([5]), other = loom.randn([5]);
    const f = (second: (a: loom.Tensor) => loom.Tensor) => {
      const a = x.lazy().exp();
      const ae = a.eval(); // a's node is now a leaf over ae's buffer
      return a.mul(second(ae).lazy()).eval();
    };
    const ex = x.exp();
    for (let i = 0; i < 2; i++) {
      expect(bits(f((ae) => ae))).toEqual(bits(ex.mul(ex))); // both leaves view one buffer, one layout
      expect(bits(f(() => other))).toEqual(bits(ex.mul(other)));
    }
    const t = loom.randn([8]);
    const g = (p: loom.Tensor, q: loom.Tensor) => p.lazy().mul(q.lazy()).add(p.lazy()).eval();
    const pairs: [loom.Tensor, loom.Tensor][] = [
      [t.narrow(0, 0, 4), t.narrow(0, 4, 4)], [x.narrow(0, 0, 4), other.narrow(0, 0, 4)], [t.narrow(0, 0, 4), t.narrow(0, 0, 4)],
      [t.narrow(0, 1, 4), t.narrow(0, 3, 4)], [t.narrow(0, 0, 4), t.narrow(0, 4, 4)], [other.narrow(0, 1, 4), x.narrow(0, 1, 4)],
    ];
    for (const [p, q] of pairs) expect(bits(g(p, q))).toEqual(bits(p.mul(q).add(p)));
    // many leaves (past the short list the walk scans): the same checks
    const many = Array.from({ length: 20 }, () => loom.randn([4]));
    const h = (p: loom.Tensor, q: loom.Tensor) => many.reduce((acc: any, m) => acc.add(m.lazy()), p.lazy().mul(q.lazy())).eval();
    const hEager = (p: loom.Tensor, q: loom.Tensor) => many.reduce((acc, m) => acc.add(m), p.mul(q));
    for (const [p, q] of [...pairs, ...pairs]) expect(bits(h(p, q))).toEqual(bits(hEager(p, q)));
    const many5 = Array.from({ length: 20 }, () => loom.randn([5]));
    const f2 = (second: (a: loom.Tensor) => loom.Tensor) => {
      const a = many5.reduce((acc: any, m) => acc.add(m.lazy()), x.lazy()).exp();
      const ae = a.eval();
      return many5.reduce((acc: any, m) => acc.mul(m.lazy()), a).mul(second(ae).lazy()).eval();
    };
    const ae = many5.reduce((acc, m) => acc.add(m), x).exp();
    const ref = (b: loom.Tensor) => many5.reduce((acc, m) => acc.mul(m), ae).mul(b);
    for (let i = 0; i < 2; i++) {
      expect(bits(f2((t) => t))).toEqual(bits(ref(ae)));
      expect(bits(f2(() => other))).toEqual(bits(ref(other)));
    }
  });

  test("graphs that differ only in attrs (reduced dim, slice start, permutation) are told apart", () => {
    const x = loom.randn([4, 4]), v = loom.randn([9]);
    for (let i = 0; i < 2; i++) {
      for (const d of [0, 1]) expect(bits(x.lazy().sum(d).exp().eval())).toEqual(bits(x.sum(d).exp()));
      for (const s of [0, 2, 5]) expect(bits(v.lazy().narrow(0, s, 4).exp().eval())).toEqual(bits(v.narrow(0, s, 4).exp()));
      for (const keep of [true, false]) expect(bits(x.lazy().amax(1, keep).exp().eval())).toEqual(bits(x.amax(1, keep).exp()));
      expect(bits(x.lazy().permute(1, 0).mul(x.lazy()).eval())).toEqual(bits(x.permute(1, 0).mul(x)));
      expect(bits(x.lazy().permute(0, 1).mul(x.lazy()).eval())).toEqual(bits(x.mul(x)));
    }
  });

  test("several roots: each output goes to its own tensor, in the order asked", () => {
    const x = loom.randn([3, 4]);
    for (let i = 0; i < 2; i++) {
      const a = x.lazy().exp(), b = x.lazy().sum(0);
      const [ra, rb] = loom.realizeAll([a, b]);
      expect(bits(ra!)).toEqual(bits(x.exp()));
      expect(bits(rb!)).toEqual(bits(x.sum(0)));
      const c = x.lazy().exp(), d = x.lazy().sum(0);
      const [rd, rc] = loom.realizeAll([d, c]);
      expect(bits(rc!)).toEqual(bits(x.exp()));
      expect(bits(rd!)).toEqual(bits(x.sum(0)));
    }
  });

  test("values kept for backward are bound on a fast hit too (gradients equal eager)", () => {
    for (let i = 0; i < 3; i++) {
      const w0 = loom.randn([5]);
      const we = w0.clone().requires_grad_(), wl = w0.clone().requires_grad_();
      we.mul(we).exp().mul(we).sum().backward();
      const s = wl.lazy().mul(wl.lazy()).exp().mul(wl.lazy()).sum();
      s.eval();
      s.backward();
      expect(bits(wl.grad!)).toEqual(bits(we.grad!));
    }
  });

  test("compiler options are part of the fingerprint", () => {
    const x = loom.randn([4, 4]);
    const g = () => x.lazy().mul(2).exp();
    expect(g().plan().kernelCount).toBe(1);
    expect(with_compiler_options({ fuse: false }, () => g().plan().kernelCount)).toBe(2);
    expect(g().plan().kernelCount).toBe(1);
  });

  test("a size-1 dimension's stride never enters a plan key (issue 11): one compile, right values", () => {
    const a = loom.randn([4, 4]).index("0:1"); // [1, 4], strides [4, 1]
    const b = loom.randn([3, 8]).index("1:2", "0:4"); // [1, 4], strides [8, 1], offset 8
    const c = loom.randn([4, 1]).t(); // [1, 4], strides [1, 1]
    const f = (t: loom.Tensor) => t.lazy().mul(3).add(1).eval();
    f(a);
    const m0 = planCacheStats.misses;
    for (const t of [b, c]) expect(bits(f(t))).toEqual(bits(t.mul(3).add(1)));
    expect(planCacheStats.misses - m0).toBe(0);
  });
});
