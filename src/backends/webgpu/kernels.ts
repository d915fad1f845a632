/**
 * WGSL launchers for the registry's `kernel` ops (tsc checks the table covers them all):
 * matmul, indexing (gather/scatter_add, index_select/index_add), tri, cat, slice_backward,
 * argmax/argmin, cumsum, argsort and the fused lora_linear.
 *
 * Scatters are deterministic: one thread per output lane walks the indexed dim in order, so
 * there are no atomics and sums come in the js reference's order. Out-of-range (and negative:
 * PyTorch rejects them) indices cannot throw on the GPU: the kernel records the first one in its
 * own error cell (queue.ts), which the output's storage and everything computed from it keep, and
 * every read of those raises the js reference's error (`indexError`: LoomIndexError, worded for
 * the composite in `IndexAttrs.caller`; one_hot's LoomValueError).
 */
import type { ArgAttrs, CumsumAttrs } from "../../graph/ops/reduce.ts";
import type { LoraAttrs } from "../../graph/ops/lora.ts";
import type { ArgsortAttrs } from "../../graph/ops/sort.ts";
import type { DimAttrs, SliceBackwardAttrs } from "../../graph/ops/movement.ts";
import { indexError, type IndexAttrs, type TriAttrs } from "../../graph/ops/linalg_index.ts";
import { LoomShapeError } from "../../tensor/errors.ts";
import { normalizeDim } from "../../tensor/shape.ts";
import { storeExpr, WGSL_COMMON } from "./dtype.ts";
import { collapse, contiguous, groupsFor, linearIndex, numelOf, padRank, type Ctx, type OpsOfKind, type View } from "./context.ts";
import { launchElementwise } from "./elementwise.ts";
import { launchGemm, launchMatmul } from "./matmul.ts";
import { launchQuantizedLinear } from "./quantized.ts";
import { ERR_WGSL, PARAMS_WGSL } from "./queue.ts";
import { launchRotaryEmbedding } from "./rope.ts";
import { launchArg, launchCumsum, unravel } from "./reduce.ts";
import { launchSpmm } from "./spmm.ts";

/** A kernel launcher: inputs are operand views, `out` a fresh dense output. */
export type Launch = (ctx: Ctx, ins: readonly View[], attrs: any, out: View) => void;

/** out (dense) = values of `src` converted to out's dtype. */
function copyInto(ctx: Ctx, src: View, out: View, shape = src.shape): void {
  launchElementwise(ctx, "contiguous", [{ kind: "buf", view: src }], shape, { view: out, dense: true });
}

/** A view of `out` (dense) restricted to [start, start+len) along dim. */
function sliceOf(out: View, dim: number, start: number, len: number, step = 1): View {
  const st = contiguous(out.shape);
  const shape = [...out.shape];
  shape[dim] = len;
  const strides = [...st];
  strides[dim] = st[dim]! * step;
  return { ...out, shape, strides, offset: out.offset + start * st[dim]! };
}

/**
 * Generic "index along dim" kernel: one thread per lane of `lanes` (a shape whose `dim` is 1 for
 * scatters); `body` gets `ox`, `oi`, `os`, `oo` (offsets of x, index, src, out for the lane) and
 * calls `report(1u, v)` for an index v outside [0, size): the error is the js reference's
 * (`indexError`, worded for `a.caller`: embedding, cross_entropy's target, one_hot's class).
 */
type IndexOp = "gather" | "scatter_add" | "index_select" | "index_add";
function laneKernel(ctx: Ctx, op: IndexOp, a: IndexAttrs, size: number, ins: string, lanes: readonly number[], strideLists: readonly (readonly number[])[], body: string, outT: string, extra: number[]): { source: string; params: number[] } {
  const nd = lanes.length;
  const names = ["ox", "oi", "os", "oo"].slice(0, strideLists.length);
  const cellWord = 1 + extra.length; // word of the error cell's offset, after n and extras
  const E = cellWord + 1; // first word after n, extras and the cell
  const S = E; // shape words
  const targets = names.map((v, k) => ({ v, stride: (d: number) => S + nd * (k + 1) + d }));
  const source = `${PARAMS_WGSL}${WGSL_COMMON}
@group(0) @binding(1) var<storage, read_write> out: array<${outT}>;
${ins}
${ERR_WGSL(5, cellWord)}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let i = ${linearIndex(64)};
  if (i >= p(0u)) { return; }
  ${names.map((v) => `var ${v} = 0u;`).join(" ")}
  ${unravel("i", nd, (d) => S + d, targets)}
  ${body}
}`;
  const cell = ctx.q.errorCell([(v) => indexError(op, v, size, a.dim, a.caller)]);
  return { source, params: [numelOf(lanes), ...extra, cell.word, ...lanes, ...strideLists.flat()] };
}

