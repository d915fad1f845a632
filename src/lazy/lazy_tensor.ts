/**
 * LazyTensor: same methods as Tensor, but ops record graph nodes; `eval()` computes the pending
 * graph (each node once, however many users) and returns an eager Tensor. Shape and dtype
 * errors are raised when the op is recorded, not at eval.
 */
import { set_grad_materializer } from "../autograd/engine.ts";
import { is_grad_enabled } from "../autograd/grad_mode.ts";
import { Node, toDot } from "../graph/node.ts";
import type { OpDef } from "../graph/op.ts";
import { realize } from "../scheduler/realize.ts";
import type { DType } from "../tensor/dtype.ts";
import type { TensorData } from "../tensor/storage.ts";
import { backendFor } from "./device.ts";
import { TensorOps } from "./surface.ts";
import { Tensor } from "./tensor.ts";

export class LazyTensor extends TensorOps<LazyTensor> {
  readonly isLazy = true;

  constructor(public node: Node, readonly device = "cpu") {
    super();
  }
  get shape(): readonly number[] {
    return this.node.shape;
  }
  get dtype(): DType {
    return this.node.dtype;
  }
  protected _make(op: OpDef, inputs: readonly LazyTensor[], attrs: unknown, shape: number[], dtype: DType): LazyTensor {
    return new LazyTensor(new Node(op, inputs.map((i) => i.node), attrs, shape, dtype), this.device);
  }
  _constant(data: TensorData): LazyTensor {
    return new LazyTensor(Node.source(data), this.device);
  }
  protected _on(device: string, data: TensorData): LazyTensor {
    return new LazyTensor(Node.source(data), device);
  }
  _data(): TensorData {
    realize([this.node], backendFor(this.device));
    return this.node.realized!;
  }
  detach(): LazyTensor {
    return new LazyTensor(this.node, this.device);
  }
  lazy(): LazyTensor {
    return this;
  }
  protected _assign(src: LazyTensor): void {
    this.node = src.node;
  }
  /** Record that gradients reaching this lazy view of `t` flow back to eager `t`. */
  _linkTo(t: Tensor): void {
    if (!is_grad_enabled()) return;
    // the gradient stays lazy here; the engine's materializer realizes all such gradients at once
    this._record(this, "lazy", [t as never], (g) => [g as never]);
  }
  /**
   * Compute the pending graph below this tensor and return the result as an eager Tensor
   * (alias `realize()`). Autograd history carries over: backward through the result reaches
   * this graph's leaves.
   */
  eval(): Tensor {
    const t = new Tensor(this._data(), this.device);
    if (this.requires_grad && is_grad_enabled()) {
      t.grad_fn = { name: "eval", inputs: [this as never], apply: (g) => [(g as Tensor).lazy() as never], released: false };
      t.requires_grad = true;
    }
    return t;
  }
  realize(): Tensor {
    return this.eval();
  }
  /** Graphviz DOT of the pending graph (ops, attrs, shapes, dtypes). */
  toDot(): string {
    return toDot([this.node]);
  }
}

/** Realize several lazy tensors together, so shared subgraphs run once. */
export function realizeAll(tensors: readonly LazyTensor[]): Tensor[] {
  const byDevice = new Map<string, Node[]>();
  for (const t of tensors) byDevice.set(t.device, [...(byDevice.get(t.device) ?? []), t.node]);
  for (const [dev, nodes] of byDevice) realize(nodes, backendFor(dev));
  return tensors.map((t) => t.eval());
}

// Gradients crossing between kinds are converted in one batch per backward: all lazy gradients
// of eager tensors are realized together (one realize, shared subgraphs computed once).
set_grad_materializer((pairs) => {
  const out: unknown[] = pairs.map((p) => p.grad);
  const toEager: number[] = [];
  pairs.forEach((p, i) => {
    const target = p.target as TensorOps<any>, grad = p.grad as TensorOps<any>;
    if (target.isLazy === grad.isLazy) return;
    if (target.isLazy) out[i] = grad.lazy();
    else toEager.push(i);
  });
  if (toEager.length) {
    const done = realizeAll(toEager.map((i) => pairs[i]!.grad as LazyTensor));
    toEager.forEach((i, k) => { out[i] = done[k]; });
  }
  return out;
});
