/**
 * Gradients of eager parameters used in lazy code are pending after backward and realized
 * together at the first read: one realize however many parameters there are (realizeStats).
 */
import { expect, test } from "bun:test";
import * as loom from "../../src/index.ts";

test("lazy backward into 4 eager parameters: pending gradients, realized once at the first read", () => {
  const ps = [loom.randn([3, 2]), loom.randn([3]), loom.randn([1, 3]), loom.randn([1])].map((p) => p.requires_grad_());
  const x = loom.randn([5, 2]);
  const h = loom.linear(x.lazy(), ps[0]!.lazy(), ps[1]!.lazy()).tanh();
  const loss = loom.linear(h, ps[2]!.lazy(), ps[3]!.lazy()).square().mean();
  const before = loom.realizeStats.realizes;
  loss.backward();
  expect(loom.realizeStats.realizes - before).toBe(0);
  expect(ps.every((p) => p.grad!.is_pending)).toBe(true);
  ps[0]!.grad!.dataSync(); // the first read computes all four (retained .grad values)
  expect(loom.realizeStats.realizes - before).toBe(1);
  expect(ps.some((p) => p.grad!.is_pending)).toBe(false);
  // same gradients as the eager computation
  const eps = ps.map((p) => p.detach().requires_grad_());
  loom.linear(loom.linear(x, eps[0]!, eps[1]!).tanh(), eps[2]!, eps[3]!).square().mean().backward();
  ps.forEach((p, i) => {
    expect(p.grad!.isLazy).toBe(false);
    expect(p.grad!.tolist()).toEqual(eps[i]!.grad!.tolist());
  });
});
