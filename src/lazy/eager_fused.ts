/**
 * Eager dispatch of composites to their fused kernels. An eager softmax written op by op (amax,
 * sub, exp, sum, div) runs five kernels and five passes over memory; the compiler's pattern pass
 * turns the same decomposition into one `fused_softmax` when it is lazy. Eager tensors ask the
 * kernel catalog (backends/catalog.ts) for the same fused op, chosen as a plan chooses it
 * (scheduler/select.ts `candidates` at the global tolerance), and run it now through the
 * implementation's `run`. So eager and lazy run the same kernel: at `tolerance: "exact"` that is
 * the exact fused kernel (the bits of the unfused ops), at the default float32 tolerance the
 * bounded row kernel (native/kernels/rows_f32.c).
 *
 * Used only where no gradient is recorded (the fused ops have no gradient rules: they exist only
 * inside compiled plans, after autograd), the compiler's `patterns` option is on, the backend has
 * a catalog with a runnable implementation, and the dtype is one the pattern pass matches.
 */
import type { Application } from "../backends/catalog.ts";
import type { OpDef } from "../graph/op.ts";
import { patternDtype, type FusedSoftmaxAttrs } from "../graph/passes/fused_ops.ts";
import { FUSED_OPS } from "../graph/registry.ts";
import { compilerOptions } from "../scheduler/options.ts";
import { candidates } from "../scheduler/select.ts";
import type { DType } from "../tensor/dtype.ts";
import type { TensorData } from "../tensor/storage.ts";
import { backendFor } from "./device.ts";

/**
 * The application's result computed now by the best runnable implementation of `op` on
 * `device`, or null when none applies (the caller then runs the decomposition op by op).
 */
export function runFused(device: string, op: OpDef, inputs: readonly TensorData[], attrs: unknown, shape: readonly number[], dtype: DType): TensorData | null {
  const backend = backendFor(device);
  if (!backend.implementations) return null;
  const opts = compilerOptions();
  if (!opts.patterns) return null;
  const a: Application = { op, inputs, attrs, shape, dtype };
  for (const impl of candidates(backend, a, opts.tolerance)) if (impl.run) return impl.run(a, inputs);
  return null;
}

/**
 * softmax of `x` over `dim` (normalized, non-empty) as one fused kernel: the `fused_softmax`
 * whose prologue is x itself (one load with x's own strides), as the pattern pass builds it for
 * `x.softmax(dim)`. Null where no fused implementation runs (see the file comment).
 */
export function fusedSoftmax(device: string, x: TensorData, dim: number): TensorData | null {
  if (!patternDtype(x.dtype) || x.shape.length === 0) return null;
  const attrs: FusedSoftmaxAttrs = {
    dim,
    prologue: { shape: x.shape, code: [{ k: "load", input: 0, strides: x.strides, offset: 0, dtype: x.dtype }], out: 0 },
  };
  return runFused(device, FUSED_OPS.fused_softmax, [x], attrs, x.shape, x.dtype);
}
