/**
 * Batch and group normalization layers: BatchNorm1d / BatchNorm2d (torch.nn.BatchNorm1d/2d, with
 * running statistics as buffers) and GroupNorm (torch.nn.GroupNorm). The math is functional
 * batch_norm / group_norm (lazy/batch_norm.ts).
 *
 * Running statistics in lazy execution: the forward reads the buffers lifted to LazyTensors, and
 * their update becomes a deferred (private) write of the eager buffers, computed in the same
 * plan as the step's loss, gradients and optimizer writes.
 */
import { full, zeros } from "../lazy/creation.ts";
import { _batch_norm, group_norm } from "../lazy/batch_norm.ts";
import { LazyTensor } from "../lazy/lazy_tensor.ts";
import type { TensorOps } from "../lazy/surface.ts";
import { Tensor } from "../lazy/tensor.ts";
import { no_grad } from "../autograd/grad_mode.ts";
import type { DType } from "../tensor/dtype.ts";
import { LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { lift } from "./execution.ts";
import { TensorModule, py_bool, py_float } from "./module.ts";
import { Parameter } from "./parameter.ts";

/**
 * Write a running statistic into the module's eager buffer, privately (as optimizers write
 * parameters, `_write_private`): lazily the value stays pending and the buffer is written at the
 * end of the step's one plan; the value's node is only held by this forward, so the next step's
 * write marks it stale instead of copying the buffer for it.
 */
function writeBuffer(buffer: Tensor, value: TensorOps<any>): void {
  buffer._write_private(value instanceof LazyTensor ? value.defer() : (value as Tensor));
}

export interface BatchNormOptions {
  /** Added to the variance (absolute); default 1e-5. */
  eps?: number;
  /** Weight of the newest batch in the running statistics (default 0.1); null: cumulative average (1/num_batches_tracked). */
  momentum?: number | null;
  /** Learn weight (init 1) and bias (init 0) per channel; default true. */
  affine?: boolean;
  /** Keep running_mean / running_var / num_batches_tracked and use them in eval mode; default true. */
  track_running_stats?: boolean;
  /** Parameter and running-stat dtype (default float32). */
  dtype?: DType;
}

/**
 * torch's _BatchNorm: per-channel normalization of [N, C, *] over N and *. Training uses the
 * batch's mean and biased variance and updates the running estimates (the variance unbiased);
 * eval uses the running estimates (batch statistics when track_running_stats is false).
 * weight, bias: [C] (affine); buffers running_mean [C] (0), running_var [C] (1),
 * num_batches_tracked int64 0-d: torch's state_dict keys.
 * Source: Ioffe & Szegedy 2015, "Batch Normalization"; torch/nn/modules/batchnorm.py
 */
abstract class BatchNormBase extends TensorModule {
  weight: Parameter | null;
  bias: Parameter | null;
  declare readonly running_mean: Tensor | null;
  declare readonly running_var: Tensor | null;
  declare readonly num_batches_tracked: Tensor | null;
  readonly num_features: number;
  readonly eps: number;
  readonly momentum: number | null;
  readonly affine: boolean;
  readonly track_running_stats: boolean;

  /** @throws LoomValueError unless num_features is a positive integer and momentum in [0, 1] or null */
  constructor(num_features: number, opts: BatchNormOptions) {
    super();
    const name = new.target.name;
    if (!Number.isInteger(num_features) || num_features <= 0) throw new LoomValueError(`[${name}] num_features must be a positive integer, got ${num_features}`);
    const momentum = opts.momentum === undefined ? 0.1 : opts.momentum;
    if (momentum !== null && !(momentum >= 0 && momentum <= 1)) throw new LoomValueError(`[${name}] momentum must be in [0, 1] or null, got ${momentum}`);
    this.num_features = num_features;
    this.eps = opts.eps ?? 1e-5;
    this.momentum = momentum;
    this.affine = opts.affine ?? true;
    this.track_running_stats = opts.track_running_stats ?? true;
    const dtype = opts.dtype ?? "float32";
    this.weight = this.affine ? new Parameter(full([num_features], 1, { dtype })) : null;
    this.bias = this.affine ? new Parameter(full([num_features], 0, { dtype })) : null;
    const track = this.track_running_stats;
    this.register_buffer("running_mean", track ? zeros([num_features], { dtype }) : null);
    this.register_buffer("running_var", track ? full([num_features], 1, { dtype }) : null);
    this.register_buffer("num_batches_tracked", track ? zeros([], { dtype: "int64" }) : null);
  }

  /** Running mean 0, running variance 1, no batches tracked (torch reset_running_stats). */
  reset_running_stats(): void {
    if (!this.track_running_stats) return;
    no_grad(() => {
      this.running_mean!.zero_();
      this.running_var!.fill_(1);
      this.num_batches_tracked!.zero_();
    });
  }

  /** reset_running_stats, and weight 1, bias 0 (torch reset_parameters). */
  reset_parameters(): void {
    this.reset_running_stats();
    no_grad(() => {
      this.weight?.fill_(1);
      this.bias?.zero_();
    });
  }

  /** Throw unless the input has the rank this layer takes. */
  protected abstract _check_input_dim(x: TensorOps<any>): void;

  /**
   * @param x - [N, num_features, *] float (rank per subclass)
   * @returns x's shape
   * @throws LoomShapeError for another rank or channel count; LoomValueError when training on
   *   one value per channel
   */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    this._check_input_dim(x);
    if (x.shape[1] !== this.num_features) {
      throw new LoomShapeError(`[${this._get_name()}] expected input with ${this.num_features} channels (dim 1), got ${fmtShape(x.shape)}`);
    }
    const rm = lift(this.running_mean, x), rv = lift(this.running_var, x);
    let factor: number | S = this.momentum ?? 0;
    if (this.training && this.track_running_stats) {
      const nbt = no_grad(() => lift(this.num_batches_tracked!, x).add(1));
      writeBuffer(this.num_batches_tracked!, nbt);
      if (this.momentum === null) factor = no_grad(() => nbt.to(x.dtype).reciprocal()); // cumulative moving average
    }
    // eval uses the running stats when there are any; batch stats otherwise
    const bn_training = this.training || rm === null;
    const useRunning = !this.training || this.track_running_stats;
    const write = (target: S, value: S) => writeBuffer(target === rm ? this.running_mean! : this.running_var!, value);
    return _batch_norm(x, useRunning ? rm : null, useRunning ? rv : null, lift(this.weight, x), lift(this.bias, x), bn_training, factor, this.eps, write);
  }

  override extra_repr(): string {
    const m = this.momentum === null ? "None" : py_float(this.momentum);
    return `${this.num_features}, eps=${py_float(this.eps)}, momentum=${m}, affine=${py_bool(this.affine)}, track_running_stats=${py_bool(this.track_running_stats)}`;
  }
}

