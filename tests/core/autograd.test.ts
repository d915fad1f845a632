/**
 * Autograd semantics (as torch.autograd): accumulation into .grad, retain_grad, grad modes,
 * detach, leaves, higher-order gradients, allow_unused, grad_outputs, deep graphs, and the
 * bridges between eager and lazy tensors. Every expected gradient is derived by hand.
 */
import { describe, expect, test } from "bun:test";
import {
  LazyTensor, Tensor, autograd, enable_grad, is_grad_enabled, no_grad, set_grad_enabled, tensor, with_compiler_options, zeros,
  type TensorOps,
} from "../../src/index.ts";

type T = TensorOps<any>;
const MODES: [string, (t: Tensor) => T][] = [
  ["eager", (t) => t],
  ["lazy", (t) => t.lazy()],
];
/** A float32 leaf that requires grad, eager or lazy. */
const leafOf = (lift: (t: Tensor) => T) => (v: number[] | number) => lift(tensor(v, { dtype: "float32" })).requires_grad_();

function close(actual: number[], expected: number[], tol = 1e-6): void {
  expect(actual.length).toBe(expected.length);
  actual.forEach((a, i) => expect(Math.abs(a - expected[i]!)).toBeLessThanOrEqual(tol * Math.max(1, Math.abs(expected[i]!))));
}
const vals = (t: T | null): number[] => Array.from(t!.dataSync());

