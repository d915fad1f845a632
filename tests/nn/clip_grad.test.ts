/**
 * clip_grad_norm_ / clip_grad_value_ against hand-computed values (torch's formula:
 * total = ‖(‖g_i‖)‖, coef = max_norm / (total + 1e-6), grads scaled by min(coef, 1)).
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { nn } from "../../src/index.ts";
import { expectClose } from "./helpers.ts";

/** Two parameters with grads [3, 4] (‖·‖₂ = 5) and [[12]] (‖·‖₂ = 12). */
function setup(): [nn.Parameter, nn.Parameter] {
  const a = new nn.Parameter(loom.zeros(2));
  const b = new nn.Parameter(loom.zeros(1, 1));
  a.grad = loom.tensor([3, 4]).float();
  b.grad = loom.tensor([[12]]).float();
  return [a, b];
}

describe("clip_grad_norm_", () => {
  test("L2: total √(5² + 12²) = 13; grads scaled by 1 / (13 + 1e-6)", () => {
    const [a, b] = setup();
    const total = nn.clip_grad_norm_([a, b], 1);
    expect(total.ndim).toBe(0);
    expect(total.item()).toBe(13);
    const c = 1 / (13 + 1e-6);
    expectClose(a.grad!, [3 * c, 4 * c], { rtol: 1e-6, atol: 0, what: "a.grad" });
    expectClose(b.grad!, [12 * c], { rtol: 1e-6, atol: 0, what: "b.grad" });
    // the clipped gradients now have total norm max_norm (up to the 1e-6)
    expect(nn.clip_grad_norm_([a, b], 100).item()).toBeCloseTo(1, 6);
  });
  test("below max_norm nothing changes (coef clamped to 1)", () => {
    const [a, b] = setup();
    expect(nn.clip_grad_norm_([a, b], 20).item()).toBe(13);
    expect(a.grad!.tolist()).toEqual([3, 4]);
    expect(b.grad!.tolist()).toEqual([[12]]);
  });
  test("other norms: inf = max |g| = 12, L1 = 3 + 4 + 12 = 19, L3 = (27 + 64 + 1728)^(1/3)", () => {
    let [a, b] = setup();
    expect(nn.clip_grad_norm_([a, b], 6, Infinity).item()).toBe(12);
    expectClose(a.grad!, [3 * 6 / (12 + 1e-6), 4 * 6 / (12 + 1e-6)], { rtol: 1e-6, atol: 0, what: "inf-clipped" });
    [a, b] = setup();
    expect(nn.clip_grad_norm_([a, b], 100, 1).item()).toBe(19);
    [a, b] = setup();
    expect(nn.clip_grad_norm_([a, b], 100, 3).item()).toBeCloseTo(Math.cbrt(27 + 64 + 1728), 4);
  });
  test("parameters without grad are skipped; no grads gives 0", () => {
    const [a] = setup();
    const c = new nn.Parameter(loom.zeros(3));
    expect(nn.clip_grad_norm_([a, c], 1).item()).toBe(5);
    expect(c.grad).toBeNull();
    expect(nn.clip_grad_norm_([c], 1).item()).toBe(0);
    expect(nn.clip_grad_norm_(a, 100).item()).toBeCloseTo(1, 6); // a single tensor is accepted
  });
  test("error_if_nonfinite", () => {
    const [a] = setup();
    a.grad = loom.tensor([NaN, 1]).float();
    expect(() => nn.clip_grad_norm_([a], 1, 2, { error_if_nonfinite: true })).toThrow(
      "[clip_grad_norm_] The total norm of order 2 for gradients from `parameters` is non-finite",
    );
    expect(Number.isNaN(nn.clip_grad_norm_([a], 1).item())).toBe(true);
  });
  test("works on a model's parameters after backward", () => {
    const lin = new nn.Linear(2, 1);
    lin.load_state_dict({ weight: loom.tensor([[1, 1]]), bias: loom.tensor([0]) });
    lin.call(loom.tensor([[3, 4]]).float()).sum().backward(); // grads: weight [3, 4], bias [1]
    const total = nn.clip_grad_norm_(lin.parameters(), 1);
    expect(total.item()).toBeCloseTo(Math.sqrt(26), 6);
    expectClose(lin.bias!.grad!, [1 / (Math.sqrt(26) + 1e-6)], { rtol: 1e-6, atol: 0, what: "bias grad" });
  });
});

describe("clip_grad_value_", () => {
  test("clamps every element into [-v, v]", () => {
    const [a, b] = setup();
    nn.clip_grad_value_([a, b], 3.5);
    expect(a.grad!.tolist()).toEqual([3, 3.5]);
    expect(b.grad!.tolist()).toEqual([[3.5]]);
  });
});
