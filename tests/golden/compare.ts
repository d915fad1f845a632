/**
 * Comparing a Loom tensor with a golden array written by a PyTorch script (tests/golden,
 * tests/opinfo): non-finite values are stored as the strings "nan", "inf", "-inf".
 */
import type * as loom from "../../src/index.ts";

/** A golden array: shape, dtype and the row-major values. */
export interface GoldenArray { shape: readonly number[]; dtype: loom.DType; data: readonly (number | string | boolean)[] }
export interface Tol { rtol: number; atol: number }

const NONFINITE: Record<string, number> = { nan: NaN, inf: Infinity, "-inf": -Infinity };
/** A golden value as a number ("nan"/"inf"/"-inf" strings, booleans as 0/1). */
export const num = (v: number | string | boolean): number =>
  typeof v === "string" ? NONFINITE[v]! : typeof v === "boolean" ? Number(v) : v;
/** A golden argument with the non-finite strings turned back into numbers (other strings kept). */
export const decodeNonFinite = (s: string): number | string => (s in NONFINITE ? NONFINITE[s]! : s);

const fmt = (v: ArrayLike<number>) => `[${Array.from(v).slice(0, 16).map((x) => +x.toPrecision(8)).join(", ")}${v.length > 16 ? ", ..." : ""}]`;

/**
 * A description of the first difference between `got` and `want`, or null: shape, dtype, then
 * values (integers and bools exactly, -0 equal to 0; floats within atol + rtol·|want|; NaN equals
 * NaN; infinities exactly).
 */
export function mismatch(what: string, got: loom.Tensor, want: GoldenArray, tol: Tol): string | null {
  const shape = [...got.shape];
  if (JSON.stringify(shape) !== JSON.stringify(want.shape)) return `${what}: shape ${JSON.stringify(shape)}, expected ${JSON.stringify(want.shape)}`;
  if (got.dtype !== want.dtype) return `${what}: dtype ${got.dtype}, expected ${want.dtype}`;
  const g = got.dataSync();
  const exact = !want.dtype.startsWith("float");
  for (let i = 0; i < g.length; i++) {
    const w = num(want.data[i]!);
    const v = g[i]!;
    const ok = exact ? v === w // integers: -0 equals 0 here; -0 leaking into floats is caught there
      : !Number.isFinite(w) ? Object.is(v, w) || (Number.isNaN(v) && Number.isNaN(w))
        : Math.abs(v - w) <= tol.atol + tol.rtol * Math.abs(w);
    if (!ok) return `${what}[${i}] (flat): got ${v}, expected ${w}\n  got      ${fmt(g)}\n  expected ${fmt(want.data.map(num))}`;
  }
  return null;
}
