/**
 * Loss functions with torch.nn.functional's names and semantics, generic over Tensor and
 * LazyTensor. Each is a composite of surface ops, so it runs eagerly and lazily and autograd
 * differentiates it (input and target); the composite is the reference a fused kernel must match.
 * Formulas follow torch 1.13 (aten/src/ATen/native/Loss.cpp, LossNLL.cpp, torch/nn/functional.py).
 *
 * Where torch only warns and broadcasts a target whose shape differs from the input (mse, l1,
 * huber, smooth_l1, kl_div), Loom raises LoomShapeError: an [N, 1] against [N] broadcast to
 * [N, N] is almost always a bug.
 */
import { OPS } from "../graph/registry.ts";
import { isFloating } from "../tensor/dtype.ts";
import { LoomDtypeError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { shapesEqual } from "../tensor/shape.ts";
import type { TensorOps } from "./surface.ts";

/** How per-element losses are combined: kept ("none"), averaged ("mean") or added ("sum"). */
export type Reduction = "none" | "mean" | "sum";

export interface LossOptions {
  /** Default "mean". */
  reduction?: Reduction;
}

/** @throws LoomValueError for a reduction outside `allowed` (torch's "is not a valid value for reduction") */
export function checkReduction(op: string, reduction: unknown, allowed: readonly string[] = ["none", "mean", "sum"]): void {
  if (typeof reduction !== "string" || !allowed.includes(reduction)) {
    throw new LoomValueError(`[${op}] reduction must be one of ${allowed.map((r) => `"${r}"`).join(", ")}, got ${JSON.stringify(reduction) ?? String(reduction)}`);
  }
}

function reduce<S extends TensorOps<S>>(loss: S, reduction: Reduction): S {
  return reduction === "none" ? loss : reduction === "sum" ? loss.sum() : loss.mean();
}

/**
 * Checks shared by the elementwise losses: floating input and target of equal shapes.
 * @throws LoomDtypeError for a non-floating input or target; LoomShapeError for different shapes
 */
function checkPair(op: string, input: TensorOps<any>, target: TensorOps<any>, reduction: unknown): void {
  checkReduction(op, reduction);
  if (!isFloating(input.dtype) || !isFloating(target.dtype)) {
    throw new LoomDtypeError(`[${op}] expected floating input and target, got input ${input.dtype} ${fmtShape(input.shape)} and target ${target.dtype} ${fmtShape(target.shape)}`);
  }
  if (!shapesEqual(input.shape, target.shape)) {
    throw new LoomShapeError(`[${op}] target ${fmtShape(target.shape)} must have the same shape as input ${fmtShape(input.shape)}`);
  }
}

/** A weight must broadcast to the input's shape without growing it (torch's weight contract). */
function checkBroadcastsTo(op: string, what: string, w: TensorOps<any>, shape: readonly number[]): void {
  const ok = w.ndim <= shape.length && w.shape.every((s, i) => s === 1 || s === shape[shape.length - w.ndim + i]);
  if (!ok) throw new LoomShapeError(`[${op}] ${what} ${fmtShape(w.shape)} does not broadcast to input ${fmtShape(shape)}`);
}

/** Options or, as Loom has accepted so far, the reduction alone. */
function opts<O extends LossOptions>(o: O | Reduction | undefined): O {
  return (typeof o === "string" ? { reduction: o } : (o ?? {})) as O;
}

/**
 * Mean squared error (x - y)² (torch.nn.functional.mse_loss).
 * @param input - floating, any shape; target - floating, same shape
 * @param o - `{ reduction }` (or the reduction string)
 * @returns 0-d for "mean"/"sum", input's shape for "none"
 * @throws LoomShapeError for different shapes; LoomDtypeError for a non-floating operand;
 *   LoomValueError for an unknown reduction
 */
export function mse_loss<S extends TensorOps<S>>(input: S, target: S, o?: LossOptions | Reduction): S {
  const { reduction = "mean" } = opts(o);
  checkPair("mse_loss", input, target, reduction);
  const d = input.sub(target);
  return reduce(d.mul(d), reduction);
}

/**
 * Mean absolute error |x - y| (torch.nn.functional.l1_loss); the gradient at x == y is 0 (sign).
 * Shapes, dtypes and errors as mse_loss.
 */
export function l1_loss<S extends TensorOps<S>>(input: S, target: S, o?: LossOptions | Reduction): S {
  const { reduction = "mean" } = opts(o);
  checkPair("l1_loss", input, target, reduction);
  return reduce(input.sub(target).abs(), reduction);
}

/**
 * Quadratic below |d| = t, linear above (d = x - y): huber (scale by t: t·(|d| - t/2)) or
 * smooth_l1 (= huber / t: 0.5·d²/t and |d| - t/2; t = 0 is l1_loss, as torch).
 * @throws as mse_loss; LoomValueError for delta <= 0 or beta < 0
 */
function quadraticThenLinear<S extends TensorOps<S>>(op: "huber_loss" | "smooth_l1_loss", input: S, target: S, reduction: Reduction, t: number): S {
  checkPair(op, input, target, reduction);
  const huber = op === "huber_loss";
  if (huber ? !(t > 0) : !(t >= 0)) throw new LoomValueError(`[${op}] ${huber ? "delta must be positive" : "beta must be non-negative"}, got ${t}`);
  const z = input.sub(target).abs();
  if (t === 0) return reduce(z, reduction);
  const quad = z.mul(z).mul(huber ? 0.5 : 0.5 / t), lin = z.sub(0.5 * t);
  return reduce(quad.where(z.lt(t), huber ? lin.mul(t) : lin), reduction);
}

export interface HuberLossOptions extends LossOptions {
  /** Where the loss turns from quadratic to linear (absolute, > 0); default 1. */
  delta?: number;
}

/**
 * Huber loss: 0.5·d² for |d| < delta, else delta·(|d| - 0.5·delta), d = x - y
 * (Huber 1964; torch.nn.functional.huber_loss). Shapes and errors as mse_loss.
 * @throws LoomValueError unless delta > 0
 */
export function huber_loss<S extends TensorOps<S>>(input: S, target: S, o: HuberLossOptions = {}): S {
  return quadraticThenLinear("huber_loss", input, target, o.reduction ?? "mean", o.delta ?? 1);
}

export interface SmoothL1LossOptions extends LossOptions {
  /** Where the loss turns from quadratic to linear (absolute, >= 0); default 1; 0 is l1_loss. */
  beta?: number;
}

/**
 * Smooth L1: 0.5·d²/beta for |d| < beta, else |d| - 0.5·beta, d = x - y; equal to
 * huber_loss / beta (Girshick 2015, Fast R-CNN; torch.nn.functional.smooth_l1_loss).
 * Shapes and errors as mse_loss.
 * @throws LoomValueError for a negative beta
 */
export function smooth_l1_loss<S extends TensorOps<S>>(input: S, target: S, o: SmoothL1LossOptions = {}): S {
  return quadraticThenLinear("smooth_l1_loss", input, target, o.reduction ?? "mean", o.beta ?? 1);
}

export interface KLDivOptions {
  /** "batchmean" (sum / batch size) is the KL divergence; "mean" averages over every element. Default "mean" as torch. */
  reduction?: Reduction | "batchmean";
  /** The target is given as log-probabilities; default false. */
  log_target?: boolean;
}

/**
 * Pointwise KL divergence with log-probability input: target·(log target - input), or with
 * log_target exp(target)·(target - input) (torch.nn.functional.kl_div). A zero target contributes
 * 0 (torch's xlogy), with a zero gradient.
 * @param input - floating log-probabilities; target - floating, same shape
 * @returns 0-d, or input's shape for "none"; "batchmean" divides the sum by input.shape[0]
 *   (a 0-d input: the sum)
 * @throws as mse_loss
 */
export function kl_div<S extends TensorOps<S>>(input: S, target: S, o: KLDivOptions = {}): S {
  const { reduction = "mean", log_target = false } = o;
  checkReduction("kl_div", reduction, ["none", "mean", "sum", "batchmean"]);
  checkPair("kl_div", input, target, "none");
  let loss: S;
  if (log_target) {
    loss = target.exp().mul(target.sub(input));
  } else {
    // xlogy(t, t) - t·x; log reads 1 where t == 0 so neither value nor gradient sees log(0)
    loss = target.mul(target.where(target.ne(0), 1).log()).sub(target.mul(input));
  }
  if (reduction === "batchmean") return input.ndim === 0 ? loss.sum() : loss.sum().div(input.shape[0]!);
  return reduce(loss, reduction);
}

export interface BCEOptions<S> extends LossOptions {
  /** Rescales each element's loss; broadcast to the input's shape. */
  weight?: S | null;
}

/**
 * log(x) clamped to >= -100 as torch's BCE, with a zero gradient (not 0/0) where x == 0;
 * NaN stays NaN.
 */
function clampedLog<S extends TensorOps<S>>(x: S): S {
  const nz = x.ne(0);
  return x.where(nz, 1).log().where(nz, -100).clamp(-100);
}

/**
 * Binary cross entropy between probabilities and targets:
 * -w·(y·log x + (1 - y)·log(1 - x)), each log clamped to >= -100 as torch
 * (torch.nn.functional.binary_cross_entropy). Inputs outside [0, 1] are not checked (torch checks
 * values, which a lazy input cannot do before it runs): they give NaN. The gradient is the
 * derivative of this composite; at x = 0 or 1 exactly it can differ from torch's hand-written
 * backward, which divides by max(x·(1 - x), 1e-12).
 * @param input - floating probabilities; target - floating, same shape; weight - broadcastable
 * @returns 0-d, or input's shape for "none"
 * @throws LoomShapeError for different shapes or a weight that does not broadcast; LoomDtypeError;
 *   LoomValueError for an unknown reduction
 */
export function binary_cross_entropy<S extends TensorOps<S>>(input: S, target: S, o: BCEOptions<S> = {}): S {
  const { reduction = "mean", weight = null } = o;
  checkPair("binary_cross_entropy", input, target, reduction);
  if (weight) checkBroadcastsTo("binary_cross_entropy", "weight", weight, input.shape);
  let loss = target.mul(clampedLog(input)).add(target.rsub(1).mul(clampedLog(input.rsub(1)))).neg();
  if (weight) loss = loss.mul(weight);
  return reduce(loss, reduction);
}

export interface BCEWithLogitsOptions<S> extends BCEOptions<S> {
  /** Weight of the positive examples, broadcast along the last (class) dim, e.g. [C]. */
  pos_weight?: S | null;
}

/**
 * Binary cross entropy on logits, sigmoid folded in for stability
 * (torch.nn.functional.binary_cross_entropy_with_logits). With m = max(-x, 0) and
 * lw = 1 + (pos_weight - 1)·y: loss = (1 - y)·x + lw·(log(e^-m + e^(-x-m)) + m), times weight;
 * the form of torch 1.13's Loss.cpp, which never exponentiates a positive number.
 * @param input - floating logits; target - floating, same shape; weight, pos_weight - broadcastable
 * @returns 0-d, or input's shape for "none"
 * @throws as binary_cross_entropy, also for a pos_weight that does not broadcast
 */
export function binary_cross_entropy_with_logits<S extends TensorOps<S>>(input: S, target: S, o: BCEWithLogitsOptions<S> = {}): S {
  const { reduction = "mean", weight = null, pos_weight = null } = o;
  const op = "binary_cross_entropy_with_logits";
  checkPair(op, input, target, reduction);
  if (weight) checkBroadcastsTo(op, "weight", weight, input.shape);
  if (pos_weight) checkBroadcastsTo(op, "pos_weight", pos_weight, input.shape);
  const m = input.neg().clamp(0);
  const softplusNeg = m.neg().exp().add(input.neg().sub(m).exp()).log().add(m); // log(1 + e^-x)
  const lw = pos_weight ? pos_weight.sub(1).mul(target).add(1) : null;
  let loss = target.rsub(1).mul(input).add(lw ? lw.mul(softplusNeg) : softplusNeg);
  if (weight) loss = loss.mul(weight);
  return reduce(loss, reduction);
}

export interface NLLLossOptions<S> extends LossOptions {
  /** Per-class rescaling, [C]. */
  weight?: S | null;
  /** Targets equal to it add nothing to the loss or the "mean" denominator; default -100. */
  ignore_index?: number;
}

export interface CrossEntropyOptions<S> extends NLLLossOptions<S> {
  /** Mix the target with the uniform distribution: (1 - ε)·target + ε/C; in [0, 1], default 0. */
  label_smoothing?: number;
}

function checkClassWeight(op: string, weight: TensorOps<any> | null, input: TensorOps<any>, C: number): void {
  if (weight && !shapesEqual(weight.shape, [C])) {
    throw new LoomShapeError(`[${op}] weight must have one entry per class, ${fmtShape([C])} for input ${fmtShape(input.shape)}, got ${fmtShape(weight.shape)}`);
  }
}

/**
 * Checks a class-index target against input [N, C, d1...] / [C] and picks -input[target]:
 * the per-element weighted loss, the weights (0 where ignored) and the non-ignored mask.
 */
function pickClasses<S extends TensorOps<S>>(op: "nll_loss" | "cross_entropy", input: S, target: S, weight: S | null, ignore_index: number) {
  if (input.ndim === 0) throw new LoomShapeError(`[${op}] input must have a class dim, got a 0-d input`);
  const cdim = input.ndim === 1 ? 0 : 1;
  const C = input.shape[cdim]!;
  if (target.dtype !== "int64" && target.dtype !== "int32") {
    throw new LoomDtypeError(`[${op}] expected a class-index target of dtype int64 or int32, got ${target.dtype} ${fmtShape(target.shape)} (input ${input.dtype} ${fmtShape(input.shape)})`);
  }
  const want = input.shape.filter((_, i) => i !== cdim);
  if (!shapesEqual(target.shape, want)) {
    throw new LoomShapeError(`[${op}] expected target of shape ${fmtShape(want)} for input ${fmtShape(input.shape)}, got ${fmtShape(target.shape)}`);
  }
  checkClassWeight(op, weight, input, C);
  const valid = target.ne(ignore_index);
  // only ignored targets become 0; any other target outside [0, C) (-1 included) makes the gather
  // raise PyTorch's "Target -1 is out of bounds." (eagerly now, lazily when realized)
  const safe = target.where(valid, 0).to("int64");
  const nll = input._apply(OPS.gather, [safe.unsqueeze(cdim)], { dim: cdim, caller: op }).squeeze(cdim).neg();
  let w = valid.to(input.dtype);
  if (weight) w = w.mul(weight._apply(OPS.index_select, [safe.flatten()], { dim: 0, caller: op }).reshape(safe.shape as number[]));
  // where, not a product with the 0/1 mask: an ignored position's -inf log-probability stays out
  return { loss: nll.where(valid, 0).mul(w), w, valid };
}

/**
 * Negative log likelihood of class indices under log-probabilities
 * (torch.nn.functional.nll_loss): loss_i = -weight[t_i]·input[i, t_i]; "mean" divides by the
 * sum of the weights of the non-ignored targets (NaN when all are ignored, as torch).
 * @param input - floating log-probabilities [N, C], [N, C, d1, ...] or [C]
 * @param target - int64|int32 class indices [N], [N, d1, ...] or []
 * @returns 0-d, or target's shape for "none" (0 where ignored)
 * @throws LoomDtypeError for a non-integer target; LoomShapeError for a target or weight of the
 *   wrong shape; LoomIndexError for a target outside [0, C) other than ignore_index (when run);
 *   LoomValueError for an unknown reduction
 */
export function nll_loss<S extends TensorOps<S>>(input: S, target: S, o: NLLLossOptions<S> = {}): S {
  const { weight = null, ignore_index = -100, reduction = "mean" } = o;
  checkReduction("nll_loss", reduction);
  if (!isFloating(input.dtype)) throw new LoomDtypeError(`[nll_loss] expected floating log-probabilities, got input ${input.dtype} ${fmtShape(input.shape)}`);
  const { loss, w } = pickClasses("nll_loss", input, target, weight, ignore_index);
  return reduction === "none" ? loss : reduction === "sum" ? loss.sum() : loss.sum().div(w.sum());
}

/**
 * Cross entropy between logits and class indices (or class probabilities), as
 * torch.nn.functional.cross_entropy: nll_loss(log_softmax(input, class dim)), with label smoothing.
 * @param input - [N, C], [N, C, d1, ...] or [C] logits, floating
 * @param target - int [N] / [N, d1, ...] / [] class indices, or probabilities shaped like input
 * @returns 0-d for "mean"/"sum"; per-element loss for "none"
 * @throws LoomShapeError when target does not match input without its class dim; otherwise as nll_loss
 */
export function cross_entropy<S extends TensorOps<S>>(input: S, target: S, o: CrossEntropyOptions<S> = {}): S {
  const { weight = null, ignore_index = -100, reduction = "mean", label_smoothing = 0 } = o;
  checkReduction("cross_entropy", reduction);
  if (input.ndim === 0) throw new LoomShapeError(`[cross_entropy] input must have a class dim, got a 0-d input`);
  if (!(label_smoothing >= 0 && label_smoothing <= 1)) throw new LoomValueError(`[cross_entropy] label_smoothing must be between 0.0 and 1.0, got ${label_smoothing}`);
  const cdim = input.ndim === 1 ? 0 : 1;
  const C = input.shape[cdim]!;
  checkClassWeight("cross_entropy", weight, input, C);
  const logp = input.log_softmax(cdim);
  // per-class weights broadcast along the class dim
  const wview = weight ? weight.reshape([C, ...Array(Math.max(0, input.ndim - cdim - 1)).fill(1)]) : null;
  if (target.is_floating_point()) {
    if (!shapesEqual(target.shape, input.shape)) throw new LoomShapeError(`[cross_entropy] probability target ${fmtShape(target.shape)} must match input ${fmtShape(input.shape)}`);
    let t = label_smoothing > 0 ? target.mul(1 - label_smoothing).add(label_smoothing / C) : target;
    if (wview) t = t.mul(wview);
    const loss = logp.mul(t).sum(cdim).neg();
    if (reduction === "none") return loss;
    return reduction === "sum" ? loss.sum() : loss.sum().div(loss.numel());
  }
  const { loss, w, valid } = pickClasses("cross_entropy", logp, target, weight, ignore_index);
  // label smoothing: the (weighted) mean over classes of -log p, on the non-ignored targets
  const smooth = label_smoothing > 0 ? (wview ? logp.mul(wview) : logp).sum(cdim).neg().where(valid, 0) : null;
  if (reduction === "none") {
    return smooth ? loss.mul(1 - label_smoothing).add(smooth.mul(label_smoothing / C)) : loss;
  }
  const denom = reduction === "mean" ? w.sum() : null;
  let r = denom ? loss.sum().div(denom) : loss.sum();
  if (smooth) {
    const sr = denom ? smooth.sum().div(denom) : smooth.sum();
    r = r.mul(1 - label_smoothing).add(sr.mul(label_smoothing / C));
  }
  return r;
}
