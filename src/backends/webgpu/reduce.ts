/**
 * Reductions (sum, amax, amin over any dims) and the lane-wise kernels argmax/argmin and cumsum.
 *
 * A reduction sees its input as [kept dims..., reduced dims...] (a permuted view, no copy); both
 * groups are collapsed. Rows are never folded in one long float32 sequence (which loses 2^25 ones
 * at 2^24): short rows fold in blocks of 8 per thread, long ones in tiles (a workgroup tree over 16
 * values per thread) and further passes over the tiles' partials (`reduceRows`, which fused
 * reductions share). The fold (`init`/`step`) is the WGSL counterpart of the registry op's.
 */
import { LoomIndexError } from "../../tensor/errors.ts";
import { convertExpr, storeExpr, WGSL_COMMON, type Wgsl } from "./dtype.ts";
import { collapse, contiguous, groupsFor, linearIndex, numelOf, padRank, type Ctx, type OpsOfKind, type View } from "./context.ts";
import { computeType, helpersFor } from "./elementwise.ts";
import type { PBuf } from "./memory.ts";
import { PARAMS_WGSL } from "./queue.ts";

export interface Fold { readonly init: string; readonly step: (acc: string, x: string) => string }

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

/** Threads of a tile workgroup, elements each thread folds per tile, elements per tile. */
const WG = 64, PER = 16, TILE = WG * PER;
/** Rows shorter than this fold in one thread (blocks of 8), longer ones in tiles of TILE elements. */
export const SERIAL_MAX = 128;

/**
 * Where pass 1 of a row reduction reads from. Its bindings start at 2 (1 is the output), its
 * parameter words at 3 (0-2 are outN, R and the tile count G).
 */
export interface RowSource {
  /** Binding declarations and helper functions. */
  readonly decls: string;
  /** Buffers bound from 2 on; `null`: the error ring (written), for a source that can fault. */
  readonly bufs: readonly (PBuf | null)[];
  readonly params: readonly number[];
  /** Statements run once per row `o` (u32) before its loads. */
  readonly row: string;
  /** Statements ending in `let v: <ct> = ...;`, element `j` (an identifier) of row `o`. */
  readonly load: (j: string) => string;
}

/** How the last pass writes row `o`'s result: statements from the folded value; may use the source's decls. */
export type RowStore = (acc: string) => string;

/**
 * One row-reduction pass. "serial": a thread per row folding blocks of 8 values, the blocks'
 * folds then folded (at most 8 + R/8 roundings per sum for R < SERIAL_MAX). "tile": a workgroup
 * per (row, tile of TILE elements); each thread folds PER elements strided by WG (coalesced),
 * then a tree in workgroup memory; with G > 1 tiles the partials go to `out[o * G + tile]` for
 * the next pass.
 */
function passSource(mode: "serial" | "tile", fold: Fold, ct: Wgsl, outT: Wgsl, src: RowSource, store: RowStore | null): string {
  const body = mode === "serial"
    ? `let o = ${linearIndex(64)};
  if (o >= p(0u)) { return; }
  ${src.row}
  var acc: ${ct} = ${fold.init};
  var blk: ${ct} = ${fold.init};
  for (var j = 0u; j < p(1u); j++) {
    ${src.load("j")}
    blk = ${fold.step("blk", "v")};
    if ((j & 7u) == 7u) { acc = ${fold.step("acc", "blk")}; blk = ${fold.init}; }
  }
  acc = ${fold.step("acc", "blk")};
  ${store!("acc")}`
    : `let wg = wid.x + wid.y * nw.x;
  let G = p(2u);
  let o = wg / G;
  if (o >= p(0u)) { return; }
  ${src.row}
  let R = p(1u);
  let t0 = (wg - o * G) * ${TILE}u;
  let tend = min(R, t0 + ${TILE}u); // a bound only known at run time: the loop stays a loop (NIR unrolls constant ones)
  var acc: ${ct} = ${fold.init};
  for (var j = t0 + lid.x; j < tend; j += ${WG}u) {
    ${src.load("j")}
    acc = ${fold.step("acc", "v")};
  }
  sh[lid.x] = acc;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s = s >> 1u) {
    if (lid.x < s) { let a = sh[lid.x]; let b = sh[lid.x + s]; sh[lid.x] = ${fold.step("a", "b")}; }
    workgroupBarrier();
  }
  if (lid.x == 0u) {
    let r = sh[0];
    ${store ? store("r") : "out[wg] = r;"}
  }`;
  const text = `${src.decls}
${body}`;
  return `${PARAMS_WGSL}${WGSL_COMMON}${helpersFor(text)}
@group(0) @binding(1) var<storage, read_write> out: array<${outT}>;
${src.decls}
${mode === "tile" ? `var<workgroup> sh: array<${ct}, ${WG}>;` : ""}
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  ${body}
}`;
}

