/**
 * torch.scatter / Tensor.scatter_ and torch.scatter_reduce (sum, prod, mean, amax, amin), written
 * as composites of registry ops (index_select, cat, sum/amax/amin, mul, index_add, where), so they
 * need no kernel of their own and their gradients come from those ops' rules.
 *
 * The plan: the index is read on the host when the op is recorded (a lazy index is realized, as
 * indexing with a lazy index is), giving for every index element its target position in the
 * flattened self and its source position in the flattened src. Targets are grouped, and groups
 * of equal size L bucketed; per bucket the values of each touched target (self's first when
 * include_self, then the src values in index order) are gathered into a dense [T_L, L] table with
 * one index_select and reduced along L; the results are placed back with the IEEE -0 identity
 * (index_add onto -0, then where(covered, ., self)), as index_put does. Host work is
 * O(numel(index)); device work O(numel(index) + numel(self)); the graph grows by a few nodes per
 * distinct group size (at most sqrt(2·numel(index)) of them).
 *
 * Methods are attached to TensorOps with a declaration merge, as in shape_ops.ts.
 */
import { OPS } from "../graph/registry.ts";
import { isIntegral } from "../tensor/dtype.ts";
import { LoomDtypeError, LoomIndexError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { contiguousStrides, normalizeDim, numel } from "../tensor/shape.ts";
import { fromValues, scalarData, toFloat64 } from "../tensor/storage.ts";
import type { Scalar } from "./surface.ts";
import { TensorOps } from "./surface.ts";

export type ScatterReduce = "sum" | "prod" | "mean" | "amax" | "amin";
const REDUCES: readonly string[] = ["sum", "prod", "mean", "amax", "amin"];

interface ScatterPlan {
  /** Distinct target positions in flattened self, in first-touch order. */
  targets: number[];
  /** For each target, the flattened src positions written to it, in index order. */
  groups: number[][];
}

/**
 * Check operands as torch's scatter_gather_shape_check does and map every index element to
 * (target in flat self, source in flat src).
 */
function plan(op: string, selfShape: readonly number[], dim: number, index: { shape: readonly number[]; dtype: string; _data(): any }, srcShape: readonly number[]): ScatterPlan {
  if (index.dtype !== "int64") throw new LoomDtypeError(`[${op}] ${op}(): Expected dtype int64 for index, got ${index.dtype}`);
  const S = selfShape.length ? selfShape : [1];
  const I = index.shape.length ? index.shape : [1];
  const R = srcShape.length ? srcShape : [1];
  if (index.shape.length !== 0 || selfShape.length !== 0) {
    if (I.length !== S.length || I.length !== R.length) {
      throw new LoomShapeError(`[${op}] Index tensor must have the same number of dimensions as self and src tensors: index ${fmtShape(index.shape)}, self ${fmtShape(selfShape)}, src ${fmtShape(srcShape)}`);
    }
    if (I.some((s, d) => (d !== dim && s > S[d]!) || s > R[d]!)) {
      throw new LoomShapeError(`[${op}] Expected index ${fmtShape(index.shape)} to be smaller than self ${fmtShape(selfShape)} apart from dimension ${dim} and to be smaller size than src ${fmtShape(srcShape)}`);
    }
  }
  const iv = toFloat64(index._data());
  const ss = contiguousStrides(S), rs = contiguousStrides(R);
  const byTarget = new Map<number, number[]>();
  const c = new Array<number>(I.length).fill(0);
  const n = numel(I);
  for (let e = 0; e < n; e++) {
    const k = iv[e]!;
    if (!(k >= 0 && k < S[dim]!)) throw new LoomIndexError(`[${op}] index ${k} is out of bounds for dimension ${dim} with size ${S[dim]}`);
    let t = 0, s = 0;
    for (let d = 0; d < I.length; d++) {
      t += (d === dim ? k : c[d]!) * ss[d]!;
      s += c[d]! * rs[d]!;
    }
    let g = byTarget.get(t);
    if (!g) byTarget.set(t, (g = []));
    g.push(s);
    for (let d = I.length - 1; d >= 0; d--) {
      if (++c[d]! < I[d]!) break;
      c[d] = 0;
    }
  }
  return { targets: [...byTarget.keys()], groups: [...byTarget.values()] };
}

/** self (flattened) with `values` [T] at `targets`, the rest unchanged, reshaped back. */
function place<S extends TensorOps<S>>(self: S, targets: number[], values: S): S {
  const N = self.numel();
  const flat = self.reshape([N]);
  const pos = self._constant(fromValues("int64", [targets.length], targets));
  const covered = new Uint8Array(N);
  for (const t of targets) covered[t] = 1;
  // -0 is the additive identity of IEEE floats, so each value arrives bit for bit
  const placed = flat.full_like(-0).index_add(0, pos, values);
  return placed.where(self._constant(fromValues("bool", [N], covered)), flat).reshape(self.shape as number[]);
}

/**
 * Copy of self with src's values written at `index` along `dim` (torch.scatter): for dim 0,
 * out[index[i][j]][j] = src[i][j]. Duplicate targets: the last write in index order wins (torch's
 * CPU order; torch calls it undefined), and only that element gets gradient (torch's formula gives
 * every duplicate the target's gradient).
 * @param index - int64, same number of dims as self and src, sizes <= src's and (except at dim) <= self's
 * @param src - tensor of self's dtype, or a scalar
 * @param opts.reduce - "add" or "multiply": scatter_reduce "sum" / "prod" with include_self (torch's
 *   legacy form)
 * @returns self's shape and dtype
 * @throws LoomDtypeError for a non-int64 index or src of another dtype; LoomShapeError for
 *   mismatched shapes; LoomIndexError for an index outside [0, self.size(dim))
 */
export function scatter<S extends TensorOps<S>>(self: S, dim: number, index: S, src: S | Scalar, opts: { reduce?: "add" | "multiply" } = {}): S {
  const d = normalizeDim("scatter", dim, self.ndim);
  const s = typeof src === "object" ? src : self._constant(scalarData(self.dtype, Number(src))).expand(index.shape as number[]);
  if (opts.reduce !== undefined) {
    if (opts.reduce !== "add" && opts.reduce !== "multiply") throw new LoomValueError(`[scatter] reduce argument must be either add or multiply, got ${opts.reduce}`);
    return scatter_reduce(self, dim, index, s, opts.reduce === "add" ? "sum" : "prod");
  }
  if (s.dtype !== self.dtype) throw new LoomDtypeError(`[scatter] scatter(): Expected self.dtype to be equal to src.dtype, got ${self.dtype} and ${s.dtype}`);
  const p = plan("scatter", self.shape, d, index, s.shape);
  if (p.targets.length === 0) return self.clone();
  const last = p.groups.map((g) => g[g.length - 1]!);
  const vals = s.reshape([s.numel()]).index_select(0, self._constant(fromValues("int64", [last.length], last)));
  return place(self, p.targets, vals);
}

/**
 * Copy of self where each position addressed by `index` along `dim` holds the reduction of the
 * src values sent to it, and (with include_self) its own value (torch.scatter_reduce).
 * "mean" divides by the count (floor division for integer dtypes, as torch); "prod" multiplies in
 * index order; amax/amin split the gradient evenly among tied elements (torch's rule). Positions
 * no index addresses keep self's value.
 * @param index - int64, same number of dims as self and src, sizes <= src's and (except at dim) <= self's
 * @param src - self's dtype
 * @returns self's shape and dtype
 * @throws LoomValueError for an unknown reduce; otherwise as {@link scatter}
 */
export function scatter_reduce<S extends TensorOps<S>>(self: S, dim: number, index: S, src: S, reduce: ScatterReduce, opts: { include_self?: boolean } = {}): S {
  if (!REDUCES.includes(reduce)) throw new LoomValueError(`[scatter_reduce] reduce argument must be either sum, prod, mean, amax or amin, got ${reduce}`);
  const d = normalizeDim("scatter_reduce", dim, self.ndim);
  if (src.dtype !== self.dtype) throw new LoomDtypeError(`[scatter_reduce] scatter_reduce(): Expected self.dtype to be equal to src.dtype, got ${self.dtype} and ${src.dtype}`);
  const p = plan("scatter_reduce", self.shape, d, index, src.shape);
  if (p.targets.length === 0) return self.clone();
  const inc = opts.include_self ?? true;
  // bucket the targets by group size L: each bucket is a dense [T_L, L] table, so no padding
  // value (whose ties or identity would differ per reduction and dtype) is ever needed
  const buckets = new Map<number, number[]>(); // L -> indices into p.groups
  p.groups.forEach((g, k) => {
    let b = buckets.get(g.length);
    if (!b) buckets.set(g.length, (b = []));
    b.push(k);
  });
  const srcFlat = src.reshape([src.numel()]);
  const selfFlat = self.reshape([self.numel()]);
  const int64 = (v: ArrayLike<number>) => self._constant(fromValues("int64", [v.length], v));
  const parts: S[] = [];
  const order: number[] = [];
  for (const [L, ks] of buckets) {
    const T = ks.length;
    const table = new Float64Array(T * L);
    ks.forEach((k, t) => table.set(p.groups[k]!, t * L));
    let vals = srcFlat.index_select(0, int64(table)).reshape([T, L]); // [T, L]
    const targets = ks.map((k) => p.targets[k]!);
    if (inc) vals = selfFlat.index_select(0, int64(targets)).reshape([T, 1])._apply(OPS.cat, [vals], { dim: 1 }); // [T, 1 + L]
    parts.push(reduceRows(vals, reduce));
    order.push(...targets);
  }
  const r = parts.length === 1 ? parts[0]! : parts[0]!._apply(OPS.cat, parts.slice(1), { dim: 0 });
  return place(self, order, r.to(self.dtype));
}

/** Reduce each row of [T, P] (P >= 1) to [T]: "mean" floor-divides for integer dtypes, as torch. */
function reduceRows<S extends TensorOps<S>>(v: S, reduce: ScatterReduce): S {
  if (reduce === "sum") return v.sum(1);
  if (reduce === "amax") return v.amax(1);
  if (reduce === "amin") return v.amin(1);
  if (reduce === "prod") return prodRows(v);
  const n = v.shape[1]!;
  return isIntegral(v.dtype) ? v.sum(1).div(n, { rounding_mode: "floor" }) : v.sum(1).div(n);
}

/** Row products of [T, P], multiplied left to right (torch's order) for small P, pairwise beyond. */
function prodRows<S extends TensorOps<S>>(v: S): S {
  let P = v.shape[1]!;
  if (P <= 16) {
    let acc = v._slice(1, 0, 1, 1);
    for (let j = 1; j < P; j++) acc = acc.mul(v._slice(1, j, j + 1, 1));
    return acc.squeeze(1);
  }
  let r = v;
  while (P > 1) {
    const h = Math.floor(P / 2);
    const prod = r._slice(1, 0, h, 1).mul(r._slice(1, h, 2 * h, 1));
    r = P % 2 ? prod._apply(OPS.cat, [r._slice(1, 2 * h, P, 1)], { dim: 1 }) : prod;
    P = r.shape[1]!;
  }
  return r.squeeze(1);
}

declare module "./surface.ts" {
  interface TensorOps<Self extends TensorOps<Self>> {
    /** torch.Tensor.scatter; see {@link scatter}. */
    scatter(dim: number, index: Self, src: Self | Scalar, opts?: { reduce?: "add" | "multiply" }): Self;
    /** In-place torch.Tensor.scatter_ (TensorOps' in-place write path, as masked_fill_). */
    scatter_(dim: number, index: Self, src: Self | Scalar, opts?: { reduce?: "add" | "multiply" }): this;
    /** torch.Tensor.scatter_reduce; see {@link scatter_reduce}. */
    scatter_reduce(dim: number, index: Self, src: Self, reduce: ScatterReduce, opts?: { include_self?: boolean }): Self;
    /** In-place torch.Tensor.scatter_reduce_. */
    scatter_reduce_(dim: number, index: Self, src: Self, reduce: ScatterReduce, opts?: { include_self?: boolean }): this;
  }
}

type SetFn = { _set(op: string, value: (self: any) => any, checkCast?: boolean): any };
const proto = TensorOps.prototype as TensorOps<any>;
proto.scatter = function (dim, index, src, opts) { return scatter(this, dim, index, src, opts); };
proto.scatter_reduce = function (dim, index, src, reduce, opts) { return scatter_reduce(this, dim, index, src, reduce, opts); };
// the in-place forms go through TensorOps' private write path (_set), as masked_fill_ does
proto.scatter_ = function (dim, index, src, opts) { return (this as unknown as SetFn)._set("scatter_", (s) => scatter(s, dim, index, src, opts)); };
proto.scatter_reduce_ = function (dim, index, src, reduce, opts) { return (this as unknown as SetFn)._set("scatter_reduce_", (s) => scatter_reduce(s, dim, index, src, reduce, opts)); };
