/**
 * LazyTensor: same methods as Tensor, but ops record graph nodes; `eval()` computes the pending
 * graph (each node once, however many users) and returns an eager Tensor. Shape and dtype
 * errors are raised when the op is recorded, not at eval.
 */
import { set_grad_materializer } from "../autograd/engine.ts";
import { is_grad_enabled } from "../autograd/grad_mode.ts";
import { Node, toDot } from "../graph/node.ts";
import type { OpDef, ViewOp } from "../graph/op.ts";
import { patternDtype, type NormAttrs } from "../graph/passes/fused_ops.ts";
import { FUSED_OPS } from "../graph/registry.ts";
import { compilerOptions } from "../scheduler/options.ts";
import type { CompiledPlan } from "../scheduler/plan.ts";
import { planFor } from "../scheduler/realize.ts";
import { flush, ownValue, retainValue } from "./deferred.ts";
import type { DType } from "../tensor/dtype.ts";
import { contiguousStrides } from "../tensor/shape.ts";
import type { TensorData } from "../tensor/storage.ts";
import { backendFor } from "./device.ts";
import { leafSoftmaxAttrs, normConstants, normOperandsFit } from "./eager_fused.ts";
import { mixed_lift, TensorOps } from "./surface.ts";
import { checkView, Tensor } from "./tensor.ts";

/**
 * The strides `n` will have when realized, or null when they are contiguous (the common case, found
 * without work: an op result). A chain of views (permute, expand, slice, reshape) over a realized
 * buffer or an op result has the strides the views compute from that buffer's real strides, or from
 * contiguous ones; a reshape the strides cannot express copies, so it is contiguous.
 */
function layoutStrides(n: Node): readonly number[] | null {
  const chain: Node[] = [];
  let base = n;
  while (!base.realized && base.op?.kind === "view") {
    chain.push(base);
    base = base.inputs[0]!;
  }
  if (!base.realized && chain.length === 0) return null;
  const dense = (m: Node): TensorData => ({ dtype: m.dtype, shape: m.shape, strides: contiguousStrides(m.shape), offset: 0, data: NO_DATA });
  let t = base.realized ?? dense(base);
  for (let i = chain.length - 1; i >= 0; i--) {
    const v = chain[i]!;
    t = (v.op as ViewOp<unknown>).ref(t, v.attrs) ?? dense(v);
  }
  return t.strides;
}
const NO_DATA = new Float64Array(0);

