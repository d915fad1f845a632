/**
 * Eager and lazy execution agree bit for bit (the same kernels run), on every backend, for every op case:
 * forward values, dtypes, shapes, and the gradients of a random projection of the outputs.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { BACKENDS, WEBGPU, useBackend } from "../backends.ts";
import { OP_CASES } from "./op_cases.ts";

/** Inputs as run on webgpu: float64 becomes float32 (WGSL has no f64), moved to the device. */
const onGpu = (x: loom.Tensor) => (x.dtype === "float64" ? x.float() : x).to("webgpu");

function run(c: (typeof OP_CASES)[number], inputs: loom.Tensor[], lazy: boolean, gpu = false) {
  const leaves = inputs.map((x) => {
    const d = gpu ? onGpu(x) : x.detach();
    return x.dtype === "float64" && !c.nondiff ? d.detach().requires_grad_(true) : d.detach();
  });
  const args = leaves.map((x) => (lazy ? x.lazy() : x));
  const outs = [c.fn(...args)].flat() as any[];
  const values = outs.map((o) => ({ shape: [...o.shape], dtype: o.dtype, data: Array.from(o.dataSync() as Float64Array) }));
  let grads: (number[] | null)[] = [];
  if (!c.nondiff) {
    // loss = sum_i sum(out_i * w_i) with fixed weights w_i = 1 + k/7 (k: flat index mod 5)
    let loss: any = null;
    for (const o of outs) {
      const w = loom.tensor(Array.from({ length: o.numel() }, (_, k) => 1 + (k % 5) / 7), { dtype: o.dtype }).reshape([...o.shape]);
      const s = o.mul(lazy ? w.lazy() : w).sum();
      loss = loss ? loss.add(s) : s;
    }
    loss.backward();
    grads = leaves.map((x) => (x.grad ? Array.from(x.grad.dataSync()) : null));
  }
  return { values, grads };
}

describe.each(BACKENDS)("eager == lazy on %s", (backend) => {
  useBackend(backend);
  for (const c of OP_CASES) {
    test(c.name, () => {
      const inputs = c.inputs();
      const e = run(c, inputs, false);
      const l = loom.with_compiler_options({ tolerance: "exact" }, () => run(c, inputs, true)); // eager's bits
      expect(l.values).toEqual(e.values);
      expect(l.grads).toEqual(e.grads);
      if (!c.nondiff) expect(e.grads.some((g) => g !== null)).toBe(true);
    });
  }
});

/** Cases whose fn mixes in float64 constants, which the webgpu device cannot hold. */
const NEEDS_F64 = new Set(["cast_roundtrip", "permute", "expand", "squeeze_unsqueeze_flatten"]);
/** float32 on the GPU vs the float64 js reference: |got - want| <= atol + rtol·|want|. */
const GPU_TOL = { rtol: 1e-4, atol: 1e-4 };
/** Lazy (fused kernels) vs eager on the GPU: float32 rounding and summation order. */
const LAZY_TOL = { rtol: 1e-5, atol: 1e-6 };

function worstMismatch(got: number[], want: number[], tol = GPU_TOL): string | null {
  if (got.length !== want.length) return `length ${got.length} vs ${want.length}`;
  for (let i = 0; i < got.length; i++) {
    const g = got[i]!, w = want[i]!;
    const ok = Number.isNaN(w) ? Number.isNaN(g) : !Number.isFinite(w) ? g === w : Math.abs(g - w) <= tol.atol + tol.rtol * Math.abs(w);
    if (!ok) return `[${i}] ${g} vs ${w}`;
  }
  return null;
}

describe.if(WEBGPU)("eager ≈ lazy on webgpu, and close to js float64", () => {
  for (const c of OP_CASES) {
    if (NEEDS_F64.has(c.name)) continue;
    test(c.name, () => {
      const inputs = c.inputs();
      const ref = run(c, inputs, false);
      const e = run(c, inputs, false, true);
      const l = run(c, inputs, true, true);
      // lazy runs fused kernels (other kernels than eager's): equal to float32 rounding, not bitwise
      const errs: string[] = [];
      e.values.forEach((v, i) => { const m = worstMismatch(l.values[i]!.data, v.data, LAZY_TOL); if (m) errs.push(`lazy out[${i}] ${m}`); });
      e.grads.forEach((g, i) => { const h = l.grads[i] ?? null; if (g && h) { const m = worstMismatch(h, g, LAZY_TOL); if (m) errs.push(`lazy grad[${i}] ${m}`); } else if (g !== h) errs.push(`lazy grad[${i}] presence`); });
      e.values.forEach((v, i) => {
        const w = ref.values[i]!;
        if (JSON.stringify(v.shape) !== JSON.stringify(w.shape)) errs.push(`out[${i}] shape`);
        const m = worstMismatch(v.data, w.data);
        if (m) errs.push(`out[${i}] ${m}`);
      });
      e.grads.forEach((g, i) => {
        const w = ref.grads[i] ?? null;
        if ((g === null) !== (w === null)) errs.push(`grad[${i}] presence`);
        else if (g && w) { const m = worstMismatch(g, w); if (m) errs.push(`grad[${i}] ${m}`); }
      });
      expect(errs).toEqual([]);
    }, 60_000); // first use of a kernel compiles it (lavapipe: up to seconds)
  }
});
