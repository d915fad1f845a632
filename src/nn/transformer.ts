/**
 * Transformer encoder (torch.nn.TransformerEncoderLayer / TransformerEncoder, torch 1.13
 * semantics and names: self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2;
 * `layers.0.self_attn.in_proj_weight` ... in the encoder's state dict).
 * Source: Vaswani et al. 2017 (post-norm); Xiong et al. 2020 (pre-norm, `norm_first`);
 * torch/nn/modules/transformer.py.
 */
import { gelu, relu } from "../lazy/functional.ts";
import { TensorOps } from "../lazy/surface.ts";
import type { DType } from "../tensor/dtype.ts";
import { LoomValueError } from "../tensor/errors.ts";
import type { Generator } from "../tensor/rng.ts";
import { Dropout } from "./activation.ts";
import { ModuleList } from "./container.ts";
import { Linear } from "./linear.ts";
import { Module } from "./module.ts";
import { MultiheadAttention } from "./multihead_attention.ts";
import { LayerNorm } from "./normalization.ts";
import { Parameter } from "./parameter.ts";

/** An activation: "relu", "gelu", or a function of one tensor (torch accepts a callable). */
export type TransformerActivation = "relu" | "gelu" | (<S extends TensorOps<S>>(x: S) => S);

export interface TransformerEncoderLayerOptions {
  /** Hidden size of the feed-forward network (default 2048). */
  dim_feedforward?: number;
  /** Dropout probability (default 0.1, as torch). */
  dropout?: number;
  /** Feed-forward activation (default "relu"). */
  activation?: TransformerActivation;
  /** LayerNorm eps, absolute (default 1e-5). */
  layer_norm_eps?: number;
  /** Inputs and outputs are [N, S, E] instead of [S, N, E] (default false). */
  batch_first?: boolean;
  /** Pre-norm: x + sa(norm1(x)), x + ff(norm2(x)) (default false: post-norm). */
  norm_first?: boolean;
  dtype?: DType;
  generator?: Generator;
}

export interface TransformerEncoderLayerForwardOptions<S> {
  /** [S, S] or [N·nhead, S, S] attention mask (bool: true = masked; float: added). */
  src_mask?: S | null;
  /** [N, S] (bool: true = padding; float: added). */
  src_key_padding_mask?: S | null;
  /** Causal self-attention (see MultiheadAttentionForwardOptions.is_causal). */
  is_causal?: boolean;
}

export interface TransformerEncoderForwardOptions<S> {
  /** Attention mask for every layer (see TransformerEncoderLayer's src_mask). */
  mask?: S | null;
  src_key_padding_mask?: S | null;
  is_causal?: boolean;
}

/**
 * One encoder block: self-attention then a feed-forward network, each with dropout, a residual
 * connection and LayerNorm (after the residual by default, before with norm_first).
 * Input src [S, N, d_model] ([N, S, d_model] with batch_first, or [S, d_model]); output same shape.
 */
export class TransformerEncoderLayer extends Module {
  self_attn: MultiheadAttention;
  linear1: Linear;
  dropout: Dropout;
  linear2: Linear;
  readonly norm_first: boolean;
  norm1: LayerNorm;
  norm2: LayerNorm;
  dropout1: Dropout;
  dropout2: Dropout;
  readonly activation: TransformerActivation;

  /** @throws LoomValueError for an unknown activation or d_model not divisible by nhead */
  constructor(d_model: number, nhead: number, opts: TransformerEncoderLayerOptions = {}) {
    super();
    const { dim_feedforward = 2048, dropout = 0.1, activation = "relu", layer_norm_eps = 1e-5, batch_first = false, norm_first = false, dtype, generator } = opts;
    if (typeof activation !== "function" && activation !== "relu" && activation !== "gelu") {
      throw new LoomValueError(`[TransformerEncoderLayer] activation should be relu/gelu, not ${String(activation)}`);
    }
    this.self_attn = new MultiheadAttention(d_model, nhead, { dropout, batch_first, dtype, generator });
    this.linear1 = new Linear(d_model, dim_feedforward, { dtype, generator });
    this.dropout = new Dropout(dropout);
    this.linear2 = new Linear(dim_feedforward, d_model, { dtype, generator });
    this.norm_first = norm_first;
    this.norm1 = new LayerNorm(d_model, { eps: layer_norm_eps, dtype });
    this.norm2 = new LayerNorm(d_model, { eps: layer_norm_eps, dtype });
    this.dropout1 = new Dropout(dropout);
    this.dropout2 = new Dropout(dropout);
    this.activation = activation;
  }

  private _act<S extends TensorOps<S>>(x: S): S {
    const a = this.activation;
    return a === "relu" ? relu(x) : a === "gelu" ? gelu(x) : a(x);
  }
  /** dropout1(self_attn(x, x, x)) without weights. */
  private _sa_block<S extends TensorOps<S>>(x: S, o: TransformerEncoderLayerForwardOptions<S>): S {
    const [y] = this.self_attn.forward(x, x, x, { attn_mask: o.src_mask, key_padding_mask: o.src_key_padding_mask, need_weights: false, is_causal: o.is_causal });
    return this.dropout1.forward(y);
  }
  /** dropout2(linear2(dropout(activation(linear1(x))))). */
  private _ff_block<S extends TensorOps<S>>(x: S): S {
    return this.dropout2.forward(this.linear2.forward(this.dropout.forward(this._act(this.linear1.forward(x)))));
  }

