/**
 * Pooling layers (torch.nn.MaxPool1d/2d, AvgPool1d/2d, AdaptiveAvgPool1d/2d,
 * AdaptiveMaxPool1d/2d): no parameters; the computation is the functional form in
 * lazy/pooling.ts. Max pools built with `return_indices: true` return [values, indices], typed.
 */
import type { IntOrTuple } from "../lazy/conv.ts";
import {
  adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_max_pool1d, adaptive_max_pool2d, avg_pool1d, avg_pool2d, max_pool1d,
  max_pool2d,
} from "../lazy/pooling.ts";
import type { TensorOps } from "../lazy/surface.ts";
import { Module, TensorModule, py_bool } from "./module.ts";

/** A value as Python prints it: 2, (2,), (2, 3), None. */
function py(v: number | readonly (number | null)[] | null): string {
  if (v === null) return "None";
  if (typeof v === "number") return String(v);
  const items = v.map((x) => (x === null ? "None" : String(x)));
  return items.length === 1 ? `(${items[0]},)` : `(${items.join(", ")})`;
}

/** [values, indices] when the module was built with return_indices, else the values. */
export type PoolResult<S, R extends boolean> = R extends true ? [S, S] : S;

export interface MaxPoolModuleOptions<R extends boolean> {
  /** Window step (default kernel_size). */
  stride?: IntOrTuple | null;
  /** -inf padding on both sides, at most half the kernel (default 0). */
  padding?: IntOrTuple;
  /** Spacing between window elements (default 1). */
  dilation?: IntOrTuple;
  /** Also return the int64 flat spatial index of each maximum. */
  return_indices?: R;
  /** Round the output size up (a last partial window that starts inside the input counts). */
  ceil_mode?: boolean;
}

/** torch's _MaxPoolNd: the options and repr shared by MaxPool1d and MaxPool2d. */
abstract class MaxPoolNd<R extends boolean> extends Module {
  readonly kernel_size: IntOrTuple;
  readonly stride: IntOrTuple;
  readonly padding: IntOrTuple;
  readonly dilation: IntOrTuple;
  readonly return_indices: R;
  readonly ceil_mode: boolean;

  constructor(kernel_size: IntOrTuple, opts: MaxPoolModuleOptions<R>) {
    super();
    this.kernel_size = kernel_size;
    this.stride = opts.stride ?? kernel_size;
    this.padding = opts.padding ?? 0;
    this.dilation = opts.dilation ?? 1;
    this.return_indices = (opts.return_indices ?? false) as R;
    this.ceil_mode = opts.ceil_mode ?? false;
  }
  protected _opts() {
    return { stride: this.stride, padding: this.padding, dilation: this.dilation, ceil_mode: this.ceil_mode };
  }
  abstract override forward_lazy<S extends TensorOps<S>>(x: S): PoolResult<S, R>;
  override forward<S extends TensorOps<S>>(x: S): PoolResult<S, R> {
    return super.forward(x);
  }
  override extra_repr(): string {
    return `kernel_size=${py(this.kernel_size)}, stride=${py(this.stride)}, padding=${py(this.padding)}, dilation=${py(this.dilation)}, ceil_mode=${py_bool(this.ceil_mode)}`;
  }
}

/** 1-D max pooling (torch.nn.MaxPool1d): [N, C, L] -> [N, C, L_out]. */
export class MaxPool1d<R extends boolean = false> extends MaxPoolNd<R> {
  constructor(kernel_size: IntOrTuple, opts: MaxPoolModuleOptions<R> = {}) {
    super(kernel_size, opts);
  }
  /** @throws as F.max_pool1d */
  forward_lazy<S extends TensorOps<S>>(x: S): PoolResult<S, R> {
    if (this.return_indices) return max_pool1d(x, this.kernel_size, { ...this._opts(), return_indices: true }) as PoolResult<S, R>;
    return max_pool1d(x, this.kernel_size, this._opts()) as PoolResult<S, R>;
  }
}

/** 2-D max pooling (torch.nn.MaxPool2d): [N, C, H, W] -> [N, C, H_out, W_out]. */
export class MaxPool2d<R extends boolean = false> extends MaxPoolNd<R> {
  constructor(kernel_size: IntOrTuple, opts: MaxPoolModuleOptions<R> = {}) {
    super(kernel_size, opts);
  }
  /** @throws as F.max_pool2d */
  forward_lazy<S extends TensorOps<S>>(x: S): PoolResult<S, R> {
    if (this.return_indices) return max_pool2d(x, this.kernel_size, { ...this._opts(), return_indices: true }) as PoolResult<S, R>;
    return max_pool2d(x, this.kernel_size, this._opts()) as PoolResult<S, R>;
  }
}

export interface AvgPoolModuleOptions {
  /** Window step (default kernel_size). */
  stride?: IntOrTuple | null;
  /** Zero padding on both sides, at most half the kernel (default 0). */
  padding?: IntOrTuple;
  /** Round the output size up. */
  ceil_mode?: boolean;
  /** Count padding zeros in the divisor (default true). */
  count_include_pad?: boolean;
}

/** 1-D average pooling (torch.nn.AvgPool1d): [N, C, L] -> [N, C, L_out]. */
export class AvgPool1d extends TensorModule {
  readonly kernel_size: [number];
  readonly stride: [number];
  readonly padding: [number];
  readonly ceil_mode: boolean;
  readonly count_include_pad: boolean;

