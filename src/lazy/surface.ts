/**
 * The tensor method surface, written once. `TensorOps<Self>` implements every public method over
 * one abstract `_make(op, inputs, attrs, shape, dtype)`: `Tensor` runs the op now, `LazyTensor`
 * records a node (tinygrad's mixin idea). Shape and dtype inference, argument checks and autograd
 * recording happen here, so eager and lazy tensors fail the same way at the same moment.
 */
import {
  backward_state, check_saved, runBackward, saved_versions, type AutogradTensor, type BackwardOptions, type GradFnNode, type RemovableHandle,
} from "../autograd/engine.ts";
import { is_grad_enabled, no_grad } from "../autograd/grad_mode.ts";
import { floatHint, requireFloat } from "../graph/infer.ts";
import type { Diff, OpDef } from "../graph/op.ts";
import { OPS } from "../graph/registry.ts";
import {
  DTYPES, canCast, isFloating, isIntegral, promoteWithScalar, type DType,
} from "../tensor/dtype.ts";
import {
  LoomAutogradError, LoomDtypeError, LoomIndexError, LoomShapeError, LoomValueError, fmtShape,
} from "../tensor/errors.ts";
import {
  inferShape, normalizeDim, normalizeDims, numel, shapesEqual,
} from "../tensor/shape.ts";
import { fromValues, scalarData, toFloat64, type TensorData } from "../tensor/storage.ts";
import { backendFor, moveData } from "./device.ts";
import { autocast_args, autocast_state } from "./autocast.ts";
import { formatTensor } from "./format.ts";
import { indexPut, indexPutItems, valueShape } from "./index_put.ts";
import { applyIndex, planIndex, type IndexItem, type IndexList, type IndexTensor } from "./indexing.ts";

export type Scalar = number | boolean;
export type DimArg = number | readonly number[] | null | undefined;
export type NestedList = number | boolean | NestedList[];

function flatShapeArgs(args: readonly (number | readonly number[])[]): number[] {
  return args.length === 1 && Array.isArray(args[0]) ? [...(args[0] as number[])] : (args as number[]);
}

/**
 * How an eager operand is lifted when it meets a lazy one (`_apply`): `t.lazy()` unless a module
 * forward set its lift (nn/execution.ts: one private lift per tensor per call, as `nn.lift`).
 */
export const mixed_lift: { fn: ((t: TensorOps<any>) => TensorOps<any>) | null } = { fn: null };

export abstract class TensorOps<Self extends TensorOps<Self>> implements Diff<Self>, AutogradTensor<Self> {
  abstract readonly shape: readonly number[];
  abstract readonly dtype: DType;
  /** True for LazyTensor: ops record graph nodes instead of running. */
  abstract readonly isLazy: boolean;

  private _grad: Self | null = null;
  /** The accumulated gradient (torch.Tensor.grad). */
  get grad(): Self | null {
    return this._grad;
  }
  set grad(g: Self | null) {
    const prev = this._grad;
    this._grad = g;
    if (prev !== g) this._onGrad(prev, g);
  }
  /** A `.grad` was replaced (eager tensors retain a pending gradient until the next flush). */
  protected _onGrad(_prev: Self | null, _g: Self | null): void {}
  grad_fn: GradFnNode<Self> | null = null;
  _retains_grad = false;
  private _requires_grad = false;
  /**
   * The version counter, one per storage: views, detach(), Parameter, `lazy()` of an eager tensor
   * and `eval()` of a lazy one share it, so a write through any of them is seen by all (torch's
   * VariableVersion). Null until first shared or written (version 0): most tensors never are. A
   * small object, not the tensor it came from, so sharing it keeps no graph alive.
   */
  _vc: { v: number } | null = null;

  /** Run (eager) or record (lazy) an op whose output shape/dtype are already inferred. */
  protected abstract _make(op: OpDef, inputs: readonly Self[], attrs: unknown, shape: number[], dtype: DType): Self;
  /** A tensor of this kind wrapping a buffer (no autograd history). */
  abstract _constant(data: TensorData): Self;
  /** The computed buffer (realizes a lazy tensor). */
  abstract _data(): TensorData;
  /** Same values, no autograd history (torch.Tensor.detach). */
  abstract detach(): Self;
  /** This tensor as a LazyTensor (identity for lazy tensors). */
  abstract lazy(): TensorOps<any>;
  abstract get device(): string;

  // ---- autograd state ---------------------------------------------------------------------
  get requires_grad(): boolean {
    return this._requires_grad;
  }
  set requires_grad(v: boolean) {
    if (this.grad_fn && !v) {
      throw new LoomAutogradError("you can only change requires_grad flags of leaf variables; use detach() to get a tensor that does not require grad");
    }
    if (v && !isFloating(this.dtype)) {
      throw new LoomAutogradError(`only Tensors of floating point dtype can require gradients, got ${this.dtype}: ${floatHint(this.dtype)}`);
    }
    this._requires_grad = v;
  }
  /** True when the tensor was not produced by a recorded op (torch.Tensor.is_leaf). */
  get is_leaf(): boolean {
    return this.grad_fn === null;
  }
  /** Set requires_grad in place and return this (torch.Tensor.requires_grad_). */
  requires_grad_(v = true): this {
    this.requires_grad = v;
    return this;
  }
  /** Keep `.grad` for this non-leaf tensor during backward (torch.Tensor.retain_grad). */
  retain_grad(): this {
    if (!this.requires_grad) throw new LoomAutogradError("can't retain_grad on Tensor that has requires_grad=false");
    if (this.grad_fn) this._retains_grad = true;
    return this;
  }

  /**
   * Call `hook(grad)` whenever the gradient with respect to this tensor is computed in a backward
   * (torch.Tensor.register_hook). A returned tensor replaces the gradient: it is what a leaf
   * accumulates into `.grad` and what flows on to the inputs. Hooks run in registration order.
   * @returns a handle whose `remove()` unregisters the hook
   * @throws LoomAutogradError for a tensor that does not require grad
   */
  register_hook(hook: (grad: Self) => Self | void): RemovableHandle {
    if (!this.requires_grad) throw new LoomAutogradError("cannot register a hook on a tensor that doesn't require gradient");
    const hooks = (this._hooks ??= []);
    const entry = { fn: hook };
    hooks.push(entry);
    return { remove: () => { const i = hooks.indexOf(entry); if (i >= 0) hooks.splice(i, 1); } };
  }
  /** Gradient hooks (register_hook), null until one is registered. */
  _hooks: { fn: (grad: any) => any }[] | null = null;

  /** `out` with a zero gradient to each of `inputs` that requires grad (rounding ops, counts). */
  protected _zeroGrad(out: Self, inputs: readonly Self[], name: string): Self {
    if (is_grad_enabled() && isFloating(out.dtype) && inputs.some((i) => i.requires_grad)) {
      this._record(out, name, inputs, () => inputs.map((i) => (i.requires_grad ? i.detach().zeros_like() : null)));
    }
    return out;
  }
  /**
   * How many times this tensor's storage was written in place (torch.Tensor._version): 0 when
   * made, +1 per in-place op (copy_, add_, ..., an optimizer step) through it or any tensor
   * sharing its counter. Backward refuses to use a saved tensor whose version changed.
   */
  get _version(): number {
    return this._vc === null ? 0 : this._vc.v;
  }
  /** Count an in-place write to this tensor's storage (torch.autograd.graph.increment_version). */
  _increment_version(): void {
    (this._vc ??= { v: 0 }).v++;
  }
  /** This tensor's version counter, made on first use, for a tensor that shares the storage. */
  _version_counter(): { v: number } {
    return (this._vc ??= { v: 0 });
  }

