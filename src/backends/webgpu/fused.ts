/**
 * Kernels for the graph compiler's fused ops (src/graph/passes/fused_ops.ts is the spec: every
 * step rounded to its dtype as the unfused op would store it). Generic fusion: fused_elementwise
 * (one kernel per program), fused_reduce (prologue program folded in lanes/trees as reduce.ts's
 * `reduceRows`, epilogue program applied),
 * fused_matmul (the tiled/naive GEMM with a program epilogue). Named patterns: fused_softmax,
 * fused_layer_norm, fused_rms_norm (one thread per row, reading the row four/two times; row sums
 * in two levels, see rowSum),
 * fused_lora_linear (three GEMMs and one epilogue pass) and fused_attention (scores and softmax in
 * one kernel per row, then a GEMM with v: the [..., L, S] scores never leave the kernel's buffer).
 */
import type {
  AttentionAttrs, FusedElementwiseAttrs, FusedMatmulAttrs, FusedReduceAttrs, FusedSoftmaxAttrs, LoraAttrs, NormAttrs,
} from "../../graph/passes/fused_ops.ts";
import type { FUSED_OPS } from "../../graph/registry.ts";
import { broadcastStrides } from "../../tensor/shape.ts";
import type { TensorData } from "../../tensor/storage.ts";
import { convertExpr, storeExpr, WGSL_COMMON, type Wgsl } from "./dtype.ts";
import { contiguous, groupsFor, linearIndex, numelOf, type Ctx, type View } from "./context.ts";
import { EW_WGSL, computeType, helpersFor, type Operand } from "./elementwise.ts";
import { launchMatmul, type Epilogue } from "./matmul.ts";
import type { PBuf } from "./memory.ts";
import { bindInputs, classOf, ErrSink, programFn, unravelInto, type InputAccess } from "./program.ts";
import { PARAMS_WGSL } from "./queue.ts";
import { REDUCE_WGSL, reduceRows } from "./reduce.ts";

/** A fused-op launcher: inputs as operands (host scalars become parameters), `out` dense. */
export type FusedLaunch = (ctx: Ctx, ins: readonly TensorData[], attrs: any, out: View) => void;

const F = EW_WGSL as unknown as Record<keyof typeof EW_WGSL, { f: (a: string, b: string, c: string) => string }>;
/** Round an f32 value to float dtype `d` (identity for float32). */
const R = (d: TensorData["dtype"], v: string) => storeExpr(d, "f32", v);

/** Assemble a kernel: params, helpers, output binding, input declarations, functions, body. */
function source(outT: Wgsl, decls: readonly string[], fns: readonly string[], wg: number, body: string): string {
  const text = `${fns.join("\n")}\n${body}`;
  return `${PARAMS_WGSL}${WGSL_COMMON}${helpersFor(text)}
@group(0) @binding(1) var<storage, read_write> out: array<${outT}>;
${decls.join("\n")}
${fns.join("\n")}
@compute @workgroup_size(${wg})
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let i = ${linearIndex(wg)};
  ${body}
}`;
}

/** Access of bindings 1..: the output, then read-only inputs (the error ring, bound as `null`, is written). */
const accessOf = (bufs: readonly (PBuf | null)[]): ("r" | "rw")[] => ["rw", ...bufs.map((b) => (b ? "r" as const : "rw" as const))];

/** Read a 0-d or 1-element operand as f32 (a constant n, eps or scale). */
const scalarOf = (a: InputAccess): string => (a.kind === "imm" ? convertExpr(a.t, "f32", a.value!) : convertExpr(a.t, "f32", `${a.name}[${a.base}]`));

/** `fn <name>(f: u32) -> f32`: element f (row-major) of a strided operand (shape/strides baked). */
function loader(name: string, a: InputAccess, v: View | null): string {
  if (a.kind === "imm" || !v) return `fn ${name}(f: u32) -> f32 { return ${scalarOf(a)}; }`;
  const dense = v.strides.every((s, d) => v.shape[d] === 1 || s === contiguous(v.shape)[d]);
  if (dense) return `fn ${name}(f: u32) -> f32 { return ${convertExpr(a.t, "f32", `${a.name}[${a.base} + f]`)}; }`;
  const terms = v.strides.map((s, d) => (s === 0 || v.shape[d] === 1 ? "" : ` + c[${d}] * ${s}u`)).join("");
  return `fn ${name}(f: u32) -> f32 {
  ${unravelInto("c", "f", v.shape)}
  return ${convertExpr(a.t, "f32", `${a.name}[${a.base}${terms}]`)};
}`;
}

