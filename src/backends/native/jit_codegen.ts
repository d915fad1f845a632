/**
 * C source for one fused program (graph/passes/program.ts), for the generated-kernel
 * implementations of jit.ts: straight-line code in a loop the compiler vectorizes (AVX-512 here).
 *
 * Numerics: every value is computed in double, from the loaded values (float32 and the integer
 * dtypes convert to double exactly), and rounded once on store. With contraction off, +, −, ·, /
 * and sqrt are IEEE double operations in the decomposition's order, so they give exactly what
 * the float64 reference computes; only the transcendental functions differ: glibc libmvec's SIMD
 * variants (exp, log, log1p, sin, cos, tanh, erf, pow), documented ≤ 4 ulp of double
 * (glibc manual, "Errors in Math Functions"). So the result is the float64 reference, perturbed
 * by those few double ulps (times the program's condition), rounded once: within one float32 ulp.
 * A discontinuous op (comparison, floor, sign, where's condition...) could turn such a
 * perturbation into a different value; programs that apply one to a transcendental result are
 * refused (`unsupported`), so everything else stays within the bound.
 *
 * Loop shapes:
 * - elementwise: the index space collapsed (size-1 dims dropped, dims contiguous in every load
 *   merged), tasks = tiles of up to TILE elements of the last dim; loads with last-dim stride 0
 *   are hoisted out of the inner loop.
 * - reduction: the prologue's index space permuted to kept dims first, reduced dims last (each
 *   group collapsed); a task is one output element: a `#pragma omp simd reduction` fold over the
 *   innermost reduced dim (8 double lanes), outer reduced dims by index arithmetic, then the
 *   epilogue at that element (column reductions, strided along the fold, are refused).
 * Sizes, strides and offsets are runtime parameters (`Params`, the instruction's attributes):
 * the source holds only the structure (ops, dtypes, collapsed rank, which strides are 0 or 1),
 * so a program at another size or offset reuses the compiled kernel.
 */
import type { FusedReduceAttrs } from "../../graph/passes/fused_ops.ts";
import type { Instr, LoadInstr, Program } from "../../graph/passes/program.ts";
import type { DType } from "../../tensor/dtype.ts";
import { numel } from "../../tensor/shape.ts";

/** Elements of the last dim per elementwise task. */
export const TILE = 8192;
/** Elements a pool chunk should hold at least (below that the pool's overhead dominates). */
export const CHUNK_ELEMENTS = 32768;
/** Most instructions of a program we generate code for (compile time grows with it). */
export const MAX_JIT_CODE = 512;

/** C type of a loaded element (int64 lives in a double array: src/tensor/dtype.ts). */
export const LOAD_TYPE: Partial<Record<DType, string>> = {
  float32: "float", float64: "double", int64: "double", int32: "int32_t", int8: "int8_t", uint8: "uint8_t", bool: "uint8_t",
};
export const STORE_TYPE: Partial<Record<DType, string>> = { float32: "float", float64: "double" };

/** Ops whose result can differ from the float64 reference by a few double ulps (libmvec). */
export const TRANSCENDENTAL = new Set(["exp", "log", "log1p", "sin", "cos", "tanh", "sigmoid", "erf", "pow"]);
/** Ops whose result jumps: an input perturbed by an ulp may change it by much more. */
const DISCONTINUOUS = new Set([
  "sign", "floor", "ceil", "round", "isnan", "logical_not", "floor_divide", "eq", "ne", "lt", "le", "gt", "ge",
  "logical_and", "logical_or",
]);
/** Ops whose result is 0/1 and so may have dtype bool. */
const BOOLEAN_VALUED = new Set(["isnan", "logical_not", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "cast", "where", "contiguous", "maximum", "minimum"]);

/**
 * The spelling of one C evaluation precision: the double kernels (jit_codegen.ts) and the
 * float32 fast kernels (jit_fast.ts) generate the same expressions through it.
 */
