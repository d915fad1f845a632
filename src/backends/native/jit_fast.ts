/**
 * The fast generated elementwise kernel: the whole program in float32 (16 AVX-512 lanes), its
 * transcendental functions through glibc libmvec's float32 variants (expf, logf, log1pf, sinf,
 * cosf, tanhf: ≤ 4 ulp, glibc NEWS 2.22 / manual "Errors in Math Functions") and Loom's own
 * inline erf (loom_erff, absolute error ≤ ERF_ABS_BOUND, measured exhaustively), with a
 * running error bound per element that certifies the result against the float64 reference, and
 * the double kernel's value (jit_codegen.ts) for every element it cannot certify.
 *
 * Error bound e of each value (float32, first order plus the product term), carried as E = e/U in
 * units of one rounding, U = 2^-24·(1 + 2^-16): a rounding then adds |t| to E (an add where an
 * absolute bound needs a multiply too; W2's kernel 0.82 → 0.69 ns/element with the next two):
 * - loads of float32 and small integers are exact; other loads round (|t|·U);
 * - every op adds its own rounding, |t|·U ≥ |t|·(2^-24 + 2^-53) (the float32 rounding and the
 *   reference's double one); +, −: e_a + e_b; ·: |b|e_a + |a|e_b + e_a·e_b; /, reciprocal,
 *   sqrt, rsqrt: the exact perturbation bounds (infinite where the divisor's interval holds 0);
 *   max/min/abs/neg/relu pass the error through;
 * - +, − with an infinite operand whose bound is finite: the reference has the same infinity, so
 *   no rounding term (−inf − max in a masked softmax; a float32 overflow of finite operands still
 *   gets an infinite bound); tested only where some use can turn the infinity into a certified
 *   value (exp, tanh, a comparison...), not where it can only reach a product, a log or the result;
 * - the bounds' sums of products are fmaf's (one rounding where C would round twice);
 * - a libmvec function f with input error d: L·d (tanh, sin, cos 1; exp: f·(e^d − 1), and 0 for an
 *   interval below −104, where float32 and the float64 reference both round to 0;
 *   log: d/(x − d); log1p: d/(1 + x − d)) plus 4 ulp of the result (|f|·2^-21); erf:
 *   (2/√π)·d plus loom_erff's absolute bound ERF_ABS_BOUND;
 * - a discontinuous op (comparison, floor/ceil/round, sign, logical ops, where's condition) is
 *   exact when its input interval [t − e, t + e] cannot change the result, else infinite.
 * An element is certified when its result is finite and e ≤ 9.5e-6 + 1e-6·|v| (one fmaf and one
 * comparison: an infinite result has an infinite bound wherever its last op rounds, elsewhere the
 * test adds fmaf(v, 0, E)); a tile with an uncertified element is redone element by element, with
 * no flag array in the vector loop. The bound's own
 * float32 arithmetic (a relative 2^-24 per op) and subnormal roundings fit in the slack to
 * FAST_CONTRACT (|y − ref| ≤ 1e-5 + 1.3e-6·|ref|, torch.testing's float32 tolerance).
 * Uncertified elements (NaN, ±inf, float32 overflow, cancellation after a transcendental, huge
 * exp arguments, comparisons too close to call) are recomputed by the double code, whose
 * contract is tighter. When the output shares a buffer with an input (in-place reuse) a tile is
 * staged in a stack buffer, so the recomputation still reads intact inputs.
 */
import type { FusedReduceAttrs } from "../../graph/passes/fused_ops.ts";
import type { LoadInstr, Program } from "../../graph/passes/program.ts";
import { MAX_INPUTS } from "./program.ts";
import {
  body, CHUNK_ELEMENTS, elementwiseHead, opExpr, type CPrecision, genReduce, Params, reduceHead, SIGNATURE, TILE, TRANSCENDENTAL, unsupported,
  unsupportedReduce, type Generated,
} from "./jit_codegen.ts";

/**
 * The unit of every bound: one float32 rounding plus the float64 reference's own, relative,
 * rounded up to a value whose bound arithmetic stays exact-ish: U = 2^-24·(1 + 2^-16) ≥ 2^-24 + 2^-53.
 * A bound E in units of U is e = U·E, so a rounding adds |t| (an add, not a multiply).
 */
