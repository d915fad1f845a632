/**
 * argsort: the one sorting primitive. sort, topk, kthvalue and msort are written on the surface
 * (src/lazy/sort_ops.ts) as this op followed by `gather`, so their values get gather's gradient
 * (scatter_add of the gradient into the sorted positions, which is torch's sort/topk backward)
 * and the indices have none. A sort is not expressible with the elementwise/reduce ops, so it is
 * a kernel op. webgpu ranks by counting (src/backends/webgpu/kernels.ts); native has no kernel
 * for it and runs this reference (the js backend's kernel) eagerly and inside plans, as it does
 * for any op it lacks.
 */
import { LoomIndexError, fmtShape } from "../../tensor/errors.ts";
import { toFloat64 } from "../../tensor/storage.ts";
import { defineOp, type KernelOp } from "../op.ts";

/**
 * argsort attributes.
 * - `dim`: normalized (0 for a 0-d input, which sorts as [1]);
 * - `descending`: largest first;
 * - `k`: how many of the sorted positions to keep along `dim` (the full size for sort; topk's k).
 */
export interface ArgsortAttrs {
  readonly dim: number;
  readonly descending: boolean;
  readonly k: number;
}

/**
 * The order torch uses: NaN is larger than every number (so it comes last ascending, first
 * descending); -0 equals 0. Ties are broken by position (a stable sort), in both directions.
 */
function ascending(a: number, b: number): number {
  if (a !== a) return b !== b ? 0 : 1;
  if (b !== b) return -1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Indices that sort `x` along `dim`, the first `k` of them (torch.argsort(stable=True) for k = the
 * size; torch.topk's indices for k smaller, ties lowest index first).
 * @param x - any dtype, any shape (0-d counts as [1])
 * @returns int64, x's shape with `dim` resized to k
 * @throws LoomIndexError when k is outside [0, size of dim] (torch: "selected index k out of range")
 */
export const argsort: KernelOp<ArgsortAttrs> = defineOp<ArgsortAttrs, KernelOp<ArgsortAttrs>>({
  kind: "kernel", arity: 1, name: "argsort",
  shape: ([x], a) => {
    const s = x!.shape.length ? [...x!.shape] : [1];
    const n = s[a.dim]!;
    if (!Number.isInteger(a.k) || a.k < 0 || a.k > n) {
      throw new LoomIndexError(`[argsort] selected index k out of range: k = ${a.k} for dim ${a.dim} of size ${n} (input ${fmtShape(x!.shape)})`);
    }
    s[a.dim] = a.k;
    return x!.shape.length ? s : [];
  },
  dtype: () => "int64",
  ref: ([x], a, out) => {
    // values decoded (half types) in row-major order: element (o, j, i) at (o·n + j)·inner + i
    const v = toFloat64(x!);
    const s = x!.shape.length ? x!.shape : [1];
    const n = s[a.dim]!;
    let outer = 1, inner = 1;
    for (let d = 0; d < a.dim; d++) outer *= s[d]!;
    for (let d = a.dim + 1; d < s.length; d++) inner *= s[d]!;
    const k = a.k;
    const idx = new Array<number>(n);
    const key = new Float64Array(n);
    const cmp = a.descending
      ? (p: number, q: number) => ascending(key[q]!, key[p]!) || p - q
      : (p: number, q: number) => ascending(key[p]!, key[q]!) || p - q;
    for (let o = 0; o < outer; o++) {
      for (let i = 0; i < inner; i++) {
        const base = o * n * inner + i;
        for (let j = 0; j < n; j++) {
          idx[j] = j;
          key[j] = v[base + j * inner]!;
        }
        const ob = o * k * inner + i;
        if (k * 16 < n) {
          // topk of a long row (sampling over a vocabulary): the first k under the same total order
          // (value, then index) kept in a bounded heap, O(n log k); then sorted as the full sort would
          const top = firstK(idx, n, k, cmp);
          for (let r = 0; r < k; r++) out.data[ob + r * inner] = top[r]!;
        } else {
          idx.sort(cmp);
          for (let r = 0; r < k; r++) out.data[ob + r * inner] = idx[r]!;
        }
      }
    }
  },
  describe: (a) => `dim=${a.dim}${a.descending ? " descending" : ""} k=${a.k}`,
});


/**
 * The first k of positions 0..n-1 under `cmp` (a total order: ties broken by position), in order.
 * A max-heap on `cmp` of size k holds the best k seen; its root is the worst of them.
 */
function firstK(scratch: number[], n: number, k: number, cmp: (p: number, q: number) => number): number[] {
  if (k === 0) return [];
  const h = scratch; // reused: h[0..size) is the heap
  let size = 0;
  const down = (i: number): void => {
    for (;;) {
      const l = 2 * i + 1, r = l + 1;
      let m = i;
      if (l < size && cmp(h[l]!, h[m]!) > 0) m = l;
      if (r < size && cmp(h[r]!, h[m]!) > 0) m = r;
      if (m === i) return;
      const t = h[i]!; h[i] = h[m]!; h[m] = t;
      i = m;
    }
  };
  for (let j = 0; j < n; j++) {
    if (size < k) {
      // sift up
      let i = size++;
      h[i] = j;
      while (i > 0) {
        const p = (i - 1) >> 1;
        if (cmp(h[i]!, h[p]!) <= 0) break;
        const t = h[i]!; h[i] = h[p]!; h[p] = t;
        i = p;
      }
    } else if (cmp(j, h[0]!) < 0) {
      h[0] = j;
      down(0);
    }
  }
  return h.slice(0, k).sort(cmp);
}