  /**
   * Attach autograd history to an op output. The versions of `inputs` and `out` are recorded:
   * when `apply` uses one of them as an operand during backward, it must be unmodified.
   */
  protected _record(out: Self, name: string, inputs: readonly Self[], apply: (g: Self) => (Self | null)[]): void {
    out.grad_fn = { name, inputs, apply, released: false, output: out, versions: saved_versions(inputs, out) };
    out._requires_grad = true;
  }

  /**
   * Apply a registry op to (this, ...rest): infer shape/dtype (throwing at record time), run or
   * record it, and record autograd history when any input requires grad. Mixed eager/lazy
   * operands lift the eager ones to lazy.
   */
  _apply<A>(opdef: OpDef<A>, rest: readonly Self[], attrs: A): Self {
    const op = opdef as OpDef<any>;
    const running = backward_state.fn; // a gradient rule is running: its saved operands must be unmodified
    if (running !== null) {
      check_saved(running, this as unknown as Self);
      for (const r of rest) check_saved(running, r);
    }
    // plain loops, no closures: this runs once per recorded op (lazy recording budget ~0.3 µs)
    let anyGrad = this._requires_grad;
    for (let i = 0; i < rest.length; i++) {
      const r = rest[i]!;
      if (r.isLazy !== this.isLazy) {
        const lift = mixed_lift.fn;
        const lifted = [this, ...rest].map((t) => (t.isLazy ? t : lift !== null ? lift(t) : t.lazy()));
        return lifted[0]!._apply(op, lifted.slice(1), attrs) as unknown as Self;
      }
      if (r._requires_grad) anyGrad = true;
    }
    if (autocast_state.active && running === null) { // autocast.ts: cast inputs per the region's policy
      const c = autocast_args(op.name, [this as unknown as Self, ...rest]) as Self[] | null;
      if (c !== null) return c[0]!._apply(op, c.slice(1), attrs);
    }
    const inputs = rest.length === 0 ? [this as unknown as Self] : rest.length === 1 ? [this as unknown as Self, rest[0]!] : [this as unknown as Self, ...rest];
    const shape = op.shape(inputs, attrs);
    const dtype = op.dtype(inputs, attrs);
    const out = this._make(op, inputs, attrs, shape, dtype);
    if (op.kind === "view" && this._viewAliases(op, out)) out._vc = this._version_counter();
    if (anyGrad && op.grad && is_grad_enabled() && isFloating(dtype)) {
      const grad = op.grad;
      const needs = inputs.map((i) => i.requires_grad);
      this._record(out, op.name, inputs, (g) => grad(g, inputs, out, attrs, needs));
    }
    return out;
  }

  /** Wrap a scalar as a 0-d tensor of this kind with PyTorch's scalar promotion. */
  protected _wrap(o: Self | Scalar): Self {
    if (typeof o === "number" || typeof o === "boolean") {
      return this._constant(scalarData(promoteWithScalar(this.dtype, o), Number(o)));
    }
    return o;
  }
  private _bin(op: OpDef, o: Self | Scalar): Self {
    return this._apply(op, [this._wrap(o)], {});
  }
  private _un(op: OpDef): Self {
    return this._apply(op, [], {});
  }

  // ---- properties -------------------------------------------------------------------------
  get ndim(): number {
    return this.shape.length;
  }
  dim(): number {
    return this.shape.length;
  }
  /** torch.Tensor.size(): the shape, or one dim's size. */
  size(): number[];
  size(dim: number): number;
  size(dim?: number): number[] | number {
    return dim === undefined ? [...this.shape] : this.shape[normalizeDim("size", dim, this.ndim)]!;
  }
  numel(): number {
    return numel(this.shape);
  }
  element_size(): number {
    return { float32: 4, float64: 8, float16: 2, bfloat16: 2, int32: 4, int64: 8, int8: 1, uint8: 1, bool: 1 }[this.dtype];
  }
  is_floating_point(): boolean {
    return isFloating(this.dtype);
  }

  // ---- arithmetic -------------------------------------------------------------------------
  /** this + alpha * other, broadcasting (torch.add). */
  add(o: Self | Scalar, opts?: { alpha?: number }): Self {
    const a = opts?.alpha;
    return this._bin(OPS.add, a === undefined || a === 1 ? o : this._wrap(o).mul(a));
  }
  sub(o: Self | Scalar, opts?: { alpha?: number }): Self {
    const a = opts?.alpha;
    return this._bin(OPS.sub, a === undefined || a === 1 ? o : this._wrap(o).mul(a));
  }
  /** other - alpha * this (torch.rsub). */
  rsub(o: Self | Scalar, opts?: { alpha?: number }): Self {
    return this._wrap(o).sub(this as unknown as Self, opts);
  }
  mul(o: Self | Scalar): Self {
    return this._bin(OPS.mul, o);
  }
  /**
   * True division; `rounding_mode` "floor" or "trunc" keeps integer dtypes and has a zero
   * gradient (torch.div).
   * @throws LoomValueError for integer division by zero ("ZeroDivisionError", as torch)
   */
  div(o: Self | Scalar, opts?: { rounding_mode?: "floor" | "trunc" | null }): Self {
    const m = opts?.rounding_mode;
    if (!m) return this._bin(OPS.div, o);
    const other = this._wrap(o);
    const inputs = [this as unknown as Self, other];
    // the rounded quotient is computed without history; torch's derivative is zero for both modes
    const r = no_grad(() => {
      if (m === "floor") return this._bin(OPS.floor_divide, other);
      const d = OPS.floor_divide.dtype([this, other], {});
      if (!isFloating(d)) {
        // integers: trunc(a / b) = floor_divide(a, b), plus 1 where the remainder is non-zero and the
        // signs differ; floor_divide raises for b = 0 as torch does
        const q = this._bin(OPS.floor_divide, other);
        const fix = this._bin(OPS.remainder, other).ne(0).logical_and(this.lt(0).ne(other.lt(0)));
        return q.add(fix.to(d));
      }
      const q = this._bin(OPS.div, other);
      return q.sign().mul(q.abs().floor()).to(d);
    });
    return this._zeroGrad(r, inputs, "div");
  }
  floor_divide(o: Self | Scalar): Self {
    return this._bin(OPS.floor_divide, o);
  }
  remainder(o: Self | Scalar): Self {
    return this._bin(OPS.remainder, o);
  }
  /**
   * this ** o (torch.pow). An integer result with a negative scalar exponent is refused as torch
   * refuses it; a negative integer tensor exponent gives torch's 1 / ±1 / 0.
   * @throws LoomValueError for an integer tensor to a negative scalar power
   */
  pow(o: Self | Scalar): Self {
    if (typeof o === "number" && o < 0 && isIntegral(promoteWithScalar(this.dtype, o))) {
      throw new LoomValueError(`[pow] integers to negative integer powers are not allowed (${this.dtype} tensor, exponent ${o})`);
    }
    return this._bin(OPS.pow, o);
  }
  /** x·x; bool promotes to int64 as in torch (square is pow(x, 2)). */
  square(): Self {
    if (this.dtype === "bool") return this.to("int64").square();
    return this.mul(this as unknown as Self);
  }
  maximum(o: Self): Self {
    return this._bin(OPS.maximum, o);
  }
  minimum(o: Self): Self {
    return this._bin(OPS.minimum, o);
  }
  neg(): Self { return this._un(OPS.neg); }
  abs(): Self { return this._un(OPS.abs); }
  sign(): Self { return this._un(OPS.sign); }
  exp(): Self { return this._un(OPS.exp); }
  log(): Self { return this._un(OPS.log); }
  log1p(): Self { return this._un(OPS.log1p); }
  sqrt(): Self { return this._un(OPS.sqrt); }
  rsqrt(): Self { return this._un(OPS.rsqrt); }
  reciprocal(): Self { return this._un(OPS.reciprocal); }
  sin(): Self { return this._un(OPS.sin); }
  cos(): Self { return this._un(OPS.cos); }
  tanh(): Self { return this._un(OPS.tanh); }
  sigmoid(): Self { return this._un(OPS.sigmoid); }
  relu(): Self { return this._un(OPS.relu); }
  erf(): Self { return this._un(OPS.erf); }
  floor(): Self { return this._un(OPS.floor); }
  ceil(): Self { return this._un(OPS.ceil); }
  /**
   * Round half to even (torch.round); with `decimals` at 10^-decimals: x·10^d rounded then / 10^d
   * for d > 0, x / 10^-d rounded then · 10^-d for d < 0 (torch's round_decimals kernel). Zero gradient.
   * @throws LoomDtypeError for an integer input with decimals != 0 (torch has no integer kernel)
   */
  round(opts?: { decimals?: number }): Self {
    const d = opts?.decimals ?? 0;
    if (d === 0) return this._un(OPS.round);
    if (!Number.isInteger(d)) throw new LoomValueError(`[round] decimals must be an integer, got ${d}`);
    if (!isFloating(this.dtype)) throw new LoomDtypeError(`[round] "round_decimals" is not implemented for '${this.dtype}'`);
    return d > 0 ? this.mul(10 ** d).round().div(10 ** d) : this.div(10 ** -d).round().mul(10 ** -d);
  }
  isnan(): Self { return this._un(OPS.isnan); }
  logical_not(): Self { return this._un(OPS.logical_not); }

