/**
 * Convolution layers: Conv1d (torch.nn.Conv1d) and Conv2d (torch.nn.Conv2d), with torch's
 * parameter layout (weight [out, in/groups, *kernel], bias [out]) and default initialization.
 * The computation is functional conv1d / conv2d (lazy/conv.ts: im2col by one gather, then a
 * batched matmul). Not to be confused with Conv1D (conv1d.ts), Hugging Face's transposed Linear.
 */
import { zeros } from "../lazy/creation.ts";
import { conv1d, conv2d, ntuple, type IntOrTuple, type PaddingMode } from "../lazy/conv.ts";
import type { TensorOps } from "../lazy/surface.ts";
import type { DType } from "../tensor/dtype.ts";
import { LoomValueError } from "../tensor/errors.ts";
import type { Generator } from "../tensor/rng.ts";
import { lift } from "./execution.ts";
import { calculate_fan_in_and_fan_out, kaiming_uniform_, uniform_ } from "./init.ts";
import { TensorModule } from "./module.ts";
import { Parameter } from "./parameter.ts";

export interface ConvModuleOptions {
  /** Window step per spatial dim (default 1). */
  stride?: IntOrTuple;
  /** Padding per side (default 0), or "valid" (none) / "same" (output size = input size; stride 1). */
  padding?: IntOrTuple | "same" | "valid";
  /** Spacing between kernel elements (default 1). */
  dilation?: IntOrTuple;
  /** Blocked connections: in and out channels split into `groups` (default 1; in_channels for depthwise). */
  groups?: number;
  /** Learn an additive bias (default true). */
  bias?: boolean;
  /** What the padding reads: "zeros" (default), "reflect", "replicate" or "circular". */
  padding_mode?: PaddingMode;
  /** Parameter dtype (default float32). */
  dtype?: DType;
  /** Random source for the initialization (default generator when omitted). */
  generator?: Generator;
}

/** A tuple as Python prints it: (3,) or (3, 3). */
function pyTuple(v: readonly number[]): string {
  return v.length === 1 ? `(${v[0]},)` : `(${v.join(", ")})`;
}

/** torch's _ConvNd: parameters, checks, init and repr shared by Conv1d and Conv2d. */
abstract class ConvNd extends TensorModule {
  weight: Parameter;
  bias: Parameter | null;
  readonly in_channels: number;
  readonly out_channels: number;
  readonly kernel_size: number[];
  readonly stride: number[];
  readonly padding: number[] | "same" | "valid";
  readonly dilation: number[];
  readonly groups: number;
  readonly padding_mode: PaddingMode;

  /**
   * @throws LoomValueError for non-positive channels, kernel, stride or dilation, channels not
   *   divisible by groups, an unknown padding string or padding_mode, or "same" with a stride
   */
  constructor(n: number, in_channels: number, out_channels: number, kernel_size: IntOrTuple, opts: ConvModuleOptions) {
    super();
    const name = new.target.name;
    for (const [k, v] of [["in_channels", in_channels], ["out_channels", out_channels]] as const) {
      if (!Number.isInteger(v) || v <= 0) throw new LoomValueError(`[${name}] ${k} must be a positive integer, got ${v}`);
    }
    const groups = opts.groups ?? 1;
    if (!Number.isInteger(groups) || groups <= 0) throw new LoomValueError(`[${name}] groups must be a positive integer, got ${groups}`);
    if (in_channels % groups !== 0) throw new LoomValueError(`[${name}] in_channels must be divisible by groups (in_channels=${in_channels}, groups=${groups})`);
    if (out_channels % groups !== 0) throw new LoomValueError(`[${name}] out_channels must be divisible by groups (out_channels=${out_channels}, groups=${groups})`);
    this.in_channels = in_channels;
    this.out_channels = out_channels;
    this.groups = groups;
    this.kernel_size = ntuple(name, "kernel_size", kernel_size, n);
    this.stride = ntuple(name, "stride", opts.stride ?? 1, n);
    this.dilation = ntuple(name, "dilation", opts.dilation ?? 1, n);
    for (const [k, v] of [["kernel_size", this.kernel_size], ["stride", this.stride], ["dilation", this.dilation]] as const) {
      if (v.some((x) => x <= 0)) throw new LoomValueError(`[${name}] ${k} must be positive, got ${pyTuple(v)}`);
    }
    const p = opts.padding ?? 0;
    if (typeof p === "string") {
      if (p !== "same" && p !== "valid") throw new LoomValueError(`[${name}] Invalid padding string ${JSON.stringify(p)}, should be one of "valid", "same"`);
      if (p === "same" && this.stride.some((s) => s !== 1)) throw new LoomValueError(`[${name}] padding='same' is not supported for strided convolutions`);
      this.padding = p;
    } else {
      this.padding = ntuple(name, "padding", p, n);
      if (this.padding.some((x) => x < 0)) throw new LoomValueError(`[${name}] padding must be non-negative, got ${pyTuple(this.padding)}`);
    }
    const mode = opts.padding_mode ?? "zeros";
    if (!["zeros", "reflect", "replicate", "circular"].includes(mode)) {
      throw new LoomValueError(`[${name}] padding_mode must be one of "zeros", "reflect", "replicate", "circular", but got padding_mode=${JSON.stringify(mode)}`);
    }
    this.padding_mode = mode;
    const dtype = opts.dtype ?? "float32";
    this.weight = new Parameter(zeros([out_channels, in_channels / groups, ...this.kernel_size], { dtype }));
    this.bias = opts.bias === false ? null : new Parameter(zeros([out_channels], { dtype }));
    this.reset_parameters(opts.generator);
  }

