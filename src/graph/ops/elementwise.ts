/**
 * Elementwise primitives. `ref` is the scalar definition the js backend loops over and that
 * generated kernels must reproduce; `grad` is written with tensor methods.
 * Composites (gelu, silu, softmax, clamp...) live on the tensor surface, built from these.
 */
import { isFloating, isIntegral, promoteFloat, type DType } from "../../tensor/dtype.ts";
import { LoomDtypeError, LoomValueError } from "../../tensor/errors.ts";
import { boolDtype, broadcastAll, floatDtype, resultType, sameDtype, sameShape } from "../infer.ts";
import { defineOp, type Diff, type ElementwiseOp, type GradFn, type Meta } from "../op.ts";

type Unary = ElementwiseOp<{}>;

function unary(name: string, ref: (x: number) => number, dtype: (i: readonly Meta[]) => DType, grad?: GradFn<{}>): Unary {
  return defineOp<{}, Unary>({ kind: "elementwise", arity: 1, name, shape: sameShape, dtype, ref, grad });
}
function binary(name: string, ref: (a: number, b: number) => number, dtype: (i: readonly Meta[]) => DType, grad?: GradFn<{}>): Unary {
  return defineOp<{}, Unary>({
    kind: "elementwise", arity: 2, name, shape: (i) => broadcastAll(name, i), dtype, ref, grad,
  });
}
const arith = (i: readonly Meta[]) => resultType(i);
const noBool = (name: string) => (i: readonly Meta[]) => {
  const d = resultType(i);
  if (d === "bool") throw new LoomDtypeError(`[${name}] is not supported for bool tensors; use logical ops`);
  return d;
};
/** Cast a 0/1 mask to the gradient's dtype so it can multiply. */
const mask = <T extends Diff<T>>(m: T, like: T) => m.to(like.dtype);

// Error function, W. J. Cody's rational approximations (|err| < 1e-15), as in libm's erf:
// JavaScript has no Math.erf.
function erf(x: number): number {
  if (Number.isNaN(x)) return x; // torch.erf(nan) is nan
  const ax = Math.abs(x);
  if (ax < 0.5) {
    const t = x * x;
    const p = (((0.185777706184603153 * t + 3.16112374387056560) * t + 113.864154151050156) * t + 377.485237685302021) * t + 3209.37758913846947;
    const q = (((t + 23.6012909523441209) * t + 244.024637934444173) * t + 1282.61652607737228) * t + 2844.23683343917062;
    return (x * p) / q;
  }
  let r: number;
  if (ax < 4) {
    const p = (((((((5.64188496988670089e-1 * ax + 8.88314979438837594) * ax + 66.1191906371416295) * ax + 298.635138197400131) * ax + 881.952221241769090) * ax + 1712.04761263407058) * ax + 2051.07837782607147) * ax + 1230.33935479799725);
    const q = (((((((ax + 15.7449261107098347) * ax + 117.693950891312499) * ax + 537.181101862009858) * ax + 1621.38957456669019) * ax + 3290.79923573345963) * ax + 4362.61909014324716) * ax + 3439.36767414372164) * ax + 1230.33935480374942;
    r = 1 - (Math.exp(-ax * ax) * p) / q;
  } else if (ax < 27) {
    const z = 1 / (ax * ax);
    const p = ((((1.63153871373020978e-2 * z + 3.05326634961232344e-1) * z + 3.60344899949804439e-1) * z + 1.25781726111229246e-1) * z + 1.60837851487422766e-2) * z + 6.58749161529837803e-4;
    const q = ((((z + 2.56852019228982242) * z + 1.87295284992346725) * z + 5.27905102951428412e-1) * z + 6.05183413124413191e-2) * z + 2.33520497626869185e-3;
    r = 1 - (Math.exp(-ax * ax) / ax) * (0.564189583547756287 - (z * p) / q);
  } else r = 1;
  return x < 0 ? -r : r;
}
const TWO_OVER_SQRT_PI = 1.1283791670955126;