  constructor(kernel_size: IntOrTuple, opts: AvgPoolModuleOptions = {}) {
    super();
    // torch's AvgPool1d keeps 1-tuples (_single)
    const one = (v: IntOrTuple): [number] => [typeof v === "number" ? v : v[0]!];
    this.kernel_size = one(kernel_size);
    this.stride = one(opts.stride ?? kernel_size);
    this.padding = one(opts.padding ?? 0);
    this.ceil_mode = opts.ceil_mode ?? false;
    this.count_include_pad = opts.count_include_pad ?? true;
  }
  /** @throws as F.avg_pool1d */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return avg_pool1d(x, this.kernel_size, { stride: this.stride, padding: this.padding, ceil_mode: this.ceil_mode, count_include_pad: this.count_include_pad });
  }
  override extra_repr(): string {
    return `kernel_size=${py(this.kernel_size)}, stride=${py(this.stride)}, padding=${py(this.padding)}`;
  }
}

/** 2-D average pooling (torch.nn.AvgPool2d): [N, C, H, W] -> [N, C, H_out, W_out]. */
export class AvgPool2d extends TensorModule {
  readonly kernel_size: IntOrTuple;
  readonly stride: IntOrTuple;
  readonly padding: IntOrTuple;
  readonly ceil_mode: boolean;
  readonly count_include_pad: boolean;
  readonly divisor_override: number | null;

  constructor(kernel_size: IntOrTuple, opts: AvgPoolModuleOptions & { divisor_override?: number | null } = {}) {
    super();
    this.kernel_size = kernel_size;
    this.stride = opts.stride ?? kernel_size;
    this.padding = opts.padding ?? 0;
    this.ceil_mode = opts.ceil_mode ?? false;
    this.count_include_pad = opts.count_include_pad ?? true;
    this.divisor_override = opts.divisor_override ?? null;
  }
  /** @throws as F.avg_pool2d */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return avg_pool2d(x, this.kernel_size, {
      stride: this.stride, padding: this.padding, ceil_mode: this.ceil_mode, count_include_pad: this.count_include_pad, divisor_override: this.divisor_override,
    });
  }
  override extra_repr(): string {
    return `kernel_size=${py(this.kernel_size)}, stride=${py(this.stride)}, padding=${py(this.padding)}`;
  }
}

/** 1-D adaptive average pooling (torch.nn.AdaptiveAvgPool1d): [N, C, L] -> [N, C, output_size]. */
export class AdaptiveAvgPool1d extends TensorModule {
  constructor(readonly output_size: number | readonly [number | null]) {
    super();
  }
  /** @throws as F.adaptive_avg_pool1d */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return adaptive_avg_pool1d(x, this.output_size);
  }
  override extra_repr(): string {
    return `output_size=${py(this.output_size)}`;
  }
}

/** 2-D adaptive average pooling (torch.nn.AdaptiveAvgPool2d): [N, C, H, W] -> [N, C, *output_size]; null keeps a dim. */
export class AdaptiveAvgPool2d extends TensorModule {
  constructor(readonly output_size: number | readonly [number | null, number | null]) {
    super();
  }
  /** @throws as F.adaptive_avg_pool2d */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return adaptive_avg_pool2d(x, this.output_size);
  }
  override extra_repr(): string {
    return `output_size=${py(this.output_size)}`;
  }
}

/** torch's _AdaptiveMaxPoolNd: output_size and return_indices. */
abstract class AdaptiveMaxPoolNd<R extends boolean> extends Module {
  readonly return_indices: R;
  constructor(readonly output_size: number | readonly (number | null)[], return_indices?: R) {
    super();
    this.return_indices = (return_indices ?? false) as R;
  }
  abstract override forward_lazy<S extends TensorOps<S>>(x: S): PoolResult<S, R>;
  override forward<S extends TensorOps<S>>(x: S): PoolResult<S, R> {
    return super.forward(x);
  }
  override extra_repr(): string {
    return `output_size=${py(this.output_size)}`;
  }
}

/** 1-D adaptive max pooling (torch.nn.AdaptiveMaxPool1d). */
export class AdaptiveMaxPool1d<R extends boolean = false> extends AdaptiveMaxPoolNd<R> {
  constructor(output_size: number | readonly [number | null], return_indices?: R) {
    super(output_size, return_indices);
  }
  /** @throws as F.adaptive_max_pool1d */
  forward_lazy<S extends TensorOps<S>>(x: S): PoolResult<S, R> {
    const o = this.output_size as number | readonly [number | null];
    return (this.return_indices ? adaptive_max_pool1d(x, o, true) : adaptive_max_pool1d(x, o)) as PoolResult<S, R>;
  }
}

/** 2-D adaptive max pooling (torch.nn.AdaptiveMaxPool2d). */
export class AdaptiveMaxPool2d<R extends boolean = false> extends AdaptiveMaxPoolNd<R> {
  constructor(output_size: number | readonly [number | null, number | null], return_indices?: R) {
    super(output_size, return_indices);
  }
  /** @throws as F.adaptive_max_pool2d */
  forward_lazy<S extends TensorOps<S>>(x: S): PoolResult<S, R> {
    const o = this.output_size as number | readonly [number | null, number | null];
    return (this.return_indices ? adaptive_max_pool2d(x, o, true) : adaptive_max_pool2d(x, o)) as PoolResult<S, R>;
  }
}
