/**
 * Sorting and sampling with PyTorch's names and semantics: sort, argsort, msort, topk, kthvalue
 * and multinomial.
 *
 * sort/topk/kthvalue are the registry's `argsort` (src/graph/ops/sort.ts) followed by `gather`,
 * so the values' gradient is gather's (scatter_add of the gradient back to the positions the
 * indices name: torch's sort/topk backward) and the int64 indices have none. Order as torch: NaN
 * is larger than every number (last ascending, first descending), -0 equals 0.
 *
 * Ties (what Loom returns where torch leaves it open): the argsort op is always stable, so equal
 * values keep index order in both directions. `stable: false` gives the same result (allowed:
 * torch only promises some order). topk and kthvalue return the lowest index among equal values
 * (torch's CPU topk may return another); `sorted: false` returns the same sorted order.
 *
 * multinomial draws on the host from a Generator (src/tensor/rng.ts): a lazy `probs` is realized
 * first, as data-dependent indexing does, and the samples are a constant of the same tensor
 * kind, so it is eager in effect (no gradient; torch has none either).
 *
 * Methods are attached to TensorOps with a declaration merge, as in shape_ops.ts.
 */
import { OPS } from "../graph/registry.ts";
import { isFloating } from "../tensor/dtype.ts";
import { LoomDtypeError, LoomIndexError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { default_generator, type Generator } from "../tensor/rng.ts";
import { normalizeDim } from "../tensor/shape.ts";
import { fromValues, toFloat64 } from "../tensor/storage.ts";
import { bindArgs, type PyArgs } from "./py_args.ts";
import { TensorOps } from "./surface.ts";

/**
 * torch.return_types: `[values, indices]` that also answers `.values` / `.indices`, so both
 * `const [v, i] = x.topk(3)` and `x.topk(3).values` read as in Python.
 */
export type ValuesIndices<S> = [S, S] & { readonly values: S; readonly indices: S };
function pair<S>(values: S, indices: S): ValuesIndices<S> {
  return Object.assign([values, indices] as [S, S], { values, indices });
}

/** sorted indices (first k along d) and the values they name, for x of any rank. */
function sortedPair<S extends TensorOps<S>>(x: S, op: string, dim: number, descending: boolean, k?: number): ValuesIndices<S> {
  const d = normalizeDim(op, dim, x.ndim);
  const n = x.ndim ? x.shape[d]! : 1;
  const kk = k ?? n;
  if (!Number.isInteger(kk) || kk < 0 || kk > n) {
    throw new LoomIndexError(`[${op}] selected index k out of range: k = ${kk} for dim ${d} of size ${n} (input ${fmtShape(x.shape)})`);
  }
  const indices = x._apply(OPS.argsort, [], { dim: d, descending, k: kk });
  // gather treats a 0-d input and index as [1]: its gradient scatters back the same way
  return pair(x.gather(d, indices), indices);
}

type SortKw = { dim?: number; descending?: boolean; stable?: boolean };
/**
 * Sort along `dim` (torch.sort(input, dim=-1, descending=False, *, stable=False)).
 * @param x - any dtype, any shape
 * @returns [values (x's dtype and shape), indices (int64, x's shape)]; `.values`/`.indices` too
 * @throws LoomIndexError for a dim out of range
 */
export function sort<S extends TensorOps<S>>(x: S, ...args: PyArgs<[dim: number, descending: boolean], SortKw>): ValuesIndices<S> {
  const a = bindArgs("sort", ["dim", "descending"], args, ["stable"]);
  return sortedPair(x, "sort", (a.dim as number) ?? -1, (a.descending as boolean) ?? false);
}

/**
 * The indices that sort `x` along `dim` (torch.argsort(input, dim=-1, descending=False, *, stable=False)).
 * @returns int64, x's shape (no gradient)
 */
export function argsort<S extends TensorOps<S>>(x: S, ...args: PyArgs<[dim: number, descending: boolean], SortKw>): S {
  const a = bindArgs("argsort", ["dim", "descending"], args, ["stable"]);
  const d = normalizeDim("argsort", (a.dim as number) ?? -1, x.ndim);
  return x._apply(OPS.argsort, [], { dim: d, descending: (a.descending as boolean) ?? false, k: x.ndim ? x.shape[d]! : 1 });
}

/** Values sorted along dim 0 (torch.msort: sort(x, 0).values). */
export function msort<S extends TensorOps<S>>(x: S): S {
  return sortedPair(x, "msort", 0, false).values;
}

type TopkKw = { k?: number; dim?: number; largest?: boolean; sorted?: boolean };
/**
 * The k largest (smallest with `largest: false`) elements along `dim`
 * (torch.topk(input, k, dim=-1, largest=True, sorted=True)). Loom always returns them sorted
 * (largest first, or smallest first), equal values lowest index first.
 * @returns [values, indices (int64)], x's shape with dim resized to k
 * @throws LoomIndexError when k is outside [0, size of dim] ("selected index k out of range")
 */
export function topk<S extends TensorOps<S>>(x: S, ...args: PyArgs<[k: number, dim: number, largest: boolean, sorted: boolean], TopkKw>): ValuesIndices<S> {
  const a = bindArgs("topk", ["k", "dim", "largest", "sorted"], args);
  if (a.k === undefined) throw new LoomValueError("[topk] missing required argument 'k'");
  const largest = (a.largest as boolean) ?? true;
  return sortedPair(x, "topk", (a.dim as number) ?? -1, largest, a.k as number);
}

type KthKw = { k?: number; dim?: number; keepdim?: boolean };
/**
 * The k-th smallest element along `dim`, k counted from 1 (torch.kthvalue(input, k, dim=-1,
 * keepdim=False)); among equal values the lowest index.
 * @returns [values, indices (int64)], x's shape without dim (kept as 1 with keepdim)
 * @throws LoomIndexError when k is outside [1, size of dim]
 */
export function kthvalue<S extends TensorOps<S>>(x: S, ...args: PyArgs<[k: number, dim: number, keepdim: boolean], KthKw>): ValuesIndices<S> {
  const a = bindArgs("kthvalue", ["k", "dim", "keepdim"], args);
  const k = a.k as number;
  const d = normalizeDim("kthvalue", (a.dim as number) ?? -1, x.ndim);
  const n = x.ndim ? x.shape[d]! : 1;
  if (!Number.isInteger(k) || k < 1 || k > n) {
    throw new LoomIndexError(`[kthvalue] selected number k out of range for dimension ${d}: k = ${k}, size ${n} (input ${fmtShape(x.shape)})`);
  }
  const [v, i] = sortedPair(x, "kthvalue", d, false, k);
  if (x.ndim === 0) return pair(v, i);
  const vk = v.narrow(d, k - 1, 1), ik = i.narrow(d, k - 1, 1);
  return (a.keepdim as boolean) ? pair(vk, ik) : pair(vk.squeeze(d), ik.squeeze(d));
}

type MultinomialKw = { num_samples?: number; replacement?: boolean; generator?: Generator };
/**
 * Draw category indices from rows of non-negative weights (torch.multinomial(input, num_samples,
 * replacement=False, *, generator=None)); weights need not sum to 1.
 *
 * Each draw is inverse-CDF sampling in float64 with u = generator.uniform53(): the first category
 * whose cumulative weight exceeds u·total (so zero-weight categories are never drawn while others
 * remain). Without replacement the drawn category's weight is removed before the next draw
 * (sequential sampling, the distribution of torch's); once only zero weights remain, the lowest
 * remaining index is taken (torch leaves that order to its topk of p/q among equal zeros: 1.13's
 * CPU gives [1, 3, 4, 0, 2] for weights [0, 5, 0, 1, 0]; Loom gives [1, 3, 0, 2, 4] or
 * [3, 1, 0, 2, 4]). The sequence differs from torch's for the same seed (its generators draw
 * differently).
 * @param probs - [C] or [B, C], floating dtype; a lazy tensor is realized (host sampling)
 * @returns int64 [num_samples] or [B, num_samples], the same tensor kind as probs
 * @throws LoomDtypeError for a non-float probs; LoomShapeError for other ranks; LoomValueError
 *   for num_samples <= 0, num_samples > C without replacement, a negative, infinite or NaN
 *   weight, or a row whose weights sum to 0 (torch's wording)
 */
export function multinomial<S extends TensorOps<S>>(probs: S, ...args: PyArgs<[num_samples: number, replacement: boolean], MultinomialKw>): S {
  const a = bindArgs("multinomial", ["num_samples", "replacement"], args, ["generator"]);
  const ns = a.num_samples as number, replacement = (a.replacement as boolean) ?? false;
  const gen = (a.generator as Generator | undefined) ?? default_generator;
  if (!isFloating(probs.dtype)) throw new LoomDtypeError(`[multinomial] only supports floating-point dtypes for input, got ${probs.dtype}`);
  if (probs.ndim !== 1 && probs.ndim !== 2) throw new LoomShapeError(`[multinomial] prob_dist must be 1 or 2 dim, got ${fmtShape(probs.shape)}`);
  if (!Number.isInteger(ns) || ns <= 0) throw new LoomValueError(`[multinomial] cannot sample n_sample <= 0 samples (num_samples = ${ns})`);
  const C = probs.shape[probs.ndim - 1]!, B = probs.ndim === 2 ? probs.shape[0]! : 1;
  if (!replacement && ns > C) {
    throw new LoomValueError(`[multinomial] cannot sample n_sample > prob_dist.size(-1) samples without replacement (num_samples = ${ns}, categories = ${C})`);
  }
  const p = toFloat64(probs._data()); // realizes a lazy probs
  const out = new Float64Array(B * ns);
  const w = new Float64Array(C);
  for (let b = 0; b < B; b++) {
    let total = 0;
    for (let c = 0; c < C; c++) {
      const v = p[b * C + c]!;
      if (v !== v || v === Infinity) throw new LoomValueError(`[multinomial] invalid multinomial distribution (encountering probability entry = infinity or NaN) in row ${b}`);
      if (v < 0) throw new LoomValueError(`[multinomial] invalid multinomial distribution (encountering probability entry < 0) in row ${b}`);
      w[c] = v;
      total += v;
    }
    if (!(total > 0)) throw new LoomValueError(`[multinomial] invalid multinomial distribution (sum of probabilities <= 0) in row ${b}`);
    for (let s = 0; s < ns; s++) {
      const c = total > 0 ? draw(w, total, gen.uniform53()) : w.findIndex((v) => v >= 0);
      out[b * ns + s] = c;
      if (!replacement) {
        // remove the category (-1: never chosen by draw or the zero-weight fallback); the total is
        // summed again rather than decremented, so rounding cannot leave a phantom remainder
        w[c] = -1;
        total = 0;
        for (let j = 0; j < C; j++) if (w[j]! > 0) total += w[j]!;
      }
    }
  }
  return probs._constant(fromValues("int64", probs.ndim === 2 ? [B, ns] : [ns], out));
}

/** The first category whose running sum of positive weights exceeds u·total (the last positive one if rounding leaves none). */
function draw(w: Float64Array, total: number, u: number): number {
  const target = u * total;
  let acc = 0, last = -1;
  for (let c = 0; c < w.length; c++) {
    const v = w[c]!;
    if (v <= 0) continue;
    acc += v;
    last = c;
    if (acc > target) return c;
  }
  return last;
}

declare module "./surface.ts" {
  interface TensorOps<Self extends TensorOps<Self>> {
    /** torch.Tensor.sort; see {@link sort}. */
    sort(...args: PyArgs<[dim: number, descending: boolean], SortKw>): ValuesIndices<Self>;
    /** torch.Tensor.argsort; see {@link argsort}. */
    argsort(...args: PyArgs<[dim: number, descending: boolean], SortKw>): Self;
    /** torch.Tensor.msort; see {@link msort}. */
    msort(): Self;
    /** torch.Tensor.topk; see {@link topk}. */
    topk(...args: PyArgs<[k: number, dim: number, largest: boolean, sorted: boolean], TopkKw>): ValuesIndices<Self>;
    /** torch.Tensor.kthvalue; see {@link kthvalue}. */
    kthvalue(...args: PyArgs<[k: number, dim: number, keepdim: boolean], KthKw>): ValuesIndices<Self>;
    /** torch.Tensor.multinomial; see {@link multinomial}. */
    multinomial(...args: PyArgs<[num_samples: number, replacement: boolean], MultinomialKw>): Self;
  }
}

const proto = TensorOps.prototype as TensorOps<any>;
proto.sort = function (...args) { return sort(this, ...args); };
proto.argsort = function (...args) { return argsort(this, ...args); };
proto.msort = function () { return msort(this); };
proto.topk = function (...args) { return topk(this, ...args); };
proto.kthvalue = function (...args) { return kthvalue(this, ...args); };
proto.multinomial = function (...args) { return multinomial(this, ...args); };