export class LazyTensor extends TensorOps<LazyTensor> {
  readonly isLazy = true;
  /**
   * The eager tensor this one was lifted from (`Tensor.lazy()`) while it still reads its buffer:
   * an in-place write to this lazy tensor writes that tensor too (a deferred write), as writing a
   * view writes its base.
   */
  _origin: Tensor | null = null;
  /**
   * A module forward's private lift (`Tensor._lift`): a write through it writes the origin
   * privately (`_write_private`, as optimizers and running statistics are written: no
   * copy-on-write copy; the forward's other private readers of the old value become stale).
   */
  _originPrivate = false;

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
    const nodes = new Array<Node>(inputs.length);
    for (let i = 0; i < inputs.length; i++) nodes[i] = inputs[i]!.node;
    return new LazyTensor(new Node(op, nodes, attrs, shape, dtype), this.device);
  }
  _constant(data: TensorData): LazyTensor {
    // literals the surface makes (wrapped scalars, masks): the compiler may fold ops over them
    return new LazyTensor(Node.constant(data), this.device);
  }
  protected override _record(out: LazyTensor, name: string, inputs: readonly LazyTensor[], apply: (g: LazyTensor) => (LazyTensor | null)[]): void {
    super._record(out, name, inputs, apply);
    // while this record is not released, a backward may read the value: a plan keeps it
    out.node.tracked = out.grad_fn;
  }
  protected _on(device: string, data: TensorData): LazyTensor {
    return new LazyTensor(Node.source(data), device);
  }
  /**
   * rms_norm / layer_norm recorded as ONE fused_rms_norm / fused_layer_norm node where no gradient
   * is recorded: the node the compiler's pattern pass would make of the decomposition (same
   * inputs: x, the 0-d constants n and eps wrapped as the decomposition wraps them, w, b), so the
   * plan and its bits are the same, and decoding records 1 node instead of about 10 per norm.
   * The decomposition is recorded instead when a gradient is wanted (fused ops have no gradient
   * rules), with `patterns: false`, for dtypes the pattern pass does not match, or when weight or
   * bias is not x's dtype and the normalized shape (the pattern would not match either).
   */
  override _fusedNorm(kind: "rms_norm" | "layer_norm", dims: number, n: number, weight: LazyTensor | null, bias: LazyTensor | null, eps: number): LazyTensor | null {
    if (!compilerOptions().patterns || !patternDtype(this.dtype) || dims < 1 || dims > this.ndim || !normOperandsFit(this, dims, weight, bias)) return null;
    // an eager weight or bias (a plain forward using its parameters directly) is lifted as _apply lifts it
    const lazy = (t: LazyTensor | Tensor): LazyTensor => (t.isLazy ? (t as LazyTensor) : mixed_lift.fn !== null ? mixed_lift.fn(t) as LazyTensor : (t as Tensor).lazy());
    const ins = [this.node, ...normConstants(kind, this.dtype, n, eps).map((c) => Node.constant(c))];
    if (weight) ins.push(lazy(weight).node);
    if (bias) ins.push(lazy(bias).node);
    const attrs: NormAttrs = { dims, has_weight: weight !== null, has_bias: bias !== null };
    const op = kind === "rms_norm" ? FUSED_OPS.fused_rms_norm : FUSED_OPS.fused_layer_norm;
    return new LazyTensor(new Node(op, ins, attrs, [...this.shape], this.dtype), this.device);
  }
  /**
   * softmax of a buffer (a source node: an eager tensor's `.lazy()`, a parameter) recorded as ONE
   * fused_softmax node where no gradient is recorded: the node the pattern pass makes of the
   * decomposition over a leaf (eager_fused.ts leafSoftmaxAttrs, as the eager path's), so the plan
   * and its bits are the same, and a small lazy softmax records and fingerprints 1 node instead
   * of 6. Any other input keeps the decomposition, which the pattern pass matches with its
   * producers (a scale or mask prologue, attention).
   */
  protected override _fusedSoftmax(dim: number): LazyTensor | null {
    const n = this.node, d = n.realized;
    if (n.op !== null || d === null || this.ndim === 0 || !compilerOptions().patterns || !patternDtype(this.dtype)) return null;
    if (this.requires_grad && is_grad_enabled()) return null;
    return new LazyTensor(new Node(FUSED_OPS.fused_softmax, [n], leafSoftmaxAttrs(d, dim), [...this.shape], this.dtype), this.device);
  }
  _data(): TensorData {
    // with the device's pending writes and retained values: one plan (deferred.ts), whose
    // result the caller reads at once
    flush(this.device, [this.node], true);
    return this.node.realized!;
  }
  /** Same node, no autograd history; shares the version counter (torch.Tensor.detach). */
  detach(): LazyTensor {
    const t = new LazyTensor(this.node, this.device);
    t._vc = this._version_counter();
    return t;
  }
  lazy(): LazyTensor {
    return this;
  }
  /** torch.view's check, made at record time as the eager tensor makes it (see layoutStrides). */
  protected override _checkView(shape: readonly number[]): void {
    const strides = layoutStrides(this.node);
    if (strides) checkView(this.shape, strides, shape);
  }
  /**
   * In place, lazily: rebind to the new value. It counts as a write of this tensor (a saved
   * `this` is outdated), with a counter of its own from now on: the tensors that shared the old
   * one (views, the eager source of `lazy()`) keep their values, so their saved copies stay valid.
   */
  protected _assign(src: LazyTensor): void {
    const origin = this._origin;
    this.node = src.node;
    this._vc = { v: this._version + 1 };
    // lifted from an eager tensor: write it too (deferred until its device flushes)
    if (origin) {
      const value = Tensor._pending(src.node, this.device);
      if (this._originPrivate) origin._write_private(value);
      else origin._assign_from(value);
    }
  }
  /** Record that gradients reaching this lazy view of `t` flow back to eager `t`. */
  _linkTo(t: Tensor): void {
    if (!is_grad_enabled()) return;
    // the gradient stays lazy here; the engine's materializer hands `t` a pending value of it
    this._record(this, "lazy", [t as never], (g) => [g as never]);
  }
  /**
   * Compute the pending graph below this tensor and return the result as an eager Tensor
   * (alias `realize()`). Autograd history carries over: backward through the result reaches
   * this graph's leaves.
   */
  eval(): Tensor {
    flush(this.device, [this.node]); // queued on asynchronous devices: JavaScript goes on meanwhile
    return this._asEager(new Tensor(ownValue(this.node, this.device), this.device));
  }
  /**
   * `t` (an eager tensor holding this value, computed or pending) with this tensor's version
   * counter (t shares the value: a write to t outdates this) and its autograd history: backward
   * through t reaches this graph's leaves.
   */
  private _asEager(t: Tensor): Tensor {
    t._vc = this._version_counter();
    if (this.requires_grad && is_grad_enabled()) {
      t.grad_fn = { name: "eval", inputs: [this as never], apply: (g) => [(g as Tensor).lazy() as never], released: false };
      t.requires_grad = true;
    }
    return t;
  }
  realize(): Tensor {
    return this.eval();
  }
  /**
   * This value as a pending eager Tensor (deferred.ts): nothing runs now; reading it, or any
   * read on its device, computes it in one plan with the device's other pending state. Autograd
   * history carries over as with eval().
   * @param retain - compute it at the next flush even if it is not read first (a module's outputs)
   */
  defer(retain = false): Tensor {
    const t = this._asEager(Tensor._pending(this.node, this.device));
    if (retain) retainValue(t, true);
    return t;
  }
  /**
   * The compiled plan that would compute this tensor (from the plan cache when the same graph
   * was compiled before), without running it: `kernelCount`, `estimate_memory()`, `explain()`.
   */
  plan(): CompiledPlan {
    return planFor([this.node], backendFor(this.device), this.device);
  }
  /** The plan listing: kernels, fused groups, buffer sizes, peak workspace. */
  explain(): string {
    return this.plan().explain();
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
  for (const [dev, nodes] of byDevice) flush(dev, nodes);
  return tensors.map((t) => t.eval());
}

/** The one plan computing all of `tensors` (one device), without running it. */
export function compile_plan(tensors: readonly LazyTensor[]): CompiledPlan {
  const dev = tensors[0]?.device ?? "cpu";
  return planFor(tensors.map((t) => t.node), backendFor(dev), dev);
}

/** The plan listing for computing `tensors` together (see CompiledPlan.explain). */
export function explain(tensors: readonly LazyTensor[]): string {
  return compile_plan(tensors).explain();
}

// Gradients crossing between kinds: an eager gradient of a lazy tensor is lifted; a lazy
// gradient of an eager tensor stays pending, computed with whatever reads it next (an optimizer
// step's writes, the loss) in one plan (deferred.ts).
set_grad_materializer((pairs) => pairs.map((p) => {
  const target = p.target as TensorOps<any>, grad = p.grad as TensorOps<any>;
  if (target.isLazy === grad.isLazy) return grad;
  return target.isLazy ? grad.lazy() : (grad as LazyTensor).defer();
}));