  /**
   * GELU. approximate "none": x·Φ(x) = 0.5·x·(1 + erf(x/√2)); "tanh":
   * 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). Source: Hendrycks & Gimpel 2016; torch.nn.GELU.
   */
  gelu(approximate: "none" | "tanh" = "none"): Self {
    if (approximate !== "none" && approximate !== "tanh") {
      throw new LoomValueError(`[gelu] approximate argument must be either none or tanh, got '${approximate}'`);
    }
    const f = approximate === "tanh"
      ? (x: Self): Self => {
        const inner = x.add(x.mul(x).mul(x).mul(0.044715)).mul(Math.sqrt(2 / Math.PI));
        return x.mul(0.5).mul(inner.tanh().add(1));
      }
      : (x: Self): Self => x.mul(0.5).mul(x.mul(Math.SQRT1_2).erf().add(1));
    return this._elementwisePlan(f) ?? f(this as unknown as Self);
  }
  /** SiLU / swish: x·σ(x) (Elfwing et al. 2017). */
  silu(): Self {
    const f = (x: Self): Self => x.mul(x.sigmoid());
    return this._elementwisePlan(f) ?? f(this as unknown as Self);
  }
  /**
   * Clamp into [min, max]; the gradient flows where min <= x <= max (torch.clamp).
   * @throws LoomValueError if both bounds are missing
   */
  clamp(min?: Self | number | null, max?: Self | number | null): Self {
    if ((min === undefined || min === null) && (max === undefined || max === null)) {
      throw new LoomValueError("[clamp] at least one of 'min' or 'max' must not be None");
    }
    // min(max(x, min), max) as torch: with min > max everything becomes max. NaN stays NaN with a
    // zero gradient (torch's clamp_backward passes it only where min <= x <= max): the NaN is
    // taken from a detached copy
    let r = this as unknown as Self;
    if (min !== undefined && min !== null) r = r.where(r.ge(min), r.detach().where(r.isnan(), min));
    if (max !== undefined && max !== null) r = r.where(r.le(max), r.detach().where(r.isnan(), max));
    return r;
  }
  clip(min?: Self | number | null, max?: Self | number | null): Self {
    return this.clamp(min, max);
  }

  // ---- comparison and selection -------------------------------------------------------------
  eq(o: Self | Scalar): Self { return this._bin(OPS.eq, o); }
  ne(o: Self | Scalar): Self { return this._bin(OPS.ne, o); }
  lt(o: Self | Scalar): Self { return this._bin(OPS.lt, o); }
  le(o: Self | Scalar): Self { return this._bin(OPS.le, o); }
  gt(o: Self | Scalar): Self { return this._bin(OPS.gt, o); }
  ge(o: Self | Scalar): Self { return this._bin(OPS.ge, o); }
  logical_and(o: Self | Scalar): Self { return this._bin(OPS.logical_and, o); }
  logical_or(o: Self | Scalar): Self { return this._bin(OPS.logical_or, o); }

  /** condition ? this : other, broadcasting (torch.Tensor.where). */
  where(condition: Self, other: Self | Scalar): Self {
    const o = typeof other === "object" ? other : this._wrap(other);
    return condition._apply(OPS.where, [this as unknown as Self, o], {});
  }
  /** Fill positions where `mask` is true with `value`; keeps this dtype (torch.masked_fill). */
  masked_fill(mask: Self, value: Self | Scalar): Self {
    if (mask.dtype !== "bool") throw new LoomDtypeError(`[masked_fill] mask must be a bool tensor, got ${mask.dtype}`);
    const v = typeof value === "object" ? value : this._wrap(value);
    if (typeof value === "object" && value.ndim !== 0) {
      throw new LoomShapeError(`[masked_fill] only supports a 0-dimensional value tensor, but got a tensor with ${value.ndim} dimensions`);
    }
    return v.to(this.dtype).where(mask, this as unknown as Self);
  }

