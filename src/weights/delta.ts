/**
 * Composite nodes: Delta (base + delta, a fine-tune stored against its base, e.g. a quantized
 * delta over a quantized base) and Scaled (alpha · child, e.g. a LoRA scaling).
 * Both run `linear` through their children's `linear`, so a fused child stays fused:
 * Delta: x (B + D)ᵀ = x Bᵀ + x Dᵀ; Scaled: x (αW)ᵀ = α (x Wᵀ).
 */
import type { TensorOps } from "../lazy/surface.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { WeightNode, expect_child, register_weight_kind, type JsonValue, type WeightSpec } from "./node.ts";

/** W = base + delta. */
export class Delta extends WeightNode {
  readonly kind = "delta";
  readonly base: WeightNode;
  readonly delta: WeightNode;

  /** @throws LoomShapeError if the shapes differ */
  constructor(base: WeightNode, delta: WeightNode) {
    super(base.shape, base.dtype);
    if (base.shape.length !== delta.shape.length || base.shape.some((d, i) => d !== delta.shape[i])) {
      throw new LoomShapeError(`[Delta] base ${fmtShape(base.shape)} and delta ${fmtShape(delta.shape)} must have the same shape`);
    }
    this.base = base;
    this.delta = delta;
  }

  pieces(): Record<string, Tensor> {
    return {};
  }

  override children(): Record<string, WeightNode> {
    return { base: this.base, delta: this.delta };
  }

  decompose<S extends TensorOps<S>>(like: S): S {
    return this.base.decompose(like).add(this.delta.decompose(like));
  }

  /** x Bᵀ + x Dᵀ + b, each through its child's own linear (fused where the child has a kernel). */
  override linear<S extends TensorOps<S>>(x: S, bias: S | null = null): S {
    this.check_linear_input(x);
    return this.base.linear(x, bias).add(this.delta.linear(x));
  }
}

/** W = alpha · child (alpha a finite number). */
export class Scaled extends WeightNode {
  readonly kind = "scaled";
  readonly child: WeightNode;
  readonly alpha: number;

  /** @throws LoomValueError if alpha is not a finite number */
  constructor(child: WeightNode, alpha: number) {
    super(child.shape, child.dtype);
    if (typeof alpha !== "number" || !Number.isFinite(alpha)) throw new LoomValueError(`[Scaled] alpha must be a finite number, got ${alpha}`);
    this.child = child;
    this.alpha = alpha;
  }

  pieces(): Record<string, Tensor> {
    return {};
  }

  override children(): Record<string, WeightNode> {
    return { child: this.child };
  }

  override attrs(): Record<string, JsonValue> {
    return { alpha: this.alpha };
  }

  decompose<S extends TensorOps<S>>(like: S): S {
    return this.child.decompose(like).mul(this.alpha);
  }

  /** α (x Wᵀ) + b. */
  override linear<S extends TensorOps<S>>(x: S, bias: S | null = null): S {
    this.check_linear_input(x);
    const y = this.child.linear(x).mul(this.alpha);
    return bias ? y.add(bias) : y;
  }
}

register_weight_kind("delta", (spec: WeightSpec) => new Delta(expect_child("delta", spec, "base"), expect_child("delta", spec, "delta")));
register_weight_kind("scaled", (spec: WeightSpec) => {
  const a = spec.attrs.alpha;
  if (typeof a !== "number") throw new LoomValueError(`[scaled] attrs.alpha must be a number, got ${JSON.stringify(a)}`);
  return new Scaled(expect_child("scaled", spec, "child"), a);
});
