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

/**
 * A plan's (or the global) tolerance: `"exact"` admits only exact implementations; a bound admits
 * every implementation whose contract is within it (atol and rtol both no larger).
 */
export type Tolerance = "exact" | { readonly atol: number; readonly rtol: number };

/**
 * The default tolerance: torch.testing.assert_close's float32 defaults (rtol 1.3e-6, atol 1e-5),
 * which PyTorch's own CPU kernels (vectorized exp/tanh/erf, reordered sums) are held to.
 */
export const FLOAT32_TOLERANCE: Tolerance = { atol: 1e-5, rtol: 1.3e-6 };

/** Whether `c` is admitted by tolerance `t`. */
export function admits(t: Tolerance, c: Contract): boolean {
  if (c.kind === "exact") return true;
  if (t === "exact") return false;
  return c.atol <= t.atol && c.rtol <= t.rtol;
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
