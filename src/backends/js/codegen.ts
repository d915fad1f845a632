/**
 * JavaScript kernels generated for fused programs. A Program (graph/passes/program.ts) becomes the
 * source of one function with its shapes and strides as literals, compiled once with `new Function`
 * and cached by its source text (the structural hash of the kernel). Generated code lives only in
 * those functions; this file is the generator.
 *
 * Exactness: each op is the registry's scalar `ref` (a few are inlined as the identical expression)
 * and each result is rounded to its dtype as the unfused js kernel's store would round it, so a
 * generated kernel computes the same bits as the ops it fuses; reductions fold in the js reduce's
 * order (row-major over the reduced dims, one output at a time).
 */
import type { ReduceOp } from "../../graph/op.ts";
import { intResultCheck } from "../../graph/ops/elementwise.ts";
import { programDtype, roundTo, storeRound, type Instr, type Program } from "../../graph/passes/program.ts";
import { allocArray, decoder, floatToBf16, floatToHalf, type DType } from "../../tensor/dtype.ts";
import { broadcastStrides, contiguousStrides } from "../../tensor/shape.ts";
import type { TensorData } from "../../tensor/storage.ts";

/** A compiled kernel: reads `ins` (base buffers; strides are baked in), writes the dense `out`. */
export type GeneratedKernel = (ins: readonly TensorData[], out: TensorData, acc?: ArrayLike<number>) => void;

/** Ops whose `ref` is exactly this expression (checked against the refs by tests/compiler). */
export const INLINE: Record<string, (a: string, b: string, c: string) => string> = {
  add: (a, b) => `(${a} + ${b})`,
  sub: (a, b) => `(${a} - ${b})`,
  mul: (a, b) => `(${a} * ${b})`,
  div: (a, b) => `(${a} / ${b})`,
  neg: (a) => `(-${a})`,
  exp: (a) => `Math.exp(${a})`,
  log: (a) => `Math.log(${a})`,
  sqrt: (a) => `Math.sqrt(${a})`,
  tanh: (a) => `Math.tanh(${a})`,
  abs: (a) => `Math.abs(${a})`,
  contiguous: (a) => a,
  cast: (a) => a,
  where: (c, a, b) => `(${c} ? ${a} : ${b})`,
};

/** Expression rounding `e` to dtype `d` (see program.ts `roundTo`); closures for the rest. */
function round(d: DType, e: string): string {
  switch (d) {
    case "float32": return `Math.fround(${e})`;
    case "float64": return e;
    case "int32": return `(${e} | 0)`;
    case "int8": return `((${e} << 24) >> 24)`;
    case "uint8": return `(${e} & 255)`;
    default: return `RND_${d}(${e})`;
  }
}

const cache = new Map<string, GeneratedKernel>();
/** Counters: kernels generated (cache misses) and reused. */
export const codegenStats = { compiled: 0, reused: 0 };

/** Collapse adjacent dims that every access walks contiguously (fewer, longer loops). */
function collapse(shape: readonly number[], strides: (readonly number[])[]): { shape: number[]; strides: number[][] } {
  const keep = shape.map((_, i) => i).filter((i) => shape[i] !== 1);
  const outShape: number[] = [];
  const outStrides: number[][] = strides.map(() => []);
  for (const d of keep) {
    const last = outShape.length - 1;
    if (last >= 0 && strides.every((s, k) => outStrides[k]![last] === s[d]! * shape[d]!)) {
      outShape[last]! *= shape[d]!;
      strides.forEach((s, k) => { outStrides[k]![last] = s[d]!; });
    } else {
      outShape.push(shape[d]!);
      strides.forEach((s, k) => outStrides[k]!.push(s[d]!));
    }
  }
  return { shape: outShape, strides: outStrides };
}

interface Access { input: number; strides: readonly number[]; offset: number }

/**
 * Source of a loop nest over `shape` (already collapsed) with one pointer per access; `body` is
 * the innermost code, which may use the pointers `q<k>`.
 */