function operands(ctx: Ctx, ins: readonly TensorData[]): Operand[] {
  return ins.map((t) => ctx.operand(t, "fused"));
}
const viewOf = (o: Operand): View | null => (o.kind === "buf" ? o.view : null);

const fused_elementwise: FusedLaunch = (ctx, ins, a: FusedElementwiseAttrs, out) => {
  const n = numelOf(out.shape);
  if (n === 0) return;
  const b = bindInputs(operands(ctx, ins), out, 2, 1);
  const sink = new ErrSink();
  const { fn } = programFn("prog", a.program, b.access, sink);
  const e = sink.slot(ctx.q, 2 + b.bufs.length, 1 + b.params.length);
  const body = `if (i >= p(0u)) { return; }
  ${unravelInto("c", "i", a.program.shape)}
  out[i] = prog(c, 0.0);`;
  const bufs = [...b.bufs, ...e.bufs];
  ctx.q.dispatch({ source: source(out.t, [...b.decls, ...e.decls], [fn], 256, body), access: accessOf(bufs) }, [n, ...b.params, ...e.params], [out.buf, ...bufs], groupsFor(n));
};

const fused_reduce: FusedLaunch = (ctx, ins, a: FusedReduceAttrs, out) => {
  const shape = a.prologue.shape;
  const kept = shape.map((_, d) => d).filter((d) => !a.dim.includes(d));
  const keptShape = kept.map((d) => shape[d]!), redShape = a.dim.map((d) => shape[d]!);
  const outN = numelOf(keptShape), R_ = numelOf(redShape);
  if (outN === 0) return;
  const b = bindInputs(operands(ctx, ins), out, 2, 3);
  const sink = new ErrSink();
  const pro = programFn("pro", a.prologue, b.access, sink);
  const ct = computeType(a.dtype, [{ dtype: a.prologue.code[a.prologue.out]!.dtype }]);
  const fold = REDUCE_WGSL[a.reduce.name as keyof typeof REDUCE_WGSL][ct];
  const accD = a.dtype;
  const epi = a.epilogue ? programFn("epi", a.epilogue, b.access, sink, classOf(accD)) : null;
  // every pass that reads the inputs (the first, and the last when it runs the epilogue) binds them
  // and the error ring after them; its cell's word follows their parameters (reduce.ts RowSource)
  const e = sink.slot(ctx.q, 2 + b.bufs.length, 3 + b.params.length);
  const set = (c: string, v: string, dims: readonly number[], sh: readonly number[]) => {
    if (!sh.length) return "";
    const lines = [`var r_${v} = ${v};`];
    for (let k = sh.length - 1; k >= 0; k--) lines.push(k > 0 ? `${c}[${dims[k]}] = r_${v} % ${sh[k]}u; r_${v} = r_${v} / ${sh[k]}u;` : `${c}[${dims[0]}] = r_${v};`);
    return lines.join(" ");
  };
  const src = {
    decls: [...b.decls, ...e.decls, pro.fn, ...(epi ? [epi.fn] : [])].join("\n"), bufs: [...b.bufs, ...e.bufs], params: [...b.params, ...e.params],
    row: `var c: array<u32, ${Math.max(shape.length, 1)}>;\n  ${set("c", "o", kept, keptShape)}`,
    load: (j: string) => `${set("c", j, a.dim, redShape)} let v = ${convertExpr(pro.outT, ct, "pro(c, 0.0)")};`,
  };
  const store = (acc: string) => {
    const result = storeExpr(accD, ct, acc);
    return epi ? `${unravelInto("ce", "o", a.epilogue!.shape)}\n  out[o] = epi(ce, ${result});` : `out[o] = ${result};`;
  };
  reduceRows(ctx, "fused_reduce", fold, ct, outN, R_, src, out, store);
};

const fused_matmul: FusedLaunch = (ctx, ins, a: FusedMatmulAttrs, out) => {
  const ops = operands(ctx, ins);
  const [x, y] = [viewOf(ops[0]!), viewOf(ops[1]!)];
  if (!x || !y) throw new Error("[fused_matmul] operands must be tensors");
  const epi = (firstBinding: number, firstWord: number): Epilogue => {
    const b = bindInputs(ops, out, firstBinding, firstWord, new Map([[x.buf, "A"], [y.buf, "B"]]));
    const sink = new ErrSink();
    const { fn } = programFn("epi", a.epilogue, b.access, sink, classOf(a.dtype));
    const e = sink.slot(ctx.q, firstBinding + b.bufs.length, firstWord + b.params.length);
    return { decls: [...b.decls, ...e.decls], fn, shape: a.epilogue.shape, accDtype: a.dtype, bufs: [...b.bufs, ...e.bufs], params: [...b.params, ...e.params] };
  };
  launchMatmul(ctx, x, y, { ...out, shape: a.shape, dtype: a.dtype }, epi);
};

