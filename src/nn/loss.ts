/**
 * Loss modules (torch.nn.MSELoss, CrossEntropyLoss, ...): each keeps its options (and its class
 * weights as a buffer, as torch) and calls the functional loss of src/lazy/losses.ts, so
 * `new nn.MSELoss().call(x, y)` equals `F.mse_loss(x, y)`. `forward(input, target)` runs eagerly
 * and lazily like every module (Module.forward's execution rules).
 */
import {
  binary_cross_entropy, binary_cross_entropy_with_logits, checkReduction, cross_entropy, huber_loss, kl_div, l1_loss,
  mse_loss, nll_loss, smooth_l1_loss, type Reduction,
} from "../lazy/losses.ts";
import type { TensorOps } from "../lazy/surface.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { LoomValueError } from "../tensor/errors.ts";
import { lift } from "./execution.ts";
import { Module, py_float } from "./module.ts";

const REDUCTIONS: readonly Reduction[] = ["none", "mean", "sum"];

export interface LossModuleOptions {
  /** "none" | "mean" | "sum"; default "mean". */
  reduction?: Reduction;
}

/**
 * Base of the loss modules (torch.nn.modules.loss._Loss): a reduction, and a typed
 * `forward(input, target)` over the generic `forward_lazy`.
 */
export abstract class _Loss<R extends string = Reduction> extends Module {
  readonly reduction: R;
  /** @throws LoomValueError for a reduction outside `allowed` */
  constructor(reduction: R | undefined, allowed: readonly R[]) {
    super();
    reduction ??= "mean" as R;
    checkReduction(this._get_name(), reduction, allowed);
    this.reduction = reduction;
  }
  abstract override forward_lazy<S extends TensorOps<S>>(input: S, target: S): S;
  override forward<S extends TensorOps<S>>(input: S, target: S): S {
    return super.forward(input, target) as S;
  }
}

/** A loss with optional per-class (or per-element) weights, kept as the buffer `weight`. */
export abstract class _WeightedLoss extends _Loss {
  declare readonly weight: Tensor | null;
  constructor(weight: TensorOps<any> | null | undefined, reduction?: Reduction) {
    super(reduction, REDUCTIONS);
    this.register_buffer("weight", (weight ?? null) as Tensor | null);
  }
}

/** Mean squared error (torch.nn.MSELoss). input, target: same shape, floating. */
export class MSELoss extends _Loss {
  constructor(opts: LossModuleOptions = {}) {
    super(opts.reduction, REDUCTIONS);
  }
  forward_lazy<S extends TensorOps<S>>(input: S, target: S): S {
    return mse_loss(input, target, { reduction: this.reduction });
  }
}

/** Mean absolute error (torch.nn.L1Loss). input, target: same shape, floating. */
export class L1Loss extends _Loss {
  constructor(opts: LossModuleOptions = {}) {
    super(opts.reduction, REDUCTIONS);
  }
  forward_lazy<S extends TensorOps<S>>(input: S, target: S): S {
    return l1_loss(input, target, { reduction: this.reduction });
  }
}

export interface HuberLossModuleOptions extends LossModuleOptions {
  /** Quadratic below, linear above (absolute, > 0); default 1. */
  delta?: number;
}

/** Huber loss (torch.nn.HuberLoss); see F.huber_loss. */
export class HuberLoss extends _Loss {
  readonly delta: number;
  /** @throws LoomValueError unless delta > 0 */
  constructor(opts: HuberLossModuleOptions = {}) {
    super(opts.reduction, REDUCTIONS);
    this.delta = opts.delta ?? 1;
    if (!(this.delta > 0)) throw new LoomValueError(`[HuberLoss] delta must be positive, got ${this.delta}`);
  }
  forward_lazy<S extends TensorOps<S>>(input: S, target: S): S {
    return huber_loss(input, target, { reduction: this.reduction, delta: this.delta });
  }
}

export interface SmoothL1LossModuleOptions extends LossModuleOptions {
  /** Quadratic below, linear above (absolute, >= 0); default 1. */
  beta?: number;
}

/** Smooth L1 loss (torch.nn.SmoothL1Loss); see F.smooth_l1_loss. */
export class SmoothL1Loss extends _Loss {
  readonly beta: number;
  /** @throws LoomValueError for a negative beta */
  constructor(opts: SmoothL1LossModuleOptions = {}) {
    super(opts.reduction, REDUCTIONS);
    this.beta = opts.beta ?? 1;
    if (!(this.beta >= 0)) throw new LoomValueError(`[SmoothL1Loss] beta must be non-negative, got ${this.beta}`);
  }
  forward_lazy<S extends TensorOps<S>>(input: S, target: S): S {
    return smooth_l1_loss(input, target, { reduction: this.reduction, beta: this.beta });
  }
}