/** Batch normalization over [N, C] or [N, C, L] (torch.nn.BatchNorm1d). */
export class BatchNorm1d extends BatchNormBase {
  constructor(num_features: number, opts: BatchNormOptions = {}) {
    super(num_features, opts);
  }
  protected _check_input_dim(x: TensorOps<any>): void {
    if (x.ndim !== 2 && x.ndim !== 3) throw new LoomShapeError(`[BatchNorm1d] expected 2D or 3D input (got ${x.ndim}D input of size ${fmtShape(x.shape)})`);
  }
}

/** Batch normalization over [N, C, H, W] (torch.nn.BatchNorm2d). */
export class BatchNorm2d extends BatchNormBase {
  constructor(num_features: number, opts: BatchNormOptions = {}) {
    super(num_features, opts);
  }
  protected _check_input_dim(x: TensorOps<any>): void {
    if (x.ndim !== 4) throw new LoomShapeError(`[BatchNorm2d] expected 4D input (got ${x.ndim}D input of size ${fmtShape(x.shape)})`);
  }
}

export interface GroupNormOptions {
  /** Added to the variance (absolute); default 1e-5. */
  eps?: number;
  /** Learn weight (init 1) and bias (init 0) per channel; default true. */
  affine?: boolean;
  dtype?: DType;
}

/**
 * Group normalization (torch.nn.GroupNorm): channels split into num_groups groups, each
 * normalized over its channels and positions, then a per-channel affine.
 * weight, bias: [num_channels]. Input [N, num_channels, *]; output same shape.
 * Source: Wu & He 2018, "Group Normalization"
 */
export class GroupNorm extends TensorModule {
  weight: Parameter | null;
  bias: Parameter | null;
  readonly num_groups: number;
  readonly num_channels: number;
  readonly eps: number;
  readonly affine: boolean;

  /** @throws LoomValueError unless num_channels is divisible by num_groups */
  constructor(num_groups: number, num_channels: number, opts: GroupNormOptions = {}) {
    super();
    if (!Number.isInteger(num_groups) || num_groups <= 0 || !Number.isInteger(num_channels) || num_channels % num_groups !== 0) {
      throw new LoomValueError(`[GroupNorm] num_channels must be divisible by num_groups (num_groups=${num_groups}, num_channels=${num_channels})`);
    }
    this.num_groups = num_groups;
    this.num_channels = num_channels;
    this.eps = opts.eps ?? 1e-5;
    this.affine = opts.affine ?? true;
    const dtype = opts.dtype ?? "float32";
    this.weight = this.affine ? new Parameter(full([num_channels], 1, { dtype })) : null;
    this.bias = this.affine ? new Parameter(full([num_channels], 0, { dtype })) : null;
  }

  /** @throws LoomShapeError when the input's dim 1 is not num_channels */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    if (x.ndim < 2 || x.shape[1] !== this.num_channels) {
      throw new LoomShapeError(`[GroupNorm] expected input [N, ${this.num_channels}, *], got ${fmtShape(x.shape)}`);
    }
    return group_norm(x, this.num_groups, lift(this.weight, x), lift(this.bias, x), this.eps);
  }

  override extra_repr(): string {
    return `${this.num_groups}, ${this.num_channels}, eps=${py_float(this.eps)}, affine=${py_bool(this.affine)}`;
  }
}