/** Rows along `dim` of `shape`: count, and WGSL setting c[...] of the outer dims from `row`. */
function rowsOf(shape: readonly number[], dim: number) {
  const outer = shape.map((_, d) => d).filter((d) => d !== dim);
  const os = outer.map((d) => shape[d]!);
  const lines = [`var c: array<u32, ${Math.max(shape.length, 1)}>;`, "var rr = row;"];
  for (let k = outer.length - 1; k >= 0; k--) lines.push(k > 0 ? `c[${outer[k]}] = rr % ${os[k]}u; rr = rr / ${os[k]}u;` : `c[${outer[0]}] = rr;`);
  const st = contiguous(shape);
  const base = outer.map((d) => `c[${d}] * ${st[d]}u`).join(" + ") || "0u";
  return { rows: numelOf(os), setup: lines.join("\n  "), base, inner: st[dim]! };
}

/**
 * WGSL summing `term` over j < n into a new `var acc` in two levels: blocks of 32 terms, then the
 * block sums. One thread owns a row, so this stands in for pairwise sums: the rounding error
 * grows as (n/32 + 32)·eps instead of n·eps. `pre` runs first in each iteration (lets).
 */
function rowSum(acc: string, n: number, pre: string, term: string): string {
  return `var ${acc} = 0.0;
  {
    var part = 0.0;
    for (var j = 0u; j < ${n}u; j++) { ${pre} part = part + ${term}; if ((j & 31u) == 31u) { ${acc} = ${acc} + part; part = 0.0; } }
    ${acc} = ${acc} + part;
  }`;
}

const fused_softmax: FusedLaunch = (ctx, ins, a: FusedSoftmaxAttrs, out) => {
  const shape = a.prologue.shape, D = out.dtype, n = shape[a.dim]!;
  const { rows, setup, base, inner } = rowsOf(shape, a.dim);
  if (rows === 0 || n === 0) return;
  const b = bindInputs(operands(ctx, ins), out, 2, 1);
  const sink = new ErrSink();
  const pro = programFn("pro", a.prologue, b.access, sink);
  const e = sink.slot(ctx.q, 2 + b.bufs.length, 1 + b.params.length);
  const v = (j: string) => `c[${a.dim}] = ${j}; let v = ${convertExpr(pro.outT, "f32", "pro(c, 0.0)")};`;
  const body = `let row = i;
  if (row >= p(0u)) { return; }
  ${setup}
  let ob = ${base};
  var m = -f_inf();
  for (var j = 0u; j < ${n}u; j++) { ${v("j")} m = ${REDUCE_WGSL.amax.f32.step("m", "v")}; }
  m = ${R(D, "m")};
  ${rowSum("z", n, v("j"), R(D, F.exp.f(R(D, F.sub.f("v", "m", "")), "", "")))}
  z = ${R(D, "z")};
  for (var j = 0u; j < ${n}u; j++) {
    ${v("j")}
    let e = ${R(D, F.exp.f(R(D, F.sub.f("v", "m", "")), "", ""))};
    out[ob + j * ${inner}u] = ${R(D, F.div.f("e", "z", ""))};
  }`;
  const bufs = [...b.bufs, ...e.bufs];
  ctx.q.dispatch({ source: source(out.t, [...b.decls, ...e.decls], [pro.fn], 64, body), access: accessOf(bufs) }, [rows, ...b.params, ...e.params], [out.buf, ...bufs], groupsFor(rows, 64));
};

