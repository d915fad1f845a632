/**
 * Parameter-free layers: activations (torch.nn.ReLU, GELU, SiLU, Tanh, Sigmoid, LeakyReLU,
 * Softmax, LogSoftmax), Identity, Dropout and the reshapes Flatten / Unflatten. Each is a thin
 * Module around the functional op, so it can sit in a Sequential and shows up in named_modules
 * like its torch counterpart.
 */
import { dropout, leaky_relu } from "../lazy/functional.ts";
import type { TensorOps } from "../lazy/surface.ts";
import { LoomValueError } from "../tensor/errors.ts";
import { TensorModule, py_bool, py_float } from "./module.ts";

/** max(x, 0) (torch.nn.ReLU). Any shape; same shape and dtype out. */
export class ReLU extends TensorModule {
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return x.relu();
  }
}

/**
 * GELU (torch.nn.GELU): "none" is x·Φ(x) with the exact erf; "tanh" is the approximation
 * 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))) used by GPT-2. Source: Hendrycks & Gimpel 2016.
 */
export class GELU extends TensorModule {
  readonly approximate: "none" | "tanh";
  /** @throws LoomValueError for an approximate other than "none" or "tanh" */
  constructor(approximate: "none" | "tanh" = "none") {
    super();
    if (approximate !== "none" && approximate !== "tanh") throw new LoomValueError(`[GELU] approximate must be "none" or "tanh", got ${String(approximate)}`);
    this.approximate = approximate;
  }
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return x.gelu(this.approximate);
  }
  override extra_repr(): string {
    return `approximate='${this.approximate}'`;
  }
}

/** x·σ(x), a.k.a. swish (torch.nn.SiLU). Source: Elfwing et al. 2017. */
export class SiLU extends TensorModule {
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return x.silu();
  }
}

/** x for x > 0, else negative_slope·x (torch.nn.LeakyReLU). Any shape; same shape and dtype out. */
export class LeakyReLU extends TensorModule {
  readonly negative_slope: number;
  readonly inplace: boolean;
  constructor(negative_slope = 0.01, inplace = false) {
    super();
    this.negative_slope = negative_slope;
    this.inplace = inplace;
  }
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return leaky_relu(x, this.negative_slope);
  }
  override extra_repr(): string {
    return `negative_slope=${py_float(this.negative_slope)}${this.inplace ? ", inplace=True" : ""}`;
  }
}

/**
 * softmax along `dim` (torch.nn.Softmax); torch's implicit dim (deprecated there) is not offered.
 * @throws LoomIndexError (when called) for a dim outside the input's range
 */
export class Softmax extends TensorModule {
  constructor(readonly dim: number) {
    super();
  }
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return x.softmax(this.dim);
  }
  override extra_repr(): string {
    return `dim=${this.dim}`;
  }
}

/** log(softmax(x)) along `dim`, computed stably (torch.nn.LogSoftmax). */
export class LogSoftmax extends TensorModule {
  constructor(readonly dim: number) {
    super();
  }
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return x.log_softmax(this.dim);
  }
  override extra_repr(): string {
    return `dim=${this.dim}`;
  }
}

/** tanh(x) (torch.nn.Tanh). */
export class Tanh extends TensorModule {
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return x.tanh();
  }
}

/** 1 / (1 + e^-x) (torch.nn.Sigmoid). */
export class Sigmoid extends TensorModule {
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return x.sigmoid();
  }
}

/** Returns its input unchanged (torch.nn.Identity); constructor arguments are ignored, as in torch. */
export class Identity extends TensorModule {
  constructor(..._args: unknown[]) {
    super();
  }
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return x;
  }
}

/**
 * While training, zero each element with probability p and scale the others by 1/(1-p);
 * the identity in eval mode (torch.nn.Dropout). The mask is drawn from the default generator
 * when the op is recorded, so eager and lazy runs with the same seed agree.
 * Source: Srivastava et al. 2014.
 */
export class Dropout extends TensorModule {
  readonly p: number;
  readonly inplace: boolean;
  /** @throws LoomValueError unless 0 <= p <= 1 */
  constructor(p = 0.5, inplace = false) {
    super();
    if (!(p >= 0 && p <= 1)) throw new LoomValueError(`[Dropout] dropout probability has to be between 0 and 1, but got ${p}`);
    this.p = p;
    this.inplace = inplace;
  }
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return dropout(x, this.p, this.training);
  }
  override extra_repr(): string {
    return `p=${py_float(this.p)}, inplace=${py_bool(this.inplace)}`;
  }
}

/**
 * Flatten dims start_dim..end_dim into one (torch.nn.Flatten); the defaults keep the batch dim:
 * [N, C, H, W] -> [N, C·H·W].
 * @throws LoomIndexError (when called) for dims outside the input's range or start after end
 */
export class Flatten extends TensorModule {
  constructor(readonly start_dim = 1, readonly end_dim = -1) {
    super();
  }
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return x.flatten(this.start_dim, this.end_dim);
  }
  override extra_repr(): string {
    return `start_dim=${this.start_dim}, end_dim=${this.end_dim}`;
  }
}

/**
 * Split dim `dim` into `unflattened_size` (torch.nn.Unflatten); one size may be -1:
 * Unflatten(1, [2, 3]) maps [N, 6] to [N, 2, 3].
 * @throws LoomShapeError (when called) if the sizes do not multiply to the dim's size
 */
export class Unflatten extends TensorModule {
  readonly unflattened_size: readonly number[];
  constructor(readonly dim: number, unflattened_size: readonly number[]) {
    super();
    this.unflattened_size = [...unflattened_size];
  }
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return x.unflatten(this.dim, this.unflattened_size);
  }
  override extra_repr(): string {
    const s = this.unflattened_size;
    return `dim=${this.dim}, unflattened_size=${s.length === 1 ? `(${s[0]},)` : `(${s.join(", ")})`}`;
  }
}
