/**
 * Tensor: the eager tensor. Every op runs now on its device's backend; views share storage.
 */
import type { OpDef } from "../graph/op.ts";
import { Node } from "../graph/node.ts";
import type { DType, TypedArray } from "../tensor/dtype.ts";
import { LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { viewStrides } from "../tensor/shape.ts";
import { forEachStrided, isDense, toContiguous, type TensorData } from "../tensor/storage.ts";
import { backendFor } from "./device.ts";
import { beforeWrite, LazyTensor, sourceNode } from "./lazy_tensor.ts";
import { TensorOps } from "./surface.ts";

/** torch.view's check: `strides` over `from` must express `shape` without a copy (eager and lazy). */
export function checkView(from: readonly number[], strides: readonly number[], shape: readonly number[]): void {
  if (!viewStrides(from, strides, shape)) {
    throw new LoomShapeError(
      `[view] view size ${fmtShape(shape)} is not compatible with input tensor's size ${fmtShape(from)} and stride [${strides.join(", ")}] (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.`,
    );
  }
}

export class Tensor extends TensorOps<Tensor> {
  readonly isLazy = false;

  /** @param _d - the strided buffer this tensor views */
  constructor(readonly _d: TensorData, readonly device = "cpu") {
    super();
  }
  get shape(): readonly number[] {
    return this._d.shape;
  }
  get dtype(): DType {
    return this._d.dtype;
  }
  protected _make(op: OpDef, inputs: readonly Tensor[], attrs: unknown, shape: number[], dtype: DType): Tensor {
    return new Tensor(backendFor(this.device).run(op, inputs.map((i) => i._d), attrs, shape, dtype), this.device);
  }
  _constant(data: TensorData): Tensor {
    return new Tensor(data, this.device);
  }
  protected _on(device: string, data: TensorData): Tensor {
    return new Tensor(data, device);
  }
  _data(): TensorData {
    return this._d;
  }
  protected override _isDense(): boolean {
    return isDense(this._d);
  }
  /** Same storage, no autograd history; shares the version counter (torch.Tensor.detach). */
  detach(): Tensor {
    const t = new Tensor(this._d, this.device);
    t._vc = this._version_counter();
    return t;
  }
  /** A view shares the storage unless reshape had to copy (strides that cannot express it). */
  protected override _viewAliases(op: OpDef, out: Tensor): boolean {
    return op.name !== "reshape" || viewStrides(this._d.shape, this._d.strides, out.shape) !== null;
  }
  protected override _checkView(shape: readonly number[]): void {
    checkView(this._d.shape, this._d.strides, shape);
  }
  /**
   * A LazyTensor reading this tensor's buffer (no copy). Gradients flowing into it come back
   * to this tensor, so eager parameters can be used inside lazy code.
   */
  protected _assign(src: Tensor): void {
    const { shape, strides } = this._d;
    if (shape.some((s, i) => s > 1 && strides[i] === 0)) {
      throw new LoomValueError("[in-place] unsupported operation: more than one element of the written-to tensor refers to a single memory location; make it contiguous() first");
    }
    this._increment_version(); // saved for backward before this write: backward refuses it
    if (backendFor(this.device).write?.(this._d, src._d)) return; // device memory (webgpu)
    const dst = this._d.data;
    beforeWrite(dst); // pending lazy graphs reading this buffer keep the old values
    // Read src fully before writing: it may alias this storage (x.copy_(x.t()), x.t().copy_(x)),
    // and toContiguous returns an already dense buffer as is, so copy a shared one first.
    const s = src._d.data === dst ? { ...src._d, data: dst.slice() as TypedArray } : src._d;
    const v = toContiguous(s, this.dtype);
    forEachStrided(this.shape, [this._d], (i, idx) => { dst[idx[0]!] = v.data[i]!; });
  }
  lazy(): LazyTensor {
    const l = new LazyTensor(sourceNode(this._d, this.device), this.device);
    l._vc = this._version_counter(); // reads this storage: a write to it outdates l
    if (this.requires_grad) l._linkTo(this);
    return l;
  }
  /** Already computed: returns this (so code can call eval() on either kind). */
  eval(): Tensor {
    return this;
  }
  realize(): Tensor {
    return this;
  }
}
