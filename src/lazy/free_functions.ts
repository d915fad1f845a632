/**
 * Top-level functions with PyTorch's signatures for the tensor methods (`loom.add(a, b, {alpha})`,
 * `loom.sum(x, 1, true)`, `loom.pow(2, t)`), generic over Tensor and LazyTensor. Each calls the
 * method, so values, dtypes, errors and gradients are the method's.
 *
 * Arguments follow torch's order. Python keyword arguments go in a trailing options object, and
 * any parameter after `input` may be given either way, as in Python: `loom.sum(x, 1, true)`,
 * `loom.sum(x, 1, {keepdim: true})` and `loom.sum(x, {dim: 1, keepdim: true})` are the same call.
 * A scalar first operand (add, sub, mul, div, pow, remainder, floor_divide: where torch accepts
 * one) is wrapped as torch wraps a Python scalar: a 0-d tensor of the other operand's kind whose
 * dtype is the promoted one, so `loom.add(2.5, intTensor)` is float32 and `loom.add(2, intTensor)`
 * int64. A JavaScript number is an integer scalar when `Number.isInteger` (2.0 is 2, see tensor()).
 * Shape ops (split, chunk, reshape, gather...) live in free_functions_shape.ts; matmul, relu,
 * sigmoid, tanh, softmax, log_softmax, tril, triu, where, cat and stack in functional.ts.
 * Errors are the method's (typed, naming the op); the binding adds LoomValueError for a bad call.
 */
