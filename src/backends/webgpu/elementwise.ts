/**
 * Elementwise kernels, generated from the op table: each registry elementwise op has a WGSL
 * expression here (the counterpart of its js `ref`; tsc checks every op has one), and
 * `elementwiseKernel` wraps it into a strided, broadcasting compute shader for the operands'
 * dtypes. Values are computed in f32 when any operand or the output is floating, else in i32, and
 * stored with the output dtype's conversion (dtype.ts `storeExpr`).
 *
 * Operands are buffers with strides (broadcast dims have stride 0) or immediate scalars passed
 * in the parameter block (the 0-d constants that `x * 2` creates), so a scalar costs no upload.
 *
 * Integer results are checked as the reference checks them (`intFaults`): a kernel that can fault
 * (integer floor_divide/remainder, a float-to-integer store) binds the error ring and reports
 * to its own cell; every other kernel binds nothing more.
 */
import { intResultCheck } from "../../graph/ops/elementwise.ts";
import type { DType } from "../../tensor/dtype.ts";
import { LoomValueError } from "../../tensor/errors.ts";
import { convertExpr, isFloatClass, scalarBits, storeExpr, WGSL_COMMON, type Wgsl } from "./dtype.ts";
import { collapse, contiguous, groupsFor, linearIndex, numelOf, padRank, type Ctx, type OpsOfKind, type View } from "./context.ts";
import type { PBuf } from "./memory.ts";
import { ERR_WGSL, PARAMS_WGSL, type ErrSite, type Kernel } from "./queue.ts";

type Expr = (a: string, b: string, c: string) => string;
/** `f`: the f32 expression; `i`: the i32 expression (absent: the op computes in f32). */
interface EwWgsl { readonly f: Expr; readonly i?: Expr }

const fsel = (cond: string) => `select(0.0, 1.0, ${cond})`;
const isel = (cond: string) => `select(0, 1, ${cond})`;
const cmp = (o: string): EwWgsl => ({ f: (a, b) => fsel(`${a} ${o} ${b}`), i: (a, b) => isel(`${a} ${o} ${b}`) });

/** WGSL for every elementwise op of the registry (src/graph/ops/elementwise.ts is the spec). */
export const EW_WGSL = {
  neg: { f: (a) => `-(${a})`, i: (a) => `-(${a})` },
  abs: { f: (a) => `abs(${a})`, i: (a) => `abs(${a})` },
  sign: { f: (a) => `sign_f(${a})`, i: (a) => `sign(${a})` },
  exp: { f: (a) => `exp(${a})` },
  log: { f: (a) => `log_f(${a})` },
  log1p: { f: (a) => `log1p_f(${a})` },
  sqrt: { f: (a) => `sqrt_f(${a})` },
  rsqrt: { f: (a) => `(1.0 / sqrt_f(${a}))` },
  reciprocal: { f: (a) => `(1.0 / ${a})` },
  sin: { f: (a) => `sin(${a})` },
  cos: { f: (a) => `cos(${a})` },
  tanh: { f: (a) => `tanh_f(${a})` },
  sigmoid: { f: (a) => `(1.0 / (1.0 + exp(-(${a}))))` },
  relu: { f: (a) => `select(0.0, ${a}, ${a} > 0.0 || is_nan(${a}))`, i: (a) => `max(${a}, 0)` },
  erf: { f: (a) => `erf_f(${a})` },
  floor: { f: (a) => `floor(${a})`, i: (a) => a },
  ceil: { f: (a) => `ceil(${a})`, i: (a) => a },
  round: { f: (a) => `round(${a})`, i: (a) => a }, // WGSL round() is half-to-even, as torch.round
  isnan: { f: (a) => fsel(`is_nan(${a})`), i: () => "0" },
  logical_not: { f: (a) => fsel(`!truthy(${a})`), i: (a) => isel(`${a} == 0`) },
  contiguous: { f: (a) => a, i: (a) => a },
  cast: { f: (a) => a, i: (a) => a },
  add: { f: (a, b) => `(${a} + ${b})`, i: (a, b) => `(${a} + ${b})` },
  sub: { f: (a, b) => `(${a} - ${b})`, i: (a, b) => `(${a} - ${b})` },
  mul: { f: (a, b) => `(${a} * ${b})`, i: (a, b) => `(${a} * ${b})` },
  div: { f: (a, b) => `(${a} / ${b})` },
  floor_divide: { f: (a, b) => `floor(${a} / ${b})`, i: (a, b) => `floordiv_i(${a}, ${b})` },
  remainder: { f: (a, b) => `rem_f(${a}, ${b})`, i: (a, b) => `rem_i(${a}, ${b})` },
  pow: { f: (a, b) => `pow_f(${a}, ${b})`, i: (a, b) => `pow_i(${a}, ${b})` },
  maximum: { f: (a, b) => `max_f(${a}, ${b})`, i: (a, b) => `max(${a}, ${b})` },
  minimum: { f: (a, b) => `min_f(${a}, ${b})`, i: (a, b) => `min(${a}, ${b})` },
  eq: cmp("=="), ne: cmp("!="), lt: cmp("<"), le: cmp("<="), gt: cmp(">"), ge: cmp(">="),
  logical_and: { f: (a, b) => fsel(`truthy(${a}) && truthy(${b})`), i: (a, b) => isel(`${a} != 0 && ${b} != 0`) },
  logical_or: { f: (a, b) => fsel(`truthy(${a}) || truthy(${b})`), i: (a, b) => isel(`${a} != 0 || ${b} != 0`) },
  where: { f: (c, a, b) => `select(${b}, ${a}, truthy(${c}))`, i: (c, a, b) => `select(${b}, ${a}, ${c} != 0)` },
} satisfies Record<OpsOfKind<"elementwise">, EwWgsl>;