  // ---- reductions ---------------------------------------------------------------------------
  /**
   * Sum over `dim` (all dims when omitted); int/bool inputs sum in int64 (torch.sum).
   * `dtype`: the input is cast to it first and the result has that dtype (torch's dtype=).
   */
  sum(dim?: DimArg, keepdim = false, opts?: { dtype?: DType }): Self {
    if (opts?.dtype) return this.to(opts.dtype).sum(dim, keepdim).to(opts.dtype);
    return this._apply(OPS.sum, [], { dim: normalizeDims("sum", dim, this.ndim), keepdim });
  }
  /**
   * Mean over `dim`; floating dtypes only (torch.mean). `dtype`: the input is cast to it first.
   * @throws LoomDtypeError for a non-floating input without a floating `dtype`
   */
  mean(dim?: DimArg, keepdim = false, opts?: { dtype?: DType }): Self {
    if (opts?.dtype) return this.to(opts.dtype).mean(dim, keepdim);
    requireFloat("mean", this.dtype);
    const dims = normalizeDims("mean", dim, this.ndim);
    const n = dims.reduce((p, d) => p * this.shape[d]!, 1);
    return this.sum(dims, keepdim).div(n);
  }
  /**
   * Maximum over `dim` (all dims when omitted) (torch.amax).
   * @throws LoomValueError for an empty tensor without `dim`; LoomIndexError when a reduced dim has size 0
   */
  amax(dim?: DimArg, keepdim = false): Self {
    return this._extreme("amax", true, dim, keepdim);
  }
  amin(dim?: DimArg, keepdim = false): Self {
    return this._extreme("amin", false, dim, keepdim);
  }
  /** amax/amin under the name `op` (amax, max...): an empty input has no identity, as in torch. */
  private _extreme(op: string, largest: boolean, dim: DimArg, keepdim: boolean): Self {
    if ((dim === undefined || dim === null) && this.numel() === 0) {
      throw new LoomValueError(`[${op}] expected reduction dim to be specified for input.numel() == 0 (input shape ${fmtShape(this.shape)}); specify the reduction dim with the 'dim' argument`);
    }
    return this._apply(largest ? OPS.amax : OPS.amin, [], { dim: normalizeDims(op, dim, this.ndim), keepdim });
  }
  /** Whether reducing over `dim` folds an empty set (then amax/amin have no value). */
  private _reducesEmpty(op: string, dim: DimArg): boolean {
    return normalizeDims(op, dim, this.ndim).some((d) => this.shape[d] === 0);
  }
  /**
   * max(): the maximum (0-d); max(dim, keepdim): {values, indices} with the first index of each
   * maximum; max(other): elementwise maximum. As torch.max.
   */
  max(): Self;
  max(dim: number, keepdim?: boolean): { values: Self; indices: Self };
  max(other: Self): Self;
  max(arg?: number | Self, keepdim = false): Self | { values: Self; indices: Self } {
    if (arg === undefined) return this._extreme("max", true, undefined, false);
    if (typeof arg !== "number") return this.maximum(arg);
    return this._extremeWithIndices(arg, keepdim, true);
  }
  min(): Self;
  min(dim: number, keepdim?: boolean): { values: Self; indices: Self };
  min(other: Self): Self;
  min(arg?: number | Self, keepdim = false): Self | { values: Self; indices: Self } {
    if (arg === undefined) return this._extreme("min", false, undefined, false);
    if (typeof arg !== "number") return this.minimum(arg);
    return this._extremeWithIndices(arg, keepdim, false);
  }
  private _extremeWithIndices(dim: number, keepdim: boolean, largest: boolean): { values: Self; indices: Self } {
    const op = largest ? "max" : "min";
    const d = normalizeDim(op, dim, this.ndim);
    if (this.shape[d] === 0) throw new LoomIndexError(`[${op}] expected reduction dim ${d} to have non-zero size (input shape ${fmtShape(this.shape)})`);
    if (this.ndim === 0) return { values: this as unknown as Self, indices: this._constant(fromValues("int64", [], [0])) };
    const idx = largest ? this.argmax(d, true) : this.argmin(d, true);
    // values through gather so the gradient goes to the selected element only (as torch)
    const values = this.gather(d, idx);
    return keepdim ? { values, indices: idx } : { values: values.squeeze(d), indices: idx.squeeze(d) };
  }
  /** Index of the first maximum over `dim` (flattened when omitted), int64. */
  argmax(dim?: number | null, keepdim = false): Self {
    return this._apply(OPS.argmax, [], { dim: dim ?? null, keepdim });
  }
  argmin(dim?: number | null, keepdim = false): Self {
    return this._apply(OPS.argmin, [], { dim: dim ?? null, keepdim });
  }
  /**
   * Variance over `dim` with Bessel's correction by default: sum((x - mean)²) / (N - correction).
   * `unbiased: false` means correction 0 (torch.var).
   */
  var(dim?: DimArg, opts: { unbiased?: boolean; correction?: number; keepdim?: boolean } = {}): Self {
    requireFloat("var", this.dtype);
    const dims = normalizeDims("var", dim, this.ndim);
    const correction = opts.correction ?? (opts.unbiased === false ? 0 : 1);
    const n = dims.reduce((p, d) => p * this.shape[d]!, 1);
    const d = this.sub(this.mean(dims, true));
    return d.mul(d).sum(dims, opts.keepdim ?? false).div(Math.max(0, n - correction));
  }
  std(dim?: DimArg, opts: { unbiased?: boolean; correction?: number; keepdim?: boolean } = {}): Self {
    requireFloat("std", this.dtype);
    return this.var(dim, opts).sqrt();
  }
  /** log(sum(exp(x))) over `dim`, stabilized by the (detached) max (torch.logsumexp). */
  logsumexp(dim: DimArg, keepdim = false): Self {
    const dims = normalizeDims("logsumexp", dim, this.ndim);
    const safe = this._stabilizer("logsumexp", dims);
    const r = this.sub(safe).exp().sum(dims, true).log().add(safe);
    return keepdim ? r : r.squeeze(dims);
  }
  /**
   * The detached max over `dims` (keepdim) that softmax-like ops subtract, with infinite maxima
   * replaced by 0 (an all -inf row keeps -inf, not NaN); 0 for an empty reduction (which has no max).
   */
  private _stabilizer(op: string, dims: readonly number[]): Self {
    if (this._reducesEmpty(op, dims)) return this._wrap(0);
    const m = this.amax(dims, true).detach();
    return m.where(m.abs().lt(Infinity), 0);
  }
  /** Cumulative sum along `dim` (torch.cumsum); `dtype`: computed in it, result of that dtype. */
  cumsum(dim: number, opts?: { dtype?: DType }): Self {
    if (opts?.dtype) return this.to(opts.dtype).cumsum(dim).to(opts.dtype);
    return this._apply(OPS.cumsum, [], { dim: normalizeDim("cumsum", dim, this.ndim), reverse: false });
  }
  /** True if any element is non-zero (0-d bool). */
  any(dim?: DimArg, keepdim = false): Self {
    // an empty reduction is false (amax has no identity there): count the non-zeros instead
    if (this._reducesEmpty("any", dim)) return this.ne(0).sum(dim, keepdim).gt(0);
    return this.ne(0).amax(dim, keepdim);
  }
  /** True if every element is non-zero (an empty reduction is true). */
  all(dim?: DimArg, keepdim = false): Self {
    if (this._reducesEmpty("all", dim)) return this.eq(0).sum(dim, keepdim).eq(0);
    return this.ne(0).amin(dim, keepdim);
  }
  /** softmax(x)_i = exp(x_i - max) / sum_j exp(x_j - max) along `dim` (torch.softmax). */
  softmax(dim: number, opts?: { dtype?: DType }): Self {
    if (opts?.dtype) return this.to(opts.dtype).softmax(dim);
    requireFloat("softmax", this.dtype);
    const d = normalizeDim("softmax", dim, this.ndim);
    if (this.shape[d] === 0) return this.clone();
    const f = this._fusedSoftmax(d);
    if (f !== null) return f;
    const e = this.sub(this.amax(d, true).detach()).exp();
    return e.div(e.sum(d, true));
  }
  /**
   * log(softmax(x)) = (x - m) - log(sum(exp(x - m))) with m the (detached) max, subtracted
   * first as torch does: x - (m + log s) would round m + log s first and lose x's low bits
   * (logits of ±1e4 keep only ~1e-3 of precision in float32).
   */
  log_softmax(dim: number, opts?: { dtype?: DType }): Self {
    if (opts?.dtype) return this.to(opts.dtype).log_softmax(dim);
    requireFloat("log_softmax", this.dtype);
    const d = normalizeDim("log_softmax", dim, this.ndim);
    if (this.shape[d] === 0) return this.clone();
    const shifted = this.sub(this._stabilizer("log_softmax", [d]));
    return shifted.sub(shifted.exp().sum(d, true).log());
  }

