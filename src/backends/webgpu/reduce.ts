/**
 * Reductions (sum, amax, amin over any dims) and the lane-wise kernels argmax/argmin and cumsum.
 *
 * A reduction sees its input as [kept dims..., reduced dims...] (a permuted view, no copy); both
 * groups are collapsed. Small reductions use one thread per output; long ones (>= 128 elements)
 * one 64-thread workgroup per output: strided partial folds, then a tree in workgroup memory.
 * The fold (`init`/`step`) is the WGSL counterpart of the registry op's.
 */
import type { DType } from "../../tensor/dtype.ts";
import { LoomIndexError } from "../../tensor/errors.ts";
import { convertExpr, storeExpr, WGSL_COMMON, type Wgsl } from "./dtype.ts";
import { collapse, contiguous, groupsFor, linearIndex, numelOf, padRank, type Ctx, type OpsOfKind, type View } from "./context.ts";
import { computeType } from "./elementwise.ts";
import { PARAMS_WGSL, type Kernel } from "./queue.ts";

interface Fold { readonly init: string; readonly step: (acc: string, x: string) => string }

/** init/step per reduce op of the registry, in f32 and i32 (src/graph/ops/reduce.ts is the spec). */
export const REDUCE_WGSL = {
  sum: {
    f32: { init: "0.0", step: (a, x) => `${a} + ${x}` },
    i32: { init: "0", step: (a, x) => `${a} + ${x}` },
  },
  amax: {
    f32: { init: "-f_inf()", step: (a, x) => `select(${a}, ${x}, ${x} > ${a} || is_nan(${x}))` },
    i32: { init: "i32(-2147483648)", step: (a, x) => `max(${a}, ${x})` },
  },
  amin: {
    f32: { init: "f_inf()", step: (a, x) => `select(${a}, ${x}, ${x} < ${a} || is_nan(${x}))` },
    i32: { init: "i32(2147483647)", step: (a, x) => `min(${a}, ${x})` },
  },
} satisfies Record<OpsOfKind<"reduce">, Record<Wgsl, Fold>>;

/** WGSL lines adding the offsets of linear index `src` over `nd` dims at param words. */
export function unravel(src: string, nd: number, shapeWord: (d: number) => number, targets: readonly { v: string; stride: (d: number) => number }[]): string {
  if (nd === 0 || targets.length === 0) return "";
  const lines = [`var r_${src} = ${src};`];
  for (let d = nd - 1; d >= 0; d--) {
    const add = targets.map((t) => `${t.v} += c * p(${t.stride(d)}u);`).join(" ");
    lines.push(d > 0 ? `{ let s = p(${shapeWord(d)}u); let c = r_${src} % s; r_${src} = r_${src} / s; ${add} }` : `{ let c = r_${src}; ${add} }`);
  }
  return lines.join("\n  ");
}

/** Params: outN, R, offset, kept shape[nk], kept strides[nk], reduced shape[nr], reduced strides[nr]. */
function reduceKernel(op: keyof typeof REDUCE_WGSL, inT: Wgsl, ct: Wgsl, outDtype: DType, outT: Wgsl, nk: number, nr: number, group: boolean): Kernel {
  const fold = REDUCE_WGSL[op][ct] as Fold;
  const K = 3, KS = 3 + nk, RS = 3 + 2 * nk, RST = 3 + 2 * nk + nr;
  const kept = unravel("o", nk, (d) => K + d, [{ v: "base", stride: (d) => KS + d }]);
  const red = unravel("j", nr, (d) => RS + d, [{ v: "off", stride: (d) => RST + d }]);
  const load = convertExpr(inT, ct, "x[off]");
  const head = `${PARAMS_WGSL}${WGSL_COMMON}
@group(0) @binding(1) var<storage, read_write> out: array<${outT}>;
@group(0) @binding(2) var<storage, read> x: array<${inT}>;`;
  const foldLoop = (start: string, step: string) => `var acc: ${ct} = ${fold.init};
  for (var j = ${start}; j < p(1u); j += ${step}) {
    var off = base;
    ${red}
    let v = ${load};
    acc = ${fold.step("acc", "v")};
  }`;
  const source = group
    ? `${head}
var<workgroup> sh: array<${ct}, 64>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let o = wid.x + wid.y * nw.x;
  if (o >= p(0u)) { return; }
  var base = p(2u);
  ${kept}
  ${foldLoop("lid.x", "64u")}
  sh[lid.x] = acc;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s = s >> 1u) {
    if (lid.x < s) { let a = sh[lid.x]; let b = sh[lid.x + s]; sh[lid.x] = ${fold.step("a", "b")}; }
    workgroupBarrier();
  }
  if (lid.x == 0u) { out[o] = ${storeExpr(outDtype, ct, "sh[0]")}; }
}`
    : `${head}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let o = ${linearIndex(64)};
  if (o >= p(0u)) { return; }
  var base = p(2u);
  ${kept}
  ${foldLoop("0u", "1u")}
  out[o] = ${storeExpr(outDtype, ct, "acc")};
}`;
  return { source, access: ["rw", "r"] };
}