/** Helper functions, included in a shader only when its expression calls them. */
const HELPERS: Record<string, string> = {
  // NaN is true (only 0 is false) and sign(NaN) = sign(-0) = 0, as torch (elementwise.ts refs)
  truthy: "fn truthy(x: f32) -> bool { return x != 0.0 || is_nan(x); }",
  sign_f: "fn sign_f(x: f32) -> f32 { return f32(x > 0.0) - f32(x < 0.0); }",
  log_f: "fn log_f(x: f32) -> f32 { if (x < 0.0) { return f_nan(); } if (x == 0.0) { return -f_inf(); } return log(x); }",
  sqrt_f: "fn sqrt_f(x: f32) -> f32 { if (x < 0.0) { return f_nan(); } return sqrt(x); }",
  log1p_f: `fn log1p_f(x: f32) -> f32 {
  if (x < -1.0) { return f_nan(); } if (x == -1.0) { return -f_inf(); }
  let u = 1.0 + x;
  if (u == 1.0) { return x; }
  if (u > 1e30) { return log(u); }
  return log(u) * x / (u - 1.0); // Goldberg's trick: exact-ish for tiny x
}`,
  tanh_f: "fn tanh_f(x: f32) -> f32 { if (is_nan(x)) { return x; } if (abs(x) > 15.0) { return sign(x); } return tanh(x); }",
  // W. J. Cody's rational approximations, as the js reference (src/graph/ops/elementwise.ts)
  erf_f: `fn erf_f(x: f32) -> f32 {
  if (is_nan(x)) { return x; }
  let ax = abs(x);
  if (ax < 0.5) {
    let t = x * x;
    let p = (((0.185777706184603153 * t + 3.16112374387056560) * t + 113.864154151050156) * t + 377.485237685302021) * t + 3209.37758913846947;
    let q = (((t + 23.6012909523441209) * t + 244.024637934444173) * t + 1282.61652607737228) * t + 2844.23683343917062;
    return x * p / q;
  }
  var r = 1.0;
  if (ax < 4.0) {
    let p = (((((((5.64188496988670089e-1 * ax + 8.88314979438837594) * ax + 66.1191906371416295) * ax + 298.635138197400131) * ax + 881.952221241769090) * ax + 1712.04761263407058) * ax + 2051.07837782607147) * ax + 1230.33935479799725);
    let q = (((((((ax + 15.7449261107098347) * ax + 117.693950891312499) * ax + 537.181101862009858) * ax + 1621.38957456669019) * ax + 3290.79923573345963) * ax + 4362.61909014324716) * ax + 3439.36767414372164) * ax + 1230.33935480374942;
    r = 1.0 - exp(-ax * ax) * p / q;
  } else if (ax < 10.0) {
    let z = 1.0 / (ax * ax);
    let p = ((((1.63153871373020978e-2 * z + 3.05326634961232344e-1) * z + 3.60344899949804439e-1) * z + 1.25781726111229246e-1) * z + 1.60837851487422766e-2) * z + 6.58749161529837803e-4;
    let q = ((((z + 2.56852019228982242) * z + 1.87295284992346725) * z + 5.27905102951428412e-1) * z + 6.05183413124413191e-2) * z + 2.33520497626869185e-3;
    r = 1.0 - exp(-ax * ax) / ax * (0.564189583547756287 - z * p / q);
  }
  return select(r, -r, x < 0.0);
}`,
  nonfinite_f: "fn nonfinite_f(x: f32) -> bool { return (bitcast<u32>(x) & 0x7f800000u) == 0x7f800000u; }",
  floordiv_i: `fn floordiv_i(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  let q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) { return q - 1; }
  return q;
}`,
  rem_i: `fn rem_i(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  let r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) { return r + b; }
  return r;
}`,
  rem_f: "fn rem_f(a: f32, b: f32) -> f32 { return a - floor(a / b) * b; }",
  max_f: "fn max_f(a: f32, b: f32) -> f32 { if (is_nan(a) || is_nan(b)) { return f_nan(); } return max(a, b); }",
  min_f: "fn min_f(a: f32, b: f32) -> f32 { if (is_nan(a) || is_nan(b)) { return f_nan(); } return min(a, b); }",
  // Math.pow semantics: integer exponents of negative bases, 0^0 = 1, exact small powers
  pow_f: `fn pow_f(a: f32, b: f32) -> f32 {
  if (b == 0.0) { return 1.0; }
  if (is_nan(a) || is_nan(b)) { return f_nan(); }
  if (b == 1.0) { return a; }
  if (b == 2.0) { return a * a; }
  if (b == 3.0) { return a * a * a; }
  if (b == 0.5) { return sqrt_f(a); }
  if (b == -1.0) { return 1.0 / a; }
  if (b == -2.0) { return 1.0 / (a * a); }
  let isInt = floor(b) == b;
  if (a == 0.0) { if (b > 0.0) { return 0.0; } return f_inf(); }
  if (a < 0.0) {
    if (!isInt) { return f_nan(); }
    let m = exp2(b * log2(-a));
    let odd = abs(b) < 16777216.0 && (i32(abs(b)) & 1) == 1;
    return select(m, -m, odd);
  }
  return exp2(b * log2(a));
}`,
  // torch's integer pow (intResultCheck): a negative exponent gives 1 for base 1, ±1 for base -1, else 0
  pow_i: `fn pow_i(a: i32, b: i32) -> i32 {
  if (b < 0) { return select(select(0, select(-1, 1, (b & 1) == 0), a == -1), 1, a == 1); }
  var r = 1; var base = a; var e = b;
  loop { if (e == 0) { break; } if ((e & 1) == 1) { r = r * base; } base = base * base; e = e >> 1u; }
  return r;
}`,
};
// helpers calling helpers
const DEPS: Record<string, string[]> = { pow_f: ["sqrt_f"] };

