/**
 * Eager and lazy execution agree bit for bit (the same kernels run), on every backend, for every op case:
 * forward values, dtypes, shapes, and the gradients of a random projection of the outputs.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { OP_CASES } from "./op_cases.ts";

function run(c: (typeof OP_CASES)[number], inputs: loom.Tensor[], lazy: boolean) {
  const leaves = inputs.map((x) => (x.dtype === "float64" && !c.nondiff ? x.detach().requires_grad_(true) : x.detach()));
  const args = leaves.map((x) => (lazy ? x.lazy() : x));
  const outs = [c.fn(...args)].flat() as any[];
  const values = outs.map((o) => ({ shape: [...o.shape], dtype: o.dtype, data: Array.from(o.dataSync() as Float64Array) }));
  let grads: (number[] | null)[] = [];
  if (!c.nondiff) {
    // loss = sum_i sum(out_i * w_i) with fixed weights w_i = 1 + k/7 (k: flat index mod 5)
    let loss: any = null;
    for (const o of outs) {
      const w = loom.tensor(Array.from({ length: o.numel() }, (_, k) => 1 + (k % 5) / 7), { dtype: o.dtype }).reshape([...o.shape]);
      const s = o.mul(lazy ? w.lazy() : w).sum();
      loss = loss ? loss.add(s) : s;
    }
    loss.backward();
    grads = leaves.map((x) => (x.grad ? Array.from(x.grad.dataSync()) : null));
  }
  return { values, grads };
}

describe.each(BACKENDS)("eager == lazy on %s", (backend) => {
  useBackend(backend);
  for (const c of OP_CASES) {
    test(c.name, () => {
      const inputs = c.inputs();
      const e = run(c, inputs, false);
      const l = run(c, inputs, true);
      expect(l.values).toEqual(e.values);
      expect(l.grads).toEqual(e.grads);
      if (!c.nondiff) expect(e.grads.some((g) => g !== null)).toBe(true);
    });
  }
});