describe.each(MODES)("%s", (mode, lift) => {
  const leaf = leafOf(lift);

  test(".grad accumulates over two backwards (retain_graph)", () => {
    const x = leaf([1, 2, 3]);
    const y = x.mul(x).sum(); // dy/dx = 2x
    y.backward(null, { retain_graph: true });
    expect(x.grad!.tolist()).toEqual([2, 4, 6]);
    y.backward();
    expect(x.grad!.tolist()).toEqual([4, 8, 12]);
    // a fresh graph adds to the existing .grad too: d/dx sum(3x) = 3
    x.mul(3).sum().backward();
    expect(x.grad!.tolist()).toEqual([7, 11, 15]);
    expect(x.grad!.isLazy).toBe(mode === "lazy");
  });

  test("retain_grad keeps .grad of a non-leaf; others stay null", () => {
    const x = leaf([1, 2]);
    const h = x.mul(3).retain_grad(); // h = 3x = [3, 6]
    const k = h.add(1); // not retained
    const loss = h.mul(h).sum().add(k.sum()); // dloss/dh = 2h + 1 = [7, 13]
    loss.backward();
    expect(h.grad!.tolist()).toEqual([7, 13]);
    expect(k.grad).toBeNull();
    expect(x.grad!.tolist()).toEqual([21, 39]); // 3 · dloss/dh
    expect(h.is_leaf).toBe(false);
  });

  test("no_grad: outputs do not require grad; nesting and enable_grad inside", () => {
    const x = leaf([1, 2]);
    const y = no_grad(() => x.mul(2));
    expect(y.requires_grad).toBe(false);
    expect(y.grad_fn).toBeNull();
    expect(y.is_leaf).toBe(true);
    no_grad(() => {
      no_grad(() => expect(is_grad_enabled()).toBe(false));
      expect(is_grad_enabled()).toBe(false); // inner exit restores the outer mode
      const z = enable_grad(() => {
        expect(is_grad_enabled()).toBe(true);
        return x.mul(2);
      });
      expect(z.requires_grad).toBe(true);
      expect(z.grad_fn!.name).toBe("mul");
      expect(x.add(1).requires_grad).toBe(false);
    });
    expect(is_grad_enabled()).toBe(true);
    // an exception inside no_grad restores the mode
    expect(() => no_grad(() => { throw new Error("boom"); })).toThrow("boom");
    expect(is_grad_enabled()).toBe(true);
    set_grad_enabled(false);
    try {
      expect(x.exp().requires_grad).toBe(false);
    } finally {
      set_grad_enabled(true);
    }
  });

  test("async no_grad restores the mode when the promise settles", async () => {
    const x = leaf([1]);
    const r = await no_grad(async () => {
      await Promise.resolve();
      return x.mul(2);
    });
    expect(r.requires_grad).toBe(false);
    expect(is_grad_enabled()).toBe(true);
  });

  test("detach stops the gradient", () => {
    const x = leaf([1, -2, 3]);
    const d = x.detach();
    expect(d.requires_grad).toBe(false);
    expect(d.is_leaf).toBe(true);
    // d/dx sum(x · stop(x)) = stop(x) = x, not 2x
    x.mul(x.detach()).sum().backward();
    expect(x.grad!.tolist()).toEqual([1, -2, 3]);
  });

  test("requires_grad_, is_leaf, grad_fn", () => {
    const a = lift(zeros(2));
    expect(a.requires_grad).toBe(false);
    expect(a.requires_grad_()).toBe(a);
    expect(a.requires_grad).toBe(true);
    expect(a.is_leaf).toBe(true);
    expect(a.grad_fn).toBeNull();
    const b = a.add(1);
    expect(b.is_leaf).toBe(false);
    expect(b.requires_grad).toBe(true);
    expect(b.grad_fn!.name).toBe("add");
    a.requires_grad_(false);
    expect(a.requires_grad).toBe(false);
    expect(a.add(1).requires_grad).toBe(false);
    // ops producing integers or bools record no history
    const c = leaf([1.5, -2]);
    expect(c.gt(0).requires_grad).toBe(false);
    expect(c.argmax().requires_grad).toBe(false);
    expect(c.to("int64").requires_grad).toBe(false);
  });

  test("second derivative of x³ is 6x", () => {
    const x = leaf(3);
    for (const y of [x.pow(3), x.mul(x).mul(x)]) {
      const [g] = autograd.grad(y, x, { create_graph: true }); // 3x² = 27
      expect(g!.requires_grad).toBe(true);
      expect(g!.item()).toBe(27);
      const [gg] = autograd.grad(g!, x); // 6x = 18
      expect(gg!.item()).toBe(18);
    }
  });

  test("d/dx of (d/dx sin x) = -sin x", () => {
    const x = leaf([0.5, -1.25]);
    const [g] = autograd.grad(x.sin().sum(), x, { create_graph: true });
    close(vals(g!), [Math.cos(0.5), Math.cos(-1.25)]);
    const [gg] = autograd.grad(g!.sum(), x);
    close(vals(gg!), [-Math.sin(0.5), -Math.sin(-1.25)]);
  });

  test("mixed partials of f = x·y²", () => {
    const x = leaf(3);
    const y = leaf(5);
    const f = x.mul(y).mul(y);
    const [fx, fy] = autograd.grad(f, [x, y], { create_graph: true });
    expect(fx!.item()).toBe(25); // y²
    expect(fy!.item()).toBe(30); // 2xy
    const [fxx, fxy] = autograd.grad(fx!, [x, y], { retain_graph: true, allow_unused: true });
    expect(fxx === null || fxx.item() === 0).toBe(true); // y² does not depend on x
    expect(fxy!.item()).toBe(10); // 2y
    const [fyx, fyy] = autograd.grad(fy!, [x, y]);
    expect(fyx!.item()).toBe(10); // 2y: mixed partials agree
    expect(fyy!.item()).toBe(6); // 2x
  });

  test("backward with create_graph leaves a differentiable .grad", () => {
    const x = leaf(2);
    x.pow(3).backward(null, { create_graph: true }); // x.grad = 3x² = 12
    expect(x.grad!.item()).toBe(12);
    const g = x.grad!;
    expect(g.requires_grad).toBe(true);
    const [gg] = autograd.grad(g, x); // d/dx 3x² = 6x = 12
    expect(gg!.item()).toBe(12);
  });

  test("autograd.grad does not touch .grad; allow_unused", () => {
    const x = leaf([1, 2]);
    const y = leaf([3, 4]);
    const z = x.mul(2).sum();
    expect(() => autograd.grad(z, [x, y], { retain_graph: true })).toThrow(/input 1\) appears to not have been used/);
    const [gx, gy] = autograd.grad(z, [x, y], { allow_unused: true });
    expect(gx!.tolist()).toEqual([2, 2]);
    expect(gy).toBeNull();
    expect(x.grad).toBeNull();
    expect(y.grad).toBeNull();
  });

  test("grad_outputs for non-scalar outputs", () => {
    const x = leaf([1, 2, 3]);
    const y = x.mul(x); // dy_i/dx_i = 2x_i
    const v = lift(tensor([1, 10, 100], { dtype: "float32" }));
    const [g] = autograd.grad(y, x, { grad_outputs: [v], retain_graph: true });
    expect(g!.tolist()).toEqual([2, 40, 600]); // vᵀJ = v · 2x
    y.backward(v);
    expect(x.grad!.tolist()).toEqual([2, 40, 600]);
    // two outputs at once: d/dx (sum(y) + sum(3x)) = 2x + 3
    const x2 = leaf([1, 2]);
    autograd.backward([x2.mul(x2).sum(), x2.mul(3)], [null, lift(tensor([1, 1], { dtype: "float32" }))]);
    expect(x2.grad!.tolist()).toEqual([5, 7]);
  });

  test("shared subexpressions: y = x·x; z = y + y gives 4x", () => {
    const x = leaf([1, -2]);
    const y = x.mul(x);
    y.add(y).sum().backward();
    expect(x.grad!.tolist()).toEqual([4, -8]);
    // diamond: a = 2x, b = a·a, c = a + b; dc/dx = 2 + 2·2a·... = 2(1 + 2a) = 2 + 8x
    const w = leaf([0.5, 3]);
    const a = w.mul(2);
    a.add(a.mul(a)).sum().backward();
    expect(w.grad!.tolist()).toEqual([6, 26]);
  });

  test("a graph of 5000 chained ops: no stack overflow", () => {
    const x = leaf(1);
    let y = x;
    for (let i = 0; i < 5000; i++) y = y.add(x); // y = 5001 x
    expect(y.item()).toBe(5001);
    y.backward();
    expect(x.grad!.item()).toBe(5001);
    // a chain through unary ops: d/dx of 5000 negations is (-1)^5000 = 1
    const w = leaf(2);
    let u = w;
    for (let i = 0; i < 5000; i++) u = u.neg();
    u.backward();
    expect(w.grad!.item()).toBe(1);
  });

  test("leaf grads own their buffers (no aliasing between leaves or with the given gradient)", () => {
    const x = leaf([1, 2, 3]);
    const y = leaf([4, 5, 6]);
    x.add(y).sum().backward(); // both grads are the same broadcast ones
    no_grad(() => x.grad!.add_(1));
    expect(x.grad!.tolist()).toEqual([2, 2, 2]);
    expect(y.grad!.tolist()).toEqual([1, 1, 1]);
    const b = leaf([1, 2]);
    const gz = lift(tensor([5, 6], { dtype: "float32" }));
    b.add(0).backward(gz);
    no_grad(() => b.grad!.zero_());
    expect(gz.tolist()).toEqual([5, 6]);
    expect(b.grad!.tolist()).toEqual([0, 0]);
  });

  test("gradients reach leaves through integer-valued paths only where differentiable", () => {
    // d/dx sum(x · (x > 0)) = (x > 0): the mask is a constant
    const x = leaf([-1, 2, 0.5]);
    x.mul(x.gt(0).to("float32")).sum().backward();
    expect(x.grad!.tolist()).toEqual([0, 1, 1]);
  });
});