/** The helper functions `code` calls, in dependency order. */
export function helpersFor(code: string): string {
  const need = new Set<string>();
  const add = (h: string) => {
    if (need.has(h)) return;
    for (const d of DEPS[h] ?? []) add(d);
    need.add(h);
  };
  for (const h of Object.keys(HELPERS)) if (new RegExp(`\\b${h}\\(`).test(code)) add(h);
  return [...need].map((h) => HELPERS[h]).join("\n");
}

/** The error `check` throws (the reference's own check, so messages are the js backend's). */
function thrownBy(check: () => unknown): Error {
  try {
    check();
  } catch (e) {
    return e as Error;
  }
  return new LoomValueError("[webgpu] a fault site's check did not raise");
}
const BITS = new Int32Array(1);
const BITS_F = new Float32Array(BITS.buffer);

/**
 * WGSL checking one step whose result has dtype `dtype`, as the reference's intResultCheck does
 * (src/graph/ops/elementwise.ts): integer floor_divide/remainder by 0 and a non-finite value
 * stored as an integer (a cast of inf/NaN). A GPU kernel cannot
 * throw: a failed check calls `report` with a site that `site()` registered (its number), whose
 * error the reads of the result raise (queue.ts ErrCell). `a`, `b`: the operands and `e` the value
 * (WGSL type `useT`); `tmp` names a fresh variable. Ops that cannot fault return `e` unchecked.
 */