function loopNest(shape: readonly number[], acc: readonly Access[], strides: readonly (readonly number[])[], body: string, prefix: string): string {
  const nd = shape.length;
  if (nd === 0) {
    return `{ ${acc.map((a, k) => `const ${prefix}${k} = o${a.input} + ${a.offset};`).join(" ")}\n${body}\n}`;
  }
  let src = "";
  for (let d = 0; d < nd - 1; d++) src += `for (let ${prefix}i${d} = 0; ${prefix}i${d} < ${shape[d]}; ${prefix}i${d}++) {\n`;
  const ptrInit = acc.map((a, k) => {
    let e = `o${a.input} + ${a.offset}`;
    for (let d = 0; d < nd - 1; d++) if (strides[k]![d] !== 0) e += ` + ${prefix}i${d} * ${strides[k]![d]}`;
    return `let ${prefix}${k} = ${e};`;
  }).join(" ");
  const inc = acc.map((_, k) => (strides[k]![nd - 1] !== 0 ? `${prefix}${k} += ${strides[k]![nd - 1]};` : "")).join(" ");
  src += `${ptrInit}\nfor (let ${prefix}j = 0; ${prefix}j < ${shape[nd - 1]}; ${prefix}j++) {\n${body}\n${inc}\n}\n`;
  for (let d = 0; d < nd - 1; d++) src += "}\n";
  return src;
}

/**
 * Code for the program's instructions. Loads read through pointers named by `ptr(k)` for load k
 * (a loop-invariant load is read once before the loops); `accExpr` is the accumulator.
 */
function emitCode(p: Program, loads: Map<number, number>, ptr: (k: number) => string, accExpr: string, invariant: boolean[]): { pre: string[]; body: string[] } {
  const pre: string[] = [];
  const body: string[] = [];
  p.code.forEach((c: Instr, i) => {
    let e: string;
    if (c.k === "load") {
      const at = invariant[i] ? `o${c.input} + ${c.offset}` : ptr(loads.get(i)!);
      e = decoder(c.dtype) ? `DEC_${c.dtype}(d${c.input}, ${at})` : `d${c.input}[${at}]`;
    } else if (c.k === "acc") e = accExpr;
    else {
      const args = c.args.map((a) => `t${a}`);
      const inl = INLINE[c.op.name];
      const v = inl ? inl(args[0]!, args[1]!, args[2]!) : `F_${c.op.name}(${args[0]}, ${args[1] ?? 0}, ${args[2] ?? 0})`;
      // integer results are checked before rounding (elementwise.ts intResultCheck)
      e = round(c.dtype, intResultCheck(c.op.name, c.dtype) ? `CHK_${c.op.name}_${c.dtype}(${v}, ${args[0]}, ${args[1] ?? 0})` : v);
    }
    (invariant[i] ? pre : body).push(`const t${i} = ${e};`);
  });
  return { pre, body };
}

/** Which instructions do not depend on the loop index (zero-stride loads and ops over them). */
function invariants(p: Program): boolean[] {
  const inv: boolean[] = [];
  p.code.forEach((c, i) => {
    inv[i] = c.k === "load" ? c.strides.every((s) => s === 0) : c.k === "op" ? c.args.every((a) => inv[a]) : false;
  });
  return inv;
}

function storeExpr(d: DType, v: string): string {
  return d === "float16" || d === "bfloat16" ? `ENC_${d}(${v})` : v;
}

/** The closure environment a generated function is built in (op refs, rounding, codecs). */
function environment(progs: readonly Program[], extra: Record<string, unknown> = {}): [string[], unknown[]] {
  const env: Record<string, unknown> = { ...extra };
  for (const p of progs) {
    for (const c of p.code) {
      if (c.k === "op" && !INLINE[c.op.name]) env[`F_${c.op.name}`] = c.op.ref;
      if (c.k === "op" && intResultCheck(c.op.name, c.dtype)) env[`CHK_${c.op.name}_${c.dtype}`] = intResultCheck(c.op.name, c.dtype);
      if (c.k !== "load" && !["float32", "float64", "int32", "int8", "uint8"].includes(c.dtype)) env[`RND_${c.dtype}`] = roundTo(c.dtype);
      if (c.k === "load" && decoder(c.dtype)) env[`DEC_${c.dtype}`] = decoder(c.dtype);
    }
  }
  env.ENC_float16 = floatToHalf;
  env.ENC_bfloat16 = floatToBf16;
  return [Object.keys(env), Object.values(env)];
}

