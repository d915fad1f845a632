/**
 * Shared helpers for the compiler tests: run on the js backend (the one with fused kernels),
 * count kernels, compare bits, and look at graphs pass by pass.
 */
import { afterAll, beforeAll, expect } from "bun:test";
import * as loom from "../../src/index.ts";
import { fromLazy, type Graph } from "../../src/graph/passes/ir.ts";
import { set_default_backend } from "../../src/lazy/device.ts";
import type { LazyTensor } from "../../src/lazy/lazy_tensor.ts";
import { compile_plan } from "../../src/lazy/lazy_tensor.ts";
import { with_compiler_options, type CompilerOptions } from "../../src/scheduler/options.ts";
import type { CompiledPlan } from "../../src/scheduler/plan.ts";

/** Run the enclosing file on the js backend (fused kernels are generated for it). */
export function useJs(): void {
  let prev = "";
  beforeAll(() => { prev = set_default_backend("js"); });
  afterAll(() => { set_default_backend(prev as "js" | "native"); });
}

/** The plan for computing `ts` together must launch exactly `n` kernels (explain on failure). */
export function expectKernels(plan: CompiledPlan, n: number): void {
  if (plan.kernelCount !== n) throw new Error(`expected ${n} kernels, got ${plan.kernelCount}:\n${plan.explain()}`);
}

export function planOf(ts: LazyTensor | LazyTensor[], opts: Partial<CompilerOptions> = {}): CompiledPlan {
  return with_compiler_options(opts, () => compile_plan(Array.isArray(ts) ? ts : [ts]));
}

/** Kernel op names a plan launches, in order. */
export function kernelNames(plan: CompiledPlan): string[] {
  return plan.instructions.map((i) => i.op.name);
}

/** Values as an array of numbers, for bit-exact toEqual (which tells -0 from 0 and NaN apart). */
export function bits(t: loom.Tensor | LazyTensor): number[] {
  return Array.from(t.dataSync());
}

/**
 * Evaluate `make()` (a fresh lazy graph each call) unfused and fused, and eagerly with `eager()`:
 * all three must be bit-equal.
 */
export function expectSameAsUnfused(make: () => LazyTensor[], eager?: () => loom.Tensor[]): void {
  const ref = with_compiler_options({ fuse: false, patterns: false, simplify: false }, () => loom.realizeAll(make()).map(bits));
  const fused = loom.realizeAll(make()).map(bits);
  expect(fused).toEqual(ref);
  if (eager) expect(eager().map(bits)).toEqual(ref);
}

/** The IR of the pending graph below `ts`. */
export function irOf(...ts: LazyTensor[]): Graph {
  return fromLazy(ts.map((t) => t.node));
}

/** Op names of a graph's op nodes, in topological order. */
export function opsOf(g: Graph): string[] {
  return g.nodes.filter((n) => n.op).map((n) => n.op!.name);
}