export function intFaults(op: string, dtype: DType, useT: Wgsl, a: string, b: string, e: string, tmp: string, site: (s: ErrSite) => number): { pre: string; value: string } {
  const chk = intResultCheck(op, dtype);
  if (!chk) return { pre: "", value: e };
  const zero = useT === "f32" ? "0.0" : "0";
  const pre: string[] = [];
  if (op === "floor_divide" || op === "remainder") pre.push(`if (${b} == ${zero}) { report(${site(() => thrownBy(() => chk(0, 1, 0)))}u, 0); }`);
  if (useT === "i32") return { pre: pre.join(" "), value: e }; // i32 values are finite
  const fin = site((v) => {
    BITS[0] = v;
    return thrownBy(() => chk(BITS_F[0]!, 1, 1));
  });
  pre.push(`let ${tmp} = ${e}; if (nonfinite_f(${tmp})) { report(${fin}u, bitcast<i32>(${tmp})); }`);
  return { pre: pre.join(" "), value: tmp };
}

/** An elementwise operand: a strided buffer view, or an immediate scalar. */
export type Operand = { kind: "buf"; view: View } | { kind: "imm"; t: Wgsl; dtype: DType; value: number };

/** Compute type: f32 when any operand or the output is floating. */
export function computeType(out: DType, operands: readonly { dtype: DType }[]): Wgsl {
  return isFloatClass(out) || operands.some((o) => isFloatClass(o.dtype)) ? "f32" : "i32";
}

/**
 * The kernel for `op` over operands of the given storage types, output dtype, collapsed rank
 * `nd`, and (when `outStrided`) an output view instead of a dense output.
 * Params: n, shape[nd], [out offset, out strides[nd]], per buffer operand offset + strides[nd],
 * then immediate values.
 */
export function elementwiseKernel(
  op: keyof typeof EW_WGSL, ct: Wgsl, outDtype: DType, outT: Wgsl, operands: readonly { kind: "buf" | "imm" | "alias"; t: Wgsl }[], nd: number, outStrided: boolean,
): EwKernel {
  // generating the source costs more than the dispatch: memoize by what determines it
  const key = `${op}|${ct}|${outDtype}|${outT}|${operands.map((o) => o.kind + o.t).join(",")}|${nd}|${+outStrided}`;
  let k = KERNEL_MEMO.get(key);
  if (!k) KERNEL_MEMO.set(key, (k = buildElementwise(op, ct, outDtype, outT, operands, nd, outStrided)));
  return k;
}
const KERNEL_MEMO = new Map<string, EwKernel>();
/** An elementwise kernel; one that can fault (intFaults) binds the error ring last and reads its cell's word last. */
export interface EwKernel extends Kernel { readonly sites: readonly ErrSite[] }

