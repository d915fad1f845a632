/**
 * Every op case of tests/core/op_cases.ts on device "cuda" (float64 stays float64 on CUDA):
 * eager on the device against the js backend's float64 reference, and lazy (the compiler's fused
 * programs and reductions) against eager on the device, values and gradients.
 * Tolerances: CUDA's double transcendental functions are within 2 ulp of double (CUDA C
 * Programming Guide, Mathematical Functions), sums and cuBLAS's dgemm add in other orders than
 * the js reference: 1e-10 relative plus 1e-12 absolute covers both with margin for these sizes.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { set_default_backend } from "../../src/lazy/device.ts";
import { OP_CASES } from "../core/op_cases.ts";
import { CUDA, mismatch } from "./device.ts";

const TOL = { atol: 1e-12, rtol: 1e-10 };
/**
 * Cases whose op is float32 with float32 accumulation on the device (as on the CPU), against the
 * js reference's float64 sum: quantized_linear's QUANT_ERROR_BOUND, rtol 2^-24 plus
 * (K + 16)·2^-24·S. In op_cases.ts K = 64, |x| ≤ 1, |w| ≤ 8·2^-6 (Q4_0_W), |b| ≤ 1, so
 * S ≤ 64/8 + 1 = 9 and the bound is below 4.3e-5; its gradient (N = 3 terms) is far smaller.
 */
const REF_TOL: Record<string, typeof TOL> = { quantized_linear: { atol: 4.3e-5, rtol: 2 ** -24 } };

function run(c: (typeof OP_CASES)[number], inputs: loom.Tensor[], lazy: boolean, device: "cpu" | "cuda") {
  const leaves = inputs.map((x) => {
    const d = device === "cuda" ? x.detach().to("cuda") : x.detach();
    return x.dtype === "float64" && !c.nondiff ? d.detach().requires_grad_(true) : d.detach();
  });
  const args = leaves.map((x) => (lazy ? x.lazy() : x));
  const outs = [c.fn(...args)].flat() as any[];
  const values = outs.map((o) => ({ shape: [...o.shape], dtype: o.dtype, device: o.device, data: Array.from(o.dataSync() as Float64Array) }));
  let grads: (number[] | null)[] = [];
  if (!c.nondiff) {
    // loss = Σ_i Σ out_i · w_i with fixed weights w_i = 1 + k/7 (k: flat index mod 5), as tests/core/eager_lazy.test.ts
    let loss: any = null;
    for (const o of outs) {
      const w = loom.tensor(Array.from({ length: o.numel() }, (_, k) => 1 + (k % 5) / 7), { dtype: o.dtype, device: o.device }).reshape([...o.shape]);
      const s = o.mul(lazy ? w.lazy() : w).sum();
      loss = loss ? loss.add(s) : s;
    }
    loss.backward();
    grads = leaves.map((x) => (x.grad ? Array.from(x.grad.dataSync()) : null));
  }
  return { values, grads };
}

describe.if(CUDA)("eager ≈ js reference and lazy ≈ eager on cuda", () => {
  for (const c of OP_CASES) {
    test(c.name, () => {
      const inputs = c.inputs();
      const prev = set_default_backend("js"); // the reference: the op definitions' `ref`
      let ref: ReturnType<typeof run>;
      try { ref = run(c, inputs, false, "cpu"); } finally { set_default_backend(prev as "js" | "native"); }
      const e = run(c, inputs, false, "cuda");
      const l = run(c, inputs, true, "cuda");
      const errs: string[] = [];
      const cmp = (what: string, got: number[] | null, want: number[] | null, tol = TOL) => {
        if ((got === null) !== (want === null)) errs.push(`${what} presence`);
        else if (got && want) { const m = mismatch(got, want, tol.atol, tol.rtol); if (m) errs.push(`${what} ${m}`); }
      };
      const refTol = REF_TOL[c.name] ?? TOL;
      if (e.values.length !== ref.values.length || l.values.length !== ref.values.length) errs.push(`outputs: ${e.values.length} eager, ${l.values.length} lazy, ${ref.values.length} reference`);
      e.values.forEach((v, i) => {
        const w = ref.values[i]!;
        if (JSON.stringify([v.shape, v.dtype]) !== JSON.stringify([w.shape, w.dtype])) errs.push(`out[${i}] shape/dtype`);
        if (v.device !== "cuda") errs.push(`out[${i}] on ${v.device}`);
        cmp(`out[${i}]`, v.data, w.data, refTol);
        cmp(`lazy out[${i}]`, l.values[i]!.data, v.data);
      });
      e.grads.forEach((g, i) => { cmp(`grad[${i}]`, g, ref.grads[i] ?? null, refTol); cmp(`lazy grad[${i}]`, l.grads[i] ?? null, g); });
      expect(errs).toEqual([]);
    }, 60_000);
  }
});
