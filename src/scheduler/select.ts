/**
 * Kernel selection: for one op application in a plan, the fastest catalog implementation
 * (backends/catalog.ts) whose contract the plan's tolerance admits. "Fastest" is the kernel
 * database's median for this op signature and shape class when it has records for every
 * candidate (kernel_db.ts), else each implementation's heuristic `rank`.
 */
import type { Backend, PreparedKernel } from "../backends/backend.ts";
import { admits, boundFor, type Application, type Implementation, type Tolerance } from "../backends/catalog.ts";
import type { DType } from "../tensor/dtype.ts";
import { lookupTimings, signatureOf, type Measured } from "./kernel_db.ts";

/** Counters: how often each implementation was chosen (tests, explain, `loom tune`). */
export const selectionStats = { chosen: new Map<string, number>(), fromDatabase: 0, fromRank: 0 };

/**
 * Whether a measured record is within `tol`: every element's error is at most atol (max abs) or
 * at most rtol·|ref| (max rel), either of which implies the elementwise bound atol + rtol·|ref|.
 */
function measuredWithin(tol: Tolerance, m: Measured, dtype: DType): boolean {
  if (!m.within_contract) return false;
  if (tol === "exact") return true; // only exact contracts get here
  const b = boundFor(tol, dtype);
  return m.max_abs_err <= b.atol || m.max_rel_err <= b.rtol;
}

/**
 * The implementations of `a.op` on `backend` that apply to `a` and are admitted by `tol` (by
 * their contract, and by their measured error where the database has it), best first.
 */
export function candidates(backend: Backend, a: Application, tol: Tolerance): Implementation[] {
  const all = backend.implementations?.(a.op.name) ?? [];
  let ok = all.filter((i) => admits(tol, i.contract, a.dtype) && i.applies(a));
  if (ok.length < 2) return ok;
  const db = lookupTimings(backend.name, signatureOf(a));
  if (db) ok = ok.filter((i) => i.contract.kind === "exact" || !db.has(i.id) || measuredWithin(tol, db.get(i.id)!, a.dtype));
  if (db && ok.every((i) => db.has(i.id))) {
    selectionStats.fromDatabase++;
    return ok.sort((x, y) => db.get(x.id)!.median_ms - db.get(y.id)!.median_ms || x.rank - y.rank);
  }
  selectionStats.fromRank++;
  return ok.sort((x, y) => x.rank - y.rank);
}

/**
 * The kernel for one instruction, and the id of the implementation behind it ("" when the
 * backend has no catalog: its `prepare`). Null when the backend cannot prepare kernels.
 * @param force - an implementation id to use if it applies (`loom tune` measuring each path)
 */
export function prepareKernel(backend: Backend, a: Application, tol: Tolerance, force?: string): { kernel: PreparedKernel; impl: string } | null {
  if (!backend.prepare) return null;
  if (backend.implementations) {
    const list = force
      ? (backend.implementations(a.op.name).filter((i) => i.id === force && i.applies(a)))
      : candidates(backend, a, tol);
    const best = list[0];
    if (best) {
      selectionStats.chosen.set(best.id, (selectionStats.chosen.get(best.id) ?? 0) + 1);
      return { kernel: best.prepare(a), impl: best.id };
    }
  }
  return { kernel: backend.prepare(a.op, a.inputs, a.attrs, a.shape, a.dtype), impl: "" };
}