const gather: Launch = (ctx, [x, index], a: IndexAttrs, out) => {
  const dim = a.dim;
  const xs = x!.strides.map((s, d) => (d === dim ? 0 : s));
  const ost = contiguous(out.shape);
  // extra words: size, x offset, x dim stride, index offset
  const { source, params } = laneKernel(ctx, "gather", a, x!.shape[dim]!, `@group(0) @binding(2) var<storage, read> x: array<${x!.t}>;
@group(0) @binding(3) var<storage, read> ix: array<i32>;
@group(0) @binding(4) var<storage, read> unused: array<i32>;`, index!.shape, [xs, index!.strides, ost],
  `let v = ix[p(4u) + oi];
  let size = i32(p(1u));
  if (v < 0 || v >= size) { report(1u, v); return; }
  let k = u32(v);
  out[i] = x[p(2u) + ox + k * p(3u)];`, out.t, [x!.shape[dim]!, x!.offset, x!.strides[dim]!, index!.offset]);
  ctx.q.dispatch({ source, access: ["rw", "r", "r", "r", "rw"] }, params, [out.buf, x!.buf, index!.buf, index!.buf, null], groupsFor(numelOf(index!.shape), 64));
};

const scatter_add: Launch = (ctx, [x, index, src], a: IndexAttrs, out) => {
  copyInto(ctx, x!, out);
  const dim = a.dim;
  const lanes = index!.shape.map((s, d) => (d === dim ? 1 : s));
  const ost = contiguous(out.shape).map((s, d) => (d === dim ? 0 : s));
  const ct = out.t;
  const { source, params } = laneKernel(ctx, "scatter_add", a, x!.shape[dim]!, `@group(0) @binding(2) var<storage, read> src: array<${src!.t}>;
@group(0) @binding(3) var<storage, read> ix: array<i32>;
@group(0) @binding(4) var<storage, read> unused: array<i32>;`, lanes, [lanes.map(() => 0), index!.strides, src!.strides, ost],
  `let size = i32(p(1u));
  for (var j = 0u; j < p(2u); j++) {
    let v = ix[p(3u) + oi + j * p(4u)];
    if (v < 0 || v >= size) { report(1u, v); return; }
    let k = u32(v);
    let t = oo + k * p(7u);
    out[t] = ${storeExpr(out.dtype, ct, `out[t] + ${ct}(src[p(5u) + os + j * p(6u)])`)};
  }`, out.t, [x!.shape[dim]!, index!.shape[dim] ?? 1, index!.offset, index!.strides[dim] ?? 0, src!.offset, src!.strides[dim] ?? 0, contiguous(out.shape)[dim] ?? 0]);
  ctx.q.dispatch({ source, access: ["rw", "r", "r", "r", "rw"] }, params, [out.buf, src!.buf, index!.buf, index!.buf, null], groupsFor(numelOf(lanes), 64));
};