// ---- unary -------------------------------------------------------------------------------
export const neg = unary("neg", (x) => -x, noBool("neg"), (g) => [g.neg()]);
// d|x|/dx = sign(x), which is 0 at 0 and at NaN (torch: grad · sgn(x))
export const abs = unary("abs", Math.abs, sameDtype, (g, [x]) => [g.mul(x!.sign())]);
/** torch.sign: -1, 0 or 1; NaN and -0 give 0, as torch's (0 < x) - (x < 0). */
export const sign = unary("sign", (x) => (x > 0 ? 1 : x < 0 ? -1 : 0), sameDtype, (g) => [g.zeros_like()]);
export const exp = unary("exp", Math.exp, floatDtype, (g, _, out) => [g.mul(out)]);
export const log = unary("log", Math.log, floatDtype, (g, [x]) => [g.div(x!)]);
export const log1p = unary("log1p", Math.log1p, floatDtype, (g, [x]) => [g.div(x!.add(1))]);
export const sqrt = unary("sqrt", Math.sqrt, floatDtype, (g, _, out) => [g.div(out.mul(2))]);
export const rsqrt = unary("rsqrt", (x) => 1 / Math.sqrt(x), floatDtype, (g, _, out) => [g.mul(out.pow(3)).mul(-0.5)]);
export const reciprocal = unary("reciprocal", (x) => 1 / x, floatDtype, (g, _, out) => [g.mul(out.mul(out)).neg()]);
export const sin = unary("sin", Math.sin, floatDtype, (g, [x]) => [g.mul(x!.cos())]);
export const cos = unary("cos", Math.cos, floatDtype, (g, [x]) => [g.mul(x!.sin()).neg()]);
export const tanh = unary("tanh", Math.tanh, floatDtype, (g, _, out) => [g.mul(out.mul(out).neg().add(1))]);
export const sigmoid = unary("sigmoid", (x) => 1 / (1 + Math.exp(-x)), floatDtype, (g, _, out) => [g.mul(out.mul(out.neg().add(1)))]);
export const relu = unary("relu", (x) => (x > 0 || Number.isNaN(x) ? x : 0), // NaN propagates, as torch
  // torch's threshold_backward: zero where out <= 0, so a NaN input passes its gradient through
  noBool("relu"), (g, _, out) => [g.zeros_like().where(out.le(0), g)]);
export const erf_ = unary("erf", erf, floatDtype, (g, [x]) => [g.mul(x!.mul(x!).neg().exp().mul(TWO_OVER_SQRT_PI))]);
export const floor = unary("floor", Math.floor, sameDtype, (g) => [g.zeros_like()]);
export const ceil = unary("ceil", Math.ceil, sameDtype, (g) => [g.zeros_like()]);
// torch.round rounds half to even
export const round = unary("round", (x) => {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}, sameDtype, (g) => [g.zeros_like()]);
export const isnan = unary("isnan", (x) => (Number.isNaN(x) ? 1 : 0), boolDtype);
/** NaN is true in logical ops, as in torch (only 0 is false). */
export const logical_not = unary("logical_not", (x) => (x === 0 ? 1 : 0), boolDtype);

/** Copy into a dense row-major buffer (identity on values). */
export const contiguous = unary("contiguous", (x) => x, sameDtype, (g) => [g]);

/** Dtype conversion; differentiable between floating dtypes only. */
export const cast = defineOp<{ dtype: DType }, ElementwiseOp<{ dtype: DType }>>({
  kind: "elementwise", arity: 1, name: "cast",
  shape: sameShape,
  dtype: (_, a) => a.dtype,
  ref: (x) => x,
  grad: (g, [x]) => [isFloating(x!.dtype) && isFloating(g.dtype) ? g.to(x!.dtype) : null],
  describe: (a) => a.dtype,
});

// ---- binary ------------------------------------------------------------------------------
export const add = binary("add", (a, b) => a + b, arith, (g, [a, b], _o, _a, needs) => [
  needs[0] ? g.sum_to_size(a!.shape) : null,
  needs[1] ? g.sum_to_size(b!.shape) : null,
]);
export const sub = binary("sub", (a, b) => a - b, noBool("sub"), (g, [a, b], _o, _a, needs) => [
  needs[0] ? g.sum_to_size(a!.shape) : null,
  needs[1] ? g.neg().sum_to_size(b!.shape) : null,
]);
export const mul = binary("mul", (a, b) => a * b, arith, (g, [a, b], _o, _a, needs) => [
  needs[0] ? g.mul(b!).sum_to_size(a!.shape) : null,
  needs[1] ? g.mul(a!).sum_to_size(b!.shape) : null,
]);
/** True division: integer inputs give the default float dtype, as torch.div. */
export const div = binary("div", (a, b) => a / b, (i) => promoteFloat(resultType(i)), (g, [a, b], out, _a, needs) => [
  needs[0] ? g.div(b!).sum_to_size(a!.shape) : null,
  needs[1] ? g.mul(out).div(b!).neg().sum_to_size(b!.shape) : null,
]);
/** torch.floor_divide / `//`: rounds toward negative infinity (also for integers). */
export const floor_divide = binary("floor_divide", (a, b) => Math.floor(a / b), noBool("floor_divide"));
/**
 * torch.remainder: the result has the sign of the divisor (Python's %). Computed as torch does,
 * fmod (JS %, exact) plus b when the signs differ: a - floor(a/b)·b loses large a
 * (remainder(-1e20, -501) is -388, not 0).
 */