const U = 2 ** -24 * (1 + 2 ** -16);
const RND = "0x1.0001p-24f";
/** Bound E (units of U) as an absolute error: for comparisons with values. */
const absErr = (e: string) => `(${e} * ${RND})`;
/** 1/U, for sqrt(U·E)/U = sqrt(E/U). */
const INV_U = `(1.0f / ${RND})`;
/** A constant absolute error c in units of U, rounded up. */
const units = (c: number) => `${(Math.ceil((c / U) * 1e6) / 1e6).toString()}f`;
/**
 * Certification threshold: e ≤ 9.5e-6 + 1e-6·|v| (see the file comment), in units of U: E ≤
 * FAST_ATOL + FAST_RTOL·|v| (rounded down).
 */
const FAST_ATOL = `${Math.floor((9.5e-6 / U) * 1e4) / 1e4}f`, FAST_RTOL = `${Math.floor((1e-6 / U) * 1e4) / 1e4}f`;

const FLOAT_FN: Record<string, string> = { exp: "expf", log: "logf", log1p: "log1pf", sin: "sinf", cos: "cosf", tanh: "tanhf", erf: "loom_erff" };

/**
 * Maximum absolute error of loom_erff against the exact erf, over every float32 input:
 * bench/erf_bound.ts measured 1.822e-7 at x = 0.94382 (every float32 in [0, 4] against glibc's
 * double erf, bench/erf_bound.txt; odd bit for bit; ≥ 4 it returns ±1 and erfc(4) < 1.6e-8),
 * rounded up to 2e-7 (glibc's own < 1 double ulp fits well inside; every step is an explicit
 * fmaf or a single rounding, so vector and scalar code give the same bits).
 * tests/catalog/jit_erf.test.ts re-measures it on a dense subset.
 */
export const ERF_ABS_BOUND = 2e-7;

/**
 * Loom's float32 erf, branch-free so `#pragma omp simd` loops inline and vectorize it (glibc
 * libmvec's erff was about half of W2's time): |x| < 3.92: x·P(v), v = x²·VA − 1 ∈ [−1, 1], P of
 * degree 15; beyond: ±1; NaN stays NaN. Coefficients: bench/erf_fit.py (output
 * bench/erf_fit.txt). Absolute error ≤ ERF_ABS_BOUND (measured, see there). fmaf: one rounding
 * per step whether or not a lane is vectorized (x86-64-v3 and later: one instruction), so the
 * bound holds for both. Single-threaded AVX-512 on the dev machine (AMD EPYC): 0.35 ns/element
 * against libmvec erff's 0.59 (a two-piece degree-9 form whose lanes pick their coefficients:
 * 0.44; GCC evaluates both pieces' fmas under masks).
 */
export const ERF_F32_C = `static inline __attribute__((always_inline)) float loom_erff(float x) {
  const float v = __builtin_fmaf(x * x, 0x1.0a8e3cp-3f, -1.0f); /* x² mapped to [−1, 1] for |x| ≤ 3.92 */
  float p = -0x1.968984p-11f;
  p = __builtin_fmaf(p, v, 0x1.0c248cp-9f); p = __builtin_fmaf(p, v, -0x1.a855a2p-10f);
  p = __builtin_fmaf(p, v, 0x1.11901ep-9f); p = __builtin_fmaf(p, v, -0x1.e3206ap-8f);
  p = __builtin_fmaf(p, v, 0x1.cae994p-7f); p = __builtin_fmaf(p, v, -0x1.4aa2f2p-6f);
  p = __builtin_fmaf(p, v, 0x1.e895a4p-6f); p = __builtin_fmaf(p, v, -0x1.63534ap-5f);
  p = __builtin_fmaf(p, v, 0x1.de12a4p-5f); p = __builtin_fmaf(p, v, -0x1.2f3a42p-4f);
  p = __builtin_fmaf(p, v, 0x1.731b68p-4f); p = __builtin_fmaf(p, v, -0x1.bf31f4p-4f);
  p = __builtin_fmaf(p, v, 0x1.129ac6p-3f); p = __builtin_fmaf(p, v, -0x1.70dcccp-3f);
  p = __builtin_fmaf(p, v, 0x1.7164fep-2f);
  /* x·p is odd; NaN: v, p and x·p are NaN (the comparison is false) */
  return __builtin_fabsf(x) >= 3.92f ? __builtin_copysignf(1.0f, x) : x * p;
}
`;
/** Declarations of the float32 SIMD variants and Loom's own erf (appended to jit.ts's prelude). */
export const FAST_PRELUDE = Object.values(FLOAT_FN).filter((f) => f !== "loom_erff").map((f) => `LOOM_SIMD float ${f}(float);`).join("\n") + "\n" + ERF_F32_C;

