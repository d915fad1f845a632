/**
 * Normalization layers over the trailing dims: LayerNorm (torch.nn.LayerNorm) and RMSNorm
 * (torch.nn.RMSNorm). The math lives in functional layer_norm / rms_norm, the reference any
 * fused kernel must match.
 */
import { full } from "../lazy/creation.ts";
import { layer_norm, rms_norm } from "../lazy/functional.ts";
import type { TensorOps } from "../lazy/surface.ts";
import type { DType } from "../tensor/dtype.ts";
import { LoomValueError } from "../tensor/errors.ts";
import { lift } from "./execution.ts";
import { TensorModule, py_bool, py_float } from "./module.ts";
import { Parameter } from "./parameter.ts";

function normShape(op: string, s: number | readonly number[]): number[] {
  const shape = typeof s === "number" ? [s] : [...s];
  if (shape.length === 0 || shape.some((d) => !Number.isInteger(d) || d < 0)) {
    throw new LoomValueError(`[${op}] normalized_shape must be a non-empty list of non-negative integers, got [${shape.join(", ")}]`);
  }
  return shape;
}

/** torch prints normalized_shape as a Python tuple: (4,) or (2, 3). */
function tuple(s: readonly number[]): string {
  return s.length === 1 ? `(${s[0]},)` : `(${s.join(", ")})`;
}

export interface LayerNormOptions {
  /** Added to the variance (absolute); default 1e-5. */
  eps?: number;
  /** Learn weight (init 1) and bias (init 0); default true. */
  elementwise_affine?: boolean;
  /** With elementwise_affine, also learn the bias; default true (torch >= 2.1's `bias`). */
  bias?: boolean;
  dtype?: DType;
}

/**
 * y = (x - E[x]) / √(Var[x] + eps) · weight + bias over the last len(normalized_shape) dims,
 * with the biased variance (torch.nn.LayerNorm). Source: Ba et al. 2016, "Layer Normalization".
 * weight, bias: normalized_shape. Input [*, ...normalized_shape]; output same shape.
 */
export class LayerNorm extends TensorModule {
  weight: Parameter | null;
  bias: Parameter | null;
  readonly normalized_shape: number[];
  readonly eps: number;
  readonly elementwise_affine: boolean;

  constructor(normalized_shape: number | readonly number[], opts: LayerNormOptions = {}) {
    super();
    this.normalized_shape = normShape("LayerNorm", normalized_shape);
    this.eps = opts.eps ?? 1e-5;
    this.elementwise_affine = opts.elementwise_affine ?? true;
    const dtype = opts.dtype ?? "float32";
    this.weight = this.elementwise_affine ? new Parameter(full(this.normalized_shape, 1, { dtype })) : null;
    this.bias = this.elementwise_affine && opts.bias !== false ? new Parameter(full(this.normalized_shape, 0, { dtype })) : null;
  }

  /** @throws LoomShapeError if the input's trailing dims are not normalized_shape */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return layer_norm(x, this.normalized_shape, lift(this.weight, x), lift(this.bias, x), this.eps);
  }

  override extra_repr(): string {
    return `${tuple(this.normalized_shape)}, eps=${py_float(this.eps)}, elementwise_affine=${py_bool(this.elementwise_affine)}`;
  }
}

export interface RMSNormOptions {
  /** Added to mean(x²) (absolute); default null = torch.finfo(x.dtype).eps. */
  eps?: number | null;
  /** Learn weight (init 1); default true. */
  elementwise_affine?: boolean;
  dtype?: DType;
}

/**
 * y = x / √(mean(x²) + eps) · weight over the last len(normalized_shape) dims (torch.nn.RMSNorm;
 * eps null means finfo(x.dtype).eps, e.g. 1.19e-7 for float32).
 * Source: Zhang & Sennrich 2019, "Root Mean Square Layer Normalization".
 */
export class RMSNorm extends TensorModule {
  weight: Parameter | null;
  readonly normalized_shape: number[];
  readonly eps: number | null;
  readonly elementwise_affine: boolean;

  constructor(normalized_shape: number | readonly number[], opts: RMSNormOptions = {}) {
    super();
    this.normalized_shape = normShape("RMSNorm", normalized_shape);
    this.eps = opts.eps ?? null;
    this.elementwise_affine = opts.elementwise_affine ?? true;
    this.weight = this.elementwise_affine ? new Parameter(full(this.normalized_shape, 1, { dtype: opts.dtype ?? "float32" })) : null;
  }

  /** @throws LoomShapeError if the input's trailing dims are not normalized_shape */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return rms_norm(x, this.normalized_shape, lift(this.weight, x), this.eps);
  }

  override extra_repr(): string {
    return `${tuple(this.normalized_shape)}, eps=${this.eps === null ? "None" : py_float(this.eps)}, elementwise_affine=${py_bool(this.elementwise_affine)}`;
  }
}