/** Split x's dims into kept and reduced (collapsed), for reduction-like kernels. */
function split(x: View, dims: readonly number[]) {
  const keptDims = x.shape.map((_, i) => i).filter((i) => !dims.includes(i));
  const k = collapse(keptDims.map((d) => x.shape[d]!), [keptDims.map((d) => x.strides[d]!)]);
  const r = collapse(dims.map((d) => x.shape[d]!), [dims.map((d) => x.strides[d]!)]);
  padRank(k.shape, k.strides);
  padRank(r.shape, r.strides);
  return { ks: k.shape, kst: k.strides[0]!, rs: r.shape, rst: r.strides[0]!, outN: numelOf(k.shape), R: numelOf(r.shape) };
}

/** out (dense, the reduced shape) = fold of x over `dims`. */
export function launchReduce(ctx: Ctx, op: keyof typeof REDUCE_WGSL, x: View, dims: readonly number[], out: View): void {
  const s = split(x, dims);
  if (s.outN === 0) return;
  const ct = computeType(out.dtype, [x]);
  const group = s.R >= 128;
  const k = reduceKernel(op, x.t, ct, out.dtype, out.t, s.ks.length, s.rs.length, group);
  const params = [s.outN, s.R, x.offset, ...s.ks, ...s.kst, ...s.rs, ...s.rst];
  ctx.q.dispatch(k, params, [out.buf, x.buf], group ? s.outN : groupsFor(s.outN, 64));
}

/**
 * argmax/argmin: index of the first extreme along the reduced dims (row-major over them, so
 * `dim=null` gives the flat index); NaN wins at once, as the js reference.
 */
export function launchArg(ctx: Ctx, op: "argmax" | "argmin", x: View, dims: readonly number[], out: View): void {
  const s = split(x, dims);
  if (s.R === 0) throw new LoomIndexError(`[${op}] expected reduction dim ${dims[0] ?? 0} to have non-zero size`);
  if (s.outN === 0) return;
  const nk = s.ks.length, nr = s.rs.length;
  const K = 3, KS = 3 + nk, RS = 3 + 2 * nk, RST = 3 + 2 * nk + nr;
  const better = op === "argmax" ? ">" : "<";
  const isF = x.t === "f32";
  const source = `${PARAMS_WGSL}${WGSL_COMMON}
@group(0) @binding(1) var<storage, read_write> out: array<i32>;
@group(0) @binding(2) var<storage, read> x: array<${x.t}>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let o = ${linearIndex(64)};
  if (o >= p(0u)) { return; }
  var base = p(2u);
  ${unravel("o", nk, (d) => K + d, [{ v: "base", stride: (d) => KS + d }])}
  var best = 0u;
  var bv = x[base];
  for (var j = 1u; j < p(1u); j++) {
    ${isF ? "if (is_nan(bv)) { break; }" : ""}
    var off = base;
    ${unravel("j", nr, (d) => RS + d, [{ v: "off", stride: (d) => RST + d }])}
    let v = x[off];
    if (${isF ? "is_nan(v) || " : ""}v ${better} bv) { bv = v; best = j; }
  }
  out[o] = i32(best);
}`;
  ctx.q.dispatch({ source, access: ["rw", "r"] }, [s.outN, s.R, x.offset, ...s.ks, ...s.kst, ...s.rs, ...s.rst], [out.buf, x.buf], groupsFor(s.outN, 64));
}

/** cumsum along `dim` (one thread per lane, sequential along the lane; `reverse` from the end). */
export function launchCumsum(ctx: Ctx, x: View, dim: number, reverse: boolean, out: View): void {
  const nd = x.shape.length;
  const n = nd === 0 ? 1 : x.shape[dim]!;
  const outer = x.shape.map((_, i) => i).filter((i) => i !== dim);
  const ost = contiguous(out.shape);
  const c = collapse(outer.map((d) => x.shape[d]!), [outer.map((d) => x.strides[d]!), outer.map((d) => ost[d]!)]);
  const lanes = numelOf(c.shape);
  if (lanes === 0 || n === 0) return;
  const no = padRank(c.shape, c.strides);
  const ct = computeType(out.dtype, [x]);
  const S = 5, XS = 5 + no, OS = 5 + 2 * no;
  const source = `${PARAMS_WGSL}${WGSL_COMMON}
@group(0) @binding(1) var<storage, read_write> out: array<${out.t}>;
@group(0) @binding(2) var<storage, read> x: array<${x.t}>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let l = ${linearIndex(64)};
  if (l >= p(0u)) { return; }
  var xb = p(2u);
  var ob = 0u;
  ${unravel("l", no, (d) => S + d, [{ v: "xb", stride: (d) => XS + d }, { v: "ob", stride: (d) => OS + d }])}
  let n = p(1u);
  var acc: ${ct} = ${ct === "f32" ? "0.0" : "0"};
  for (var s = 0u; s < n; s++) {
    let k = ${reverse ? "n - 1u - s" : "s"};
    acc = acc + ${convertExpr(x.t, ct, "x[xb + k * p(3u)]")};
    out[ob + k * p(4u)] = ${storeExpr(out.dtype, ct, "acc")};
  }
}`;
  const xs = nd === 0 ? 0 : x.strides[dim]!, os = nd === 0 ? 0 : ost[dim]!;
  ctx.q.dispatch({ source, access: ["rw", "r"] }, [lanes, n, x.offset, xs, os, ...c.shape, ...c.strides[0]!, ...c.strides[1]!], [out.buf, x.buf], groupsFor(lanes, 64));
}