export interface CPrecision {
  /** The C type. */
  readonly type: "double" | "float";
  /** Suffix of builtins and literals ("" or "f"). */
  readonly f: "" | "f";
  /** The C function computing a transcendental registry op (null: not supported at this precision). */
  readonly fn: (name: string) => string | null;
  /** pow with JS's special cases (null: not supported at this precision). */
  readonly pow: boolean;
}

const NAN = "__builtin_nan(\"\")";
const DOUBLE_FNS = new Set(["exp", "log", "log1p", "sin", "cos", "tanh", "erf"]);
/** Double evaluation: libm/libmvec double functions. */
export const DOUBLE: CPrecision = { type: "double", f: "", fn: (n) => (DOUBLE_FNS.has(n) ? n : null), pow: true };

/**
 * C expression of one op over operand expressions (the registry's `ref` semantics) at precision
 * `P`; `bool` when the op's result dtype is bool. Null for ops this precision leaves out.
 */
export function opExpr(name: string, P: CPrecision, bool: boolean, [a = "0", b = "0", c = "0"]: readonly string[]): string | null {
  const T = P.type, f = P.f, nan = `__builtin_nan${f}("")`, one = f ? "1.0f" : "1.0";
  const fn = P.fn(name);
  if (fn) return `${fn}(${a})`;
  switch (name) {
    case "neg": return `(-${a})`;
    case "abs": return `__builtin_fabs${f}(${a})`;
    case "sign": return `(${T})((${a} > 0) - (${a} < 0))`; // NaN and ±0 give 0, as the ref
    case "sqrt": return `__builtin_sqrt${f}(${a})`;
    case "rsqrt": return `(${one} / __builtin_sqrt${f}(${a}))`;
    case "reciprocal": return `(${one} / ${a})`;
    case "sigmoid": return P.fn("exp") ? `(${one} / (${one} + ${P.fn("exp")}(-${a})))` : null;
    case "relu": return `((${a} > 0 || ${a} != ${a}) ? ${a} : 0.0${f})`;
    case "floor": return `__builtin_floor${f}(${a})`;
    case "ceil": return `__builtin_ceil${f}(${a})`;
    case "round": return `__builtin_rint${f}(${a})`; // the default rounding mode: half to even, as torch.round
    case "isnan": return `(${T})(${a} != ${a})`;
    case "logical_not": return `(${T})(${a} == 0)`;
    case "contiguous": return a;
    case "cast": return bool ? `(${T})(${a} != 0)` : a;
    case "add": return `(${a} + ${b})`;
    case "sub": return `(${a} - ${b})`;
    case "mul": return `(${a} * ${b})`;
    case "div": return `(${a} / ${b})`;
    case "floor_divide": return `__builtin_floor${f}(${a} / ${b})`;
    // Math.pow: NaN exponent, and ±1 to an infinite power, give NaN (C's pow gives 1)
    case "pow": return P.pow ? `((${b} != ${b} || ((${a} == 1.0 || ${a} == -1.0) && __builtin_isinf(${b}))) ? ${nan} : pow(${a}, ${b}))` : null;
    case "maximum": return `((${a} != ${a} || ${b} != ${b}) ? ${nan} : (${a} > ${b} ? ${a} : ${b}))`;
    case "minimum": return `((${a} != ${a} || ${b} != ${b}) ? ${nan} : (${a} < ${b} ? ${a} : ${b}))`;
    case "eq": return `(${T})(${a} == ${b})`;
    case "ne": return `(${T})(${a} != ${b})`;
    case "lt": return `(${T})(${a} < ${b})`;
    case "le": return `(${T})(${a} <= ${b})`;
    case "gt": return `(${T})(${a} > ${b})`;
    case "ge": return `(${T})(${a} >= ${b})`;
    case "logical_and": return `(${T})(${a} != 0 && ${b} != 0)`;
    case "logical_or": return `(${T})(${a} != 0 || ${b} != 0)`;
    case "where": return `((${a} != 0 && ${a} == ${a}) ? ${b} : ${c})`; // JS `c ? a : b`: NaN is false
    default: return null; // remainder (fmod does not vectorize), ops added later
  }
}