import type { DType } from "../tensor/dtype.ts";
import { isFloating, promoteWithScalar } from "../tensor/dtype.ts";
import { LoomDtypeError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { scalarData } from "../tensor/storage.ts";
import { matrix_norm } from "./linalg.ts";
import { bindArgs, type PyArgs } from "./py_args.ts";
import { TensorOps, type DimArg, type Scalar } from "./surface.ts";

/** The first operand of a binary op as a tensor: input itself, or a scalar input wrapped as torch wraps a Python scalar. */
function wrapFirst<S extends TensorOps<S>>(op: string, input: S | Scalar, other: S | Scalar): S {
  if (typeof input === "object") return input;
  if (typeof other !== "object") {
    throw new LoomValueError(`[${op}] expected a tensor operand, got the scalars ${input} and ${other} (make one a tensor with loom.tensor)`);
  }
  // torch wraps a Python scalar as a 0-d tensor that takes part in promotion as a scalar: its
  // dtype is the (tensor, scalar) result type, which a 0-d operand cannot lower
  return other._constant(scalarData(promoteWithScalar(other.dtype, input), Number(input)));
}
function requireTensor(op: string, input: unknown): void {
  if (!(input instanceof TensorOps)) {
    throw new LoomValueError(`[${op}] argument 'input' must be a tensor, got ${typeof input} ${String(input)} (torch accepts no scalar here either)`);
  }
}

// ---- arithmetic -------------------------------------------------------------------------------

/** input + alpha·other (torch.add); input or other may be a scalar (not both). */
export function add<S extends TensorOps<S>>(input: S | Scalar, other: S | Scalar, opts?: { alpha?: number }): S {
  return wrapFirst("add", input, other).add(other, opts);
}
/** input - alpha·other (torch.sub); input or other may be a scalar (not both). */
export function sub<S extends TensorOps<S>>(input: S | Scalar, other: S | Scalar, opts?: { alpha?: number }): S {
  return wrapFirst("sub", input, other).sub(other, opts);
}
/** other - alpha·input (torch.rsub); input must be a tensor, as in torch. */
export function rsub<S extends TensorOps<S>>(input: S, other: S | Scalar, opts?: { alpha?: number }): S {
  requireTensor("rsub", input);
  return input.rsub(other, opts);
}
/** input · other (torch.mul); input or other may be a scalar (not both). */
export function mul<S extends TensorOps<S>>(input: S | Scalar, other: S | Scalar): S {
  return wrapFirst("mul", input, other).mul(other);
}
/** input / other (torch.div); `rounding_mode` "floor" or "trunc" as Tensor.div. */
export function div<S extends TensorOps<S>>(input: S | Scalar, other: S | Scalar, opts?: { rounding_mode?: "floor" | "trunc" | null }): S {
  return wrapFirst("div", input, other).div(other, opts);
}
/** floor(input / other), integer dtypes kept (torch.floor_divide). */
export function floor_divide<S extends TensorOps<S>>(input: S | Scalar, other: S | Scalar): S {
  return wrapFirst("floor_divide", input, other).floor_divide(other);
}
/** Python's modulus, the sign of the divisor (torch.remainder). */
export function remainder<S extends TensorOps<S>>(input: S | Scalar, exponent: S | Scalar): S {
  return wrapFirst("remainder", input, exponent).remainder(exponent);
}
/** input ** exponent (torch.pow); `loom.pow(2, t)` is 2 to the power of each element. */
export function pow<S extends TensorOps<S>>(input: S | Scalar, exponent: S | Scalar): S {
  return wrapFirst("pow", input, exponent).pow(exponent);
}
/** Elementwise maximum of two tensors, broadcasting (torch.maximum; NaN propagates). */
export function maximum<S extends TensorOps<S>>(input: S, other: S): S { return input.maximum(other); }
export function minimum<S extends TensorOps<S>>(input: S, other: S): S { return input.minimum(other); }
// Elementwise, input's shape; dtype as the method: float ops (exp, log, sqrt, sin, erf...) promote
// integers to float32, the others keep the dtype (isnan, logical_not: bool) (torch.<name>).
export function square<S extends TensorOps<S>>(input: S): S { return input.square(); }
export function neg<S extends TensorOps<S>>(input: S): S { return input.neg(); }
export function abs<S extends TensorOps<S>>(input: S): S { return input.abs(); }
export function sign<S extends TensorOps<S>>(input: S): S { return input.sign(); }
export function exp<S extends TensorOps<S>>(input: S): S { return input.exp(); }
export function log<S extends TensorOps<S>>(input: S): S { return input.log(); }
export function log1p<S extends TensorOps<S>>(input: S): S { return input.log1p(); }
export function sqrt<S extends TensorOps<S>>(input: S): S { return input.sqrt(); }
export function rsqrt<S extends TensorOps<S>>(input: S): S { return input.rsqrt(); }
export function reciprocal<S extends TensorOps<S>>(input: S): S { return input.reciprocal(); }
export function sin<S extends TensorOps<S>>(input: S): S { return input.sin(); }
export function cos<S extends TensorOps<S>>(input: S): S { return input.cos(); }
export function erf<S extends TensorOps<S>>(input: S): S { return input.erf(); }
export function floor<S extends TensorOps<S>>(input: S): S { return input.floor(); }
export function ceil<S extends TensorOps<S>>(input: S): S { return input.ceil(); }
export function isnan<S extends TensorOps<S>>(input: S): S { return input.isnan(); }
export function logical_not<S extends TensorOps<S>>(input: S): S { return input.logical_not(); }

/**
 * Round half to even (torch.round); `decimals` d rounds to multiples of 10^-d as torch does:
 * round(x · 10^d) / 10^d for d > 0, round(x / 10^-d) · 10^-d for d < 0. Zero gradient.
 * @throws LoomDtypeError for decimals != 0 on a non-floating input (torch: "round_cpu" not implemented for 'Long')
 */
export function round<S extends TensorOps<S>>(input: S, opts?: { decimals?: number }): S {
  const d = opts?.decimals ?? 0;
  if (d !== 0 && Number.isInteger(d) && !isFloating(input.dtype)) throw new LoomDtypeError(`[round] decimals=${d} needs a floating point tensor, got ${input.dtype}`);
  return input.round(opts); // the formula lives in TensorOps.round
}

type ClampArgs<S> = PyArgs<[min: S | number | null | undefined, max: S | number | null | undefined], { min?: S | number | null; max?: S | number | null }>;
/** Clamp into [min, max] (torch.clamp); `loom.clamp(x, {max: 1})` as torch.clamp(x, max=1). */
export function clamp<S extends TensorOps<S>>(input: S, ...args: ClampArgs<S>): S {
  const a = bindArgs("clamp", ["min", "max"], args);
  return input.clamp(a.min as S | number | null, a.max as S | number | null);
}
export function clip<S extends TensorOps<S>>(input: S, ...args: ClampArgs<S>): S {
  const a = bindArgs("clip", ["min", "max"], args);
  return input.clip(a.min as S | number | null, a.max as S | number | null);
}
/** In-place clamp (torch.clamp_); returns input. */
export function clamp_<S extends TensorOps<S>>(input: S, ...args: ClampArgs<S>): S {
  const a = bindArgs("clamp_", ["min", "max"], args);
  return input.clamp_(a.min as S | number | null, a.max as S | number | null);
}
/** Fill input with `value` in place (torch.fill_); returns input. */
export function fill_<S extends TensorOps<S>>(input: S, value: number): S { return input.fill_(value); }
/** Zero input in place (torch.zero_); returns input. */
export function zero_<S extends TensorOps<S>>(input: S): S { return input.zero_(); }

// ---- comparison and selection -----------------------------------------------------------------

// Comparisons and logical ops: broadcast, bool result; other may be a scalar (torch.<name>).
export function eq<S extends TensorOps<S>>(input: S, other: S | Scalar): S { return input.eq(other); }
export function ne<S extends TensorOps<S>>(input: S, other: S | Scalar): S { return input.ne(other); }
export function lt<S extends TensorOps<S>>(input: S, other: S | Scalar): S { return input.lt(other); }
export function le<S extends TensorOps<S>>(input: S, other: S | Scalar): S { return input.le(other); }
export function gt<S extends TensorOps<S>>(input: S, other: S | Scalar): S { return input.gt(other); }
export function ge<S extends TensorOps<S>>(input: S, other: S | Scalar): S { return input.ge(other); }
export function logical_and<S extends TensorOps<S>>(input: S, other: S | Scalar): S { return input.logical_and(other); }
export function logical_or<S extends TensorOps<S>>(input: S, other: S | Scalar): S { return input.logical_or(other); }
/** input with the positions where `mask` is true set to `value` (torch.masked_fill). */
export function masked_fill<S extends TensorOps<S>>(input: S, mask: S, value: S | Scalar): S { return input.masked_fill(mask, value); }

// ---- reductions -------------------------------------------------------------------------------

/** Keyword arguments of sum / mean. */
export interface ReduceKw { dim?: DimArg; keepdim?: boolean; dtype?: DType }
type ReduceArgs = PyArgs<[dim: DimArg, keepdim: boolean], ReduceKw>;
type DimKw = { dim?: DimArg; keepdim?: boolean };
type DimArgs = PyArgs<[dim: DimArg, keepdim: boolean], DimKw>;
/** `(dim, keepdim=false)` bound from `args` as Python binds them (amax, amin, any, all). */
function bindDimKeepdim(op: string, args: DimArgs): [DimArg, boolean] {
  const a = bindArgs(op, ["dim", "keepdim"], args);
  return [a.dim as DimArg, (a.keepdim as boolean) ?? false];
}
const dtypeOpt = (d: unknown): { dtype: DType } | undefined => (d ? { dtype: d as DType } : undefined);

/** Sum over `dim` (all dims when omitted) (torch.sum(input, dim, keepdim=False, *, dtype=None)). */
export function sum<S extends TensorOps<S>>(input: S, ...args: ReduceArgs): S {
  const a = bindArgs("sum", ["dim", "keepdim"], args, ["dtype"]);
  return input.sum(a.dim as DimArg, (a.keepdim as boolean) ?? false, dtypeOpt(a.dtype));
}
/** Mean over `dim`, floating dtypes (torch.mean(input, dim, keepdim=False, *, dtype=None)). */
export function mean<S extends TensorOps<S>>(input: S, ...args: ReduceArgs): S {
  const a = bindArgs("mean", ["dim", "keepdim"], args, ["dtype"]);
  return input.mean(a.dim as DimArg, (a.keepdim as boolean) ?? false, dtypeOpt(a.dtype));
}
/** Maximum over `dim`, all dims when omitted (torch.amax). */
export function amax<S extends TensorOps<S>>(input: S, ...args: DimArgs): S {
  return input.amax(...bindDimKeepdim("amax", args));
}
export function amin<S extends TensorOps<S>>(input: S, ...args: DimArgs): S {
  return input.amin(...bindDimKeepdim("amin", args));
}
/** True where any element over `dim` is non-zero (torch.any). */
export function any<S extends TensorOps<S>>(input: S, ...args: DimArgs): S {
  return input.any(...bindDimKeepdim("any", args));
}
export function all<S extends TensorOps<S>>(input: S, ...args: DimArgs): S {
  return input.all(...bindDimKeepdim("all", args));
}
/** log(sum(exp(input))) over `dim` (torch.logsumexp(input, dim, keepdim=False)). */
export function logsumexp<S extends TensorOps<S>>(input: S, ...args: PyArgs<[dim: DimArg, keepdim: boolean], DimKw>): S {
  const a = bindArgs("logsumexp", ["dim", "keepdim"], args);
  if (a.dim === undefined) throw new LoomValueError("[logsumexp] missing required argument 'dim'");
  return input.logsumexp(a.dim as DimArg, (a.keepdim as boolean) ?? false);
}

type IndexKw = { dim?: number | null; keepdim?: boolean };
/** Index of the first maximum over `dim`, of the flattened input when omitted (torch.argmax). */
export function argmax<S extends TensorOps<S>>(input: S, ...args: PyArgs<[dim: number | null, keepdim: boolean], IndexKw>): S {
  const a = bindArgs("argmax", ["dim", "keepdim"], args);
  return input.argmax(a.dim as number | null, (a.keepdim as boolean) ?? false);
}
export function argmin<S extends TensorOps<S>>(input: S, ...args: PyArgs<[dim: number | null, keepdim: boolean], IndexKw>): S {
  const a = bindArgs("argmin", ["dim", "keepdim"], args);
  return input.argmin(a.dim as number | null, (a.keepdim as boolean) ?? false);
}

type ExtremeResult<S> = { values: S; indices: S };
/**
 * torch.max: `max(input)` the maximum (0-d); `max(input, dim, keepdim?)` (or `{dim, keepdim}`)
 * `{values, indices}`; `max(input, other)` the elementwise maximum.
 */
export function max<S extends TensorOps<S>>(input: S): S;
export function max<S extends TensorOps<S>>(input: S, dim: number, keepdim?: boolean): ExtremeResult<S>;
export function max<S extends TensorOps<S>>(input: S, opts: { dim: number; keepdim?: boolean }): ExtremeResult<S>;
export function max<S extends TensorOps<S>>(input: S, other: S): S;
export function max<S extends TensorOps<S>>(input: S, ...args: unknown[]): S | ExtremeResult<S> {
  return extreme("max", input, args);
}
/** torch.min, the forms of max. */
export function min<S extends TensorOps<S>>(input: S): S;
export function min<S extends TensorOps<S>>(input: S, dim: number, keepdim?: boolean): ExtremeResult<S>;
export function min<S extends TensorOps<S>>(input: S, opts: { dim: number; keepdim?: boolean }): ExtremeResult<S>;
export function min<S extends TensorOps<S>>(input: S, other: S): S;
export function min<S extends TensorOps<S>>(input: S, ...args: unknown[]): S | ExtremeResult<S> {
  return extreme("min", input, args);
}
function extreme<S extends TensorOps<S>>(op: "max" | "min", input: S, args: unknown[]): S | ExtremeResult<S> {
  if (args[0] instanceof TensorOps) {
    if (args.length > 1) throw new LoomValueError(`[${op}] ${op}(input, other) takes no further arguments`);
    return op === "max" ? input.maximum(args[0] as S) : input.minimum(args[0] as S);
  }
  const a = bindArgs(op, ["dim", "keepdim"], args);
  if (a.dim === undefined || a.dim === null) {
    if (a.keepdim !== undefined) throw new LoomValueError(`[${op}] keepdim needs a dim`);
    return op === "max" ? input.max() : input.min();
  }
  if (typeof a.dim !== "number") throw new LoomValueError(`[${op}] dim must be a number, got ${String(a.dim)}`);
  const k = (a.keepdim as boolean) ?? false;
  return op === "max" ? input.max(a.dim, k) : input.min(a.dim, k);
}

/** Keyword arguments of var / std. */
export interface VarKw { dim?: DimArg; unbiased?: boolean; correction?: number; keepdim?: boolean }
type VarArgs = PyArgs<[dim: DimArg, unbiased: boolean, keepdim: boolean], VarKw> | PyArgs<[unbiased: boolean], VarKw>;
/** Both torch overloads: var(input, unbiased) and var(input, dim, unbiased, keepdim, *, correction). */
function varArgs(op: string, args: readonly unknown[]): [DimArg, VarKw] {
  const names = typeof args[0] === "boolean" ? ["unbiased"] : ["dim", "unbiased", "keepdim"];
  const a = bindArgs(op, names, args, ["dim", "correction", "keepdim"]) as VarKw;
  if (a.unbiased !== undefined && a.correction !== undefined) {
    throw new LoomValueError(`[${op}] cannot specify both unbiased and correction`);
  }
  return [a.dim, { unbiased: a.unbiased, correction: a.correction, keepdim: a.keepdim }];
}
/** Variance with Bessel's correction by default (torch.var); `unbiased: false` is correction 0. */
function var_<S extends TensorOps<S>>(input: S, ...args: VarArgs): S {
  const [dim, o] = varArgs("var", args);
  return input.var(dim, o);
}
// `var` is a reserved word: declared as var_, exported under torch's name
export { var_ as var };
/** Standard deviation, sqrt(var) (torch.std). */
export function std<S extends TensorOps<S>>(input: S, ...args: VarArgs): S {
  const [dim, o] = varArgs("std", args);
  return input.std(dim, o);
}
/** Cumulative sum along `dim` (torch.cumsum(input, dim, *, dtype=None)). */
export function cumsum<S extends TensorOps<S>>(input: S, ...args: PyArgs<[dim: number], { dim?: number; dtype?: DType }>): S {
  const a = bindArgs("cumsum", ["dim"], args, ["dtype"]);
  if (a.dim === undefined) throw new LoomValueError("[cumsum] missing required argument 'dim'");
  return input.cumsum(a.dim as number, dtypeOpt(a.dtype));
}

/** Keyword arguments of norm. */
export interface NormKw { p?: number | "fro" | "nuc"; dim?: DimArg; keepdim?: boolean; dtype?: DType }
/**
 * Vector p-norm over `dim`, all elements when omitted (torch.norm(input, p="fro", dim=None,
 * keepdim=False, dtype=None)). "fro" is the 2-norm over the reduced dims; "nuc" the nuclear norm
 * (sum of singular values, linalg.ts) of a 2-D input or over two `dim`s; `dtype` casts first.
 * @throws LoomValueError for another string p; LoomShapeError for "nuc" without a matrix
 */
export function norm<S extends TensorOps<S>>(input: S, ...args: PyArgs<[p: number | "fro" | "nuc", dim: DimArg, keepdim: boolean], NormKw>): S {
  const a = bindArgs("norm", ["p", "dim", "keepdim"], args, ["dtype"]) as NormKw;
  const p = a.p ?? "fro";
  if (typeof p === "string" && p !== "fro" && p !== "nuc") throw new LoomValueError(`[norm] p='${p}' is not supported; use a number, 'fro' or 'nuc'`);
  const x = a.dtype ? input.to(a.dtype) : input;
  if (p === "nuc") {
    const dims = a.dim === undefined || a.dim === null ? (x.ndim === 2 ? [0, 1] : null) : typeof a.dim === "number" ? null : [...a.dim];
    if (dims === null || dims.length !== 2) {
      throw new LoomShapeError(`[norm] p='nuc' needs a 2-D input or two dims, got input ${fmtShape(x.shape)} and dim ${JSON.stringify(a.dim ?? null)}`);
    }
    return matrix_norm(x, "nuc", { dim: [dims[0]!, dims[1]!], keepdim: a.keepdim ?? false });
  }
  return x.norm(p === "fro" ? 2 : p, a.dim, a.keepdim ?? false);
}
