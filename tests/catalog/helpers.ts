/**
 * Shared by the catalog tests: deterministic inputs, a float64 softmax reference, the check of a
 * bounded contract, the implementations a lazy plan chose, and the native-backend setup of a describe.
 */
import { afterAll, beforeAll, expect } from "bun:test";
import * as loom from "../../src/index.ts";
import type { Contract } from "../../src/backends/catalog.ts";
import { set_default_backend } from "../../src/lazy/device.ts";

/** Deterministic float32 values: normal-ish times `scale`, shifted by `shift` (an LCG, not loom's rng). */
export function values(n: number, scale: number, shift = 0, seed = 1): Float32Array {
  const v = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    let u = 0;
    for (let k = 0; k < 4; k++) { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; u += s / 2 ** 32; }
    v[i] = (u - 2) * 1.7 * scale + shift;
  }
  return v;
}

/** A tensor of `shape` over the values. */
export const t = (v: Float32Array | Uint8Array, shape: number[], dtype: "float32" | "bool" = "float32") => loom.tensor(v as never, { dtype }).reshape(shape);

/**
 * Checks a bounded contract elementwise: |y − fl(ref)| ≤ atol + rtol·|fl(ref)| (ref rounded
 * once to the output dtype, float32 unless `float64`, as the contract states), NaN where ref is
 * NaN, the same infinity where it is infinite; throws naming the worst element (after `what`). Returns the largest |y − ref|/ref where ref > 1e-30
 * (above subnormals and cut-offs), for tests that report the measured error.
 */
export function expectWithinContract(y: ArrayLike<number>, ref: ArrayLike<number>, c: Contract, opts: { what?: string; float64?: boolean } = {}): number {
  const what = opts.what ?? "", round = opts.float64 ? (x: number) => x : Math.fround;
  if (c.kind !== "bound") throw new Error("bounded contract expected");
  expect(y.length).toBe(ref.length);
  let worst = -1, at = -1, rel = 0;
  for (let i = 0; i < ref.length; i++) {
    const r = round(ref[i]!), v = y[i]!;
    if (Number.isNaN(r) || !Number.isFinite(r)) {
      if (!Object.is(v, r) && !(Number.isNaN(r) && Number.isNaN(v))) throw new Error(`${what}[${i}] ${v} != ${r}`);
      continue;
    }
    if (r > 1e-30) rel = Math.max(rel, Math.abs(v - ref[i]!) / ref[i]!);
    const excess = Math.abs(v - r) - (c.atol + c.rtol * Math.abs(r));
    if (!(excess <= 0) && (worst < 0 || excess > worst)) { worst = excess; at = i; }
  }
  if (at >= 0) throw new Error(`${what}[${at}] ${y[at]} vs float64 reference ${ref[at]}: outside atol ${c.atol} + rtol ${c.rtol}·|ref|`);
  return rel;
}

/** softmax of each row of n values in float64 (max, exp, sum, quotient; NaN as the decomposition). */
export function softmaxRef(v: ArrayLike<number>, n: number): Float64Array {
  const out = new Float64Array(v.length);
  for (let o = 0; o < v.length; o += n) {
    let m = -Infinity;
    for (let j = 0; j < n; j++) m = Number.isNaN(v[o + j]!) || v[o + j]! > m ? (Number.isNaN(m) ? m : v[o + j]!) : m;
    let z = 0;
    for (let j = 0; j < n; j++) z += Math.exp(v[o + j]! - m);
    for (let j = 0; j < n; j++) out[o + j] = Math.exp(v[o + j]! - m) / z;
  }
  return out;
}

/** rms_norm of each row of n values in float64: x·(1/sqrt(mean(x²) + eps))·w (w null: 1). */
export function rmsRef(x: ArrayLike<number>, n: number, eps: number, w: ArrayLike<number> | null): Float64Array {
  const out = new Float64Array(x.length);
  for (let o = 0; o < x.length; o += n) {
    let s = 0;
    for (let j = 0; j < n; j++) s += x[o + j]! * x[o + j]!;
    const rs = 1 / Math.sqrt(s / n + eps);
    for (let j = 0; j < n; j++) out[o + j] = x[o + j]! * rs * (w ? w[j]! : 1);
  }
  return out;
}

/** Realize the lazy result of `f`: its values, after checking that its plan ran implementation `impl` (`op:id`). */
export function runWith(f: () => loom.LazyTensor, impl: string): Float64Array {
  const y = f();
  expect(impls(y)).toContain(impl);
  return y.eval().dataSync();
}

/** The implementation ids of a lazy result's plan, as `op:impl`. */
export function impls(y: loom.LazyTensor): string[] {
  return y.plan().instructions.map((i) => `${i.op.name}:${i.impl}`);
}

/**
 * In the enclosing describe: the native backend and fresh compiler options `opts` for its tests;
 * the previous backend and the default options after them.
 */
export function useNative(opts: Parameters<typeof loom.set_compiler_options>[0] = {}): void {
  let prev = "";
  beforeAll(() => {
    prev = set_default_backend("native");
    loom.set_compiler_options(opts, true);
  });
  afterAll(() => {
    loom.set_compiler_options({}, true);
    set_default_backend(prev as "js" | "native");
  });
}
