/**
 * Learned projections and lookups: Linear (torch.nn.Linear) and Embedding (torch.nn.Embedding),
 * with PyTorch's parameter layout ([out, in] weights) and default initialization.
 */
import { no_grad } from "../autograd/grad_mode.ts";
import { zeros } from "../lazy/creation.ts";
import { _embedding, linear } from "../lazy/functional.ts";
import { LazyTensor } from "../lazy/lazy_tensor.ts";
import type { TensorOps } from "../lazy/surface.ts";
import { Tensor } from "../lazy/tensor.ts";
import type { DType } from "../tensor/dtype.ts";
import { LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import type { Generator } from "../tensor/rng.ts";
import { lift } from "./execution.ts";
import { kaiming_uniform_, normal_, uniform_ } from "./init.ts";
import { TensorModule, py_float } from "./module.ts";
import { Parameter } from "./parameter.ts";

export interface LinearOptions {
  /** Learn an additive bias (default true). */
  bias?: boolean;
  /** Parameter dtype (default float32). */
  dtype?: DType;
  /** Random source for the initialization (default generator when omitted). */
  generator?: Generator;
}

/**
 * y = x Wᵀ + b (torch.nn.Linear).
 * weight: [out_features, in_features]; bias: [out_features] or null. Input [*, in_features],
 * output [*, out_features].
 * Init (torch's reset_parameters): weight kaiming_uniform_(a=√5), i.e. U(-1/√in, 1/√in);
 * bias U(-1/√in, 1/√in).
 */
export class Linear extends TensorModule {
  weight: Parameter;
  bias: Parameter | null;
  readonly in_features: number;
  readonly out_features: number;

  constructor(in_features: number, out_features: number, opts: LinearOptions = {}) {
    super();
    for (const [n, v] of [["in_features", in_features], ["out_features", out_features]] as const) {
      if (!Number.isInteger(v) || v < 0) throw new LoomValueError(`[Linear] ${n} must be a non-negative integer, got ${v}`);
    }
    this.in_features = in_features;
    this.out_features = out_features;
    const dtype = opts.dtype ?? "float32";
    this.weight = new Parameter(zeros([out_features, in_features], { dtype }));
    this.bias = opts.bias === false ? null : new Parameter(zeros([out_features], { dtype }));
    this.reset_parameters(opts.generator);
  }

  /** Re-draw weight and bias with torch's default initialization. */
  reset_parameters(generator?: Generator): void {
    kaiming_uniform_(this.weight, Math.sqrt(5), "fan_in", "leaky_relu", { generator });
    if (this.bias) {
      const fan_in = this.in_features;
      const bound = fan_in > 0 ? 1 / Math.sqrt(fan_in) : 0;
      uniform_(this.bias, -bound, bound, { generator });
    }
  }

  /**
   * @param x - [*, in_features] float
   * @returns [*, out_features]
   * @throws LoomShapeError if the last dim of x is not in_features
   */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    if (x.ndim === 0 || x.shape[x.ndim - 1] !== this.in_features) {
      throw new LoomShapeError(`[Linear] input ${fmtShape(x.shape)} does not end in in_features=${this.in_features} (weight ${fmtShape(this.weight.shape)})`);
    }
    return linear(x, lift(this.weight, x), lift(this.bias, x));
  }

  override extra_repr(): string {
    return `in_features=${this.in_features}, out_features=${this.out_features}, bias=${this.bias ? "True" : "False"}`;
  }
}

export interface EmbeddingOptions {
  /** Row that gets no gradient and is initialized to zeros (negative counts from the end). */
  padding_idx?: number | null;
  dtype?: DType;
  generator?: Generator;
  /** Use this tensor [num_embeddings, embedding_dim] as the weight instead of a random one. */
  _weight?: Tensor | null;
  /** Looked-up rows with a norm above this are rescaled to it, in place, at each forward. */
  max_norm?: number | null;
  /** The p of the max_norm p-norm (default 2). */
  norm_type?: number;
  /** Scale each row's gradient by 1 / (its count in the batch). */
  scale_grad_by_freq?: boolean;
  /** Only false is accepted (sparse gradients are not supported). */
  sparse?: boolean;
}

/**
 * A lookup table of `num_embeddings` vectors of size `embedding_dim` (torch.nn.Embedding).
 * weight: [num_embeddings, embedding_dim], initialized N(0, 1) with the padding_idx row zeroed.
 * Input: int32/int64 indices [*]; output [*, embedding_dim].
 */
export class Embedding extends TensorModule {
  weight: Parameter;
  readonly num_embeddings: number;
  readonly embedding_dim: number;
  readonly padding_idx: number | null;
  readonly max_norm: number | null;
  readonly norm_type: number;
  readonly scale_grad_by_freq: boolean;