  // ---- shape and views ----------------------------------------------------------------------
  /** Same data, new shape; one dim may be -1 (torch.reshape: a view when strides allow). */
  reshape(...shape: (number | readonly number[])[]): Self {
    const s = inferShape("reshape", flatShapeArgs(shape), this.numel());
    if (shapesEqual(s, this.shape)) return this as unknown as Self;
    return this._apply(OPS.reshape, [], { shape: s });
  }
  /**
   * torch.view: like reshape, but an eager tensor whose strides cannot be viewed throws. Always a
   * new tensor, as in torch, even for the same shape (its own grad_fn: a hook on it sees only the
   * gradient that flows through it; a lazy no-op view is folded away by the compiler).
   */
  view(...shape: (number | readonly number[])[]): Self {
    const s = inferShape("view", flatShapeArgs(shape), this.numel());
    this._checkView(s);
    return this._apply(OPS.reshape, [], { shape: s });
  }
  /**
   * Whether `out`, this tensor viewed by `op`, shares this storage (and so its version counter).
   * Lazy views always do (a lazy reshape's strides are not known yet; torch would count it).
   */
  protected _viewAliases(_op: OpDef, _out: Self): boolean {
    return true;
  }
  /**
   * Hook: `fn` (a chain of elementwise ops of this tensor alone) computed now as one plan, one
   * pass over memory (eager tensors without a gradient to record: lazy/tensor.ts), or null for
   * the ops one by one.
   */
  protected _elementwisePlan(_fn: (x: Self) => Self): Self | null {
    return null;
  }
  /**
   * Hook: softmax over `dim` as one fused kernel now (eager tensors without a gradient to record:
   * eager_fused.ts), or null for the decomposition op by op.
   */
  protected _fusedSoftmax(_dim: number): Self | null {
    return null;
  }
  /**
   * (functional.ts) rms_norm / layer_norm of this tensor over its last `dims` dims as one fused
   * kernel now (eager tensors without a gradient to record: eager_fused.ts), or null for the
   * decomposition op by op. `n` is the normalized element count, `eps` as given.
   */
  _fusedNorm(_kind: "rms_norm" | "layer_norm", _dims: number, _n: number, _weight: Self | null, _bias: Self | null, _eps: number): Self | null {
    return null;
  }
  /** Hook: eager tensors verify the view is possible without a copy. */
  protected _checkView(_shape: readonly number[]): void {}
  view_as(o: Self): Self { return this.view(o.shape as number[]); }
  reshape_as(o: Self): Self { return this.reshape(o.shape as number[]); }