const index_select: Launch = (ctx, [x, index], a: IndexAttrs, out) => {
  const dim = a.dim;
  const xs = x!.strides.map((s, d) => (d === dim ? 0 : s));
  // the position along dim of each output element: a stride-1 counter over out's dim
  const pos = out.shape.map((_, d) => (d === dim ? 1 : 0));
  const { source, params } = laneKernel(ctx, "index_select", a, x!.shape[dim]!, `@group(0) @binding(2) var<storage, read> x: array<${x!.t}>;
@group(0) @binding(3) var<storage, read> ix: array<i32>;
@group(0) @binding(4) var<storage, read> unused: array<i32>;`, out.shape, [xs, pos],
  `let v = ix[p(4u) + oi * p(5u)];
  let size = i32(p(1u));
  if (v < 0 || v >= size) { report(1u, v); return; }
  let k = u32(v);
  out[i] = x[p(2u) + ox + k * p(3u)];`, out.t, [x!.shape[dim]!, x!.offset, x!.strides[dim]!, index!.offset, index!.strides[0] ?? 0]);
  ctx.q.dispatch({ source, access: ["rw", "r", "r", "r", "rw"] }, params, [out.buf, x!.buf, index!.buf, index!.buf, null], groupsFor(numelOf(out.shape), 64));
};

const index_add: Launch = (ctx, [x, index, src], a: IndexAttrs, out) => {
  copyInto(ctx, x!, out);
  const dim = a.dim;
  const lanes = src!.shape.map((s, d) => (d === dim ? 1 : s));
  const ost = contiguous(out.shape).map((s, d) => (d === dim ? 0 : s));
  const ct = out.t;
  const { source, params } = laneKernel(ctx, "index_add", a, x!.shape[dim]!, `@group(0) @binding(2) var<storage, read> src: array<${src!.t}>;
@group(0) @binding(3) var<storage, read> ix: array<i32>;
@group(0) @binding(4) var<storage, read> unused: array<i32>;`, lanes, [lanes.map(() => 0), lanes.map(() => 0), src!.strides, ost],
  `let size = i32(p(1u));
  for (var j = 0u; j < p(2u); j++) {
    let v = ix[p(3u) + j * p(4u)];
    if (v < 0 || v >= size) { report(1u, v); return; }
    let k = u32(v);
    let t = oo + k * p(7u);
    out[t] = ${storeExpr(out.dtype, ct, `out[t] + ${ct}(src[p(5u) + os + j * p(6u)])`)};
  }`, out.t, [x!.shape[dim]!, numelOf(index!.shape), index!.offset, index!.strides[0] ?? 0, src!.offset, src!.strides[dim]!, contiguous(out.shape)[dim]!]);
  ctx.q.dispatch({ source, access: ["rw", "r", "r", "r", "rw"] }, params, [out.buf, src!.buf, index!.buf, index!.buf, null], groupsFor(numelOf(lanes), 64));
};

const tri: Launch = (ctx, [x], a: TriAttrs, out) => {
  const nd = x!.shape.length;
  const R = x!.shape[nd - 2]!, C = x!.shape[nd - 1]!;
  const n = numelOf(x!.shape);
  if (n === 0) return;
  const zero = x!.t === "f32" ? "0.0" : "0";
  const keep = a.upper ? "i32(c) - i32(r) >= pi(3u)" : "i32(c) - i32(r) <= pi(3u)";
  const source = `${PARAMS_WGSL}
@group(0) @binding(1) var<storage, read_write> out: array<${out.t}>;
@group(0) @binding(2) var<storage, read> x: array<${x!.t}>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let i = ${linearIndex(64)};
  if (i >= p(0u)) { return; }
  var ox = p(4u);
  ${unravel("i", nd, (d) => 5 + d, [{ v: "ox", stride: (d) => 5 + nd + d }])}
  let c = i % p(2u);
  let r = (i / p(2u)) % p(1u);
  out[i] = select(${zero}, x[ox], ${keep});
}`;
  const diag = new Int32Array([a.diagonal]);
  ctx.q.dispatch({ source, access: ["rw", "r"] }, [n, R, C, new Uint32Array(diag.buffer)[0]!, x!.offset, ...x!.shape, ...x!.strides], [out.buf, x!.buf], groupsFor(n, 64));
};

const cat: Launch = (ctx, ins, a: DimAttrs, out) => {
  let start = 0;
  for (const x of ins) {
    const len = x.shape[a.dim]!;
    if (len > 0) launchElementwise(ctx, "contiguous", [{ kind: "buf", view: x }], x.shape, { view: sliceOf(out, a.dim, start, len), dense: false });
    start += len;
  }
};