function compile(src: string, progs: readonly Program[], extra: Record<string, unknown> = {}): GeneratedKernel {
  const hit = cache.get(src);
  if (hit) {
    codegenStats.reused++;
    return hit;
  }
  const [names, vals] = environment(progs, extra);
  const k = new Function(...names, src)(...vals) as GeneratedKernel;
  codegenStats.compiled++;
  cache.set(src, k);
  return k;
}

function inputsPrelude(n: number): string {
  return Array.from({ length: n }, (_, i) => `const d${i} = ins[${i}].data, o${i} = ins[${i}].offset;`).join("\n");
}

function maxInput(progs: readonly (Program | null)[]): number {
  let m = -1;
  for (const p of progs) for (const c of p?.code ?? []) if (c.k === "load") m = Math.max(m, c.input);
  return m + 1;
}

/** An elementwise kernel: the program evaluated at every index of its shape (acc from `acc[p]`). */
export function elementwiseKernel(p: Program): GeneratedKernel {
  const inv = invariants(p);
  const loadIdx = p.code.map((c, i) => (c.k === "load" && !inv[i] ? i : -1)).filter((i) => i >= 0);
  const acc: Access[] = loadIdx.map((i) => p.code[i] as Access);
  const col = collapse(p.shape, acc.map((a) => a.strides));
  const loads = new Map(loadIdx.map((i, k) => [i, k]));
  const { pre, body } = emitCode(p, loads, (k) => `q${k}`, "A[p]", inv);
  const store = `dst[p++] = ${storeExpr(programDtype(p), `t${p.out}`)};`;
  const src = `return function fused(ins, out, A) {
${inputsPrelude(maxInput([p]))}
const dst = out.data;
let p = 0;
${pre.join("\n")}
${loopNest(col.shape, acc, col.strides, `${body.join("\n")}\n${store}`, "q")}
};`;
  return compile(src, [p]);
}

export interface ReduceSpec {
  readonly prologue: Program;
  readonly reduce: ReduceOp;
  readonly dim: readonly number[];
  readonly dtype: DType;
  readonly epilogue: Program | null;
}

/**
 * A reduction kernel: for each output (row-major over kept dims) fold the prologue over the
 * reduced dims in row-major order and round to the reduction's dtype; then the epilogue (an
 * elementwise kernel reading the accumulators) or a plain store.
 */
