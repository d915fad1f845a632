/**
 * F.scaled_dot_product_attention(..., { enable_gqa: true }) (torch 2.5): with Hkv < Hq key/value
 * heads, query head h reads kv head ⌊h / (Hq / Hkv)⌋ (k.repeat_interleave(Hq / Hkv, -3), HF
 * repeat_kv). Reference: plain SDPA over k/v heads repeated by hand in JS (index arithmetic, no
 * Loom repeat op), and the k/v gradients summed over each group in JS. Values and gradients on
 * every backend, eager == lazy (bit-equal on js); the lazy plan still fuses the attention;
 * heads that do not divide raise LoomShapeError.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { compile_plan, type LazyTensor } from "../../src/lazy/lazy_tensor.ts";
import { scaled_dot_product_attention as sdpa } from "../../src/lazy/functional.ts";
import { LoomShapeError } from "../../src/tensor/errors.ts";
import { BACKENDS, useBackend } from "../backends.ts";

const [B, Hq, Hkv, L, S, E] = [2, 4, 2, 3, 4, 5];
const REP = Hq / Hkv;

/** Deterministic, irregular values (no RNG): sin of a scaled index. */
const vals = (n: number, seed: number): number[] => Array.from({ length: n }, (_, i) => Math.sin(0.7 * i + seed) * 0.9);
const t = (shape: number[], seed: number) => loom.tensor(vals(shape.reduce((a, b) => a * b, 1), seed), { dtype: "float32" }).reshape(...shape);

/** [B, Hkv, S, E] flat → [B, Hq, S, E] flat: head h takes kv head ⌊h / REP⌋. */
function repeatByHand(x: number[]): number[] {
  const out: number[] = [];
  for (let b = 0; b < B; b++) for (let h = 0; h < Hq; h++) {
    const src = (b * Hkv + Math.floor(h / REP)) * S * E;
    out.push(...x.slice(src, src + S * E));
  }
  return out;
}

/** Gradient of [B, Hq, S, E] summed back onto the Hkv heads it came from. */
function sumGroups(g: ArrayLike<number>): number[] {
  const out = new Array<number>(B * Hkv * S * E).fill(0);
  for (let b = 0; b < B; b++) for (let h = 0; h < Hq; h++) for (let i = 0; i < S * E; i++) {
    out[(b * Hkv + Math.floor(h / REP)) * S * E + i]! += g[(b * Hq + h) * S * E + i]!;
  }
  return out;
}

interface Result { out: number[]; dq: number[]; dk: number[]; dv: number[] }

/** backward of sum(out * w); `gqa`: k/v keep Hkv heads and SDPA repeats them, else repeated by hand. */
function run(gqa: boolean, lazy: boolean, opts: { is_causal?: boolean; mask?: boolean }): Result {
  const q = t([B, Hq, L, E], 1).requires_grad_(true);
  const kRaw = vals(B * Hkv * S * E, 2), vRaw = vals(B * Hkv * S * E, 3);
  const kv = (raw: number[], h: number) => loom.tensor(raw, { dtype: "float32" }).reshape(B, h, S, E).requires_grad_(true);
  const k = gqa ? kv(kRaw, Hkv) : kv(repeatByHand(kRaw), Hq);
  const v = gqa ? kv(vRaw, Hkv) : kv(repeatByHand(vRaw), Hq);
  const w = t([B, Hq, L, E], 4);
  // additive mask, one row per query: a -1e9 on a different key each row, broadcast over B and heads
  const m = opts.mask ? t([1, 1, L, S], 5).mul(0).add(loom.tensor(Array.from({ length: L * S }, (_, i) => (i % S === (Math.floor(i / S) + 1) % S ? -1e9 : 0.25 * (i % 3)))).reshape(1, 1, L, S)) : null;
  const lz = <T extends loom.Tensor>(x: T) => (lazy ? x.lazy() : x) as any;
  const out = sdpa(lz(q), lz(k), lz(v), { is_causal: opts.is_causal, attn_mask: m ? lz(m) : null, enable_gqa: gqa }) as loom.Tensor;
  expect(out.shape).toEqual([B, Hq, L, E]);
  out.mul(lz(w)).sum().backward();
  const g = (x: loom.Tensor) => Array.from(x.grad!.dataSync());
  return { out: Array.from(out.dataSync()), dq: g(q), dk: gqa ? g(k) : sumGroups(g(k)), dv: gqa ? g(v) : sumGroups(g(v)) };
}

function close(got: number[], want: number[], tol: number, what: string): void {
  expect(got.length).toBe(want.length);
  const bad = got.flatMap((x, i) => (Math.abs(x - want[i]!) <= tol * (1 + Math.abs(want[i]!)) ? [] : [`${what}[${i}] ${x} vs ${want[i]}`]));
  expect(bad.slice(0, 5)).toEqual([]);
}

const CASES = { plain: {}, causal: { is_causal: true }, mask: { mask: true } } as const;

describe.each(BACKENDS)("scaled_dot_product_attention enable_gqa on %s", (backend) => {
  useBackend(backend);
  for (const [name, opts] of Object.entries(CASES)) {
    test(`${name}: values and q/k/v gradients equal plain SDPA over hand-repeated heads; eager == lazy`, () => {
      const ref = run(false, false, opts);
      const eager = run(true, false, opts);
      const lazy = run(true, true, opts);
      // the group sums add REP terms in another order than autograd's expand backward: float32 rounding
      for (const key of ["out", "dq", "dk", "dv"] as const) close(eager[key], ref[key], 1e-5, `${name} ${key}`);
      if (backend === "js") expect(lazy).toEqual(eager);
      else for (const key of ["out", "dq", "dk", "dv"] as const) close(lazy[key], eager[key], 1e-5, `${name} lazy ${key}`);
    });
  }

  test("enable_gqa with equal heads is plain SDPA; the lazy GQA plan still fuses the attention", () => {
    const q = t([B, Hq, L, E], 1), k = t([B, Hq, S, E], 2), v = t([B, Hq, S, E], 3);
    expect(Array.from(sdpa(q, k, v, { enable_gqa: true }).dataSync())).toEqual(Array.from(sdpa(q, k, v).dataSync()));
    const kg = t([B, Hkv, S, E], 2).lazy(), vg = t([B, Hkv, S, E], 3).lazy();
    const names = compile_plan([sdpa(q.lazy(), kg, vg, { enable_gqa: true }) as LazyTensor]).instructions.map((i) => i.op.name);
    // the repeated k and v are materialized (one copy each), then one fused attention kernel
    expect(names).toContain("fused_attention");
  });
});

describe("scaled_dot_product_attention enable_gqa errors", () => {
  test("heads that do not divide, k/v head counts that differ and inputs below 3-D raise LoomShapeError", () => {
    const q = t([1, 4, 2, 3], 1);
    expect(() => sdpa(q, t([1, 3, 2, 3], 2), t([1, 3, 2, 3], 3), { enable_gqa: true })).toThrow(LoomShapeError);
    expect(() => sdpa(q, t([1, 3, 2, 3], 2), t([1, 3, 2, 3], 3), { enable_gqa: true })).toThrow(/4 query heads are not divisible by the 3 key\/value heads/);
    expect(() => sdpa(q, t([1, 2, 2, 3], 2), t([1, 1, 2, 3], 3), { enable_gqa: true })).toThrow(/k and v must have the same number of heads/);
    expect(() => sdpa(t([2, 3], 1), t([2, 3], 2), t([2, 3], 3), { enable_gqa: true })).toThrow(LoomShapeError);
  });
});