  /**
   * @param src - [S, N, d_model] ([N, S, d_model] with batch_first; [S, d_model] unbatched) float
   * @returns the same shape
   * @throws as MultiheadAttention.forward for bad shapes or mask dtypes
   */
  override forward_lazy<S extends TensorOps<S>>(src: S, opts: TransformerEncoderLayerForwardOptions<S> = {}): S {
    let x = src;
    if (this.norm_first) {
      x = x.add(this._sa_block(this.norm1.forward(x), opts));
      x = x.add(this._ff_block(this.norm2.forward(x)));
    } else {
      x = this.norm1.forward(x.add(this._sa_block(x, opts)));
      x = this.norm2.forward(x.add(this._ff_block(x)));
    }
    return x;
  }
  override forward<S extends TensorOps<S>>(src: S, opts: TransformerEncoderLayerForwardOptions<S> = {}): S {
    return super.forward(src, opts) as S;
  }
}

/** A module layer with the encoder-layer call signature (TransformerEncoderLayer or a user's). */
export type EncoderLayerLike = Module & {
  forward<S extends TensorOps<S>>(src: S, opts?: TransformerEncoderLayerForwardOptions<S>): S;
};

/**
 * A stack of num_layers deep copies of encoder_layer, then an optional norm
 * (torch.nn.TransformerEncoder). Input and output as the layer's.
 */
export class TransformerEncoder<L extends EncoderLayerLike = TransformerEncoderLayer> extends Module {
  layers: ModuleList<L>;
  readonly num_layers: number;
  norm: Module | null;

  /**
   * @param encoder_layer - copied num_layers times (parameters copied, not shared, as torch's
   *   deepcopy); the given layer itself is not used
   * @throws LoomValueError unless num_layers is a non-negative integer
   */
  constructor(encoder_layer: L, num_layers: number, norm: Module | null = null) {
    super();
    if (!Number.isInteger(num_layers) || num_layers < 0) throw new LoomValueError(`[TransformerEncoder] num_layers must be a non-negative integer, got ${num_layers}`);
    this.layers = _get_clones(encoder_layer, num_layers);
    this.num_layers = num_layers;
    this.norm = norm;
  }

  /** @param src - as the layer's; returns the same shape */
  override forward_lazy<S extends TensorOps<S>>(src: S, opts: TransformerEncoderForwardOptions<S> = {}): S {
    let out = src;
    for (const mod of this.layers) out = mod.forward(out, { src_mask: opts.mask, src_key_padding_mask: opts.src_key_padding_mask, is_causal: opts.is_causal });
    if (this.norm) out = this.norm.forward(out) as S;
    return out;
  }
  override forward<S extends TensorOps<S>>(src: S, opts: TransformerEncoderForwardOptions<S> = {}): S {
    return super.forward(src, opts) as S;
  }
}

/** N deep copies of a module in a ModuleList (torch's _get_clones). */
function _get_clones<M extends Module>(module: M, N: number): ModuleList<M> {
  return new ModuleList(Array.from({ length: N }, () => deepcopy_module(module)));
}

/**
 * A deep copy of a module (Python's copy.deepcopy on an nn.Module): a new object of the same
 * class with every submodule, Parameter (requires_grad kept, gradient not copied) and buffer
 * copied, ties within the module kept (one copy per original). Maps, arrays and plain objects
 * are copied; other class instances (a Generator, a config object), functions and primitives are
 * shared, unlike Python's deepcopy. Forward/backward hooks are not copied.
 */
export function deepcopy_module<M extends Module>(module: M): M {
  const memo = new Map<unknown, unknown>();
  const copy = (v: unknown): unknown => {
    if (v === null || typeof v !== "object") return v;
    if (memo.has(v)) return memo.get(v);
    let out: unknown;
    if (v instanceof Parameter) {
      out = new Parameter(v.detach().clone(), v.requires_grad);
    } else if (v instanceof TensorOps) {
      out = (v as TensorOps<any>).detach().clone();
    } else if (v instanceof Module) {
      const m = Object.create(Object.getPrototypeOf(v)) as Record<string, unknown>;
      memo.set(v, m);
      for (const [k, x] of Object.entries(v)) m[k] = k === "_module_hooks" ? null : copy(x);
      return m;
    } else if (v instanceof Map) {
      const m = new Map();
      memo.set(v, m);
      for (const [k, x] of v) m.set(k, copy(x));
      return m;
    } else if (Array.isArray(v)) {
      const a: unknown[] = [];
      memo.set(v, a);
      for (const x of v) a.push(copy(x));
      return a;
    } else if (Object.getPrototypeOf(v) === Object.prototype) {
      const o: Record<string, unknown> = {};
      memo.set(v, o);
      for (const [k, x] of Object.entries(v)) o[k] = copy(x);
      return o;
    } else {
      out = v; // other class instances (a Generator, a config object) are shared
    }
    memo.set(v, out);
    return out;
  };
  return copy(module) as M;
}
