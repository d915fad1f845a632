/**
 * CompressedLinear: nn.Linear with a weight node in place of the dense weight parameter
 * (bitsandbytes' Linear4bit / MLX's QuantizedLinear play this role). y = x Wᵀ + b, where
 * `weight.linear` runs the node's fused kernel when it has one, else its memoized dense weight.
 *
 * The weight node's pieces are not module state (not parameters nor buffers: state_dict leaves
 * them out, and `Module.to(dtype)` must not convert packed blocks); they are saved with
 * `loom.weights.save_weights` (serialize.ts). The bias stays an ordinary Parameter.
 *
 * It satisfies lora's LoraCompressedBase, so LoRA adapters train on it (QLoRA): get_peft_model
 * wraps it like a Linear, and merge dequantizes, adds ΔW and requantizes (`requantize`).
 */
import { Linear } from "../nn/linear.ts";
import { lift } from "../nn/execution.ts";
import { TensorModule } from "../nn/module.ts";
import { Parameter } from "../nn/parameter.ts";
import type { TensorOps } from "../lazy/surface.ts";
import type { Tensor } from "../lazy/tensor.ts";
import type { LoraCompressedBase } from "../lora/layer.ts";
import { LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { WeightCache } from "./cache.ts";
import { Dense } from "./dense.ts";
import type { WeightNode } from "./node.ts";
import { Quantized } from "./quantized.ts";

export class CompressedLinear extends TensorModule implements LoraCompressedBase {
  /** The weight graph, logical shape [out_features, in_features]. */
  weight: WeightNode;
  bias: Parameter | null;
  readonly in_features: number;
  readonly out_features: number;

  /**
   * @param weight - a 2-D node [out_features, in_features]
   * @param bias - [out_features] (wrapped in a Parameter unless it is one) or null
   * @throws LoomShapeError if the node is not 2-D or the bias does not match out_features
   */
  constructor(weight: WeightNode, bias: Tensor | Parameter | null = null) {
    super();
    if (weight.ndim !== 2) throw new LoomShapeError(`[CompressedLinear] weight node must be 2-D [out, in], got ${fmtShape(weight.shape)}`);
    this.weight = weight;
    this.out_features = weight.shape[0]!;
    this.in_features = weight.shape[1]!;
    if (bias && (bias.ndim !== 1 || bias.shape[0] !== this.out_features)) {
      throw new LoomShapeError(`[CompressedLinear] bias ${fmtShape(bias.shape)} does not match out_features=${this.out_features}`);
    }
    this.bias = bias === null ? null : bias instanceof Parameter ? bias : new Parameter(bias);
  }

  /**
   * A CompressedLinear from an nn.Linear: its weight converted by `convert` (e.g.
   * `(w) => Quantized.quantize(w, "q4_0")`), its bias kept (the same Parameter).
   */
  static from_linear(linear: Linear, convert: (w: Tensor) => WeightNode = (w) => new Dense(w)): CompressedLinear {
    if (!(linear instanceof Linear)) throw new LoomValueError(`[CompressedLinear.from_linear] expected an nn.Linear, got ${(linear as object)?.constructor?.name}`);
    const node = convert(linear.weight.detach());
    if (node.shape[0] !== linear.out_features || node.shape[1] !== linear.in_features) {
      throw new LoomShapeError(`[CompressedLinear.from_linear] converted weight ${fmtShape(node.shape)} does not match the Linear's [${linear.out_features}, ${linear.in_features}]`);
    }
    return new CompressedLinear(node, linear.bias);
  }

  /** Device of the weight's stored pieces (the first piece found, depth first; "cpu" if none). */
  weight_device(): string {
    const find = (n: WeightNode): string | null => {
      const p = Object.values(n.pieces())[0];
      if (p) return p.device;
      for (const c of Object.values(n.children())) {
        const d = find(c);
        if (d) return d;
      }
      return null;
    };
    return find(this.weight) ?? "cpu";
  }

  /**
   * The dense weight [out_features, in_features] from the node's reference decomposition, eager,
   * without history, and not kept in the weight cache (PEFT dequantize_module_weight).
   */
  dequantize(): Tensor {
    return this.weight.materialize(new WeightCache(0));
  }

  /**
   * Replace the weight by `w` compressed as the current node is: a Quantized node is quantized
   * again in its format, a Dense one wraps `w` (used by LoRA's merge, as bitsandbytes requantizes
   * on PEFT's Linear4bit.merge).
   * @param w - float32 [out_features, in_features]
   * @throws LoomShapeError for another shape; LoomValueError for a node kind that cannot be
   *   re-made from a dense weight (low-rank, sparse, delta, pq: unload the adapter instead)
   */
  requantize(w: Tensor): void {
    if (w.ndim !== 2 || w.shape[0] !== this.out_features || w.shape[1] !== this.in_features) {
      throw new LoomShapeError(`[CompressedLinear.requantize] weight ${fmtShape(w.shape)} does not match [${this.out_features}, ${this.in_features}]`);
    }
    const n = this.weight;
    if (n instanceof Quantized) this.weight = Quantized.quantize(w, n.format);
    else if (n instanceof Dense) this.weight = new Dense(w.detach());
    else throw new LoomValueError(`[CompressedLinear.requantize] cannot re-make a "${n.kind}" weight ${fmtShape(n.shape)} from a dense weight: merging LoRA into it is not supported (use unload, or load the adapter onto the float base and merge there)`);
  }

  /**
   * @param x - [*, in_features] float
   * @returns [*, out_features]
   * @throws LoomShapeError if the last dim of x is not in_features
   */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return this.weight.linear(x, lift(this.bias, x));
  }

  override extra_repr(): string {
    return `in_features=${this.in_features}, out_features=${this.out_features}, bias=${this.bias ? "True" : "False"}, weight=${this.weight.toString()}`;
  }
}