describe("lazy backward", () => {
  test("lazy grads equal eager grads and the hand-derived values", () => {
    // f = sum(sin(x) · x); df/dx = cos(x) · x + sin(x)
    const v = [0.25, -1, 2];
    const want = v.map((a) => Math.cos(a) * a + Math.sin(a));
    const xe = tensor(v, { dtype: "float64", requires_grad: true });
    xe.sin().mul(xe).sum().backward();
    const xl = tensor(v, { dtype: "float64" }).lazy().requires_grad_();
    xl.sin().mul(xl).sum().backward();
    expect(xl.grad).toBeInstanceOf(LazyTensor);
    expect(xe.grad).toBeInstanceOf(Tensor);
    const lazyGrad = with_compiler_options({ tolerance: "exact" }, () => vals(xl.grad!)); // realized with eager's bits
    close(lazyGrad, want, 1e-12);
    close(vals(xe.grad!), want, 1e-12);
    expect(lazyGrad).toEqual(vals(xe.grad!));
  });

  test("eager parameters used in lazy code receive an eager .grad", () => {
    const x = tensor([1, 2, 3], { dtype: "float32", requires_grad: true });
    const y = x.lazy().mul(2).sum();
    expect(y).toBeInstanceOf(LazyTensor);
    y.backward();
    expect(x.grad).toBeInstanceOf(Tensor);
    expect(x.grad!.tolist()).toEqual([2, 2, 2]);
    // mixing: eager operand lifted automatically, gradient 2x + 1 flows back to the eager leaf
    const w = tensor([1, -1], { dtype: "float32", requires_grad: true });
    const l = tensor([0, 0], { dtype: "float32" }).lazy();
    l.add(w as never).mul(w as never).add(w as never).sum().backward();
    expect(w.grad).toBeInstanceOf(Tensor);
    expect(w.grad!.tolist()).toEqual([3, -1]);
  });

  test("backward through lazy_tensor.eval() results", () => {
    // lazy leaf -> lazy ops -> eval (eager) -> eager ops -> backward
    const xl = tensor([1, 2], { dtype: "float32" }).lazy().requires_grad_();
    const e = xl.mul(3).eval(); // e = 3x, an eager Tensor with history
    expect(e).toBeInstanceOf(Tensor);
    expect(e.requires_grad).toBe(true);
    expect(e.is_leaf).toBe(false);
    e.mul(e).sum().backward(); // d/dx (3x)² = 18x
    expect(xl.grad).toBeInstanceOf(LazyTensor);
    expect(xl.grad!.tolist()).toEqual([18, 36]);
    // eager leaf -> lazy -> eval -> eager loss
    const p = tensor([1, 2], { dtype: "float32", requires_grad: true });
    const q = p.lazy().exp().eval();
    q.sum().backward(); // d/dp sum(exp p) = exp p
    expect(p.grad).toBeInstanceOf(Tensor);
    close(vals(p.grad!), [Math.exp(1), Math.exp(2)], 1e-6);
  });

  test("eval under no_grad carries no history", () => {
    const xl = tensor([1, 2], { dtype: "float32" }).lazy().requires_grad_();
    const e = no_grad(() => xl.mul(3).eval());
    expect(e.requires_grad).toBe(false);
    expect(e.tolist()).toEqual([3, 6]);
  });
});