export const remainder = binary("remainder", (a, b) => { const m = a % b; return m !== 0 && (b < 0) !== (m < 0) ? m + b : m; }, noBool("remainder"), (g, [a, b], _o, _a, needs) => [
  needs[0] ? g.sum_to_size(a!.shape) : null,
  // a - floor(a/b)·b: floor is piecewise constant, so d/db = -floor(a/b)
  needs[1] ? g.mul(a!.div(b!).floor()).neg().sum_to_size(b!.shape) : null,
]);
export const pow = binary("pow", Math.pow, noBool("pow"), (g, [a, b], out, _a, needs) => [
  // d/da a^b = b a^(b-1), 0 where b == 0 (torch masks it so 0^0 has no NaN gradient)
  needs[0] ? g.mul(b!).mul(a!.pow(b!.sub(1))).where(b!.ne(0), 0).sum_to_size(a!.shape) : null,
  // d/db a^b = a^b log a, 0 where a == 0 and b >= 0 (torch's mask; a = 0, b < 0 gives inf·-inf)
  needs[1] ? g.mul(out).mul(a!.log()).where(a!.ne(0).logical_or(b!.lt(0)), 0).sum_to_size(b!.shape) : null,
]);
/** torch.maximum: at ties the gradient is split evenly between the inputs. */
export const maximum = binary("maximum", (a, b) => (Number.isNaN(a) || Number.isNaN(b) ? NaN : Math.max(a, b)), arith, (g, [a, b], _o, _a, needs) => {
  const half = mask(a!.eq(b!), g).mul(0.5);
  return [
    needs[0] ? g.mul(mask(a!.gt(b!), g).add(half)).sum_to_size(a!.shape) : null,
    needs[1] ? g.mul(mask(a!.lt(b!), g).add(half)).sum_to_size(b!.shape) : null,
  ];
});
export const minimum = binary("minimum", (a, b) => (Number.isNaN(a) || Number.isNaN(b) ? NaN : Math.min(a, b)), arith, (g, [a, b], _o, _a, needs) => {
  const half = mask(a!.eq(b!), g).mul(0.5);
  return [
    needs[0] ? g.mul(mask(a!.lt(b!), g).add(half)).sum_to_size(a!.shape) : null,
    needs[1] ? g.mul(mask(a!.gt(b!), g).add(half)).sum_to_size(b!.shape) : null,
  ];
});
export const eq = binary("eq", (a, b) => (a === b ? 1 : 0), boolDtype);
export const ne = binary("ne", (a, b) => (a !== b ? 1 : 0), boolDtype);
export const lt = binary("lt", (a, b) => (a < b ? 1 : 0), boolDtype);
export const le = binary("le", (a, b) => (a <= b ? 1 : 0), boolDtype);
export const gt = binary("gt", (a, b) => (a > b ? 1 : 0), boolDtype);
export const ge = binary("ge", (a, b) => (a >= b ? 1 : 0), boolDtype);
export const logical_and = binary("logical_and", (a, b) => (a !== 0 && b !== 0 ? 1 : 0), boolDtype);
export const logical_or = binary("logical_or", (a, b) => (a !== 0 || b !== 0 ? 1 : 0), boolDtype);

// ---- integer results ---------------------------------------------------------------------
/**
 * Integer tensors hold integers only. For an elementwise op whose result dtype is int32, int64,
 * int8 or uint8, the check each result r (from inputs a, b) must pass: it returns r or throws
 * LoomValueError naming the op and dtype. torch raises "ZeroDivisionError" for integer
 * floor_divide/remainder (and div with a rounding mode) by 0; integer pow with a negative tensor
 * exponent follows torch's integer rule (the check returns the value to store); a cast of inf/NaN to an integer dtype is undefined in torch and refused
 * here, as is any other non-finite result. Every backend applies the same rule (native:
 * elementwise.c int_check, with these messages).
 * @returns null for non-integer dtypes
 */
export function intResultCheck(op: string, dtype: DType): ((r: number, a: number, b: number) => number) | null {
  if (!isIntegral(dtype)) return null;
  const finite = (r: number): number => {
    if (Number.isFinite(r)) return r;
    throw new LoomValueError(op === "cast"
      ? `[cast] cannot convert ${r} to ${dtype}: integer tensors hold integers only`
      : `[${op}] result ${r} cannot be stored in a ${dtype} tensor`);
  };
  switch (op) {
    case "floor_divide": case "remainder":
      return (r, _a, b) => {
        if (b === 0) throw new LoomValueError(`[${op}] ZeroDivisionError: integer division by zero (${dtype})`);
        return finite(r);
      };
    case "pow":
      // torch's integer pow with a negative (tensor) exponent: 1 for base 1, ±1 for base -1, else
      // 0 (a negative scalar exponent is refused on the surface, as torch refuses it)
      return (r, a, b) => (b < 0 ? (a === 1 ? 1 : a === -1 ? (b % 2 === 0 ? 1 : -1) : 0) : finite(r));
    default:
      return finite;
  }
}

// ---- ternary -----------------------------------------------------------------------------
/** torch.where(condition, input, other): condition must be bool. */
export const where = defineOp<{}, Unary>({
  kind: "elementwise", arity: 3, name: "where",
  shape: (i) => broadcastAll("where", i),
  dtype: (i) => {
    if (i[0]!.dtype !== "bool") throw new LoomDtypeError(`[where] condition must be a bool tensor, got ${i[0]!.dtype}`);
    return resultType(i.slice(1));
  },
  ref: (c, a, b) => (c ? a : b),
  grad: (g, [c, a, b], _o, _a, needs) => [
    null,
    needs[1] ? g.where(c!, 0).sum_to_size(a!.shape) : null,
    needs[2] ? g.zeros_like().where(c!, g).sum_to_size(b!.shape) : null,
  ],
});