export function reduceKernel(r: ReduceSpec): GeneratedKernel {
  const pro = r.prologue;
  const shape = pro.shape;
  const kept = shape.map((_, i) => i).filter((i) => !r.dim.includes(i));
  const inv = invariants(pro);
  const proLoads = pro.code.map((c, i) => (c.k === "load" && !inv[i] ? i : -1)).filter((i) => i >= 0);
  const acc: Access[] = proLoads.map((i) => pro.code[i] as Access);
  const outer = collapse(kept.map((d) => shape[d]!), acc.map((a) => kept.map((d) => a.strides[d]!)));
  const inner = collapse(r.dim.map((d) => shape[d]!), acc.map((a) => r.dim.map((d) => a.strides[d]!)));
  const proC = emitCode(pro, new Map(proLoads.map((i, k) => [i, k])), (k) => `r${k}`, "0", inv);
  const innerBody = `${proC.body.join("\n")}\nacc = STEP(acc, t${pro.out});`;
  // inner pointers start at the outer pointers of the same access
  const nd = inner.shape.length;
  let innerLoops: string;
  if (nd === 0) innerLoops = `{ ${acc.map((_, k) => `const r${k} = q${k};`).join(" ")}\n${innerBody}\n}`;
  else {
    innerLoops = "";
    for (let d = 0; d < nd - 1; d++) innerLoops += `for (let ri${d} = 0; ri${d} < ${inner.shape[d]}; ri${d}++) {\n`;
    const init = acc.map((_, k) => {
      let e = `q${k}`;
      for (let d = 0; d < nd - 1; d++) if (inner.strides[k]![d] !== 0) e += ` + ri${d} * ${inner.strides[k]![d]}`;
      return `let r${k} = ${e};`;
    }).join(" ");
    const inc = acc.map((_, k) => (inner.strides[k]![nd - 1] !== 0 ? `r${k} += ${inner.strides[k]![nd - 1]};` : "")).join(" ");
    innerLoops += `${init}\nfor (let rj = 0; rj < ${inner.shape[nd - 1]}; rj++) {\n${innerBody}\n${inc}\n}\n`;
    for (let d = 0; d < nd - 1; d++) innerLoops += "}\n";
  }
  const body = `let acc = ${r.reduce.init};\n${innerLoops}\nACC[p++] = ACC_ROUND(acc);`;
  const src = `/* ${r.reduce.name} -> ${r.dtype} */
return function fusedReduce(ins, ACC) {
${inputsPrelude(maxInput([pro]))}
let p = 0;
${proC.pre.join("\n")}
${loopNest(outer.shape, acc, outer.strides, body, "q")}
};`;
  const fold = compile(src, [pro], { STEP: r.reduce.step, ACC_ROUND: storeRound(r.dtype) }) as unknown as (ins: readonly TensorData[], accs: Float64Array) => void;
  const epi = r.epilogue ? elementwiseKernel(r.epilogue) : null;
  const enc = r.dtype === "float16" ? floatToHalf : r.dtype === "bfloat16" ? floatToBf16 : null;
  let accs = new Float64Array(0);
  return (ins, out) => {
    const n = out.data.length;
    if (accs.length < n) accs = new Float64Array(n);
    fold(ins, accs);
    if (epi) epi(ins, out, accs);
    else if (enc) for (let i = 0; i < n; i++) out.data[i] = enc(accs[i]!);
    else for (let i = 0; i < n; i++) out.data[i] = accs[i]!;
  };
}

/**
 * matmul followed by an elementwise epilogue: the product is written by the registry's matmul
 * (same packing and summation order), then the epilogue runs over it in place when the dtypes
 * allow (each element is read before it is overwritten).
 */
export function matmulKernel(epilogue: Program, dtype: DType, shape: readonly number[], matmul: (ins: readonly TensorData[], out: TensorData) => void): GeneratedKernel {
  const epi = elementwiseKernel(epilogue);
  const same = programDtype(epilogue) === dtype;
  const strides = contiguousStrides(shape);
  return (ins, out) => {
    const n = out.data.length;
    const prod: TensorData = { dtype, shape, strides, offset: 0, data: same ? out.data : allocArray(dtype, n) };
    matmul([ins[0]!, ins[1]!], prod);
    epi(ins, out, prod.data);
  };
}

/**
 * fused_softmax over the last dim: the prologue evaluated in bulk by a generated kernel into a
 * float64 buffer (values already rounded to their dtype), then the exact row softmax.
 */
export function softmaxKernel(prologue: Program, dim: number, softmax: (v: Float64Array, rows: number, n: number, D: DType, out: { [i: number]: number }) => void, fallback: GeneratedKernel): GeneratedKernel {
  if (dim !== prologue.shape.length - 1) return fallback;
  const pro = elementwiseKernel(prologue);
  const n = prologue.shape[dim]!;
  const D = programDtype(prologue);
  let v = new Float64Array(0);
  return (ins, out) => {
    const total = out.data.length;
    if (v.length < total) v = new Float64Array(total);
    pro(ins, { dtype: "float64", shape: prologue.shape, strides: [], offset: 0, data: v });
    softmax(v, n === 0 ? 0 : total / n, n, D, out.data);
  };
}

/**
 * fused_attention: per batch entry, scores by the matmul's own pack/gemm (rounded to the dtype),
 * the prologue by a generated kernel over that [L, S] slab (each load gets the batch entry's
 * offset), the exact row softmax, then P @ v by pack/gemm. Same arithmetic as the reference.
 */
