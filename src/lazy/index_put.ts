/**
 * Indexed assignment, `x[items] = values` (torch.Tensor.index_put / index_put_ / __setitem__),
 * written once as a composite of registry ops over the flattened tensor, so its gradients (to x
 * and to values) come from their rules and eager and lazy tensors share it:
 * - accumulate: out = x.flatten().index_add(0, P, v), duplicates summed;
 * - otherwise: duplicates are dropped on the host (the last write wins, PyTorch's CPU order), the
 *   kept values are added onto -0 (the IEEE additive identity, so every value arrives bit for bit)
 *   and out = where(covered, that, x.flatten()).
 * P, the storage position in x of every element of x[items], is computed on the host from the
 * parsed index (indexing.ts, which already read the index values); host work is O(numel(x[items])),
 * device work O(numel(x)) (a new tensor).
 */
import { LoomDtypeError, LoomIndexError, LoomShapeError, fmtShape } from "../tensor/errors.ts";
import { contiguousStrides, numel } from "../tensor/shape.ts";
import { forEachStrided, fromValues } from "../tensor/storage.ts";
import { advOffsets, type IndexItem, type IndexPlan } from "./indexing.ts";
import type { TensorOps } from "./surface.ts";

/**
 * Storage offsets in dense row-major x of every element of x[items], in the result's row-major
 * order (the same order applyIndex produces).
 */
export function putPositions(plan: IndexPlan): Float64Array {
  const xs = contiguousStrides(plan.shape);
  const advOff = advOffsets(plan, (d) => xs[d]!);
  let base = 0;
  plan.sel.forEach((s, d) => { if (s) base += s.start * xs[d]!; });
  // result dims: [size, storage stride, B stride]; advanced dims move through advOff instead
  const basic = plan.layout.map((d, p) => ({ d, p })).filter(({ p }) => !plan.advPos.includes(p)).map(({ d }) => {
    if (d === null) return { size: 1, st: 0, bst: 0 };
    const s = plan.sel[d];
    return s ? { size: Math.ceil((s.stop - s.start) / s.step), st: s.step * xs[d]!, bst: 0 } : { size: plan.shape[d]!, st: xs[d]!, bst: 0 };
  });
  const bst = contiguousStrides(plan.advShape);
  const bdims = plan.advShape.map((size, i) => ({ size, st: 0, bst: bst[i]! }));
  const p0 = plan.adv.length ? (plan.front ? 0 : plan.advPos[0]!) : basic.length;
  const dims = [...basic.slice(0, p0), ...bdims, ...basic.slice(p0)];
  const shape = dims.map((d) => d.size);
  const out = new Float64Array(numel(shape));
  const operands = [{ strides: dims.map((d) => d.st), offset: base }, { strides: dims.map((d) => d.bst), offset: 0 }];
  forEachStrided(shape, operands, (e, idx) => { out[e] = idx[0]! + (plan.adv.length ? advOff[idx[1]!]! : 0); });
  return out;
}

/** PyTorch's index_put indices (one index tensor or list per leading dim, null for a whole dim) as index items. */
export function indexPutItems(op: string, indices: unknown): IndexItem[] {
  if (!Array.isArray(indices)) {
    throw new LoomIndexError(`[${op}] indices must be an array of index tensors (one per leading dim), got ${typeof indices}`);
  }
  return indices.map((it) => {
    if (it === null) return ":";
    if (Array.isArray(it) || (typeof it === "object" && typeof (it as { _data?: unknown })._data === "function")) return it as IndexItem;
    throw new LoomIndexError(`[${op}] indices must be index tensors or lists (null for a whole dim), got ${typeof it} ${String(it)}`);
  });
}

/**
 * The shape `values` is viewed as before broadcasting to the indexing result `out`: leading size-1
 * dims beyond out's rank are dropped, as torch does.
 * @throws LoomShapeError when values do not broadcast to out
 */
export function valueShape(op: string, values: readonly number[], out: readonly number[]): number[] {
  let vs = [...values];
  while (vs.length > out.length && vs[0] === 1) vs = vs.slice(1);
  const off = out.length - vs.length;
  if (off < 0 || vs.some((s, i) => s !== 1 && s !== out[off + i])) {
    throw new LoomShapeError(`[${op}] shape mismatch: value tensor of shape ${fmtShape(values)} cannot be broadcast to indexing result of shape ${fmtShape(out)}`);
  }
  return vs;
}

/**
 * x with x[plan] replaced by (or, with `accumulate`, increased by) `values`, out of place.
 * @param values - broadcastable to the indexing result `plan.outShape`, dtype of x
 * @throws LoomDtypeError when values' dtype differs from x's; LoomShapeError when values do not broadcast
 */
export function indexPut<S extends TensorOps<S>>(op: string, x: S, plan: IndexPlan, values: S, accumulate: boolean): S {
  if (values.dtype !== x.dtype) {
    throw new LoomDtypeError(`[${op}] Index put requires the source and destination dtypes match, got ${x.dtype} for the destination and ${values.dtype} for the source`);
  }
  const out = plan.outShape;
  const vs = valueShape(op, values.shape, out);
  const N = numel(x.shape), n = numel(out);
  if (n === 0) return x.clone();
  const v = values.reshape(vs).expand(out).reshape([n]); // [n], in result order
  const xf = x.reshape([N]);
  const P = putPositions(plan);
  const int64 = (vals: ArrayLike<number>) => x._constant(fromValues("int64", [vals.length], vals));
  if (accumulate) return xf.index_add(0, int64(P), v).reshape(x.shape);
  // overwrite: the last write to each position wins (PyTorch's CPU order); Map keeps first-seen order
  const lastOf = new Map<number, number>();
  P.forEach((p, k) => { lastOf.set(p, k); });
  const pos = int64(Float64Array.from(lastOf.keys()));
  const vu = lastOf.size === n ? v : v.index_select(0, int64(Float64Array.from(lastOf.values())));
  // -0 is the additive identity of IEEE floats: -0 + v is v bit for bit (-0, NaN and inf included)
  const scattered = xf.full_like(-0).index_add(0, pos, vu);
  const one = x._constant(fromValues("float32", [], [1])).expand([lastOf.size]);
  const covered = xf.full_like(0, "float32").index_add(0, pos, one).ne(0);
  return scattered.where(covered, xf).reshape(x.shape);
}