  /** Re-draw weight and bias as torch: weight kaiming_uniform_(a=√5) = U(±1/√fan_in), bias U(±1/√fan_in), fan_in = in/groups·prod(kernel). */
  reset_parameters(generator?: Generator): void {
    kaiming_uniform_(this.weight, Math.sqrt(5), "fan_in", "leaky_relu", { generator });
    if (this.bias) {
      const { fan_in } = calculate_fan_in_and_fan_out(this.weight);
      const bound = fan_in > 0 ? 1 / Math.sqrt(fan_in) : 0;
      uniform_(this.bias, -bound, bound, { generator });
    }
  }

  /** Functional options for this layer. */
  protected _opts() {
    return { stride: this.stride, padding: this.padding, dilation: this.dilation, groups: this.groups, padding_mode: this.padding_mode };
  }

  override extra_repr(): string {
    let s = `${this.in_channels}, ${this.out_channels}, kernel_size=${pyTuple(this.kernel_size)}, stride=${pyTuple(this.stride)}`;
    const p = this.padding;
    if (typeof p === "string") s += `, padding=${p}`;
    else if (p.some((x) => x !== 0)) s += `, padding=${pyTuple(p)}`;
    if (this.dilation.some((x) => x !== 1)) s += `, dilation=${pyTuple(this.dilation)}`;
    if (this.groups !== 1) s += `, groups=${this.groups}`;
    if (!this.bias) s += ", bias=False";
    if (this.padding_mode !== "zeros") s += `, padding_mode=${this.padding_mode}`;
    return s;
  }
}

/**
 * 1-D convolution (torch.nn.Conv1d).
 * weight: [out_channels, in_channels/groups, kernel_size]; bias: [out_channels] or null.
 * Input [N, in_channels, L] or [in_channels, L]; output [N, out_channels, L_out].
 */
export class Conv1d extends ConvNd {
  /** @throws see ConvNd's constructor */
  constructor(in_channels: number, out_channels: number, kernel_size: IntOrTuple, opts: ConvModuleOptions = {}) {
    super(1, in_channels, out_channels, kernel_size, opts);
  }

  /**
   * @param x - [N, in_channels, L] or unbatched [in_channels, L], float
   * @throws LoomShapeError for a channel mismatch or a kernel larger than the padded input
   */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return conv1d(x, lift(this.weight, x), lift(this.bias, x), this._opts());
  }
}

/**
 * 2-D convolution (torch.nn.Conv2d).
 * weight: [out_channels, in_channels/groups, kH, kW]; bias: [out_channels] or null.
 * Input [N, in_channels, H, W] or [in_channels, H, W]; output [N, out_channels, H_out, W_out].
 */
export class Conv2d extends ConvNd {
  /** @throws see ConvNd's constructor */
  constructor(in_channels: number, out_channels: number, kernel_size: IntOrTuple, opts: ConvModuleOptions = {}) {
    super(2, in_channels, out_channels, kernel_size, opts);
  }

  /**
   * @param x - [N, in_channels, H, W] or unbatched [in_channels, H, W], float
   * @throws LoomShapeError for a channel mismatch or a kernel larger than the padded input
   */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return conv2d(x, lift(this.weight, x), lift(this.bias, x), this._opts());
  }
}
