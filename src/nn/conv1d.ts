/**
 * Conv1D as defined by Hugging Face for GPT-2 (transformers.pytorch_utils.Conv1D): despite the
 * name it is a linear layer whose weight is stored transposed, [in, out] (nx, nf), so
 * y = x W + b. GPT-2 checkpoints store c_attn, c_proj and c_fc this way, and PEFT treats such a
 * layer as a Linear with `fan_in_fan_out = true`.
 * Source: https://github.com/huggingface/transformers/blob/main/src/transformers/pytorch_utils.py (class Conv1D)
 */
import { zeros } from "../lazy/creation.ts";
import type { TensorOps } from "../lazy/surface.ts";
import type { DType } from "../tensor/dtype.ts";
import { LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import type { Generator } from "../tensor/rng.ts";
import { lift } from "./execution.ts";
import { normal_ } from "./init.ts";
import { TensorModule } from "./module.ts";
import { Parameter } from "./parameter.ts";

export interface Conv1DOptions {
  /** Parameter dtype (default float32). */
  dtype?: DType;
  /** Random source for the N(0, 0.02²) weight initialization (default generator when omitted). */
  generator?: Generator;
}

/**
 * y = x W + b with weight [nx, nf] = [in, out] and bias [nf] (HF Conv1D; note the argument
 * order: `new Conv1D(nf, nx)`, out first).
 * Init as HF: weight N(0, 0.02²), bias zeros.
 * Input [*, nx]; output [*, nf].
 */
export class Conv1D extends TensorModule {
  weight: Parameter;
  bias: Parameter;
  /** Output features. */
  readonly nf: number;
  /** Input features. */
  readonly nx: number;

  /** @throws LoomValueError unless nf and nx are non-negative integers */
  constructor(nf: number, nx: number, opts: Conv1DOptions = {}) {
    super();
    for (const [n, v] of [["nf", nf], ["nx", nx]] as const) {
      if (!Number.isInteger(v) || v < 0) throw new LoomValueError(`[Conv1D] ${n} must be a non-negative integer, got ${v}`);
    }
    this.nf = nf;
    this.nx = nx;
    const dtype = opts.dtype ?? "float32";
    this.weight = new Parameter(zeros([nx, nf], { dtype }));
    this.bias = new Parameter(zeros([nf], { dtype }));
    normal_(this.weight, 0, 0.02, { generator: opts.generator });
  }

  /** Input features (the Linear name, so code can treat Conv1D and Linear alike). */
  get in_features(): number {
    return this.nx;
  }
  /** Output features. */
  get out_features(): number {
    return this.nf;
  }

  /**
   * @param x - [*, nx] float
   * @returns x W + b, [*, nf]
   * @throws LoomShapeError if the last dim of x is not nx
   */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    if (x.ndim === 0 || x.shape[x.ndim - 1] !== this.nx) {
      throw new LoomShapeError(`[Conv1D] input ${fmtShape(x.shape)} does not end in nx=${this.nx} (weight ${fmtShape(this.weight.shape)})`);
    }
    return x.matmul(lift(this.weight, x)).add(lift(this.bias, x));
  }

  override extra_repr(): string {
    return `nf=${this.nf}, nx=${this.nx}`;
  }
}