  /** Flatten dims start_dim..end_dim into one (torch.flatten). */
  flatten(start_dim = 0, end_dim = -1): Self {
    if (this.ndim === 0) return this.reshape([1]);
    const s = normalizeDim("flatten", start_dim, this.ndim);
    const e = normalizeDim("flatten", end_dim, this.ndim);
    if (s > e) throw new LoomIndexError(`[flatten] start_dim ${start_dim} cannot come after end_dim ${end_dim}`);
    const shape = [...this.shape.slice(0, s), this.shape.slice(s, e + 1).reduce((p, x) => p * x, 1), ...this.shape.slice(e + 1)];
    return this.reshape(shape);
  }
  /** Split dim into `sizes` (torch.unflatten). */
  unflatten(dim: number, sizes: readonly number[]): Self {
    const d = normalizeDim("unflatten", dim, this.ndim);
    const inner = inferShape("unflatten", sizes, this.shape[d]!);
    return this.reshape([...this.shape.slice(0, d), ...inner, ...this.shape.slice(d + 1)]);
  }
  /** Remove size-1 dims (all, or those in `dim` that have size 1). */
  squeeze(dim?: DimArg): Self {
    const dims = dim === undefined || dim === null ? this.shape.map((_, i) => i) : normalizeDims("squeeze", dim, this.ndim);
    return this.reshape(this.shape.filter((s, i) => !(s === 1 && dims.includes(i))));
  }
  /** Insert a size-1 dim at `dim` in [-ndim-1, ndim] (torch.unsqueeze). */
  unsqueeze(dim: number): Self {
    const d = normalizeDim("unsqueeze", dim, this.ndim + 1);
    const s = [...this.shape];
    s.splice(d, 0, 1);
    return this.reshape(s);
  }
  /** Reorder dims (torch.permute): a view. */
  permute(...dims: (number | readonly number[])[]): Self {
    const ds = flatShapeArgs(dims).map((d) => normalizeDim("permute", d, this.ndim));
    if (ds.every((d, i) => d === i) && ds.length === this.ndim) return this as unknown as Self;
    return this._apply(OPS.permute, [], { dims: ds });
  }
  transpose(dim0: number, dim1: number): Self {
    const a = normalizeDim("transpose", dim0, this.ndim);
    const b = normalizeDim("transpose", dim1, this.ndim);
    if (a === b) return this as unknown as Self;
    const p = this.shape.map((_, i) => i);
    p[a] = b;
    p[b] = a;
    return this.permute(p);
  }
  swapaxes(a: number, b: number): Self { return this.transpose(a, b); }
  /** Transpose of a <= 2-D tensor (torch.t). */
  t(): Self {
    if (this.ndim > 2) throw new LoomShapeError(`[t] expects a tensor with <= 2 dimensions, but self is ${this.ndim}D`);
    return this.ndim < 2 ? (this as unknown as Self) : this.transpose(0, 1);
  }
  /** Transpose of the last two dims. */
  get mT(): Self {
    return this.transpose(-2, -1);
  }
  /** Broadcast view to `sizes`; -1 keeps a dim (torch.expand). */
  expand(...sizes: (number | readonly number[])[]): Self {
    const want = flatShapeArgs(sizes);
    const off = want.length - this.ndim;
    const shape = want.map((s, i) => (s === -1 && i >= off ? this.shape[i - off]! : s));
    if (shapesEqual(shape, this.shape)) return this as unknown as Self;
    return this._apply(OPS.expand, [], { shape });
  }
  expand_as(o: Self): Self { return this.expand(o.shape as number[]); }
  /** Sum broadcast dims away so the result has `shape` (torch.Tensor.sum_to_size). */
  sum_to_size(...shape: (number | readonly number[])[]): Self {
    const s = flatShapeArgs(shape);
    // size [] always sums, so a 0-d int32/bool tensor comes back int64 as in torch (at::sum_to)
    if (s.length === 0) return this.sum();
    if (shapesEqual(s, this.shape)) return this as unknown as Self;
    const lead = this.ndim - s.length;
    if (lead < 0) throw new LoomShapeError(`[sum_to_size] size ${fmtShape(s)} is not expandable to size ${fmtShape(this.shape)}`);
    const dims: number[] = [];
    for (let i = 0; i < this.ndim; i++) {
      if (i < lead) dims.push(i);
      else if (s[i - lead] === 1 && this.shape[i] !== 1) dims.push(i);
      else if (s[i - lead] !== this.shape[i]) throw new LoomShapeError(`[sum_to_size] size ${fmtShape(s)} is not expandable to size ${fmtShape(this.shape)}`);
    }
    return this.sum(dims, true).reshape(s);
  }
  /**
   * `length` elements of `dim` from `start` (negative start counts from the end): a view.
   * @throws LoomIndexError when the range leaves the dim
   */
  narrow(dim: number, start: number, length: number): Self {
    const d = normalizeDim("narrow", dim, this.ndim);
    const size = this.shape[d]!;
    const s = start < 0 ? start + size : start;
    if (s < 0 || s > size || length < 0 || s + length > size) {
      throw new LoomIndexError(`[narrow] start (${start}) + length (${length}) exceeds dimension size (${size}) of dim ${dim}`);
    }
    return this._slice(d, s, s + length, 1);
  }
  /** x[start:end:step] along `dim` with normalized bounds. */
  _slice(dim: number, start: number, end: number, step: number): Self {
    if (start === 0 && end === this.shape[dim] && step === 1) return this as unknown as Self;
    return this._apply(OPS.slice, [], { dim, start, end, step });
  }
  /**
   * Python-style indexing (torch's __getitem__): `x[0, 1:3, None, ..., ::2]` is
   * `x.index(0, "1:3", null, "...", "::2")`; slices may also be `{start, stop, step}`.
   * Basic items (integers, slices, null, "...") give a view. Advanced items: integer lists (nested
   * too) or int64/int32 tensors of any shape, and bool masks (bool lists, bool/uint8 tensors, one
   * dim per mask dim); they broadcast together to B, which replaces the indexed dims when they are
   * adjacent (after integers and null are applied) and comes first otherwise, as in PyTorch. The
   * result is a copy (index_select), differentiable; duplicate indices accumulate gradients.
   * Index values are read when the index is recorded: a lazy index tensor or mask is realized then
   * (a mask's result shape depends on its values); the indexed tensor stays lazy.
   * @example x.index([0, 2], "1:") is x[[0, 2], 1:]; x.index(":", mask) is x[:, mask]
   * @throws LoomIndexError for out-of-range indices ("[index] index 5 is out of bounds for dimension
   *   0 with size 3"), too many indices, a mask whose shape differs from the dims it indexes, index
   *   shapes that do not broadcast, float index tensors and any unsupported item
   */
  index(...items: IndexItem[]): Self {
    return applyIndex(this as unknown as Self, planIndex("index", this.shape, items));
  }
  /**
   * Out-of-place indexed assignment (torch.Tensor.index_put): a copy of this with
   * this[indices] = values, or += values with `accumulate` (duplicate indices summed; without it
   * the last duplicate wins, as PyTorch on CPU). Differentiable in this and values.
   * @param indices - one index tensor or list per leading dim (bool masks too); null for a whole dim
   * @param values - broadcastable to the shape of this[indices], same dtype as this (scalars are cast)
   * @throws LoomIndexError as index(); LoomDtypeError when values' dtype differs; LoomShapeError
   *   when values do not broadcast
   */
  index_put(indices: readonly (IndexList | IndexTensor | null)[], values: Self | Scalar, accumulate = false): Self {
    const plan = planIndex("index_put", this.shape, indexPutItems("index_put", indices));
    return indexPut("index_put", this as unknown as Self, plan, this._putValue(values), accumulate);
  }
  /** In-place index_put (torch.Tensor.index_put_); a LazyTensor is rebound to the result. */
  index_put_(indices: readonly (IndexList | IndexTensor | null)[], values: Self | Scalar, accumulate = false): this {
    const plan = planIndex("index_put_", this.shape, indexPutItems("index_put_", indices));
    return this._set("index_put_", (self) => indexPut("index_put_", self, plan, this._putValue(values), accumulate), false);
  }
  /**
   * `x[items] = value` (torch's __setitem__): `x.set(0, "1:", [2, 0], v)` is `x[0, 1:, [2, 0]] = v`.
   * Takes the items of index() followed by the value (a tensor broadcastable to this[items], or a
   * scalar). Eager tensors are written in place, a LazyTensor is rebound (as copy_). With only
   * basic items the value is converted to this dtype (copy_); with advanced items a tensor value
   * must have this dtype (PyTorch's index_put_ rule).
   * @throws as index(), plus LoomDtypeError / LoomShapeError for the value, LoomAutogradError on a
   *   tensor that requires grad while grad mode is on
   */
  set(...args: (IndexItem | Self | Scalar)[]): this {
    if (args.length === 0) throw new LoomValueError("[set] expects the index items followed by the value");
    const value = args[args.length - 1] as Self | Scalar;
    const plan = planIndex("set", this.shape, args.slice(0, -1) as IndexItem[]);
    const v = typeof value === "object" && !plan.adv.length ? value.to(this.dtype) : this._putValue(value);
    if (!plan.adv.length && !this.isLazy && this.device === "cpu" && !(is_grad_enabled() && v.requires_grad)) {
      // basic items on a host tensor: write through the view (it shares this storage), O(view)
      const view = applyIndex(this as unknown as Self, plan);
      if (view._data().data === this._data().data) {
        this._checkInplace("set");
        view.copy_(v.reshape(valueShape("set", v.shape, view.shape)));
        return this;
      }
    }
    return this._set("set", (self) => indexPut("set", self, plan, v, false), false);
  }
  /** A value for index_put: tensors as they are, scalars as a 0-d tensor of this dtype. */
  private _putValue(v: Self | Scalar): Self {
    return typeof v === "object" ? v : this._wrap(v).to(this.dtype);
  }
  /** Dense row-major version: this tensor itself when already dense (eager), else a copy. */
  contiguous(): Self {
    return this._isDense() ? (this as unknown as Self) : this._apply(OPS.contiguous, [], {});
  }
  /** A copy with its own dense storage, differentiable (torch.clone). */
  clone(): Self {
    return this._apply(OPS.contiguous, [], {});
  }
  /** Whether the data is known to be dense row-major now (lazy tensors: unknown, so false). */
  protected _isDense(): boolean {
    return false;
  }
  /**
   * Vector p-norm over `dim` (all when omitted): (Σ|x|^p)^(1/p); p = Infinity gives max |x|,
   * p = -Infinity min |x|, p = 0 the number of non-zeros (torch.linalg.vector_norm / Tensor.norm).
   */
  norm(p = 2, dim?: DimArg, keepdim = false): Self {
    if (p === 0) {
      // the count of non-zeros: piecewise constant, zero gradient (torch)
      const r = no_grad(() => this.ne(0).to(this.dtype).sum(dim, keepdim));
      return this._zeroGrad(r, [this as unknown as Self], "norm");
    }
    if (p === Infinity || p === -Infinity) {
      // max |x| / min |x|; over an empty set the norm is 0 (torch), which the sum gives
      if (this._reducesEmpty("norm", dim)) return this.abs().sum(dim, keepdim);
      return p > 0 ? this.abs().amax(dim, keepdim) : this.abs().amin(dim, keepdim);
    }
    if (p === 2) return this.mul(this as unknown as Self).sum(dim, keepdim).sqrt();
    if (p === 1) return this.abs().sum(dim, keepdim);
    return this.abs().pow(p).sum(dim, keepdim).pow(1 / p);
  }
  /** Split into pieces of `size` (or the given sizes) along `dim` (torch.split): views. */
  split(split_size_or_sections: number | readonly number[], dim = 0): Self[] {
    const d = normalizeDim("split", dim, this.ndim);
    const n = this.shape[d]!;
    let sizes: number[];
    if (typeof split_size_or_sections === "number") {
      const k = split_size_or_sections;
      if (k <= 0 && n > 0) throw new LoomValueError(`[split] split_size must be positive, got ${k}`);
      sizes = [];
      for (let s = 0; s < n; s += k) sizes.push(Math.min(k, n - s));
      if (n === 0) sizes = [0];
    } else {
      sizes = [...split_size_or_sections];
      const total = sizes.reduce((p, x) => p + x, 0);
      if (total !== n) throw new LoomShapeError(`[split] split_with_sizes expects split_sizes to sum exactly to ${n} (input tensor's size at dimension ${d}), but got split_sizes=${fmtShape(sizes)}`);
    }
    let start = 0;
    return sizes.map((len) => {
      const r = this._slice(d, start, start + len, 1);
      start += len;
      return r;
    });
  }
  /** `chunks` pieces of ceil(n / chunks) along `dim` (torch.chunk). */
  chunk(chunks: number, dim = 0): Self[] {
    if (!Number.isInteger(chunks) || chunks <= 0) throw new LoomValueError(`[chunk] chunk expects \`chunks\` to be greater than 0, got: ${chunks}`);
    const n = this.shape[normalizeDim("chunk", dim, this.ndim)]!;
    return this.split(Math.max(1, Math.ceil(n / chunks)), dim);
  }
  /** Lower triangle of the last two dims, zero elsewhere (torch.tril). */
  tril(diagonal = 0): Self {
    return this._apply(OPS.tri, [], { diagonal, upper: false });
  }
  triu(diagonal = 0): Self {
    return this._apply(OPS.tri, [], { diagonal, upper: true });
  }
  /** out[i][j] = this[index[i][j]][j] for dim 0 (torch.gather). */
  gather(dim: number, index: Self): Self {
    return this._apply(OPS.gather, [index], { dim: normalizeDim("gather", dim, this.ndim) });
  }
  /** Copy of this with src added at index along dim (torch.scatter_add). */
  scatter_add(dim: number, index: Self, src: Self): Self {
    // bool add is logical or in torch; the kernels add, so count in int32 and test != 0
    if (this.dtype === "bool" && src.dtype === "bool") return this.int().scatter_add(dim, index, src.int()).ne(0);
    return this._apply(OPS.scatter_add, [index, src], { dim: normalizeDim("scatter_add", dim, this.ndim) });
  }
  /** Rows (or slices along dim) picked by a 1-D index (torch.index_select). */
  index_select(dim: number, index: Self): Self {
    return this._apply(OPS.index_select, [index], { dim: normalizeDim("index_select", dim, this.ndim) });
  }
  index_add(dim: number, index: Self, source: Self, opts?: { alpha?: number }): Self {
    // bool: logical or, as for scatter_add
    if (this.dtype === "bool" && source.dtype === "bool") return this.int().index_add(dim, index, source.int(), opts).ne(0);
    // alpha 1 leaves source as is (a bool source times 1 would become int64)
    const src = opts?.alpha === undefined || opts.alpha === 1 ? source : source.mul(opts.alpha);
    return this._apply(OPS.index_add, [index, src], { dim: normalizeDim("index_add", dim, this.ndim) });
  }

