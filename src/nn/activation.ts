/**
 * Parameter-free elementwise layers: activations (torch.nn.ReLU, GELU, SiLU, Tanh, Sigmoid),
 * Identity and Dropout. Each is a thin Module around the functional op, so it can sit in a
 * Sequential and shows up in named_modules like its torch counterpart.
 */
import { dropout } from "../lazy/functional.ts";
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
