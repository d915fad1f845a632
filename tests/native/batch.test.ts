/**
 * The native command buffer: a batch of steps is ONE FFI submit, runs on the shim's threads while
 * JavaScript goes on, and settles a promise (or a synchronous wait) when done.
 */
import { describe, expect, test } from "bun:test";
import { OPS } from "../../src/graph/registry.ts";
import type { BatchStep } from "../../src/backends/backend.ts";
import { allocData, fromValues } from "../../src/tensor/storage.ts";
import { NATIVE, nativeOrSkip } from "./helpers.ts";

describe.skipIf(!NATIVE)("native command buffer", () => {
  const nb = nativeOrSkip();

  /** A chain of n matmuls [S,S] @ [S,S] (each step reads the previous output). */
  function chain(n: number, S: number): { steps: BatchStep[]; last: () => number[] } {
    const w = fromValues("float32", [S, S], Array.from({ length: S * S }, (_, i) => (i % S === Math.floor(i / S) ? 1 : 0)));
    let x = fromValues("float32", [S, S], Array.from({ length: S * S }, (_, i) => (i % 7) - 3));
    const steps: BatchStep[] = [];
    for (let i = 0; i < n; i++) {
      const out = allocData("float32", [S, S]);
      steps.push({ op: OPS.matmul, attrs: {}, inputs: [x, w], out });
      x = out;
    }
    const final = x;
    return { steps, last: () => Array.from(final.data.subarray(0, 8)) };
  }

  test("one submit per batch, results equal the eager ops", async () => {
    const before = nb.stats.submits;
    const shimBefore = nb.shimCounters().submits;
    const a = fromValues("float32", [4, 3], Array.from({ length: 12 }, (_, i) => i - 5));
    const b = fromValues("float32", [3], [0.5, -2, 3]);
    const s1 = allocData("float32", [4, 3]);
    const s2 = allocData("float32", [4, 3]);
    const s3 = allocData("float32", [4]);
    const sub = nb.submit([
      { op: OPS.mul, attrs: {}, inputs: [a, b], out: s1 },
      { op: OPS.exp, attrs: {}, inputs: [s1], out: s2 },
      { op: OPS.sum, attrs: { dim: [1], keepdim: false }, inputs: [s2], out: s3 },
    ]);
    await sub.done;
    expect(nb.stats.submits - before).toBe(1);
    expect(nb.shimCounters().submits - shimBefore).toBe(1);
    const e1 = nb.run(OPS.mul, [a, b], {}, [4, 3], "float32");
    const e2 = nb.run(OPS.exp, [e1], {}, [4, 3], "float32");
    const e3 = nb.run(OPS.sum, [e2], { dim: [1], keepdim: false }, [4], "float32");
    expect(Array.from(s3.data)).toEqual(Array.from(e3.data));
  });

  test("JavaScript runs while a long command buffer executes", async () => {
    const { steps, last } = chain(40, 512);
    const sub = nb.submit(steps);
    let settled = false;
    sub.done.then(() => { settled = true; });
    // JS work that completes while the plan is still running
    let spins = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < 5) spins++;
    expect(sub.isDone).toBe(false);
    expect(settled).toBe(false);
    expect(spins).toBeGreaterThan(100);
    await sub.done;
    expect(settled).toBe(true);
    expect(last()).toEqual([-3, -2, -1, 0, 1, 2, 3, -3]);
  });

  test("wait() blocks until done; errors surface with the op's message", () => {
    const { steps, last } = chain(4, 64);
    nb.submit(steps).wait();
    expect(last()).toEqual([-3, -2, -1, 0, 1, 2, 3, -3]);
    const x = fromValues("float32", [3], [1, 2, 3]);
    const idx = fromValues("int64", [2], [0, 7]);
    const bad = nb.submit([{ op: OPS.index_select, attrs: { dim: 0 }, inputs: [x, idx], out: allocData("float32", [2]) }]);
    expect(() => bad.wait()).toThrow("[index_select] index 7 is out of bounds for dimension 0 with size 3");
  });

  test("a fused elementwise chain equals the unfused ops", () => {
    const x = fromValues("float32", [2, 5], Array.from({ length: 10 }, (_, i) => i / 3 - 1.5));
    const a = fromValues("float32", [5], [1, -2, 0.5, 3, -1]);
    const out = allocData("float32", [2, 5]);
    // gelu-like: t2 = x*a; t3 = erf(t2); t4 = t2 * t3
    nb.submit([{ op: null, inputs: [x, a], out, chain: [
      { op: OPS.mul, dtype: "float32", args: [0, 1] },
      { op: OPS.erf, dtype: "float32", args: [2] },
      { op: OPS.mul, dtype: "float32", args: [2, 3] },
    ] }]).wait();
    const t2 = nb.run(OPS.mul, [x, a], {}, [2, 5], "float32");
    const t3 = nb.run(OPS.erf, [t2], {}, [2, 5], "float32");
    const t4 = nb.run(OPS.mul, [t2, t3], {}, [2, 5], "float32");
    expect(Array.from(out.data)).toEqual(Array.from(t4.data));
  });
});