  // ---- linear algebra -----------------------------------------------------------------------
  /**
   * Matrix product with torch.matmul's rules: 1-D operands gain and lose a dim, batch dims broadcast.
   * @param o - [..., K, N] or [K]; this is [..., M, K] or [K]
   * @throws LoomShapeError `[matmul] shapes [2, 3] and [4, 5]: 3 != 4`; LoomDtypeError on mixed dtypes
   */
  matmul(o: Self): Self {
    if (this.ndim === 0 || o.ndim === 0) {
      throw new LoomShapeError(`[matmul] both arguments need at least 1 dimension, got ${fmtShape(this.shape)} and ${fmtShape(o.shape)}`);
    }
    const a1 = this.ndim === 1, b1 = o.ndim === 1;
    const a = a1 ? this.unsqueeze(0) : (this as unknown as Self);
    const b = b1 ? o.unsqueeze(-1) : o;
    if (a1 || b1) {
      const ka = a.shape[a.ndim - 1]!, kb = b.shape[b.ndim - 2]!;
      if (ka !== kb) throw new LoomShapeError(`[matmul] shapes ${fmtShape(this.shape)} and ${fmtShape(o.shape)}: ${ka} != ${kb}`);
    }
    let r = a._apply(OPS.matmul, [b], {});
    if (b1) r = r.squeeze(-1);
    if (a1) r = r.squeeze(a1 && b1 ? -1 : -2);
    return r;
  }
  /** 2-D matrix product (torch.mm). */
  mm(o: Self): Self {
    if (this.ndim !== 2 || o.ndim !== 2) throw new LoomShapeError(`[mm] expects 2-D tensors, got ${fmtShape(this.shape)} and ${fmtShape(o.shape)}`);
    return this.matmul(o);
  }
  /** Batched 3-D matrix product (torch.bmm). */
  bmm(o: Self): Self {
    if (this.ndim !== 3 || o.ndim !== 3) throw new LoomShapeError(`[bmm] expects 3-D tensors, got ${fmtShape(this.shape)} and ${fmtShape(o.shape)}`);
    if (this.shape[0] !== o.shape[0]) throw new LoomShapeError(`[bmm] batch sizes differ: ${fmtShape(this.shape)} and ${fmtShape(o.shape)}`);
    return this.matmul(o);
  }

  // ---- dtype conversion ---------------------------------------------------------------------
  /**
   * Convert to `dtype`, or move to `device` ("cpu", "webgpu": a copy, differentiable; a lazy
   * tensor is realized first), or to another tensor's dtype and device; returns this when nothing
   * changes.
   */
  to(target: DType | string | Self): Self {
    // to(other): other's dtype and device (torch.Tensor.to(other))
    if (typeof target === "object") return this.to(target.dtype).to(target.device);
    if (!(DTYPES as readonly string[]).includes(target)) {
      return target === this.device ? (this as unknown as Self) : this._to_device(target);
    }
    if (target === this.dtype) return this as unknown as Self;
    return this._apply(OPS.cast, [], { dtype: target as DType });
  }
  /** This tensor's values copied to `device` (torch.Tensor.to(device)). */
  private _to_device(device: string): Self {
    const out = this._on(device, moveData(this._data(), this.device, device));
    if (is_grad_enabled() && this.requires_grad) {
      const from = this.device;
      this._record(out, "to", [this as unknown as Self], (g) => [g.to(from)]);
    }
    return out;
  }
  /** A tensor of this kind on `device` wrapping `data` (no autograd history). */
  protected abstract _on(device: string, data: TensorData): Self;
  /** Copy to host memory (torch.Tensor.cpu). */
  cpu(): Self { return this.to("cpu"); }
  float(): Self { return this.to("float32"); }
  double(): Self { return this.to("float64"); }
  half(): Self { return this.to("float16"); }
  bfloat16(): Self { return this.to("bfloat16"); }
  int(): Self { return this.to("int32"); }
  long(): Self { return this.to("int64"); }
  bool(): Self { return this.to("bool"); }

