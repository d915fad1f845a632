/**
 * Memory planning: a brute-force validator over random interval sets and random graphs (no two
 * buffers live at the same time share bytes, except an in-place write over an input dying there),
 * results of random graphs equal eager bit for bit (so reuse and in-place never corrupt a value),
 * estimate_memory, and the out-of-memory error raised before anything runs.
 */
import { afterEach, describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { jsBackend } from "../../src/backends/js/backend.ts";
import type { LazyTensor } from "../../src/lazy/lazy_tensor.ts";
import { planMemory, validateMemoryPlan, type TransientBuffer } from "../../src/scheduler/memory.ts";
import { LoomOutOfMemoryError, set_memory_limit, with_compiler_options } from "../../src/scheduler/options.ts";
import { bits, planOf, useJs } from "./helpers.ts";

useJs();
afterEach(() => set_memory_limit(null));

describe("offset assignment", () => {
  test("random lifetimes: no overlap while live, peak between the live bound and the naive sum", () => {
    const g = new loom.Generator(11);
    const r = (n: number) => Math.floor(g.uniform() * n);
    for (let trial = 0; trial < 200; trial++) {
      const n = 1 + r(30);
      const bufs: TransientBuffer[] = [];
      for (let i = 0; i < n; i++) {
        const def = r(40);
        // some buffers reuse a dying earlier one in place, as elementwise kernels do
        const cand = bufs.findIndex((b, j) => b.last === def && !bufs.some((c) => c.inplaceOf === j) && b.bytes === 64);
        const inplace = cand >= 0 && r(2) === 0 ? cand : null;
        bufs.push({ bytes: inplace !== null ? 64 : [0, 4, 64, 100, 4096][r(5)]!, def, last: def + r(10), inplaceOf: inplace });
      }
      const plan = planMemory(bufs);
      expect(validateMemoryPlan(bufs, plan)).toEqual([]);
      expect(plan.peak).toBeGreaterThanOrEqual(plan.liveBound);
      expect(plan.peak).toBeLessThanOrEqual(Math.max(plan.naive, 64));
    }
  });

  test("the validator catches an overlap", () => {
    const bufs: TransientBuffer[] = [{ bytes: 64, def: 0, last: 2, inplaceOf: null }, { bytes: 64, def: 1, last: 3, inplaceOf: null }];
    expect(validateMemoryPlan(bufs, { offsets: [0, 0], peak: 64, naive: 128, liveBound: 128 }).length).toBe(1);
  });
});

/** A random graph: a replayable list of ops over a small family of shapes. */
type Op = (xs: any[]) => any;
function randomProgram(seed: number): { ops: Op[]; roots: number[] } {
  const g = new loom.Generator(seed);
  const r = (n: number) => Math.floor(g.uniform() * n);
  const shapes: number[][] = [[4, 6]];
  const ops: Op[] = [];
  const pick = (want?: (s: number[]) => boolean) => {
    const idx = shapes.map((s, i) => i).filter((i) => !want || want(shapes[i]!));
    return idx.length ? idx[r(idx.length)]! : -1;
  };
  const add = (op: Op, shape: number[]) => { ops.push(op); shapes.push(shape); };
  const n = 8 + r(18);
  for (let k = 0; k < n; k++) {
    const a = pick();
    const sa = shapes[a]!;
    switch (r(9)) {
      case 0: { const f = ["exp", "neg", "tanh", "sigmoid", "abs"][r(5)]!; add((xs) => xs[a][f](), sa); break; }
      case 1: case 2: {
        const b = pick((s) => s.length === sa.length && s.every((d, i) => d === sa[i] || d === 1 || sa[i] === 1));
        const f = ["add", "mul", "sub", "maximum"][r(4)]!;
        add((xs) => xs[a][f](xs[b]), sa.map((d, i) => Math.max(d, shapes[b]![i]!)));
        break;
      }
      case 3: add((xs) => xs[a].mul(0.5).add(1), sa); break;
      case 4: if (sa.length === 2) { const f = ["sum", "amax"][r(2)]!; add((xs) => xs[a][f](-1, true), [sa[0]!, 1]); } break;
      case 5: if (sa.length === 2) add((xs) => xs[a].t(), [sa[1]!, sa[0]!]); break;
      case 6: if (sa.length === 2 && sa[1]! > 1) {
        const b = pick((s) => s.length === 2 && s[0] === sa[1]);
        if (b >= 0) add((xs) => xs[a].matmul(xs[b]), [sa[0]!, shapes[b]![1]!]);
      } break;
      case 7: if (sa.length === 2) add((xs) => xs[a].reshape(-1).reshape(sa[1]!, sa[0]!).t(), sa); break;
      case 8: if (sa.length === 2 && sa[0]! > 1) add((xs) => xs[a].narrow(0, 1, sa[0]! - 1), [sa[0]! - 1, sa[1]!]); break;
    }
  }
  const total = ops.length + 1;
  const roots = [total - 1, ...Array.from({ length: r(3) }, () => 1 + r(total - 1))];
  return { ops, roots };
}

function replay<T>(p: { ops: Op[]; roots: number[] }, x: T): T[] {
  const xs: any[] = [x];
  for (const op of p.ops) xs.push(op(xs));
  return p.roots.map((i) => xs[i]);
}

describe("random graphs", () => {
  test("planned workspaces never overlap live buffers, and results equal eager bit for bit", () => {
    loom.manual_seed(5);
    const x = loom.randn([4, 6]);
    let inplace = 0, reused = 0;
    for (let seed = 1; seed <= 60; seed++) {
      const p = randomProgram(seed);
      const eager = replay(p, x).map(bits);
      for (const opts of [{}, { fuse: false, patterns: false }]) {
        with_compiler_options(opts, () => {
          const outs = replay(p, x.lazy()) as LazyTensor[];
          const plan = planOf(outs);
          expect(validateMemoryPlan(plan.transients, plan.memory)).toEqual([]);
          inplace += plan.instructions.filter((i) => i.inplace).length;
          if (plan.memory.peak < plan.memory.naive) reused++;
          expect(loom.realizeAll(outs).map(bits)).toEqual(eager);
        });
      }
    }
    expect(inplace).toBeGreaterThan(0);
    expect(reused).toBeGreaterThan(0);
  });
});

describe("memory estimates and limits", () => {
  const graph = () => {
    const x = loom.randn([32, 32]).lazy();
    return x.exp().matmul(x).tanh().matmul(x.t()).sum(-1);
  };

  test("estimate_memory is the workspace plus the outputs, per device", () => {
    const plan = graph().plan();
    const est = plan.estimate_memory();
    expect(Object.keys(est)).toEqual(["cpu"]);
    expect(est.cpu).toBe(plan.workspaceBytes + plan.outputBytes);
    expect(plan.outputBytes).toBe(32 * 4);
    expect(plan.workspaceBytes).toBeLessThan(plan.memory.naive);
  });

  test("a plan over the memory limit throws before any kernel runs", () => {
    const y = graph();
    const need = y.plan().estimate_memory().cpu!;
    set_memory_limit(need - 1);
    const before = jsBackend.stats.ops;
    expect(() => y.eval()).toThrow(LoomOutOfMemoryError);
    expect(() => y.eval()).toThrow(/memory limit is \d+ bytes; nothing was run/);
    expect(jsBackend.stats.ops).toBe(before);
    expect(y.node.realized).toBeNull();
    set_memory_limit(need);
    expect(y.eval().shape).toEqual([32]);
  });
});