/** Why `p` gets no fast kernel (null: it does): the double kernel's reasons, float results only, no pow, some transcendental. */
export function unsupportedFast(p: Program): string | null {
  const why = unsupported(p, false);
  if (why) return why;
  if (p.code[p.out]!.dtype !== "float32") return "a float64 result (the double kernel is as fast and tighter)";
  const ops = p.code.flatMap((c) => (c.k === "op" ? [c.op.name] : []));
  if (ops.includes("pow")) return "pow";
  if (!ops.some((o) => TRANSCENDENTAL.has(o))) return "no transcendental function (the double kernel is exact)";
  return null;
}

const abs = (x: string) => `__builtin_fabsf(${x})`;
/**
 * x·y + z in one rounding: the bounds' own sums of products (the kernels compile with
 * -ffp-contract=off, so plain C would round twice; one rounding is within the bound's slack as
 * two are, see the file comment) in fewer instructions.
 */
const fma = (x: string, y: string, z: string) => `__builtin_fmaf(${x}, ${y}, ${z})`;
/** Ops whose value is an infinite input's, unchanged, with its bound (an infinite result is never certified). */
const INF_PASS = new Set(["add", "sub", "neg", "abs", "relu", "contiguous"]);
/** Ops for which an infinite input always gives an infinite or NaN bound (mul: |t|·2^-24; log, sqrt...). */
const INF_NEVER = new Set(["mul", "log", "log1p", "sqrt", "rsqrt", "sin", "cos", "pow"]);

/**
 * Per instruction: whether an exactly known infinity in its value can end in a certified element:
 * some use of it, directly or through INF_PASS ops, is an op that turns it into a finite value
 * with a finite bound (exp(−inf) = 0, tanh, erf, sigmoid, 1/x, max/min, comparisons, where's
 * condition...). Only such add/sub need the rule that an infinite operand adds no rounding (a
 * masked score, −inf − max): elsewhere the infinity reaches a mul, log, sqrt... or the result,
 * and the element goes to the double kernel whatever the rule says.
 */
function infinitiesCertified(p: Program): boolean[] {
  const want = new Array<boolean>(p.code.length).fill(false);
  for (let i = p.code.length - 1; i >= 0; i--) {
    const c = p.code[i]!;
    if (c.k !== "op" || INF_NEVER.has(c.op.name)) continue;
    const pass = INF_PASS.has(c.op.name) || (c.op.name === "cast" && c.dtype !== "bool");
    c.args.forEach((x, j) => {
      // where's values pass through (the condition is a discontinuous use: it can certify)
      if (pass || (c.op.name === "where" && j > 0)) want[x] ||= want[i]!;
      else want[x] = true;
    });
  }
  return want;
}
const INF = "__builtin_inff()";
/** Float32 evaluation: libmvec's float functions and Loom's erf; no pow (its bound is not modelled). */
const FLOAT: CPrecision = { type: "float", f: "f", fn: (n) => FLOAT_FN[n] ?? null, pow: false };

/**
 * A generated value and its bound E (null: exact); infBounded: an infinite v always comes with an
 * infinite or NaN E (the bound adds the value's own |t| to non-negative terms, or the value is
 * never infinite), so the certification test fails for it without a test of its own.
 */
interface FastValue { v: string; e: string | null; infBounded: boolean }

/**
 * Lines computing, in float32, value t<i> and its error bound e<i> (float32 too: a bound off by
 * a relative 2^-24 per op, which the certification threshold's slack covers). Loads of float32
 * and small integers are exact (no e).
 */