export function attentionKernel(prologue: Program, gemmOps: {
  pack: (src: TensorData["data"], off: number, R: number, C: number, sr: number, sc: number, dst: Float64Array) => void;
  gemm: (A: Float64Array, B: Float64Array, C: Float64Array, M: number, N: number, K: number) => void;
  softmax: (v: Float64Array, rows: number, n: number, D: DType, out: { [i: number]: number }) => void;
}): GeneratedKernel {
  const nd = prologue.shape.length;
  const L = prologue.shape[nd - 2]!, S = prologue.shape[nd - 1]!;
  const batch = prologue.shape.slice(0, -2);
  const D = programDtype(prologue);
  const round = storeRound(D);
  // the slab program: one input per load (its batch offset differs), strides over [L, S]
  const loads = prologue.code.map((c, i) => (c.k === "load" ? i : -1)).filter((i) => i >= 0);
  const slab: Program = {
    shape: [L, S], out: prologue.out,
    code: prologue.code.map((c, i) => (c.k === "load" ? { ...c, input: loads.indexOf(i), strides: c.strides.slice(-2) } : c)),
  };
  const pro = elementwiseKernel(slab);
  const batchStrides = loads.map((i) => (prologue.code[i] as { strides: readonly number[] }).strides.slice(0, -2));
  const inputOf = loads.map((i) => (prologue.code[i] as { input: number }).input);
  return (ins, out) => {
    const [q, kt, v] = ins as [TensorData, TensorData, TensorData];
    const E = q.shape[q.shape.length - 1]!, Ev = v.shape[v.shape.length - 1]!;
    const st = (t: TensorData) => broadcastStrides(t.shape.slice(0, -2), t.strides.slice(0, -2), batch);
    const [sq, sk, sv] = [st(q), st(kt), st(v)];
    const Qp = new Float64Array(L * E), Kp = new Float64Array(E * S), Sc = new Float64Array(L * S);
    const Vals = new Float64Array(L * S), P = new Float64Array(L * S), Vp = new Float64Array(S * Ev), O = new Float64Array(L * Ev);
    const nb = batch.reduce((p, x) => p * x, 1);
    const idx = new Array<number>(batch.length).fill(0);
    const slabOut: TensorData = { dtype: "float64", shape: [L, S], strides: [S, 1], offset: 0, data: Vals };
    for (let bi = 0; bi < nb; bi++) {
      let oq = q.offset, ok = kt.offset, ov = v.offset;
      for (let d = 0; d < batch.length; d++) { oq += idx[d]! * sq[d]!; ok += idx[d]! * sk[d]!; ov += idx[d]! * sv[d]!; }
      gemmOps.pack(q.data, oq, L, E, q.strides[q.shape.length - 2]!, q.strides[q.shape.length - 1]!, Qp);
      gemmOps.pack(kt.data, ok, E, S, kt.strides[kt.shape.length - 2]!, kt.strides[kt.shape.length - 1]!, Kp);
      gemmOps.gemm(Qp, Kp, Sc, L, S, E);
      for (let i = 0; i < Sc.length; i++) Sc[i] = round(Sc[i]!);
      const slabIns = inputOf.map((k, j) => {
        const t = ins[k]!;
        let off = t.offset;
        for (let d = 0; d < batch.length; d++) off += idx[d]! * batchStrides[j]![d]!;
        return { ...t, offset: off };
      });
      pro(slabIns, slabOut, Sc);
      gemmOps.softmax(Vals, L, S, D, P);
      gemmOps.pack(v.data, ov, S, Ev, v.strides[v.shape.length - 2]!, v.strides[v.shape.length - 1]!, Vp);
      gemmOps.gemm(P, Vp, O, L, Ev, S);
      out.data.set(O, bi * L * Ev);
      for (let d = batch.length - 1; d >= 0; d--) {
        if (++idx[d]! < batch[d]!) break;
        idx[d] = 0;
      }
    }
  };
}