/** layer_norm / rms_norm over the trailing `dims` dims: one thread per row. */
function norm(kind: "layer" | "rms"): FusedLaunch {
  return (ctx, ins, a: NormAttrs, out) => {
    const x = ins[0]!;
    const N = numelOf(x.shape.slice(x.shape.length - a.dims));
    const rows = N === 0 ? 0 : numelOf(x.shape) / N;
    if (rows === 0) return;
    const D = out.dtype;
    const ops = operands(ctx, ins);
    const b = bindInputs(ops, out, 2, 1);
    const nConst = kind === "layer" ? 3 : 1; // [x, n1, n2, n3, eps, w?, b?] or [x, n, eps, w?]
    const fns = [loader("ldx", b.access[0]!, viewOf(ops[0]!))];
    const wIdx = nConst + 2, bIdx = wIdx + (a.has_weight ? 1 : 0);
    if (a.has_weight) fns.push(loader("ldw", b.access[wIdx]!, viewOf(ops[wIdx]!)));
    if (a.has_bias) fns.push(loader("ldb", b.access[bIdx]!, viewOf(ops[bIdx]!)));
    const c1 = scalarOf(b.access[1]!), c2 = scalarOf(b.access[2]!), cv = scalarOf(b.access[nConst]!), ce = scalarOf(b.access[nConst + 1]!);
    const rs = (s: string, c: string) => R(D, F.rsqrt.f(R(D, F.add.f(R(D, F.div.f(R(D, s), c, "")), ce, "")), "", ""));
    let y = kind === "layer" ? R(D, F.mul.f("d", "rs", "")) : R(D, F.mul.f("xv", "rs", ""));
    if (a.has_weight) y = R(D, F.mul.f(y, "ldw(j)", ""));
    if (a.has_bias) y = R(D, F.add.f(y, "ldb(j)", ""));
    // layer: the corrected two pass of functional.ts (x - m0, centred again by its own mean)
    const centred = `let d0 = ${R(D, F.sub.f("ldx(o + j)", "m0", ""))}; let d = ${R(D, F.sub.f("d0", "cm", ""))};`;
    const body = kind === "layer"
      ? `if (i >= p(0u)) { return; }
  let o = i * ${N}u;
  ${rowSum("s1", N, "", "ldx(o + j)")}
  let m0 = ${R(D, F.div.f(R(D, "s1"), c1, ""))};
  ${rowSum("s2", N, "", R(D, F.sub.f("ldx(o + j)", "m0", "")))}
  let cm = ${R(D, F.div.f(R(D, "s2"), c2, ""))};
  ${rowSum("s3", N, centred, R(D, F.mul.f("d", "d", "")))}
  let rs = ${rs("s3", cv)};
  for (var j = 0u; j < ${N}u; j++) { ${centred} out[o + j] = ${y}; }`
      : `if (i >= p(0u)) { return; }
  let o = i * ${N}u;
  ${rowSum("s", N, "let xv = ldx(o + j);", R(D, F.mul.f("xv", "xv", "")))}
  let rs = ${rs("s", cv)};
  for (var j = 0u; j < ${N}u; j++) { let xv = ldx(o + j); out[o + j] = ${y}; }`;
    ctx.q.dispatch({ source: source(out.t, b.decls, fns, 64, body), access: ["rw", ...b.bufs.map(() => "r" as const)] }, [rows, ...b.params], [out.buf, ...b.bufs], groupsFor(rows, 64));
  };
}

/** (x @ Wᵀ [+ b]) + (x @ Aᵀ @ Bᵀ)·s: three GEMMs into temporaries, then one pass. */
const fused_lora_linear: FusedLaunch = (ctx, ins, a: LoraAttrs, out) => {
  const ops = operands(ctx, ins);
  const [x, wt, at, bt] = ops.slice(0, 4).map(viewOf) as View[];
  const D = out.dtype;
  const mmShape = (p: View, q: View) => [...out.shape.slice(0, -2), p.shape[p.shape.length - 2]!, q.shape[q.shape.length - 1]!];
  const Y = ctx.temp(D, out.shape, "fused_lora_linear");
  const H = ctx.temp(D, mmShape(x!, at!), "fused_lora_linear");
  const Dl = ctx.temp(D, out.shape, "fused_lora_linear");
  launchMatmul(ctx, x!, wt!, Y);
  launchMatmul(ctx, x!, at!, H);
  launchMatmul(ctx, H, bt!, Dl);
  const n = numelOf(out.shape), N = out.shape[out.shape.length - 1]!;
  const rest = [{ kind: "buf", view: Y } as Operand, { kind: "buf", view: Dl } as Operand, ops[4]!, ...(a.has_bias ? [ops[5]!] : [])];
  const b = bindInputs(rest, out, 2, 1);
  const fns = [loader("ldy", b.access[0]!, Y), loader("ldd", b.access[1]!, Dl), `fn lds() -> f32 { return ${scalarOf(b.access[2]!)}; }`];
  if (a.has_bias) fns.push(loader("ldb", b.access[3]!, viewOf(rest[3]!)));
  const base = a.has_bias ? R(D, F.add.f("ldy(i)", `ldb(i % ${N}u)`, "")) : "ldy(i)";
  const body = `if (i >= p(0u)) { return; }
  out[i] = ${R(D, F.add.f(base, R(D, F.mul.f("ldd(i)", "lds()", "")), ""))};`;
  ctx.q.dispatch({ source: source(out.t, b.decls, fns, 256, body), access: ["rw", ...b.bufs.map(() => "r" as const)] }, [n, ...b.params], [out.buf, ...b.bufs], groupsFor(n));
  for (const t of [Y, H, Dl]) ctx.q.pool.release(t.buf);
};

