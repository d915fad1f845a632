/**
 * Every differentiable op: autograd gradients against central finite differences in float64
 * (and second derivatives for the cases marked `second`), on eager tensors and on lazy ones.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { OP_CASES } from "./op_cases.ts";

const cases = OP_CASES.filter((c) => !c.nondiff);

function check(name: string, lazy: boolean, second: boolean) {
  const c = cases.find((k) => k.name === name)!;
  const inputs = c.inputs();
  const diffIdx = c.diff ?? inputs.map((x, i) => (x.dtype === "float64" ? i : -1)).filter((i) => i >= 0);
  const diffInputs = diffIdx.map((i) => inputs[i]!);
  const fn = (...xs: any[]) => {
    const all = inputs.map((x) => x as any);
    diffIdx.forEach((j, k) => { all[j] = xs[k]; });
    const args = lazy ? all.map((x) => x.lazy()) : all;
    return c.fn(...args);
  };
  const failures = loom.gradcheck(fn as any, diffInputs, { check_grad_grad: second, atol: 1e-6, rtol: 1e-4, eps: c.eps });
  expect(failures.slice(0, 3)).toEqual([]);
}

describe("gradcheck, eager", () => {
  for (const c of cases) test(c.name, () => check(c.name, false, false));
});
describe("gradcheck, lazy", () => {
  for (const c of cases) test(c.name, () => check(c.name, true, false));
});
describe("second derivatives (create_graph), eager and lazy", () => {
  for (const c of cases.filter((k) => k.second)) {
    test(`${c.name} eager`, () => check(c.name, false, true));
    test(`${c.name} lazy`, () => check(c.name, true, true));
  }
});