const slice_backward: Launch = (ctx, [g], a: SliceBackwardAttrs, out) => {
  ctx.q.clear(out.buf, numelOf(out.shape) * 4);
  const len = g!.shape[a.dim]!;
  if (len > 0) launchElementwise(ctx, "contiguous", [{ kind: "buf", view: g! }], g!.shape, { view: sliceOf(out, a.dim, a.start, len, a.step), dense: false });
};

const matmul: Launch = (ctx, [a, b], _attrs, out) => launchMatmul(ctx, a!, b!, out);

/** x [..., in] as a matrix [M, in]: its leading dims must collapse to one stride, else copy. */
function asMatrix(ctx: Ctx, x: View): { v: View; M: number; rs: number; temp: View | null } {
  const lead = x.shape.slice(0, -1);
  const M = numelOf(lead);
  const c = collapse(lead, [x.strides.slice(0, -1)]);
  if (c.shape.length <= 1) return { v: x, M, rs: c.strides[0]![0] ?? 0, temp: null };
  const t = ctx.temp(x.dtype, x.shape, "lora_linear");
  copyInto(ctx, x, t);
  return { v: t, M, rs: x.shape[x.shape.length - 1]!, temp: t };
}

/** y = x Wᵀ + b + s·(x Aᵀ) Bᵀ as three GEMMs, the last with the add/bias/scale epilogue. */
const lora_linear: Launch = (ctx, [x, W, A, B, bias], a: LoraAttrs, out) => {
  const fin = x!.shape[x!.shape.length - 1]!, fout = W!.shape[0]!, r = A!.shape[0]!;
  const xm = asMatrix(ctx, x!);
  const M = xm.M;
  if (M === 0 || fout === 0) return;
  const common = { batch: [], aBatch: [], bBatch: [] };
  const Y = ctx.temp(out.dtype, [M, fout], "lora_linear");
  const H = ctx.temp(out.dtype, [M, r], "lora_linear");
  const xk = xm.v.strides[xm.v.strides.length - 1]!;
  launchGemm(ctx, { ...common, a: xm.v, b: W!, out: Y, M, N: fout, K: fin, am: xm.rs, ak: xk, bk: W!.strides[1]!, bn: W!.strides[0]! });
  if (r > 0) launchGemm(ctx, { ...common, a: xm.v, b: A!, out: H, M, N: r, K: fin, am: xm.rs, ak: xk, bk: A!.strides[1]!, bn: A!.strides[0]! });
  else ctx.q.clear(H.buf, 4);
  if (r === 0) {
    // no adapter: out = Y + bias
    launchElementwise(ctx, "add", [{ kind: "buf", view: Y }, bias && a.has_bias ? { kind: "buf", view: { ...bias, shape: [M, fout], strides: [0, bias.strides[0]!] } } : { kind: "imm", t: out.t, dtype: out.dtype, value: 0 }], [M, fout], { view: out, dense: true });
  } else {
    launchGemm(ctx, {
      ...common, a: H, b: B!, out, M, N: fout, K: r, am: r, ak: 1, bk: B!.strides[1]!, bn: B!.strides[0]!,
      alpha: a.scaling, c: Y, bias: a.has_bias ? bias : undefined,
    });
  }
  ctx.q.pool.release(Y.buf);
  ctx.q.pool.release(H.buf);
  if (xm.temp) ctx.q.pool.release(xm.temp.buf);
};

const argmax: Launch = (ctx, [x], a: ArgAttrs, out) => argLaunch(ctx, "argmax", x!, a, out);
const argmin: Launch = (ctx, [x], a: ArgAttrs, out) => argLaunch(ctx, "argmin", x!, a, out);
function argLaunch(ctx: Ctx, op: "argmax" | "argmin", x: View, a: ArgAttrs, out: View): void {
  const nd = x.shape.length;
  const dims = a.dim === null || nd === 0 ? x.shape.map((_, i) => i) : [normalizeDim(op, a.dim, nd)];
  launchArg(ctx, op, x, dims, out);
}

const cumsum: Launch = (ctx, [x], a: CumsumAttrs, out) => {
  const nd = x!.shape.length;
  launchCumsum(ctx, x!, nd === 0 ? 0 : normalizeDim("cumsum", a.dim, nd), a.reverse, out);
};