/**
 * Why `p` cannot be generated (null when it can): dtypes, ops, size, discontinuous ops applied
 * to transcendental results. `accOk`: whether ACC codes are expected (an epilogue).
 */
export function unsupported(p: Program, accOk: boolean): string | null {
  if (p.code.length > MAX_JIT_CODE) return `program of ${p.code.length} codes`;
  if (p.shape.length > 16) return "more than 16 dims";
  const tainted: boolean[] = [];
  for (let i = 0; i < p.code.length; i++) {
    const c = p.code[i]!;
    tainted[i] = false;
    if (c.k === "load") {
      if (!LOAD_TYPE[c.dtype]) return `load of ${c.dtype}`;
      continue;
    }
    if (c.k === "acc") {
      if (!accOk) return "acc outside an epilogue";
      if (c.dtype !== "float32" && c.dtype !== "float64") return `acc of ${c.dtype}`;
      continue;
    }
    const name = c.op.name;
    if (c.dtype !== "float32" && c.dtype !== "float64" && !(c.dtype === "bool" && BOOLEAN_VALUED.has(name))) return `${name} of ${c.dtype}`;
    if (opExpr(c.op.name, DOUBLE, c.dtype === "bool", ["x", "y", "z"]) === null) return `op ${name}`;
    const cond = name === "where" ? [c.args[0]!] : c.args;
    const discontinuous = DISCONTINUOUS.has(name) || name === "where" || (name === "cast" && c.dtype === "bool");
    if (discontinuous && cond.some((a) => tainted[a])) return `${name} of a transcendental result`;
    tainted[i] = TRANSCENDENTAL.has(name) || c.args.some((a) => tainted[a]);
  }
  const d = p.code[p.out]!.dtype;
  if (!STORE_TYPE[d]) return `result of ${d}`;
  return null;
}

/** Collapsed index space: dims and, per load, strides (out is dense over `dims`). */
export interface Space { dims: number[]; strides: Map<number, number[]> }

/** Drop size-1 dims and merge dim i into i+1 where every load is contiguous across them. */
export function collapse(shape: readonly number[], loads: readonly { i: number; strides: readonly number[] }[]): Space {
  const keep = shape.map((_, d) => d).filter((d) => shape[d] !== 1);
  const dims: number[] = [];
  const st = loads.map(() => [] as number[]);
  for (const d of keep) {
    const n = dims.length;
    const merge = n > 0 && loads.every((l, k) => st[k]![n - 1] === l.strides[d]! * shape[d]!);
    if (merge) {
      dims[n - 1]! *= shape[d]!;
      loads.forEach((l, k) => { st[k]![n - 1] = l.strides[d]!; });
    } else {
      dims.push(shape[d]!);
      loads.forEach((l, k) => st[k]!.push(l.strides[d]!));
    }
  }
  return { dims, strides: new Map(loads.map((l, k) => [l.i, st[k]!])) };
}

export const loadsOf = (p: Program) => p.code.flatMap((c, i) => (c.k === "load" ? [{ i, strides: c.strides, c }] : []));

/** Lines computing t<i> for each op of `p` (loads and acc given by `leaf`); returns the result's name. */
export function body(p: Program, leaf: (c: Instr, i: number) => string, lines: string[], indent: string): string {
  p.code.forEach((c, i) => {
    if (c.k !== "op") {
      lines.push(`${indent}const double t${i} = ${leaf(c, i)};`);
      return;
    }
    lines.push(`${indent}const double t${i} = ${opExpr(c.op.name, DOUBLE, c.dtype === "bool", c.args.map((a) => `t${a}`))!};`);
  });
  return `t${p.out}`;
}

/** `int64_t` index variables of `dims` from flat index `flat` (row-major); names `${v}0...`. */
export function unflatten(dims: readonly (number | string)[], flat: string, v: string, lines: string[], indent: string): void {
  if (dims.length === 0) return;
  if (dims.length === 1) { lines.push(`${indent}const int64_t ${v}0 = ${flat};`); return; }
  lines.push(`${indent}int64_t ${v}q = ${flat};`);
  for (let d = dims.length - 1; d > 0; d--) lines.push(`${indent}const int64_t ${v}${d} = ${v}q % ${dims[d]}; ${v}q /= ${dims[d]};`);
  lines.push(`${indent}const int64_t ${v}0 = ${v}q;`);
}

