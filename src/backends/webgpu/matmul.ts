/**
 * Tiled matrix multiply with workgroup shared memory: each 16×16 workgroup computes a 64×64 tile
 * of C (4×4 per thread, kept in registers), staging 64×16 panels of A and 16×64 panels of B in
 * workgroup memory per step of K. Operands are strided views (transposes and broadcast batch
 * dims need no copy). An optional epilogue computes `alpha·acc + C0 + bias` in the same pass,
 * which LoRA linear and linear+bias use.
 */
import type { DType } from "../../tensor/dtype.ts";
import { LoomValueError } from "../../tensor/errors.ts";
import type { PBuf } from "./memory.ts";
import { unravelInto } from "./program.ts";
import { convertExpr, scalarBits, storeExpr, WGSL_COMMON } from "./dtype.ts";
import { collapse, padRank, type Ctx, type View } from "./context.ts";
import { computeType, helpersFor } from "./elementwise.ts";
import { unravel } from "./reduce.ts";
import { PARAMS_WGSL, type Kernel } from "./queue.ts";

const TILE = 64, BK = 16;

/** One batched product out[b] = op(A[b] @ B[b]); out is dense [batch..., M, N]. */
export interface Gemm {
  a: View; b: View; out: View;
  M: number; N: number; K: number;
  /** Element strides of A's rows/cols and B's rows/cols. */
  am: number; ak: number; bk: number; bn: number;
  /** Batch dims (broadcast) and A's/B's strides over them. */
  batch: readonly number[]; aBatch: readonly number[]; bBatch: readonly number[];
  /** Epilogue: out = alpha·acc + c (dense like out) + bias[n] (a 1-D view). */
  alpha?: number; c?: View; bias?: View;
  /** Or a program epilogue (fused_matmul), built once the binding/param layout is known. */
  epi?: (firstBinding: number, firstWord: number) => Epilogue;
}

/** A fused epilogue: `fn epi(c, acc)` over the output's index space, with its own inputs. */
export interface Epilogue {
  decls: string[];
  fn: string;
  /** The output shape the program's index space is (row-major over out's flat index). */
  shape: readonly number[];
  /** dtype the product is rounded to before the epilogue reads it. */
  accDtype: DType;
  /** Buffers bound after the GEMM's; `null`: the error ring (written), for an epilogue that can fault. */
  bufs: (PBuf | null)[];
  params: number[];
}

/**
 * Params: M, N, K, am, ak, bk, bn, aoff, boff, alpha, coff, biasoff, biasstride,
 * batch shape[nb], A batch strides[nb], B batch strides[nb].
 */
function gemmKernel(g: Gemm, nb: number, ep?: Epilogue): Kernel {
  const ct = computeType(g.out.dtype, [g.a, g.b]);
  const zero = ct === "f32" ? "0.0" : "0";
  const vec = `vec4<${ct}>`;
  const B0 = 13;
  const batch = unravel("bz", nb, (d) => B0 + d, [
    { v: "aoff", stride: (d) => B0 + nb + d },
    { v: "boff", stride: (d) => B0 + 2 * nb + d },
  ]);
  const decl = [
    `@group(0) @binding(1) var<storage, read_write> out: array<${g.out.t}>;`,
    `@group(0) @binding(2) var<storage, read> A: array<${g.a.t}>;`,
    `@group(0) @binding(3) var<storage, read> B: array<${g.b.t}>;`,
  ];
  const access: ("r" | "rw")[] = ["rw", "r", "r"];
  if (g.c) { decl.push(`@group(0) @binding(${access.length + 1}) var<storage, read> C0: array<${g.c.t}>;`); access.push("r"); }
  if (g.bias) { decl.push(`@group(0) @binding(${access.length + 1}) var<storage, read> bias: array<${g.bias.t}>;`); access.push("r"); }
  let v = "acc[i][j]";
  if (g.alpha !== undefined) v = `${v} * ${ct === "f32" ? "pf(9u)" : "pi(9u)"}`;
  if (g.c) v = `${v} + ${convertExpr(g.c.t, ct, "C0[p(10u) + o]")}`;
  if (g.bias) v = `${v} + ${convertExpr(g.bias.t, ct, "bias[p(11u) + gn * p(12u)]")}`;
  let store = `out[o] = ${storeExpr(g.out.dtype, ct, v)};`;
  if (ep) {
    decl.push(...ep.decls);
    access.push(...ep.bufs.map((b) => (b ? "r" as const : "rw" as const)));
    store = `${unravelInto("ce", "o", ep.shape)}\n      out[o] = epi(ce, ${storeExpr(ep.accDtype, ct, "acc[i][j]")});`;
  }
  const source = `${PARAMS_WGSL}${WGSL_COMMON}
${decl.join("\n")}
${ep ? `${helpersFor(ep.fn)}\n${ep.fn}` : ""}
var<workgroup> As: array<${ct}, ${TILE * BK}>;
var<workgroup> Bs: array<${ct}, ${TILE * BK}>;
@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u) {
  let M = p(0u); let N = p(1u); let K = p(2u);
  let am = p(3u); let ak = p(4u); let bk = p(5u); let bn = p(6u);
  var aoff = p(7u); var boff = p(8u);
  let bz = wid.z;
  ${batch}
  let row0 = wid.y * ${TILE}u;
  let col0 = wid.x * ${TILE}u;
  let tid = lid.y * 16u + lid.x;
  var acc: array<${vec}, 4>;
  for (var k0 = 0u; k0 < K; k0 += ${BK}u) {
    for (var e = 0u; e < 4u; e++) {
      let idx = tid + e * 256u;
      let m = idx / ${BK}u; let ka = idx % ${BK}u;
      let gm = row0 + m; let gka = k0 + ka;
      var va: ${ct} = ${zero};
      if (gm < M && gka < K) { va = ${convertExpr(g.a.t, ct, "A[aoff + gm * am + gka * ak]")}; }
      As[ka * ${TILE}u + m] = va;
      let kb = idx / ${TILE}u; let nn = idx % ${TILE}u;
      let gkb = k0 + kb; let gn = col0 + nn;
      var vb: ${ct} = ${zero};
      if (gkb < K && gn < N) { vb = ${convertExpr(g.b.t, ct, "B[boff + gkb * bk + gn * bn]")}; }
      Bs[kb * ${TILE}u + nn] = vb;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < ${BK}u; kk++) {
      let ab = kk * ${TILE}u + lid.y * 4u;
      let bb = kk * ${TILE}u + lid.x * 4u;
      let bv = ${vec}(Bs[bb], Bs[bb + 1u], Bs[bb + 2u], Bs[bb + 3u]);
      acc[0] += As[ab] * bv;
      acc[1] += As[ab + 1u] * bv;
      acc[2] += As[ab + 2u] * bv;
      acc[3] += As[ab + 3u] * bv;
    }
    workgroupBarrier();
  }
  let obase = bz * M * N;
  for (var i = 0u; i < 4u; i++) {
    let gm = row0 + lid.y * 4u + i;
    if (gm >= M) { break; }
    for (var j = 0u; j < 4u; j++) {
      let gn = col0 + lid.x * 4u + j;
      if (gn >= N) { break; }
      let o = obase + gm * N + gn;
      ${store}
    }
  }
}`;
  return { source, access };
}

