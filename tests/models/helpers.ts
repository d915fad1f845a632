/**
 * Shared helpers for the GPT-2 and LoRA tests: the PyTorch reference (fixtures/gpt2_reference.json,
 * written by fixtures/gen_gpt2_fixtures.py) and comparisons.
 */
import { expect } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tensor } from "../../src/lazy/creation.ts";
import type { Tensor } from "../../src/lazy/tensor.ts";

export const FIXTURES = join(import.meta.dir, "fixtures");
export const TINY = join(FIXTURES, "tiny_gpt2");
export const TINY_OPENAI = join(FIXTURES, "tiny_gpt2_openai");
export const TINY_ADAPTER = join(FIXTURES, "tiny_lora_adapter");

interface Arr { shape: number[]; data: number[] }
export interface Reference {
  torch_version: string;
  config: Record<string, unknown>;
  input_ids: number[][];
  labels: number[][];
  logits: Arr;
  loss: number;
  grads: Record<string, Arr>;
  lora: {
    r: number; lora_alpha: number; target_modules: string[];
    logits: Arr; loss: number; grads: Record<string, Arr>; merged_weights: Record<string, number[]>;
  };
}

export const REF: Reference = JSON.parse(readFileSync(join(FIXTURES, "gpt2_reference.json"), "utf8"));
export const ids = (): Tensor => tensor(REF.input_ids, { dtype: "int64" });
export const labels = (): Tensor => tensor(REF.labels, { dtype: "int64" });

/** max |a - b| over two equally long arrays. */
export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

/** Expect t's values within `atol + rtol·|ref|` of the reference (float32 rounding of a different summation order). */
export function expectClose(t: Tensor, ref: Arr | number[], atol = 2e-5, rtol = 1e-4): void {
  const want = Array.isArray(ref) ? ref : ref.data;
  if (!Array.isArray(ref)) expect([...t.shape]).toEqual(ref.shape);
  const got = t.contiguous().dataSync();
  expect(got.length).toBe(want.length);
  const bad: string[] = [];
  for (let i = 0; i < want.length; i++) {
    if (!(Math.abs(got[i]! - want[i]!) <= atol + rtol * Math.abs(want[i]!))) bad.push(`[${i}] ${got[i]} vs ${want[i]}`);
  }
  expect(bad.slice(0, 5)).toEqual([]);
}

/** Expect bit-identical values (same shape, same float bits). */
export function expectBitwise(a: Tensor, b: Tensor): void {
  expect([...a.shape]).toEqual([...b.shape]);
  const x = a.contiguous().dataSync(), y = b.contiguous().dataSync();
  let diff = 0;
  for (let i = 0; i < x.length; i++) if (!Object.is(x[i], y[i])) diff++;
  expect(diff).toBe(0);
}

export function tmp(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `loom-${prefix}-`));
}
