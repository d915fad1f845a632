/**
 * native.fused_attention.f32x (native/kernels/fused.c k_fused_attention_f32x; bound in
 * src/backends/native/rows.ts): at the default tolerance a lazy scaled_dot_product_attention runs
 * it, at "exact" the exact kernel. Its softmax rows are fused_softmax.f32x's on the exact kernel's
 * scores, so the output differs from the exact kernel's by at most the contract's rtol on P times
 * Σ p·|v|, plus P·v's own float32 rounding of that perturbation (S·2^-24·Σ p·|v|); both are checked
 * against a float64 reference computed on the host. Causal, additive and boolean masks, a scale,
 * broadcast batch dims and a strided (transposed) key.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { ATTENTION_X_CONTRACT } from "../../src/backends/native/rows.ts";
import { NATIVE } from "../native/helpers.ts";
import { t, useNative, values } from "./helpers.ts";

type L = loom.LazyTensor;
/** The contract's relative bound on P (a bounded contract: checked here, not assumed). */
const RTOL = ATTENTION_X_CONTRACT.kind === "bound" ? ATTENTION_X_CONTRACT.rtol : 0;
const impls = (y: L) => y.plan().instructions.map((i: { impl: string }) => i.impl);

/** softmax(q kᵀ · scale + mask) v in float64 on the host; mask additive (null: none, "causal"). */
function reference(q: Float64Array, k: Float64Array, v: Float64Array, B: number, Lq: number, S: number, E: number, scale: number, mask: ((i: number, j: number) => number) | null): { o: Float64Array; bound: Float64Array } {
  const o = new Float64Array(B * Lq * E), bound = new Float64Array(B * Lq * E);
  const s = new Float64Array(S);
  for (let b = 0; b < B; b++)
    for (let i = 0; i < Lq; i++) {
      let m = -Infinity;
      for (let j = 0; j < S; j++) {
        let d = 0;
        for (let e = 0; e < E; e++) d += q[(b * Lq + i) * E + e]! * k[(b * S + j) * E + e]!;
        s[j] = d * scale + (mask ? mask(i, j) : 0);
        m = Math.max(m, s[j]!);
      }
      let z = 0;
      for (let j = 0; j < S; j++) z += (s[j] = Math.exp(s[j]! - m));
      for (let e = 0; e < E; e++) {
        let acc = 0, mag = 0;
        for (let j = 0; j < S; j++) { const p = s[j]! / z; acc += p * v[(b * S + j) * E + e]!; mag += p * Math.abs(v[(b * S + j) * E + e]!); }
        o[(b * Lq + i) * E + e] = acc;
        bound[(b * Lq + i) * E + e] = mag;
      }
    }
  return { o, bound };
}

describe.skipIf(!NATIVE)("fused_attention.f32x (native)", () => {
  useNative();
  const B = 6, Lq = 19, S = 19, E = 16;
  const qv = values(B * Lq * E, 1, 0, 1), kv = values(B * S * E, 1, 0, 2), vv = values(B * S * E, 2, 0.5, 3);
  const q = t(qv, [2, 3, Lq, E]), k = t(kv, [2, 3, S, E]), v = t(vv, [2, 3, S, E]);
  const f64 = (x: Float32Array) => Float64Array.from(x);

  const cases: [string, () => L, number, ((i: number, j: number) => number) | null][] = [
    ["causal", () => loom.scaled_dot_product_attention(q.lazy() as never, k.lazy() as never, v.lazy() as never, { is_causal: true }) as L, 1 / Math.sqrt(E), (i, j) => (j <= i ? 0 : -Infinity)],
    ["additive mask, scale 0.3", () => {
      const m = t(values(Lq * S, 3, 0, 4), [Lq, S]);
      return loom.scaled_dot_product_attention(q.lazy() as never, k.lazy() as never, v.lazy() as never, { attn_mask: m.lazy() as never, scale: 0.3 }) as L;
    }, 0.3, (i, j) => Math.fround(values(Lq * S, 3, 0, 4)[i * S + j]!)],
    ["boolean mask, key from a transposed buffer", () => {
      const keep = loom.tensor(Array.from({ length: Lq * S }, (_, x) => (x % 5 !== 3) || x % S === 0), { dtype: "bool" }).reshape([Lq, S]);
      const kt = t(kv, [2, 3, S, E]).transpose(2, 3).contiguous().transpose(2, 3); // [.., S, E] with strides of a [.., E, S] buffer
      return loom.scaled_dot_product_attention(q.lazy() as never, kt.lazy() as never, v.lazy() as never, { attn_mask: keep.lazy() as never }) as L;
    }, 1 / Math.sqrt(E), (i, j) => (((i * S + j) % 5 !== 3) || j === 0 ? 0 : -Infinity)],
  ];

  for (const [name, make, scale, mask] of cases) {
    test(`${name}: f32x at the default tolerance, exact at "exact"; both within their bounds of a float64 reference`, () => {
      const y = make();
      expect(impls(y)).toContain("native.fused_attention.f32x");
      const fast = y.eval().dataSync();
      const ye = loom.with_compiler_options({ tolerance: "exact" }, () => {
        const z = make();
        expect(impls(z)).toContain("native.fused_attention.exact");
        return z.eval().dataSync();
      });
      const { o, bound } = reference(f64(qv), f64(kv), f64(vv), B, Lq, S, E, scale, mask);
      let differs = 0;
      for (let i = 0; i < o.length; i++) {
        // the exact kernel: float32 products and roundings of the unfused ops (S·2^-24·Σ p|v| each way)
        const slack = (2 * S + 8) * 2 ** -24 * bound[i]! + 1e-7;
        expect(Math.abs(ye[i]! - o[i]!)).toBeLessThanOrEqual(slack);
        // f32x: P within the contract's rtol, then the same product
        expect(Math.abs(fast[i]! - o[i]!)).toBeLessThanOrEqual(slack + RTOL * bound[i]!);
        if (fast[i] !== ye[i]) differs++;
      }
      expect(differs).toBeGreaterThan(0); // two different kernels ran
    });
  }

  test("a prologue it does not take (exp in the mask) leaves the exact kernel", () => {
    const m = t(values(Lq * S, 1, 0, 7), [Lq, S]);
    const y = loom.scaled_dot_product_attention(q.lazy() as never, k.lazy() as never, v.lazy() as never, { attn_mask: m.lazy().exp() as never }) as L;
    const ids = impls(y);
    expect(ids.some((i) => i.startsWith("native.fused_attention"))).toBe(true);
    expect(ids).not.toContain("native.fused_attention.f32x");
  });
});