  /**
   * @throws LoomValueError if padding_idx is outside [-num_embeddings, num_embeddings), max_norm
   *   is negative, or sparse is true
   */
  constructor(num_embeddings: number, embedding_dim: number, opts: EmbeddingOptions = {}) {
    super();
    this.num_embeddings = num_embeddings;
    this.embedding_dim = embedding_dim;
    let p = opts.padding_idx ?? null;
    if (p !== null) {
      if (p >= num_embeddings || p < -num_embeddings || !Number.isInteger(p)) {
        throw new LoomValueError(`[Embedding] padding_idx must be within num_embeddings (${num_embeddings}), got ${p}`);
      }
      if (p < 0) p += num_embeddings;
    }
    this.padding_idx = p;
    if (opts.max_norm !== undefined && opts.max_norm !== null && !(opts.max_norm >= 0)) throw new LoomValueError(`[Embedding] max_norm must be non-negative, got ${opts.max_norm}`);
    if (opts.sparse) throw new LoomValueError("[Embedding] sparse gradients are not supported (sparse: true)");
    this.max_norm = opts.max_norm ?? null;
    this.norm_type = opts.norm_type ?? 2;
    this.scale_grad_by_freq = opts.scale_grad_by_freq ?? false;
    if (opts._weight) {
      const want = [num_embeddings, embedding_dim];
      if (opts._weight.ndim !== 2 || opts._weight.shape[0] !== want[0] || opts._weight.shape[1] !== want[1]) {
        throw new LoomShapeError(`[Embedding] _weight ${fmtShape(opts._weight.shape)} does not match num_embeddings, embedding_dim ${fmtShape(want)}`);
      }
      this.weight = new Parameter(opts._weight);
    } else {
      this.weight = new Parameter(zeros([num_embeddings, embedding_dim], { dtype: opts.dtype ?? "float32" }));
      this.reset_parameters(opts.generator);
    }
  }

  /** Re-draw the weight from N(0, 1) and zero the padding row (torch reset_parameters). */
  reset_parameters(generator?: Generator): void {
    normal_(this.weight, 0, 1, { generator });
    if (this.padding_idx !== null) {
      const row = this.weight.narrow(0, this.padding_idx, 1); // a view of the weight's buffer
      no_grad(() => row.zero_());
    }
  }

  /**
   * An Embedding whose weight is `embeddings` (shared, not copied); frozen (requires_grad false)
   * unless `freeze` is false (torch.nn.Embedding.from_pretrained).
   */
  static from_pretrained(embeddings: Tensor, opts: { freeze?: boolean } & Pick<EmbeddingOptions, "padding_idx" | "max_norm" | "norm_type" | "scale_grad_by_freq"> = {}): Embedding {
    if (embeddings.ndim !== 2) throw new LoomShapeError(`[Embedding.from_pretrained] embeddings must be 2-dimensional, got ${fmtShape(embeddings.shape)}`);
    const { freeze: _f, ...rest } = opts;
    const e = new Embedding(embeddings.shape[0]!, embeddings.shape[1]!, { ...rest, _weight: embeddings });
    e.weight.requires_grad = !(opts.freeze ?? true);
    return e;
  }

  /**
   * @param input - int32/int64 indices [*] in [0, num_embeddings)
   * @returns [*, embedding_dim]
   */
  forward_lazy<S extends TensorOps<S>>(input: S): S {
    const opts = { padding_idx: this.padding_idx, max_norm: this.max_norm, norm_type: this.norm_type, scale_grad_by_freq: this.scale_grad_by_freq };
    return _embedding(input, lift(this.weight, input), opts, (w, v) => this._renorm_write(w, v));
  }

  /**
   * The max_norm write: the eager weight is written privately (as BatchNorm writes its running
   * stats and optimizers their parameters: no copy-on-write copy of the table per step). A lifted
   * lazy weight is rebound to the value, so the lookup reads it; being the forward's private lift,
   * writing it writes the eager weight privately, deferred into the step's plan.
   */
  private _renorm_write<S extends TensorOps<S>>(w: S, value: S): void {
    if (w instanceof LazyTensor) no_grad(() => w.copy_(value));
    else this.weight._write_private(value as unknown as Tensor);
  }

  override extra_repr(): string {
    let s = `${this.num_embeddings}, ${this.embedding_dim}`;
    if (this.padding_idx !== null) s += `, padding_idx=${this.padding_idx}`;
    if (this.max_norm !== null) s += `, max_norm=${py_float(this.max_norm)}`;
    if (this.norm_type !== 2) s += `, norm_type=${py_float(this.norm_type)}`;
    if (this.scale_grad_by_freq) s += ", scale_grad_by_freq=True";
    return s;
  }
}