function fastBody(p: Program, leaf: (i: number) => string, lines: string[], ind: string, leafErr: (i: number) => string | null = () => null): FastValue {
  const err: (string | null)[] = [];
  const infBounded: boolean[] = []; // see FastValue
  const exactInf = infinitiesCertified(p);
  p.code.forEach((c, i) => {
    const t = `t${i}`;
    if (c.k !== "op") {
      lines.push(`${ind}const float ${t} = (float)${leaf(i)};`);
      const exact = c.k === "load" && ["float32", "int8", "uint8", "bool"].includes(c.dtype);
      const extra = leafErr(i);
      err[i] = exact && !extra ? null : `e${i}`;
      infBounded[i] = !exact; // e holds |t|
      if (err[i]) lines.push(`${ind}const float e${i} = ${[extra, exact ? null : abs(t)].filter(Boolean).join(" + ")};`);
      return;
    }
    const name = c.op.name;
    const args = c.args.map((x) => `t${x}`);
    const [a = "0", b = "0"] = args;
    const [ea = null, eb = null, ec = null] = c.args.map((x) => err[x] ?? null);
    const A = ea ?? "0.0f", B = eb ?? "0.0f";
    /** Value t<i> and bound e<i> = e; inf: whether it is infBounded (see FastValue). */
    const push = (e: string | null, inf = false, value = opExpr(name, FLOAT, c.dtype === "bool", args)!) => {
      lines.push(`${ind}const float ${t} = ${value};`);
      if (e) lines.push(`${ind}const float e${i} = ${e};`);
      err[i] = e ? `e${i}` : null;
      infBounded[i] = inf;
    };
    const passes = infBounded[c.args[0]!] ?? false; // a value passed through: its input's
    // one rounding: |t| units; 4 ulp of a result: 2^-21·|t| ≤ 8 units
    const rnd = abs(t);
    const ulp4 = `${abs(t)} * 8.0f`;
    /** Certain when the input interval [x − e, x + e] does not reach zero: 0, else infinite. */
    const sure = (x: string, e: string | null) => (e ? `((${abs(x)} > ${absErr(e)} || ${e} == 0.0f) ? 0.0f : ${INF})` : null);
    switch (name) {
      case "neg": case "abs": case "relu": case "contiguous": return push(ea, passes);
      case "cast": return c.dtype === "bool" ? push(sure(a, ea), true) : push(ea, passes);
      // an infinite operand known exactly (its bound finite) gives the same infinity in the
      // reference: no rounding (a masked score, -inf − max, stays certified through exp)
      // (only where such an infinity can end in a certified element, infinitiesCertified: the
      // test costs about a quarter of W2's kernel, whose sums all feed products)
      case "add": case "sub": {
        const sum = ea && eb ? `${ea} + ${eb}` : ea ?? eb;
        if (!exactInf[i]) return push(sum ? `${rnd} + ${sum}` : rnd, true);
        return push(`${sum ?? "0.0f"} + (__builtin_isinf(${t}) && (__builtin_isinf(${a}) || __builtin_isinf(${b})) ? 0.0f : ${rnd})`);
      }
      case "mul": {
        let e = rnd;
        if (ea && eb) e = fma(`${ea} * ${RND}`, eb, e); // e_a·e_b = U·(U·E_a·E_b)
        if (eb) e = fma(abs(a), eb, e);
        if (ea) e = fma(abs(b), ea, e);
        return push(e, true);
      }
      // (e_a + |t|·e_b) / (|b| − e_b) in units: (E_a + |t|·E_b) / (|b| − U·E_b)
      case "div": return push(`(${abs(b)} > ${absErr(B)} ? (${A} + ${abs(t)} * ${B}) / (${abs(b)} - ${absErr(B)}) : ${INF}) + ${rnd}`, true);
      case "reciprocal": return push(`(${abs(a)} > ${absErr(A)} ? ${abs(t)} * ${A} / (${abs(a)} - ${absErr(A)}) : ${INF}) + ${rnd}`, true);
      // the input's interval must not reach below 0 (the reference would be NaN); min(√e, e/t) in units: min(√(E/U), E/t)
      case "sqrt": return push(ea ? `(${a} >= ${absErr(ea)} ? __builtin_fminf(__builtin_sqrtf(${ea} * ${INV_U}), ${ea} / ${t}) : ${INF}) + ${rnd}` : rnd, true);
      case "rsqrt": {
        lines.push(`${ind}const float q${i} = __builtin_sqrtf(${a});`, `${ind}const float eq${i} = ${ea ? `(${a} >= ${absErr(ea)} ? __builtin_fminf(__builtin_sqrtf(${ea} * ${INV_U}), ${ea} / q${i}) : ${INF}) + ` : ""}q${i};`);
        return push(`(q${i} > ${absErr(`eq${i}`)} ? ${abs(t)} * eq${i} / (q${i} - ${absErr(`eq${i}`)}) : ${INF}) + ${rnd}`, true);
      }
      // e_a + e_b bounds max(e_a, e_b) and keeps a NaN bound NaN (fmaxf would drop it)
      case "maximum": case "minimum": return push(ea || eb ? `${A} + ${B}` : null);
      case "where": {
        const pick = ea || eb || ec ? `((${a} != 0 && ${a} == ${a}) ? ${B} : ${ec ?? "0.0f"})` : null;
        return push(ea ? `${sure(a, ea)} + ${pick ?? "0.0f"}` : pick);
      }
      // (these values are 0, 1 or ±1: never infinite)
      case "sign": case "logical_not": return push(sure(a, ea), true);
      case "logical_and": case "logical_or": return push(ea || eb ? [sure(a, ea), sure(b, eb)].filter(Boolean).join(" + ") : null, true);
      case "isnan": return push(ea ? `(${ea} < ${INF} ? 0.0f : ${INF})` : null, true); // a finite bound: the reference is not NaN either
      case "eq": case "ne": case "lt": case "le": case "gt": case "ge":
        // |a − b| is itself rounded: shrink it by more than that rounding before comparing
        return push(ea || eb ? `((${abs(`${a} - ${b}`)} * (1.0f - 0x1p-22f) > ${absErr([ea, eb].filter(Boolean).join(" + "))}) ? 0.0f : ${INF})` : null, true);
      case "floor": case "ceil": case "round": {
        const f = name === "floor" ? "__builtin_floorf" : name === "ceil" ? "__builtin_ceilf" : "__builtin_rintf";
        // t ± e are rounded too: widen the interval by more than that rounding
        return push(ea ? `(${f}(${a} - (${absErr(ea)} + ${abs(a)} * 0x1p-22f)) == ${f}(${a} + (${absErr(ea)} + ${abs(a)} * 0x1p-22f)) ? 0.0f : ${INF})` : null);
      }
      case "floor_divide": {
        lines.push(`${ind}const float q${i} = ${a} / ${b};`);
        lines.push(`${ind}const float eq${i} = (${abs(b)} > ${absErr(B)} ? (${A} + ${abs(`q${i}`)} * ${B}) / (${abs(b)} - ${absErr(B)}) : ${INF}) + ${abs(`q${i}`)};`);
        return push(`(__builtin_floorf(q${i} - (${absErr(`eq${i}`)} + ${abs(`q${i}`)} * 0x1p-22f)) == __builtin_floorf(q${i} + (${absErr(`eq${i}`)} + ${abs(`q${i}`)} * 0x1p-22f)) ? 0.0f : ${INF})`);
      }
      case "sigmoid": {
        // 1 / (1 + expf(-a)): the exponential's bound, then the quotient's
        lines.push(`${ind}const float s${i} = expf(-${a});`);
        lines.push(`${ind}const float es${i} = s${i} * (${absErr(A)} < 1e-3f ? ${A} * 1.001f : ${INF}) + ${abs(`s${i}`)} * 8.0f;`);
        lines.push(`${ind}const float u${i} = 1.0f + s${i}, eu${i} = es${i} + u${i};`); // 1 + s rounds too
        return push(`(u${i} > ${absErr(`eu${i}`)} ? ${t} * eu${i} / (u${i} - ${absErr(`eu${i}`)}) : ${INF}) + ${rnd}`, true, `1.0f / u${i}`);
      }
      default: {
        // a float32 libmvec function: its input's error through the function (Lipschitz or local), plus 4 ulp of the result
        const prop: Record<string, string> = {
          // an argument interval below −104 underflows to 0 in float32 and in the reference (finfo.min masks)
          // e^(U·E) − 1 ≤ 1.001·U·E below U·E = 1e-3
          exp: `(${a} + ${absErr(A)} < -104.0f ? 0.0f : ${t} * (${absErr(A)} < 1e-3f ? ${A} * 1.001f : ${INF}))`,
          log: `(${a} > ${absErr(A)} ? ${A} / (${a} - ${absErr(A)}) : ${INF})`,
          log1p: `(1.0f + ${a} > ${absErr(A)} ? ${A} / (1.0f + ${a} - ${absErr(A)}) : ${INF})`,
          sin: A, cos: A, tanh: A,
        };
        // erf is Loom's own (loom_erff): its measured absolute bound instead of 4 ulp
        if (name === "erf") return push(ea ? fma("1.1283792f", A, units(ERF_ABS_BOUND)) : units(ERF_ABS_BOUND), true); // |erf| ≤ 1
        return push(ea ? fma(abs(t), "8.0f", prop[name]!) : ulp4, true);
      }
    }
  });
  return { v: `t${p.out}`, e: err[p.out] ?? null, infBounded: infBounded[p.out]! };
}