export const ptrOf = (l: LoadInstr) => `(const ${LOAD_TYPE[l.dtype]} *)P[${l.input + 1}]`;
/** Σ v<d>·st[d] over the non-zero strides (numbers or parameter names). */
export const dot = (v: string, st: readonly (number | string)[]) => st.map((s, d) => (s === 0 ? "" : ` + ${v}${d} * ${s}`)).join("");

/**
 * Runtime parameters of a generated kernel: sizes, strides and offsets are read from A[] (the
 * jit_call instruction's attributes), so one compiled kernel serves every shape with the same
 * structure (ops, dtypes, rank after collapsing, which strides are 0 or 1); the source, and so
 * its cache key, holds no shape.
 */
export class Params {
  readonly values: number[] = [];
  readonly lines: string[] = [];
  /** A named int64 parameter with this value (declared at the top of the function). */
  v(name: string, value: number): string {
    this.lines.push(`  const int64_t ${name} = (int64_t)A[${this.values.length}];`);
    this.values.push(value);
    return name;
  }
  /** Strides as parameter names; zeros stay literal (a broadcast is structure). */
  strides(prefix: string, st: readonly number[]): (string | 0)[] {
    return st.map((x, d) => (x === 0 ? 0 : this.v(`${prefix}_${d}`, x)));
  }
  /** An offset (always a parameter: slices at other offsets share the kernel). */
  offset(name: string, x: number): string {
    return this.v(name, x);
  }
}

/** The function's first line: P pointers (out, inputs), A parameters, a range of tasks. */
export const SIGNATURE = "void NAME(char *const *P, const double *A, int64_t begin, int64_t end) {";

/** A generated kernel: its C function (named NAME, replaced once hashed) and how to run it. */
export interface Generated {
  /** C text of the function (SIGNATURE; NAME replaced once hashed). */
  readonly source: string;
  /** Its runtime parameters (A[]). */
  readonly params: readonly number[];
  readonly tasks: number;
  readonly grain: number;
}

/** The shared head of an elementwise kernel: the tile loop, index arithmetic, load pointers. */
export interface ElementwiseHead {
  /** Lines up to (not including) the inner loop, inside `for (t...) {`. */
  readonly lines: string[];
  /** Inner-loop expression of each load instruction (by index). */
  readonly inner: ReadonlyMap<number, string>;
  readonly tile: number;
  readonly tasks: number;
  readonly outT: string;
}

export function elementwiseHead(p: Program, A: Params): ElementwiseHead {
  const loads = loadsOf(p);
  const sp = collapse(p.shape, loads);
  if (sp.dims.length === 0) sp.dims.push(1), sp.strides.forEach((s) => s.push(0));
  const nd = sp.dims.length, L = sp.dims[nd - 1]!, outer = sp.dims.slice(0, -1);
  const tile = Math.min(L, TILE), nb = Math.ceil(L / tile);
  const outT = STORE_TYPE[p.code[p.out]!.dtype]!;
  A.v("L", L), A.v("TL", tile), A.v("NB", nb);
  const outerN = outer.map((d, k) => A.v(`D${k}`, d));
  const lines: string[] = [];
  lines.push("    const int64_t r = t / NB, j0 = (t % NB) * TL, j1 = j0 + TL < L ? j0 + TL : L;");
  unflatten(outerN, "r", "i", lines, "    ");
  lines.push(`    ${outT} *out = (${outT} *)P[0] + r * L;`);
  const inner = new Map<number, string>();
  for (const l of loads) {
    const st = sp.strides.get(l.i)!;
    const s = st[nd - 1]!;
    lines.push(`    const ${LOAD_TYPE[l.c.dtype]} *p${l.i} = ${ptrOf(l.c)} + (${A.offset(`o${l.i}`, l.c.offset)}${dot("i", A.strides(`s${l.i}`, st.slice(0, -1)))});`);
    if (s === 0) lines.push(`    const double h${l.i} = (double)p${l.i}[0];`);
    inner.set(l.i, s === 0 ? `h${l.i}` : s === 1 ? `(double)p${l.i}[j]` : `(double)p${l.i}[j * ${A.v(`S${l.i}`, s)}]`);
  }
  return { lines, inner, tile, tasks: numel(outer) * nb, outT };
}