  // ---- in-place ---------------------------------------------------------------------------
  /** Write `src`'s values (already broadcast to this shape and cast to this dtype) into this. */
  protected abstract _assign(src: Self): void;
  private _checkInplace(op: string): void {
    if (is_grad_enabled() && this.requires_grad) {
      throw new LoomAutogradError(
        this.is_leaf
          ? `[${op}] a leaf Variable that requires grad is being used in an in-place operation; wrap the update in no_grad()`
          : `[${op}] in-place operations on tensors that require grad are not supported; use the out-of-place op`,
      );
    }
  }
  /**
   * Copy `src` into this tensor, broadcasting and converting dtype (torch.Tensor.copy_).
   * Eager tensors are written in place (views of them see the change); a LazyTensor is rebound
   * to the new value (functional semantics: other lazy views keep the old value).
   * @throws LoomAutogradError on a tensor that requires grad while grad mode is on
   */
  copy_(src: Self | Scalar): this {
    return this._set("copy_", (self) => (typeof src === "object" ? src : self._wrap(src)), false);
  }
  add_(o: Self | Scalar, opts?: { alpha?: number }): this { return this._set("add_", (self) => self.add(o, opts)); }
  sub_(o: Self | Scalar, opts?: { alpha?: number }): this { return this._set("sub_", (self) => self.sub(o, opts)); }
  mul_(o: Self | Scalar): this { return this._set("mul_", (self) => self.mul(o)); }
  div_(o: Self | Scalar): this { return this._set("div_", (self) => self.div(o)); }
  clamp_(min?: Self | number | null, max?: Self | number | null): this { return this._set("clamp_", (self) => self.clamp(min, max)); }
  fill_(v: number): this { return this._set("fill_", (self) => self._wrap(v), false); }
  zero_(): this { return this._set("zero_", (self) => self._wrap(0), false); }
  masked_fill_(mask: Self, value: Self | Scalar): this { return this._set("masked_fill_", (self) => self.masked_fill(mask, value)); }
  /**
   * Write `value(self)` into this (broadcast, cast). `checkCast`: refuse results that cannot be
   * cast back to this dtype (arithmetic ops; copy_ and fill_ convert). A value of the other kind
   * (lazy into eager, eager into lazy) is converted first. When the value requires grad (grad
   * mode on), this becomes a non-leaf whose gradient flows to it, as torch records CopyBackwards /
   * MulBackward on `x.mul_(y)`: the value is then computed from a snapshot of this, so the rule
   * that saved this does not read the overwritten storage.
   */
  /**
   * The current value of a lazy tensor, immutable (its node): detach() with a version counter of
   * its own, since writes to this tensor (and to an eager tensor it was lifted from) rebind or
   * write buffers, never the snapshot's node.
   */
  private _snapshot(): Self {
    const d = this.detach();
    d._vc = { v: this._version };
    return d;
  }
  private _set(op: string, value: (self: Self) => Self, checkCast = true): this {
    this._checkInplace(op);
    const self = this as unknown as Self;
    let v = value(self);
    if (v.requires_grad && is_grad_enabled()) v = value(this.isLazy ? this._snapshot() : no_grad(() => this.clone()));
    if (checkCast && !canCast(v.dtype, this.dtype)) {
      throw new LoomDtypeError(`[${op}] result type ${v.dtype} can't be cast to the desired output type ${this.dtype}`);
    }
    let src = v.to(this.dtype).expand(this.shape as number[]);
    // a lazy value written into an eager tensor stays pending: a deferred write (lazy/deferred.ts)
    if (src.isLazy !== this.isLazy) src = (this.isLazy ? src.lazy() : (src as unknown as { defer(): Self }).defer()) as Self;
    this._assign(src);
    if (src.requires_grad && is_grad_enabled()) this._record(self, op, [src], (g) => [g]);
    return this;
  }

  // ---- constants like this ------------------------------------------------------------------
  /** A tensor of `value` with this shape and dtype (a broadcast view of one element). */
  full_like(value: number, dtype: DType = this.dtype): Self {
    return this._constant(scalarData(dtype, value)).expand(this.shape as number[]);
  }
  zeros_like(): Self { return this.full_like(0); }
  ones_like(): Self { return this.full_like(1); }

  // ---- autograd -----------------------------------------------------------------------------
  /**
   * Accumulate d(this)/d(leaf) into every leaf's `.grad`. `gradient` is required unless this is
   * a single element (torch.Tensor.backward).
   * @throws LoomAutogradError when this does not require grad, or on a second backward without retain_graph
   */
  backward(gradient?: Self | null, opts: BackwardOptions = {}): void {
    let g = gradient ?? null;
    if (!g) {
      if (this.numel() !== 1) throw new LoomAutogradError("grad can be implicitly created only for scalar outputs");
      g = this.ones_like().contiguous();
    }
    runBackward([this as unknown as Self], [g], { ...opts, accumulate: true });
  }

  // ---- reading values -----------------------------------------------------------------------
  /** The single value as a number (bool as 0/1) (torch.Tensor.item). */
  item(): number {
    if (this.numel() !== 1) throw new LoomValueError(`[item] a Tensor with ${this.numel()} elements cannot be converted to Scalar`);
    return toFloat64(this._data())[0]!;
  }
  /** Nested JS arrays of the values; bools as booleans (torch.Tensor.tolist). */
  tolist(): NestedList {
    const v = toFloat64(this._data());
    const isBool = this.dtype === "bool";
    const shape = this.shape;
    const nd = shape.length;
    if (nd === 0) return isBool ? v[0] !== 0 : v[0]!;
    // plain loops and pushes (Array.from with a callback per element costs several times more)
    const build = (d: number, off: number, stride: number): NestedList[] => {
      const n = shape[d]!;
      const out: NestedList[] = [];
      if (d === nd - 1) {
        for (let i = 0; i < n; i++) out.push(isBool ? v[off + i] !== 0 : v[off + i]!);
        return out;
      }
      const inner = stride / shape[d + 1]!;
      for (let i = 0; i < n; i++) out.push(build(d + 1, off + i * stride, inner));
      return out;
    };
    return build(0, 0, numel(shape) / shape[0]!);
  }
  /** The values, row-major, as a Float64Array (exact for every dtype Loom stores). */
  dataSync(): Float64Array {
    return toFloat64(this._data());
  }
  /** Read back asynchronously: device backends (webgpu) map their buffer without blocking. */
  async data(): Promise<Float64Array> {
    const d = this._data();
    await backendFor(this.device).read?.(d);
    return toFloat64(d);
  }
  toString(): string {
    return formatTensor(this.shape, this.dtype, toFloat64(this._data()), this.grad_fn?.name ?? null, this.requires_grad);
  }
  /** console.log / Bun.inspect show the values, as torch's repr. */
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return this.toString();
  }
}