/**
 * softmax(prologue(q @ kᵀ)) @ v. Kernel 1 (one thread per score row) computes the row's scores
 * with the prologue and normalizes them in a temporary (the row's sum of exponentials in two
 * levels, see rowSum); kernel 2 is the GEMM with v.
 */
const fused_attention: FusedLaunch = (ctx, ins, a: AttentionAttrs, out) => {
  const ops = operands(ctx, ins);
  const [q, kt, v] = ops.slice(0, 3).map(viewOf) as View[];
  const sshape = a.prologue.shape, nd = sshape.length;
  const L = sshape[nd - 2]!, S = sshape[nd - 1]!, E = q!.shape[q!.shape.length - 1]!;
  const batch = sshape.slice(0, -2);
  const rows = numelOf(sshape.slice(0, -1));
  const D = out.dtype;
  const P = ctx.temp(D, sshape, "fused_attention");
  if (rows > 0 && S > 0) {
    const b = bindInputs(ops, P, 2, 1);
    const sink = new ErrSink();
    const pro = programFn("pro", a.prologue, b.access, sink, classOf(D));
    const e = sink.slot(ctx.q, 2 + b.bufs.length, 1 + b.params.length);
    const bs = (t: View) => broadcastStrides(t.shape.slice(0, -2), t.strides.slice(0, -2), batch);
    const qb = bs(q!), kb = bs(kt!);
    const qa = b.access[0]!, ka = b.access[1]!;
    const qoff = batch.map((_, d) => (qb[d] ? ` + c[${d}] * ${qb[d]}u` : "")).join("");
    const koff = batch.map((_, d) => (kb[d] ? ` + c[${d}] * ${kb[d]}u` : "")).join("");
    const [qm, qe] = q!.strides.slice(-2) as [number, number];
    const [ke, ks] = kt!.strides.slice(-2) as [number, number];
    const load = (acc: InputAccess, idx: string) => convertExpr(acc.t, "f32", `${acc.name}[${idx}]`);
    const body = `let row = i;
  if (row >= p(0u)) { return; }
  ${unravelInto("c", `row * ${S}u`, sshape)}
  let qo = ${qa.base}${qoff} + c[${nd - 2}] * ${qm}u;
  let ko = ${ka.base}${koff};
  let po = row * ${S}u;
  var m = -f_inf();
  for (var s = 0u; s < ${S}u; s++) {
    var acc = 0.0;
    for (var e = 0u; e < ${E}u; e++) { acc = acc + ${load(qa, `qo + e * ${qe}u`)} * ${load(ka, `ko + e * ${ke}u + s * ${ks}u`)}; }
    c[${nd - 1}] = s;
    let v = pro(c, ${R(D, "acc")});
    out[po + s] = v;
    m = ${REDUCE_WGSL.amax.f32.step("m", "v")};
  }
  m = ${R(D, "m")};
  ${rowSum("z", S, `let e = ${R(D, F.exp.f(R(D, F.sub.f("out[po + j]", "m", "")), "", ""))}; out[po + j] = e;`, "e")}
  z = ${R(D, "z")};
  for (var s = 0u; s < ${S}u; s++) { out[po + s] = ${R(D, F.div.f("out[po + s]", "z", ""))}; }`;
    const bufs = [...b.bufs, ...e.bufs];
    ctx.q.dispatch({ source: source(P.t, [...b.decls, ...e.decls], [pro.fn], 64, body), access: accessOf(bufs) }, [rows, ...b.params, ...e.params], [P.buf, ...bufs], groupsFor(rows, 64));
  }
  void L;
  launchMatmul(ctx, P, v!, out);
  ctx.q.pool.release(P.buf);
};

/** Every fused op of the registry, on the GPU. */
export const FUSED_KERNELS = {
  fused_elementwise, fused_reduce, fused_matmul, fused_softmax,
  fused_layer_norm: norm("layer"), fused_rms_norm: norm("rms"), fused_lora_linear, fused_attention,
} satisfies Record<keyof typeof FUSED_OPS, FusedLaunch>;
