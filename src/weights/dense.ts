/**
 * Dense: a weight stored as itself (the identity node). It wraps a plain tensor so it can sit in
 * a weight graph (the base of a Delta, a folded result of optimize()).
 */
import type { TensorOps } from "../lazy/surface.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { LoomFormatError } from "../tensor/errors.ts";
import { WeightNode, register_weight_kind, type WeightSpec } from "./node.ts";

export class Dense extends WeightNode {
  readonly kind = "dense";
  readonly weight: Tensor;

  /** @param weight - any shape and dtype; held as is (not copied) */
  constructor(weight: Tensor) {
    super(weight.shape, weight.dtype);
    this.weight = weight;
  }

  pieces(): Record<string, Tensor> {
    return { weight: this.weight };
  }

  /** @returns the weight itself, lifted to the kind of `like` */
  decompose<S extends TensorOps<S>>(like: S): S {
    return this.piece_as(this.weight, like);
  }

  /** A Dense node is already dense: no copy in the cache. */
  override dense_as<S extends TensorOps<S>>(like: S): S {
    return this.piece_as(this.weight, like);
  }

  override materialize(): Tensor {
    return this.weight;
  }
}

register_weight_kind("dense", (spec: WeightSpec) => {
  const w = spec.pieces.weight;
  if (!w) throw new LoomFormatError(`[dense] missing piece "weight"`);
  if (w.shape.length !== spec.shape.length || w.shape.some((d, i) => d !== spec.shape[i]) || w.dtype !== spec.dtype) {
    throw new LoomFormatError(`[dense] piece "weight" is ${w.dtype} [${w.shape.join(", ")}], graph says ${spec.dtype} [${spec.shape.join(", ")}]`);
  }
  return new Dense(w);
});
