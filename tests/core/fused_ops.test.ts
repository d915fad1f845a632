/**
 * Fused registry ops equal their decomposition (the correctness reference).
 */
import { expect, test } from "bun:test";
import * as loom from "../../src/index.ts";

function close(a: loom.Tensor, b: loom.Tensor, tol: number) {
  expect(a.shape).toEqual(b.shape);
  const x = a.dataSync(), y = b.dataSync();
  let worst = 0;
  for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs(x[i]! - y[i]!));
  expect(worst).toBeLessThan(tol);
}

test("lora_linear == x Wᵀ + b + s (x Aᵀ) Bᵀ, values and gradients (float64)", () => {
  loom.manual_seed(3);
  const mk = (...s: number[]) => loom.randn(s, { dtype: "float64" }).requires_grad_();
  const [x, W, A, B, b] = [mk(2, 3, 6), mk(5, 6), mk(2, 6), mk(5, 2), mk(5)];
  const fused = loom.lora_linear(x!, W!, A!, B!, 4, b!);
  const ref = loom.linear(x!, W!, b!).add(loom.linear(loom.linear(x!, A!), B!).mul(4));
  close(fused, ref, 1e-12);
  const gf = loom.autograd.grad(fused.mul(fused).sum(), [x!, W!, A!, B!, b!]);
  const gr = loom.autograd.grad(ref.mul(ref).sum(), [x!, W!, A!, B!, b!]);
  gf.forEach((g, i) => close(g!, gr[i]!, 1e-10));
});

test("lora_linear with B = 0 equals the base linear (LoRA's zero init)", () => {
  const x = loom.randn([4, 3]);
  const W = loom.randn([2, 3]);
  const y = loom.lora_linear(x, W, loom.randn([2, 3]), loom.zeros(2, 2), 8);
  expect(y.tolist()).toEqual(loom.linear(x, W).tolist());
});

test("lora_linear rejects mismatched shapes naming every operand", () => {
  const x = loom.randn([4, 3]);
  expect(() => loom.lora_linear(x, loom.randn([2, 3]), loom.randn([2, 4]), loom.randn([2, 2]), 1)).toThrow(
    "[lora_linear] shapes x [4, 3], W [2, 3], A [2, 4], B [2, 2]",
  );
});