/** The fast kernel of a fused_elementwise program (check `unsupportedFast(p)` first). */
export function genElementwiseFast(p: Program): Generated {
  const A = new Params();
  const h = elementwiseHead(p, A);
  const lines = [
    SIGNATURE, ...A.lines,
    `  float ob[${TILE}];`,
    `  const int alias = P[${MAX_INPUTS + 1}] != 0; /* out shares an input's buffer: stage the tile in ob */`,
    "  for (int64_t t = begin; t < end; t++) {", ...h.lines,
    "    float *dst = alias ? ob : out + j0;",
    "    int any = 0;",
    "#pragma omp simd reduction(|:any)", "    for (int64_t j = j0; j < j1; j++) {",
  ];
  /**
   * Whether element j is not certified: E − FAST_RTOL·|v| > FAST_ATOL, or NaN. A non-finite
   * float32 result is never certified (the reference may be finite: overflow in float32 only):
   * v = NaN makes the test NaN; v = ±inf does where E is then infinite too (inf − inf), and
   * elsewhere E is replaced by fmaf(v, 0, E), NaN for v = ±inf and E otherwise.
   */
  const flag = (r: FastValue) => {
    const e = r.infBounded ? (r.e ?? "0.0f") : fma(r.v, "0.0f", r.e ?? "0.0f");
    return `!(${fma(`-${FAST_RTOL}`, abs(r.v), e)} <= ${FAST_ATOL})`;
  };
  const r = fastBody(p, (i) => h.inner.get(i)!, lines, "      ");
  lines.push(`      dst[j - j0] = ${r.v};`, `      any |= ${flag(r)};`, "    }");
  // a tile with an uncertified element: each element again, its float32 value where certified, else the
  // double kernel's (inputs still intact: out is written below). Scalar and vector libmvec calls may
  // differ in their last bits, so each element keeps the value its own certificate is about.
  lines.push("    if (any) {", "      for (int64_t j = j0; j < j1; j++) {");
  const rs = fastBody(p, (i) => h.inner.get(i)!, lines, "        ");
  lines.push(`        if (!${flag(rs)}) { dst[j - j0] = ${rs.v}; continue; }`, "        {");
  const d = body(p, (_c, i) => h.inner.get(i)!, lines, "          ");
  lines.push(`          dst[j - j0] = (float)${d};`, "        }", "      }", "    }");
  lines.push("    if (alias) __builtin_memcpy(out + j0, ob, (size_t)(j1 - j0) * sizeof(float));", "  }", "}");
  return { source: lines.join("\n"), params: A.values, tasks: h.tasks, grain: Math.max(1, Math.floor(CHUNK_ELEMENTS / h.tile)) };
}