export interface KLDivLossOptions {
  /** "none" | "mean" | "sum" | "batchmean" (the KL divergence proper); default "mean" as torch. */
  reduction?: Reduction | "batchmean";
  /** The target holds log-probabilities; default false. */
  log_target?: boolean;
}

/** KL divergence with log-probability input (torch.nn.KLDivLoss); see F.kl_div. */
export class KLDivLoss extends _Loss<Reduction | "batchmean"> {
  readonly log_target: boolean;
  constructor(opts: KLDivLossOptions = {}) {
    super(opts.reduction, ["none", "mean", "sum", "batchmean"]);
    this.log_target = opts.log_target ?? false;
  }
  forward_lazy<S extends TensorOps<S>>(input: S, target: S): S {
    return kl_div(input, target, { reduction: this.reduction, log_target: this.log_target });
  }
}

export interface NLLLossModuleOptions extends LossModuleOptions {
  /** Per-class rescaling, [C]. */
  weight?: TensorOps<any> | null;
  /** Targets with this value are left out; default -100. */
  ignore_index?: number;
}

/** Negative log likelihood of class indices (torch.nn.NLLLoss); see F.nll_loss. */
export class NLLLoss extends _WeightedLoss {
  readonly ignore_index: number;
  constructor(opts: NLLLossModuleOptions = {}) {
    super(opts.weight, opts.reduction);
    this.ignore_index = opts.ignore_index ?? -100;
  }
  forward_lazy<S extends TensorOps<S>>(input: S, target: S): S {
    return nll_loss(input, target, { weight: lift(this.weight, input), ignore_index: this.ignore_index, reduction: this.reduction });
  }
}

export interface CrossEntropyLossOptions extends NLLLossModuleOptions {
  /** In [0, 1]; default 0. */
  label_smoothing?: number;
}

/** Cross entropy of logits against class indices or probabilities (torch.nn.CrossEntropyLoss); see F.cross_entropy. */
export class CrossEntropyLoss extends _WeightedLoss {
  readonly ignore_index: number;
  readonly label_smoothing: number;
  /** @throws LoomValueError for a label_smoothing outside [0, 1] */
  constructor(opts: CrossEntropyLossOptions = {}) {
    super(opts.weight, opts.reduction);
    this.ignore_index = opts.ignore_index ?? -100;
    this.label_smoothing = opts.label_smoothing ?? 0;
    if (!(this.label_smoothing >= 0 && this.label_smoothing <= 1)) {
      throw new LoomValueError(`[CrossEntropyLoss] label_smoothing must be between 0.0 and 1.0, got ${this.label_smoothing}`);
    }
  }
  forward_lazy<S extends TensorOps<S>>(input: S, target: S): S {
    const o = { weight: lift(this.weight, input), ignore_index: this.ignore_index, reduction: this.reduction, label_smoothing: this.label_smoothing };
    return cross_entropy(input, target, o);
  }
  override extra_repr(): string {
    return this.label_smoothing ? `label_smoothing=${py_float(this.label_smoothing)}` : "";
  }
}

export interface BCELossOptions extends LossModuleOptions {
  /** Rescales each element's loss; broadcast to the input's shape. */
  weight?: TensorOps<any> | null;
}

/** Binary cross entropy of probabilities (torch.nn.BCELoss); see F.binary_cross_entropy. */
export class BCELoss extends _WeightedLoss {
  constructor(opts: BCELossOptions = {}) {
    super(opts.weight, opts.reduction);
  }
  forward_lazy<S extends TensorOps<S>>(input: S, target: S): S {
    return binary_cross_entropy(input, target, { weight: lift(this.weight, input), reduction: this.reduction });
  }
}

export interface BCEWithLogitsLossOptions extends BCELossOptions {
  /** Weight of positive examples, broadcast along the last (class) dim, e.g. [C]. */
  pos_weight?: TensorOps<any> | null;
}

/** Binary cross entropy of logits (torch.nn.BCEWithLogitsLoss); see F.binary_cross_entropy_with_logits. */
export class BCEWithLogitsLoss extends _WeightedLoss {
  declare readonly pos_weight: Tensor | null;
  constructor(opts: BCEWithLogitsLossOptions = {}) {
    super(opts.weight, opts.reduction);
    this.register_buffer("pos_weight", (opts.pos_weight ?? null) as Tensor | null);
  }
  forward_lazy<S extends TensorOps<S>>(input: S, target: S): S {
    const o = { weight: lift(this.weight, input), pos_weight: lift(this.pos_weight, input), reduction: this.reduction };
    return binary_cross_entropy_with_logits(input, target, o);
  }
}
