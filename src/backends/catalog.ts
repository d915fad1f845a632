/**
 * The kernel catalog's vocabulary: an implementation of a registry op (primitive or fused) on
 * one backend, with when it applies and its numerical contract. Backends list their
 * implementations (`Backend.implementations`); the scheduler chooses among those that apply and
 * whose contract fits the plan's tolerance, by measured speed (the kernel database) or, without a
 * record, by each implementation's `rank` (the backend's best guess, lower = presumed faster).
 *
 * Contracts are stated against a float64 reference of the op's decomposition:
 * - `exact`: the same bits as the op's eager kernels on that backend (the unfused ops, each
 *   result rounded to its dtype) — what eager == lazy bit tests need;
 * - `bound`: |y − ref| ≤ atol + rtol·|ref| elementwise for every input the implementation
 *   applies to, where ref is the decomposition evaluated in float64 and rounded once to the
 *   output dtype (the form of torch.testing.assert_close). Tests check each implementation
 *   against it (tests/catalog/).
 */
import type { OpDef } from "../graph/op.ts";
import type { FusedOpName, OpName } from "../graph/registry.ts";
import type { DType } from "../tensor/dtype.ts";
import type { TensorData } from "../tensor/storage.ts";
import type { InputLayout, PreparedKernel } from "./backend.ts";

/** An implementation's error contract (see the file comment). */
export type Contract =
  | { readonly kind: "exact" }
  | { readonly kind: "bound"; readonly atol: number; readonly rtol: number; readonly source: string };

/** An elementwise error bound: |y − ref| ≤ atol + rtol·|ref|. */
export interface Bound {
  readonly atol: number;
  readonly rtol: number;
}

/**
 * A plan's (or the global) tolerance: `"exact"` admits only exact implementations; a bound admits
 * every implementation whose contract is within it (atol and rtol both no larger). `by_dtype`
 * replaces the bound for applications whose output has that dtype (assert_close's defaults differ
 * per dtype: a float32 bound cannot be met by any half-precision result but the exact one).
 */
export type Tolerance = "exact" | (Bound & { readonly by_dtype?: { readonly [D in DType]?: Bound } });

/**
 * torch.testing.assert_close's float32 defaults (rtol 1.3e-6, atol 1e-5), which PyTorch's own CPU
 * kernels (vectorized exp/tanh/erf, reordered sums) are held to.
 */
export const FLOAT32_TOLERANCE: Tolerance = { atol: 1e-5, rtol: 1.3e-6 };

/**
 * The default tolerance: FLOAT32_TOLERANCE, and for float16 / bfloat16 outputs assert_close's
 * defaults for those dtypes (rtol 1e-3 / 1.6e-2, atol 1e-5), which torch's half kernels (float32
 * accumulation) meet. float64 keeps the float32 bound: the double kernels' contracts are stated
 * at float32 grade (jit.ts JIT_CONTRACT), so a float64 bound would only refuse them.
 */
export const DEFAULT_TOLERANCE: Tolerance = {
  ...FLOAT32_TOLERANCE,
  by_dtype: { float16: { atol: 1e-5, rtol: 1e-3 }, bfloat16: { atol: 1e-5, rtol: 1.6e-2 } },
};

/** The bound `t` sets for an output of `dtype` (its by_dtype entry, else its own). */
export function boundFor(t: Exclude<Tolerance, "exact">, dtype?: DType): Bound {
  return (dtype !== undefined ? t.by_dtype?.[dtype] : undefined) ?? t;
}

/** Whether `c` is admitted by tolerance `t` for an output of `dtype`. */
export function admits(t: Tolerance, c: Contract, dtype?: DType): boolean {
  if (c.kind === "exact") return true;
  if (t === "exact") return false;
  const b = boundFor(t, dtype);
  return c.atol <= b.atol && c.rtol <= b.rtol;
}

/** What an implementation is asked about: one application of an op in a plan. */
export interface Application {
  readonly op: OpDef;
  readonly inputs: readonly InputLayout[];
  readonly attrs: unknown;
  readonly shape: readonly number[];
  readonly dtype: DType;
}

/** One implementation of a registry op on a backend. */
export interface Implementation {
  /** Unique, stable id: `<backend>.<op>.<variant>` (the kernel database's key). */
  readonly id: string;
  /** Registry name of the op it implements (OPS or FUSED_OPS; tsc checks it). */
  readonly op: OpName | FusedOpName;
  readonly contract: Contract;
  /** Heuristic order when the database has no timing (lower = presumed faster). */
  readonly rank: number;
  /** One line for `loom tune` and explain(): what it is and when it applies. */
  readonly doc: string;
  /** Whether it can run this application (dtypes, layouts, sizes). */
  applies(a: Application): boolean;
  /** A kernel for a compiled plan (same contract as Backend.prepare). */
  prepare(a: Application): PreparedKernel;
  /**
   * A function running the application now on buffers with the layouts `a.inputs` and returning
   * the dense result: how an eager composite (softmax, rms_norm, layer_norm) reaches its fused
   * kernel without a plan (prepared once per layout and cached by the caller, as a plan's kernels
   * are). Absent: only plans can use this implementation.
   */
  runner?(a: Application): (inputs: readonly TensorData[]) => TensorData;
}