/** The kernel of a fused_elementwise program (check `unsupported(p, false)` first). */
export function genElementwise(p: Program): Generated {
  const A = new Params();
  const h = elementwiseHead(p, A);
  const lines = [SIGNATURE, ...A.lines, "  for (int64_t t = begin; t < end; t++) {", ...h.lines];
  lines.push("#pragma omp simd", "    for (int64_t j = j0; j < j1; j++) {");
  const res = body(p, (_c, i) => h.inner.get(i)!, lines, "      ");
  lines.push(`      out[j] = (${h.outT})${res};`, "    }", "  }", "}");
  return { source: lines.join("\n"), params: A.values, tasks: h.tasks, grain: Math.max(1, Math.floor(CHUNK_ELEMENTS / h.tile)) };
}

/** Why a fused_reduce cannot be generated, or null. */
export function unsupportedReduce(a: FusedReduceAttrs): string | null {
  if (!["sum", "amax", "amin"].includes(a.reduce.name)) return `reduction ${a.reduce.name}`;
  if (a.dtype !== "float32" && a.dtype !== "float64") return `accumulator of ${a.dtype}`;
  const why = unsupported(a.prologue, false) ?? (a.epilogue ? unsupported(a.epilogue, true) : null);
  if (why) return why;
  const r = reduceSpace(a);
  if (!r) return "a load strided along the innermost reduced dim (column reduction)";
  return null;
}

export interface ReduceSpace { kept: Space; red: Space }

/** Kept and reduced dims of the prologue, each collapsed; null when a load is strided along the fold. */
export function reduceSpace(a: FusedReduceAttrs): ReduceSpace | null {
  const p = a.prologue, nd = p.shape.length;
  const dims = new Set(a.dim.map((d) => (d < 0 ? d + nd : d)));
  const keptD = p.shape.map((_, d) => d).filter((d) => !dims.has(d));
  const redD = [...dims].sort((x, y) => x - y);
  const loads = loadsOf(p);
  const pick = (ds: number[]) => loads.map((l) => ({ i: l.i, strides: ds.map((d) => l.strides[d]!) }));
  const kept = collapse(keptD.map((d) => p.shape[d]!), pick(keptD));
  const red = collapse(redD.map((d) => p.shape[d]!), pick(redD));
  if (red.dims.length === 0) red.dims.push(1), red.strides.forEach((s) => s.push(0));
  const last = red.dims.length - 1;
  for (const s of red.strides.values()) if (s[last] !== 0 && s[last] !== 1 && red.dims[last]! > 1) return null;
  return { kept, red };
}

/** The shared parts of a reduction kernel: per output element, per outer reduced index, inner loads. */
export interface ReduceHead {
  /** At the start of the `o` loop: kept indices, load base pointers p<i>. */
  readonly perO: string[];
  /** At the start of the `ro` loop (outer reduced index < NRO): reduced indices, pointers q<i>. */
  readonly perRo: string[];
  /** Inner-loop (j < LR) expression of each prologue load. */
  readonly inner: ReadonlyMap<number, string>;
  /** Epilogue load expression (over indices m<d> of the epilogue's shape, unflattened by `epiIndex`). */
  readonly epiLoad: (l: LoadInstr, i: number) => string;
  readonly epiIndex: string[];
  readonly nOut: number;
  /** Values folded per output element. */
  readonly n: number;
}

