/** Shared helpers for the nn tests: golden decoding and tolerance comparisons. */
import { expect } from "bun:test";
import { readFileSync } from "node:fs";
import * as loom from "../../src/index.ts";

export interface Arr { shape: number[]; dtype: loom.DType; data: number[] }

/** An eager tensor from a golden array (float32 values are exact doubles of float32 numbers). */
export function fromArr(a: Arr): loom.Tensor {
  return loom.tensor(Float64Array.from(a.data), { dtype: a.dtype }).reshape(a.shape);
}

/** Read a JSON golden file next to the caller. */
export function readGolden<T>(url: URL): T {
  return JSON.parse(readFileSync(url, "utf8")) as T;
}

/** Element-wise |a - b| <= atol + rtol·|b|, with the worst offender in the failure message. */
export function expectClose(actual: { shape: readonly number[]; dataSync(): Float64Array } | number[], expected: Arr | number[], opts: { rtol?: number; atol?: number; what?: string } = {}): void {
  const { rtol = 1e-5, atol = 1e-6, what = "" } = opts;
  const a = Array.isArray(actual) ? actual : Array.from(actual.dataSync());
  const e = Array.isArray(expected) ? expected : expected.data;
  if (!Array.isArray(actual) && !Array.isArray(expected)) expect([...actual.shape]).toEqual(expected.shape);
  expect(a.length).toBe(e.length);
  let worst = -1, worstErr = 0;
  for (let i = 0; i < a.length; i++) {
    const err = Math.abs(a[i]! - e[i]!) - (atol + rtol * Math.abs(e[i]!));
    if (err > worstErr || Number.isNaN(a[i]!) !== Number.isNaN(e[i]!)) {
      worst = i;
      worstErr = Number.isNaN(err) ? Infinity : err;
    }
  }
  if (worst >= 0) throw new Error(`${what}: element ${worst}: got ${a[worst]}, expected ${e[worst]} (rtol ${rtol}, atol ${atol})`);
}

/** Bit-equal values and equal shapes (eager vs lazy on the same kernels). */
export function expectSame(a: loom.Tensor, b: loom.Tensor): void {
  expect([...a.shape]).toEqual([...b.shape]);
  expect(Array.from(a.dataSync())).toEqual(Array.from(b.dataSync()));
}