/**
 * argsort (sort/topk/kthvalue): rank by counting, one thread per element. Element j of a lane
 * has rank r = #{m : m comes before j} in the reference's order (NaN largest, ties by index, so
 * ranks are a permutation) and writes out[r] = j when r < k. O(n²) work per lane: fine for the
 * rows models sort (vocabularies), simple, and equal to the js reference by construction.
 */
const argsort: Launch = (ctx, [x0], a: ArgsortAttrs, out) => {
  const x = rank1(x0!);
  const dim = a.dim;
  const n = x.shape[dim]!;
  const ost = contiguous(x.shape.map((s, d) => (d === dim ? a.k : s)));
  const outer = x.shape.map((_, d) => d).filter((d) => d !== dim);
  const c = collapse(outer.map((d) => x.shape[d]!), [outer.map((d) => x.strides[d]!), outer.map((d) => ost[d]!)]);
  const lanes = numelOf(c.shape);
  const total = lanes * n;
  if (total === 0 || a.k === 0) return;
  const no = padRank(c.shape, c.strides);
  const S = 6, XS = 6 + no, OS = 6 + 2 * no;
  const isF = x.t === "f32";
  // less(p, q): p sorts strictly before q ignoring ties (ascending; NaN is the largest)
  const less = isF ? "(!is_nan(p) && (is_nan(q) || p < q))" : "(p < q)";
  const same = isF ? "((is_nan(p) && is_nan(q)) || p == q)" : "(p == q)";
  const source = `${PARAMS_WGSL}${WGSL_COMMON}
@group(0) @binding(1) var<storage, read_write> out: array<i32>;
@group(0) @binding(2) var<storage, read> x: array<${x.t}>;
fn less(p: ${x.t}, q: ${x.t}) -> bool { return ${less}; }
fn same(p: ${x.t}, q: ${x.t}) -> bool { return ${same}; }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let i = ${linearIndex(64)};
  if (i >= p(0u)) { return; }
  let n = p(1u);
  let l = i / n;
  let j = i % n;
  var xb = p(2u);
  var ob = 0u;
  ${unravel("l", no, (d) => S + d, [{ v: "xb", stride: (d) => XS + d }, { v: "ob", stride: (d) => OS + d }])}
  let xs = p(3u);
  let v = x[xb + j * xs];
  var r = 0u;
  for (var m = 0u; m < n; m++) {
    let w = x[xb + m * xs];
    if (${a.descending ? "less(v, w)" : "less(w, v)"} || (m < j && same(w, v))) { r++; }
  }
  if (r < p(5u)) { out[ob + r * p(4u)] = i32(j); }
}`;
  ctx.q.dispatch({ source, access: ["rw", "r"] }, [total, n, x.offset, x.strides[dim]!, ost[dim]!, a.k, ...c.shape, ...c.strides[0]!, ...c.strides[1]!], [out.buf, x.buf], groupsFor(total, 64));
};

/** A 0-d operand as [1] (stride 0): PyTorch's index ops treat a scalar as a 1-element vector along dim 0. */
const rank1 = (v: View): View => (v.shape.length ? v : { ...v, shape: [1], strides: [0] });
/** The index kernels see 0-d inputs and outputs as 1-element vectors (one element either way). */
const atLeast1d = (launch: Launch): Launch => (ctx, ins, a, out) => launch(ctx, ins.map(rank1), a, rank1(out));

/** Every kernel op of the registry, on the GPU. */
export const KERNELS = {
  matmul, gather: atLeast1d(gather), scatter_add: atLeast1d(scatter_add), index_select: atLeast1d(index_select), index_add: atLeast1d(index_add), tri, cat, slice_backward, lora_linear, argmax, argmin, cumsum, argsort, spmm: launchSpmm,
  quantized_linear: launchQuantizedLinear, rotary_embedding: launchRotaryEmbedding,
} satisfies Record<OpsOfKind<"kernel">, Launch>;

export function checkRank(op: string, shape: readonly number[], max = 12): void {
  if (shape.length > max) throw new LoomShapeError(`[${op}] tensors of rank ${shape.length} exceed the webgpu kernels' limit of ${max}`);
}