export function reduceHead(a: FusedReduceAttrs, A: Params): ReduceHead {
  const { kept, red } = reduceSpace(a)!;
  const loads = loadsOf(a.prologue);
  const rn = red.dims.length, rOuter = red.dims.slice(0, -1);
  const keptN = kept.dims.map((d, k) => A.v(`K${k}`, d));
  A.v("LR", red.dims[rn - 1]!), A.v("NRO", numel(rOuter)), A.v("NR", numel(red.dims));
  const rOuterN = rOuter.map((d, k) => A.v(`R${k}`, d));
  const perO: string[] = [], perRo: string[] = [];
  unflatten(keptN, "o", "k", perO, "    ");
  for (const l of loads) perO.push(`    const ${LOAD_TYPE[l.c.dtype]} *p${l.i} = ${ptrOf(l.c)} + (${A.offset(`o${l.i}`, l.c.offset)}${dot("k", A.strides(`ks${l.i}`, kept.strides.get(l.i)!))});`);
  unflatten(rOuterN, "ro", "r", perRo, "      ");
  const inner = new Map<number, string>();
  for (const l of loads) {
    const st = red.strides.get(l.i)!;
    perRo.push(`      const ${LOAD_TYPE[l.c.dtype]} *q${l.i} = p${l.i}${dot("r", A.strides(`rs${l.i}`, st.slice(0, -1)))};`);
    inner.set(l.i, st[rn - 1] === 0 ? `(double)q${l.i}[0]` : `(double)q${l.i}[j]`);
  }
  const epiIndex: string[] = [];
  const e = a.epilogue;
  if (e) unflatten(e.shape.map((d, k) => A.v(`E${k}`, d)), "o", "m", epiIndex, "    ");
  const epiLoad = (l: LoadInstr, i: number) => `(double)(${ptrOf(l)})[${A.offset(`eo${i}`, l.offset)}${dot("m", A.strides(`es${i}`, l.strides))}]`;
  return { perO, perRo, inner, epiLoad, epiIndex, nOut: numel(kept.dims), n: numel(red.dims) };
}

/** The kernel of a fused_reduce (check `unsupportedReduce(a)` first): one task per output element. */
export function genReduce(a: FusedReduceAttrs): Generated {
  const A = new Params();
  const h = reduceHead(a, A);
  const p = a.prologue;
  const kind = a.reduce.name;
  const outD = a.epilogue ? a.epilogue.code[a.epilogue.out]!.dtype : a.dtype;
  const outT = STORE_TYPE[outD]!;
  const epi: string[] = [];
  if (a.epilogue) {
    epi.push(...h.epiIndex);
    const r = body(a.epilogue, (c, i) => (c.k === "acc" ? "acc" : h.epiLoad(c as LoadInstr, i)), epi, "    ");
    epi.push(`    ((${outT} *)P[0])[o] = (${outT})${r};`);
  } else epi.push(`    ((${outT} *)P[0])[o] = (${outT})acc;`);
  const lines = [SIGNATURE, ...A.lines, "  for (int64_t o = begin; o < end; o++) {", ...h.perO];
  lines.push(`    double acc = ${kind === "sum" ? "0.0" : kind === "amax" ? "-__builtin_inf()" : "__builtin_inf()"};`, "    int nanf = 0;");
  lines.push("    for (int64_t ro = 0; ro < NRO; ro++) {", ...h.perRo);
  lines.push(kind === "sum" ? "#pragma omp simd reduction(+:acc)" : `#pragma omp simd reduction(${kind === "amax" ? "max" : "min"}:acc) reduction(|:nanf)`);
  lines.push("      for (int64_t j = 0; j < LR; j++) {");
  const v = body(p, (_c, i) => h.inner.get(i)!, lines, "        ");
  if (kind === "sum") lines.push(`        acc += ${v};`);
  else lines.push(`        acc = ${v} ${kind === "amax" ? ">" : "<"} acc ? ${v} : acc;`, `        nanf |= ${v} != ${v};`);
  lines.push("      }", "    }");
  if (kind !== "sum") lines.push(`    if (nanf) acc = ${NAN};`); // NaN wins, as the ref's nanMax/nanMin
  lines.push(...epi, "  }", "}");
  return { source: lines.join("\n"), params: A.values, tasks: h.nOut, grain: Math.max(1, Math.ceil(CHUNK_ELEMENTS / Math.max(1, h.n))) };
}