/**
 * Reduce `outN` rows of `R` elements read through `src` into `out` (binding 1, element type
 * `outT`), `store` writing each row's result. Never a long sequential float sum: rows shorter
 * than SERIAL_MAX fold in blocks of 8 in one thread; longer rows fold PER elements per thread,
 * then trees over a workgroup's WG threads and, across tiles, further passes over the partials
 * (about PER + log2(R) roundings on any path, so 2^25 ones sum exactly). The last pass binds the
 * source's buffers too (an epilogue may read them) and the partials after them.
 */
export function reduceRows(ctx: Ctx, op: string, fold: Fold, ct: Wgsl, outN: number, R: number, src: RowSource, out: { buf: PBuf; t: Wgsl }, store: RowStore): void {
  if (outN === 0) return;
  const last = { ...src, row: "", load: () => "" };
  let cur = src, n = R;
  let part: View | null = null;
  for (;;) {
    const mode = n < SERIAL_MAX ? "serial" : "tile";
    const G = mode === "serial" ? 1 : Math.ceil(n / TILE);
    const final = G === 1;
    const target = final ? out : ctx.temp(ct === "f32" ? "float32" : "int32", [outN * G], op);
    const access = ["rw" as const, ...cur.bufs.map((b) => (b ? "r" as const : "rw" as const))];
    const source = passSource(mode, fold, ct, final ? out.t : ct, cur, final ? store : null);
    ctx.q.dispatch({ source, access }, [outN, n, G, ...cur.params], [target.buf, ...cur.bufs], mode === "serial" ? groupsFor(outN, WG) : outN * G);
    if (part) ctx.q.pool.release(part.buf);
    if (final) return;
    part = target as View;
    // the next pass reads the partials [outN, G]; only the last one keeps the source's bindings
    const keep = Math.ceil(G / TILE) <= 1 || G < SERIAL_MAX ? last : { decls: "", bufs: [], params: [], row: "", load: () => "" };
    const b = 2 + keep.bufs.length;
    cur = {
      decls: `${keep.decls}\n@group(0) @binding(${b}) var<storage, read> part: array<${ct}>;`,
      bufs: [...keep.bufs, part.buf], params: keep.params,
      row: "let pb = o * p(1u);", load: (j) => `let v = part[pb + ${j}];`,
    };
    n = G;
  }
}

/** Params: outN, R, G, offset, kept shape[nk], kept strides[nk], reduced shape[nr], reduced strides[nr]. */
function stridedSource(x: View, ct: Wgsl, nk: number, nr: number): RowSource {
  const K = 4, KS = 4 + nk, RS = 4 + 2 * nk, RST = 4 + 2 * nk + nr;
  return {
    decls: `@group(0) @binding(2) var<storage, read> x: array<${x.t}>;`,
    bufs: [x.buf], params: [],
    row: `var base = p(3u);\n  ${unravel("o", nk, (d) => K + d, [{ v: "base", stride: (d) => KS + d }])}`,
    load: (j) => `var off = base; ${unravel(j, nr, (d) => RS + d, [{ v: "off", stride: (d) => RST + d }])} let v = ${convertExpr(x.t, ct, "x[off]")};`,
  };
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
  const ct = computeType(out.dtype, [x]);
  const src = stridedSource(x, ct, s.ks.length, s.rs.length);
  const params = [x.offset, ...s.ks, ...s.kst, ...s.rs, ...s.rst];
  reduceRows(ctx, op, REDUCE_WGSL[op][ct] as Fold, ct, s.outN, s.R, { ...src, params }, out, (acc) => `out[o] = ${storeExpr(out.dtype, ct, acc)};`);
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