/**
 * One thread per output element, looping over K: for small products, where tiling gains nothing
 * and the tiled kernel's compile time (seconds on lavapipe) would dominate.
 */
function naiveKernel(g: Gemm, nb: number, ep?: Epilogue): Kernel {
  const t = gemmKernel(g, nb, ep);
  const ct = computeType(g.out.dtype, [g.a, g.b]);
  const head = t.source.slice(0, t.source.indexOf("var<workgroup>"));
  const from = t.source.indexOf(ep ? "var ce:" : "out[o] = ");
  const epi = t.source.slice(from, t.source.indexOf(";", t.source.indexOf("out[o] = ")) + 1).replaceAll("acc[i][j]", "acc");
  const source = `${head}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let M = p(0u); let N = p(1u); let K = p(2u);
  let i = gid.x + gid.y * nw.x * 64u;
  if (i >= M * N) { return; }
  var aoff = p(7u); var boff = p(8u);
  let bz = wid.z;
  ${unravel("bz", nb, (d) => 13 + d, [{ v: "aoff", stride: (d) => 13 + nb + d }, { v: "boff", stride: (d) => 13 + 2 * nb + d }])}
  let gm = i / N; let gn = i % N;
  var acc: ${ct} = ${ct === "f32" ? "0.0" : "0"};
  let ar = aoff + gm * p(3u); let bc = boff + gn * p(6u);
  for (var k = 0u; k < K; k++) {
    acc += ${convertExpr(g.a.t, ct, "A[ar + k * p(4u)]")} * ${convertExpr(g.b.t, ct, "B[bc + k * p(5u)]")};
  }
  let o = bz * M * N + i;
  ${epi}
}`;
  return { source, access: t.access };
}

/**
 * Register-blocked GEMM without workgroup memory, for CPU implementations of WebGPU (lavapipe):
 * each thread computes 8 rows × 4 columns, reading B as vec4 rows. On llvmpipe, which runs
 * invocations as SIMD lanes on the CPU, this is ~3× the tiled kernel (barriers and workgroup
 * memory are emulated). Needs f32 operands, B dense along N with N, B's offset and row stride
 * multiples of 4.
 */
