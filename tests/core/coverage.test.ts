/**
 * The op cases reach every registry op, and the differentiable cases reach every op that has a
 * gradient rule, measured by the js backend's per-op counters (not declared by hand).
 */
import { expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { nativeBackend } from "../../src/backends/native/backend.ts";
import { OP_CASES } from "./op_cases.ts";

/** Ops counted by the backends that ran them (js, and native when it is the cpu backend). */
function traced(run: () => void): Set<string> {
  const stats = [loom.jsBackend.stats, nativeBackend()?.stats].filter((s) => s !== undefined);
  const before = stats.map((s) => new Map(s.byOp));
  run();
  const hit = new Set<string>();
  stats.forEach((s, i) => { for (const [k, v] of s.byOp) if (v > (before[i]!.get(k) ?? 0)) hit.add(k); });
  return hit;
}

test("every registry op is exercised by an op case (forward or backward)", () => {
  const hit = traced(() => {
    for (const c of OP_CASES) {
      const xs = c.inputs().map((x) => (x.dtype === "float64" && !c.nondiff ? x.requires_grad_(true) : x));
      const outs = [c.fn(...xs)].flat() as loom.Tensor[];
      if (!c.nondiff) outs.reduce((acc: loom.Tensor | null, o) => (acc ? acc.add(o.sum()) : o.sum()), null)!.backward();
    }
  });
  const missing = Object.keys(loom.OPS).filter((k) => !hit.has(k));
  expect(missing).toEqual([]);
});

test("every op with a gradient rule runs forward in a differentiable case", () => {
  const hit = traced(() => {
    for (const c of OP_CASES.filter((k) => !k.nondiff)) c.fn(...c.inputs());
  });
  const withGrad = Object.values(loom.OPS).filter((op) => op.grad).map((op) => op.name);
  // slice_backward only appears in backward passes; its own gradient (slice) is checked by second-order cases
  const missing = withGrad.filter((k) => !hit.has(k) && k !== "slice_backward");
  expect(missing).toEqual([]);
});
