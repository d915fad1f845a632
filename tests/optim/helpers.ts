/** Shared checks of the optimizer tests against torch goldens (optim_goldens*.json). */
import { expect } from "bun:test";
import type * as loom from "../../src/index.ts";
import type { optim } from "../../src/index.ts";
import { expectClose, type Arr } from "../nn/helpers.ts";

/** torch's optimizer state per parameter index: tensors, numbers (step) or null. */
export type GoldenState = Record<string, Record<string, Arr | number | null>>;

/**
 * Each parameter's optimizer state has exactly torch's keys, numbers equal and tensors within
 * `tol` (what: the case name in failure messages).
 */
export function expectState(want: GoldenState, opt: optim.Optimizer<any>, params: readonly loom.Tensor[], tol: { rtol: number; atol: number }, what: string): void {
  params.forEach((p, i) => {
    const w = want[String(i)]!;
    const got = opt.state.get(p)!;
    expect(Object.keys(got).sort()).toEqual(Object.keys(w).sort());
    for (const [k, v] of Object.entries(w)) {
      if (v === null || typeof v === "number") expect(got[k]).toEqual(v);
      else expectClose(got[k] as loom.Tensor, v, { ...tol, what: `${what} state ${i}.${k}` });
    }
  });
}