function regKernel(g: Gemm, nb: number, ep?: Epilogue): Kernel {
  const t = gemmKernel(g, nb, ep);
  const head = t.source.slice(0, t.source.indexOf("var<workgroup>")).replace(
    "var<storage, read> B: array<f32>;", "var<storage, read> B: array<vec4<f32>>;");
  const from = t.source.indexOf(ep ? "var ce:" : "out[o] = ");
  const store = t.source.slice(from, t.source.indexOf(";", t.source.indexOf("out[o] = ")) + 1);
  const source = `${head}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let M = p(0u); let N = p(1u); let K = p(2u);
  let nb4 = N / 4u;
  let i = gid.x + gid.y * nw.x * 64u;
  let n4 = i % nb4;
  let m0 = (i / nb4) * 8u;
  if (m0 >= M) { return; }
  var aoff = p(7u); var boff = p(8u);
  let bz = wid.z;
  ${unravel("bz", nb, (d) => 13 + d, [{ v: "aoff", stride: (d) => 13 + nb + d }, { v: "boff", stride: (d) => 13 + 2 * nb + d }])}
  var acc: array<vec4<f32>, 8>;
  let b0 = boff / 4u + n4; let bk4 = p(5u) / 4u; let am = p(3u); let ak = p(4u);
  ${Array.from({ length: 8 }, (_, r) => `let a${r} = aoff + min(m0 + ${r}u, M - 1u) * am;`).join("\n  ")}
  for (var k = 0u; k < K; k++) {
    let bv = B[b0 + k * bk4];
    let kk = k * ak;
    ${Array.from({ length: 8 }, (_, r) => `acc[${r}] += A[a${r} + kk] * bv;`).join("\n    ")}
  }
  for (var i = 0u; i < 8u; i++) {
    let gm = m0 + i;
    if (gm >= M) { break; }
    for (var j = 0u; j < 4u; j++) {
      let gn = n4 * 4u + j;
      let o = bz * M * N + gm * N + gn;
      ${store}
    }
  }
}`;
  return { source, access: t.access };
}

/** Record one (batched) matmul. */
export function launchGemm(ctx: Ctx, g: Gemm): void {
  const bcol = collapse(g.batch, [g.aBatch, g.bBatch]);
  const nbatch = bcol.shape.reduce((p, s) => p * s, 1);
  if (g.M === 0 || g.N === 0 || nbatch === 0) return;
  if (nbatch > 65535) throw new LoomValueError(`[matmul] ${nbatch} batch matrices exceed the webgpu dispatch limit (65535)`);
  const nb = padRank(bcol.shape, bcol.strides);
  const tiled = g.M >= 16 && g.N >= 16 && g.M * g.N * g.K >= 1 << 18;
  const ct = computeType(g.out.dtype, [g.a, g.b]);
  const params = [
    g.M, g.N, g.K, g.am, g.ak, g.bk, g.bn, g.a.offset, g.b.offset,
    g.alpha === undefined ? 0 : scalarBits(ct, g.alpha, "matmul"), g.c ? g.c.offset : 0,
    g.bias ? g.bias.offset : 0, g.bias ? (g.bias.strides[0] ?? 0) : 0,
    ...bcol.shape, ...bcol.strides[0]!, ...bcol.strides[1]!,
  ];
  const bufs: (PBuf | null)[] = [g.out.buf, g.a.buf, g.b.buf, ...(g.c ? [g.c.buf] : []), ...(g.bias ? [g.bias.buf] : [])];
  const ep = g.epi?.(4, params.length);
  if (ep) {
    params.push(...ep.params);
    bufs.push(...ep.bufs);
  }
  const reg = ctx.q.ctx.software && g.M * g.N * g.K >= 1 << 15 && g.a.t === "f32" && g.b.t === "f32" && ct === "f32" &&
    g.bn === 1 && g.N % 4 === 0 && g.bk % 4 === 0 && g.b.offset % 4 === 0 && g.bBatch.every((s) => s % 4 === 0);
  if (reg) {
    const groups = Math.ceil((Math.ceil(g.M / 8) * (g.N / 4)) / 64);
    ctx.q.dispatch(regKernel(g, nb, ep), params, bufs, [Math.min(groups, 65535), Math.ceil(groups / 65535), nbatch]);
  } else if (tiled) ctx.q.dispatch(gemmKernel(g, nb, ep), params, bufs, [Math.ceil(g.N / TILE), Math.ceil(g.M / TILE), nbatch]);
  else {
    const groups = Math.ceil((g.M * g.N) / 64);
    ctx.q.dispatch(naiveKernel(g, nb, ep), params, bufs, [Math.min(groups, 65535), Math.ceil(groups / 65535), nbatch]);
  }
}

/** matmul of the registry: a [..., M, K] @ b [..., K, N] with broadcast batch dims. */
export function launchMatmul(ctx: Ctx, a: View, b: View, out: View, epi?: Gemm["epi"]): void {
  const M = out.shape[out.shape.length - 2]!, N = out.shape[out.shape.length - 1]!;
  const K = a.shape[a.shape.length - 1]!;
  const batch = out.shape.slice(0, -2);
  const bstr = (v: View) => {
    const vb = v.shape.slice(0, -2), sb = v.strides.slice(0, -2);
    const off = batch.length - vb.length;
    return batch.map((s, i) => (i < off || vb[i - off] === 1 ? 0 : sb[i - off]!));
  };
  launchGemm(ctx, {
    a, b, out, M, N, K,
    am: a.strides[a.strides.length - 2]!, ak: a.strides[a.strides.length - 1]!,
    bk: b.strides[b.strides.length - 2]!, bn: b.strides[b.strides.length - 1]!,
    batch, aBatch: bstr(a), bBatch: bstr(b), epi,
  });
}
