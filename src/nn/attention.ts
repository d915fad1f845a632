/**
 * Causal multi-head self-attention in nanoGPT's layout (karpathy/nanoGPT model.py,
 * CausalSelfAttention): one combined q/k/v projection `c_attn` [3·n_embd, n_embd] and an output
 * projection `c_proj` [n_embd, n_embd], so state-dict keys are `c_attn.weight`, `c_attn.bias`,
 * `c_proj.weight`, `c_proj.bias` as in GPT-2 checkpoints (whose Conv1D weights are the transpose).
 */
import { scaled_dot_product_attention } from "../lazy/functional.ts";
import type { TensorOps } from "../lazy/surface.ts";
import type { DType } from "../tensor/dtype.ts";
import { LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import type { Generator } from "../tensor/rng.ts";
import { Dropout } from "./activation.ts";
import { Linear } from "./linear.ts";
import { TensorModule } from "./module.ts";

export interface CausalSelfAttentionOptions {
  /** Biases in c_attn and c_proj (default true). */
  bias?: boolean;
  /** Dropout probability on the attention weights and the output, while training (default 0). */
  dropout?: number;
  dtype?: DType;
  generator?: Generator;
}

/**
 * y = c_proj(softmax(q kᵀ / √hs + causal mask) v) with q, k, v = split(c_attn(x)) into n_head heads
 * of size hs = n_embd / n_head. Source: Vaswani et al. 2017; Radford et al. 2019 (GPT-2); nanoGPT.
 * Input [B, T, n_embd]; output [B, T, n_embd].
 */
export class CausalSelfAttention extends TensorModule {
  c_attn: Linear;
  c_proj: Linear;
  attn_dropout: Dropout;
  resid_dropout: Dropout;
  readonly n_embd: number;
  readonly n_head: number;
  readonly dropout: number;

  /** @throws LoomValueError if n_embd is not divisible by n_head */
  constructor(n_embd: number, n_head: number, opts: CausalSelfAttentionOptions = {}) {
    super();
    if (!Number.isInteger(n_head) || n_head <= 0 || n_embd % n_head !== 0) {
      throw new LoomValueError(`[CausalSelfAttention] n_embd (${n_embd}) must be divisible by n_head (${n_head})`);
    }
    const lin = { bias: opts.bias ?? true, dtype: opts.dtype, generator: opts.generator };
    this.c_attn = new Linear(n_embd, 3 * n_embd, lin);
    this.c_proj = new Linear(n_embd, n_embd, lin);
    this.dropout = opts.dropout ?? 0;
    this.attn_dropout = new Dropout(this.dropout);
    this.resid_dropout = new Dropout(this.dropout);
    this.n_embd = n_embd;
    this.n_head = n_head;
  }

  /**
   * @param x - [B, T, n_embd] float
   * @returns [B, T, n_embd]
   * @throws LoomShapeError for another input shape
   */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    if (x.ndim !== 3 || x.shape[2] !== this.n_embd) {
      throw new LoomShapeError(`[CausalSelfAttention] expected input [B, T, ${this.n_embd}], got ${fmtShape(x.shape)}`);
    }
    const [B, T, C] = x.shape as [number, number, number];
    const nh = this.n_head, hs = C / nh;
    const [q, k, v] = this.c_attn.forward(x).split(this.n_embd, 2) as [S, S, S]; // 3 × [B, T, C]
    const heads = (t: S) => t.view(B, T, nh, hs).transpose(1, 2); // [B, nh, T, hs]
    const y = scaled_dot_product_attention(heads(q), heads(k), heads(v), {
      dropout_p: this.training ? this.dropout : 0,
      is_causal: true,
    }); // [B, nh, T, hs]
    const merged = y.transpose(1, 2).contiguous().view(B, T, C); // re-assemble heads side by side
    return this.resid_dropout.forward(this.c_proj.forward(merged));
  }
}