/** Why a fused_reduce gets no fast kernel (null: it does): the double kernel's reasons, a float32 result, a transcendental in the prologue, no pow. */
export function unsupportedReduceFast(a: FusedReduceAttrs): string | null {
  const why = unsupportedReduce(a);
  if (why) return why;
  const e = a.epilogue;
  if ((e ? e.code[e.out]!.dtype : a.dtype) !== "float32") return "a float64 result";
  const ops = [a.prologue, ...(e ? [e] : [])].flatMap((p) => p.code.flatMap((c) => (c.k === "op" ? [c.op.name] : [])));
  if (ops.includes("pow")) return "pow";
  if (!a.prologue.code.some((c) => c.k === "op" && TRANSCENDENTAL.has(c.op.name))) return "no transcendental function in the prologue (the double kernel is as fast)";
  return null;
}

/**
 * The fast kernel of a fused_reduce (check `unsupportedReduceFast(a)` first): the prologue in
 * float32 with its error bound (fastBody), folded in double together with the bounds: a sum's
 * error is Σe + 2n·2^-53·Σ|v| (its own and the reference's summation roundings, in any order),
 * an amax/amin's the largest e. The epilogue runs in float32 from that, and an output element
 * whose result is not certified (as the elementwise kernel) is recomputed by the double kernel.
 */