function buildElementwise(
  op: keyof typeof EW_WGSL, ct: Wgsl, outDtype: DType, outT: Wgsl, operands: readonly { kind: "buf" | "imm" | "alias"; t: Wgsl }[], nd: number, outStrided: boolean,
): EwKernel {
  const table = EW_WGSL[op] as EwWgsl;
  const useT: Wgsl = ct === "i32" && !table.i ? "f32" : ct;
  const expr = useT === "f32" ? table.f : table.i!;
  const lines: string[] = [];
  let w = 1 + nd; // next param word
  const outOff = outStrided ? w : -1;
  if (outStrided) w += 1 + nd;
  const bufs: { k: number; off: number; t: Wgsl }[] = [];
  const vals: string[] = [];
  const aliased: { k: number; off: number }[] = [];
  operands.forEach(() => vals.push(""));
  operands.forEach((o, k) => {
    if (o.kind !== "buf") return;
    bufs.push({ k, off: w, t: o.t });
    vals[k] = convertExpr(o.t, useT, `in${k}[o${k}]`);
    w += 1 + nd;
  });
  operands.forEach((o, k) => {
    if (o.kind !== "alias") return;
    // in place: the operand is the output buffer (one binding may not be both read and written)
    aliased.push({ k, off: w });
    vals[k] = convertExpr(o.t, useT, outT === o.t ? `out[o${k}]` : `bitcast<${o.t}>(out[o${k}])`);
    w += 1 + nd;
  });
  operands.forEach((o, k) => {
    if (o.kind === "imm") vals[k] = convertExpr(o.t, useT, o.t === "f32" ? `pf(${w++}u)` : `pi(${w++}u)`);
  });
  const decl = [`@group(0) @binding(1) var<storage, read_write> out: array<${outT}>;`];
  bufs.forEach((b, j) => decl.push(`@group(0) @binding(${j + 2}) var<storage, read> in${b.k}: array<${b.t}>;`));
  const reads = [...bufs, ...aliased];
  const idx = [...reads.map((b) => `o${b.k}`), ...(outStrided ? ["oo"] : [])];
  const offs = [...reads.map((b) => b.off), ...(outStrided ? [outOff] : [])];
  idx.forEach((v, j) => lines.push(`var ${v} = p(${offs[j]}u);`));
  if (nd > 0 && idx.length > 0) {
    lines.push("var r = i;");
    for (let d = nd - 1; d >= 0; d--) {
      const body = idx.map((v, j) => `${v} += c * p(${offs[j]! + 1 + d}u);`).join(" ");
      lines.push(d > 0 ? `{ let s = p(${1 + d}u); let c = r % s; r = r / s; ${body} }` : `{ let c = r; ${body} }`);
    }
  }
  operands.forEach((_, k) => lines.push(`let v${k} = ${vals[k]};`));
  const e = expr(...([0, 1, 2].map((k) => (k < operands.length ? `v${k}` : "0")) as [string, string, string]));
  const sites: ErrSite[] = [];
  const chk = intFaults(op, outDtype, useT, "v0", "v1", e, "r0", (s) => sites.push(s));
  if (chk.pre) lines.push(chk.pre);
  lines.push(`out[${outStrided ? "oo" : "i"}] = ${storeExpr(outDtype, useT, chk.value)};`);
  // a kernel that can fault binds the error ring after its inputs and reads its cell's word last
  if (sites.length) decl.push(ERR_WGSL(bufs.length + 2, w));
  const body = lines.join("\n  ");
  const source = `${PARAMS_WGSL}${WGSL_COMMON}${helpersFor(body)}
${decl.join("\n")}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let i = ${linearIndex()};
  if (i >= p(0u)) { return; }
  ${body}
}`;
  return { source, access: ["rw", ...bufs.map(() => "r" as const), ...(sites.length ? ["rw" as const] : [])], sites };
}

/** Output target of an elementwise launch: dense, or a strided view (in-place writes, cat). */
export interface Target { view: View; dense: boolean }

/**
 * Launch `op` over operands broadcast to `shape`, writing `target`. Operands' strides must
 * already be broadcast to `shape` (0 on broadcast dims).
 */
export function launchElementwise(ctx: Ctx, op: keyof typeof EW_WGSL, operands: readonly Operand[], shape: readonly number[], target: Target): void {
  const n = numelOf(shape);
  if (n === 0) return;
  if (n > 2 ** 31) throw new LoomValueError(`[${op}] ${n} elements exceed the webgpu kernels' 32-bit indexing`);
  const bufOps = operands.filter((o): o is Extract<Operand, { kind: "buf" }> => o.kind === "buf");
  const isAlias = (o: Operand) => o.kind === "buf" && o.view.buf === target.view.buf;
  // parameter order: output view, bound buffers, aliased buffers (as elementwiseKernel reads them)
  const ordered = [...bufOps.filter((o) => !isAlias(o)), ...bufOps.filter(isAlias)];
  const lists = ordered.map((o) => o.view.strides);
  if (!target.dense) lists.push(target.view.strides);
  const col = collapse(shape, lists.length ? lists : [contiguous(shape)]);
  const nd = padRank(col.shape, col.strides);
  const params: number[] = [n, ...col.shape];
  if (!target.dense) params.push(target.view.offset, ...col.strides[ordered.length]!);
  ordered.forEach((o, j) => params.push(o.view.offset, ...col.strides[j]!));
  const ct = computeType(target.view.dtype, operands.map((o) => (o.kind === "buf" ? o.view : o)));
  for (const o of operands) if (o.kind === "imm") params.push(scalarBits(o.t, o.value, op));
  const kinds = operands.map((o) => ({ kind: o.kind === "imm" ? "imm" as const : isAlias(o) ? "alias" as const : "buf" as const, t: o.kind === "buf" ? o.view.t : o.t }));
  const k = elementwiseKernel(op, ct, target.view.dtype, target.view.t, kinds, nd, !target.dense);
  const bufs: (PBuf | null)[] = [target.view.buf, ...ordered.filter((o) => !isAlias(o)).map((o) => o.view.buf)];
  if (k.sites.length) {
    params.push(ctx.q.errorCell(k.sites).word);
    bufs.push(null);
  }
  ctx.q.dispatch(k, params, bufs, groupsFor(n));
}