export function genReduceFast(a: FusedReduceAttrs): Generated {
  const A = new Params();
  const h = reduceHead(a, A);
  const p = a.prologue;
  const kind = a.reduce.name;
  const epi: string[] = [];
  if (!a.epilogue) {
    epi.push(`    const float y = (float)acc;`, `    const float ey = (float)eacc + ${abs("y")};`);
  } else {
    const ep = a.epilogue;
    epi.push(...h.epiIndex);
    const leaf = (i: number): string => (ep.code[i]!.k === "acc" ? "acc" : h.epiLoad(ep.code[i] as LoadInstr, i));
    const er = fastBody(ep, leaf, epi, "    ", (i) => (ep.code[i]!.k === "acc" ? "(float)eacc" : null));
    epi.push(`    const float y = ${er.v};`, `    const float ey = ${er.e ?? "0.0f"};`);
  }
  // the double kernel, called for outputs the bound does not certify, reads the same A[]
  const exact = genReduce(a);
  if (JSON.stringify(exact.params) !== JSON.stringify(A.values)) throw new Error("[jit] internal: fast and double reduction kernels disagree on their parameters");
  const lines = [exact.source.replace("void NAME(", "static void NAME_d("), "", SIGNATURE, ...A.lines, "  for (int64_t o = begin; o < end; o++) {", ...h.perO];
  lines.push(`    double acc = ${kind === "sum" ? "0.0" : kind === "amax" ? "-__builtin_inf()" : "__builtin_inf()"}, eacc = 0.0, aacc = 0.0;`, "    int nanf = 0;");
  lines.push("    for (int64_t ro = 0; ro < NRO; ro++) {", ...h.perRo);
  lines.push(kind === "sum" ? "#pragma omp simd reduction(+:acc, eacc, aacc)" : `#pragma omp simd reduction(${kind === "amax" ? "max" : "min"}:acc) reduction(max:eacc) reduction(|:nanf)`);
  lines.push("      for (int64_t j = 0; j < LR; j++) {");
  const r = fastBody(p, (i) => h.inner.get(i)!, lines, "        ");
  const e = r.e ?? "0.0f";
  if (kind === "sum") lines.push(`        acc += (double)${r.v};`, `        eacc += (double)${e};`, `        aacc += (double)${abs(r.v)};`);
  // amax/amin: the result is off by at most the largest e (a NaN value or bound: not certified)
  else {
    lines.push(`        acc = ${r.v} ${kind === "amax" ? ">" : "<"} acc ? (double)${r.v} : acc;`);
    lines.push(`        eacc = (double)${e} > eacc ? (double)${e} : eacc;`, `        nanf |= (${r.v} != ${r.v}) | (${e} != ${e});`);
  }
  lines.push("      }", "    }");
  // 2n·2^-53·Σ|v| in units of U (2^-53 = 2^-29 units of 2^-24 ≥ 2^-53/U)
  if (kind === "sum") lines.push("    eacc += aacc * (double)(2 * NR) * 0x1p-29;");
  else lines.push(`    if (nanf) eacc = ${INF};`);
  lines.push(...epi);
  lines.push(`    if (ey <= ${FAST_ATOL} + ${FAST_RTOL} * ${abs("y")} && ${abs("y")} <= 0x1.fffffep127f) ((float *)P[0])[o] = y;`);
  lines.push("    else NAME_d(P, A, o, o + 1); /* not certified: the double kernel's value */", "  }", "}");
  return { source: lines.join("\n"), params: A.values, tasks: h.nOut, grain: Math.max(1, Math.ceil(CHUNK_ELEMENTS / Math.max(1, h.n))) };
}
