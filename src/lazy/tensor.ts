/**
 * Tensor: the eager tensor. Every op runs now on its device's backend; views share storage.
 * A tensor may be *pending* (deferred.ts): its value a lazy node not computed yet, or a write of
 * its buffer not made yet. An op with a pending input is recorded instead of run; reading the
 * buffer (`_d`) computes everything pending on the device as one plan first.
 */
import type { OpDef } from "../graph/op.ts";
import { Node } from "../graph/node.ts";
import { OPS } from "../graph/registry.ts";
import type { DType, TypedArray } from "../tensor/dtype.ts";
import { LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { viewStrides } from "../tensor/shape.ts";
import { forEachStrided, isDense, toContiguous, type TensorData } from "../tensor/storage.ts";
import { is_grad_enabled, no_grad } from "../autograd/grad_mode.ts";
import { realize } from "../scheduler/realize.ts";
import { backendFor } from "./device.ts";
import { canDeferWrite, flush, hasPendingWrite, hasUnflushedWrite, ownValue, recordWrite, releaseValue, retainValue, settleRead } from "./deferred.ts";
import { fusedNorm, fusedSoftmax, normOperandsFit, plannedElementwise, plansEager, PLANNED_MIN_ELEMENTS, tolerantPrimitive } from "./eager_fused.ts";
import { LazyTensor } from "./lazy_tensor.ts";
import { beforeWrite, hasPrivateReaders, privateSource, sourceNode } from "./readers.ts";
import { TensorOps } from "./surface.ts";
import "./shape_ops.ts"; // attaches repeat, flip, roll, ... to TensorOps (declaration merge)
import "./scatter_ops.ts"; // attaches scatter, scatter_, scatter_reduce
import "./sort_ops.ts"; // attaches sort, argsort, msort, topk, kthvalue, multinomial

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
  /** The buffer; null exactly while this is a pending value (deferred.ts; `_pend` is then set). */
  private _buf: TensorData | null;
  /**
   * The pending value (deferred.ts): with `_buf` null, this tensor's value is this node's; with
   * `_buf` set, a pending write: the buffer gets this node's value at the next flush.
   */
  _pend: Node | null;
  /** A pending value that a view or detach() shares: an in-place write must give it a real buffer first. */
  private _shared = false;
  /** A literal the surface made (a wrapped scalar): a plan may fold it (eager_fused.ts). */
  private _literal = false;
  /** Set during `_write_private`. */
  private _private = false;

  /**
   * @param _d - the strided buffer this tensor views
   * @param pend - (internal) a pending value: the node whose value this tensor is, with `_d` null
   */
  constructor(_d: TensorData | null, readonly device = "cpu", pend: Node | null = null) {
    super();
    this._buf = _d;
    this._pend = pend;
  }
  /** A pending eager tensor whose value is `node`'s (computed at the next flush or read). */
  static _pending(node: Node, device: string): Tensor {
    return new Tensor(null, device, node);
  }
  /** The buffer; a pending tensor (or one over a storage with a pending write) flushes first. */
  get _d(): TensorData {
    if (this._pend !== null) this._settle(true);
    const b = this._buf!;
    if (hasPendingWrite(b, this.device)) settleRead(b, this.device);
    return b;
  }
  get shape(): readonly number[] {
    return this._buf?.shape ?? this._pend!.shape;
  }
  get dtype(): DType {
    return this._buf?.dtype ?? this._pend!.dtype;
  }
  /** Whether this tensor's value is pending (deferred.ts): a value not computed yet, or a write not made yet. */
  get is_pending(): boolean {
    return this._pend !== null && !(this._buf === null && this._pend.realized !== null);
  }
  /** deferred.ts: the flush computed or wrote this tensor's value. */
  _settled(): void {
    const n = this._pend;
    if (n === null) return;
    if (this._buf === null) this._buf = ownValue(n, this.device);
    this._pend = null;
  }
  /**
   * Compute a pending value (or make a pending write) now: one flush of the device. A pending
   * view first realizes the buffer it views, so every tensor sharing that value aliases one buffer.
   * `now`: the caller reads the value at once (see Backend.begin).
   */
  private _settle(now = false): void {
    const n = this._pend!;
    if (this._buf === null && n.realized === null) {
      let base = n;
      while (base.op?.kind === "view" && !base.realized) base = base.inputs[0]!;
      flush(this.device, [base], now);
      if (base !== n && !n.realized) realize([n], backendFor(this.device), this.device, false, [], undefined, now);
    } else if (this._buf !== null) flush(this.device, [], now);
    this._settled();
  }
  /** The node of this tensor's current value, for a deferred op reading it. */
  private _node(): Node {
    return this._pend ?? sourceNode(this._graphBuf(), this.device);
  }
  /**
   * The buffer for a lazy graph to read: a pending write of this tensor (or of another tensor over
   * the same storage) is made first; one still running on the device needs no wait, since the
   * graph's plan runs after it (command buffers run in order). Eager reads use `_d`, which waits.
   */
  private _graphBuf(): TensorData {
    if (this._pend !== null) this._settle();
    const b = this._buf!;
    if (hasUnflushedWrite(b, this.device)) flush(this.device);
    return b;
  }
  protected _make(op: OpDef, inputs: readonly Tensor[], attrs: unknown, shape: number[], dtype: DType): Tensor {
    for (let i = 0; i < inputs.length; i++) {
      const t = inputs[i]!;
      if (t._pend === null) continue;
      // a view of a pending write views the buffer: make the write first
      if (op.kind === "view" && t._buf !== null) {
        t._settle();
        continue;
      }
      // a pending input: record the op instead of running it (the result is pending too)
      const nodes = inputs.map((t) => t._node());
      const out = Tensor._pending(new Node(op, nodes, attrs, shape, dtype), this.device);
      if (op.kind === "view") {
        // a view aliases its input: writes through either must reach one buffer (see _assign)
        out._shared = true;
        for (const t of inputs) t._shared = true;
      }
      return out;
    }
    const xs = new Array<TensorData>(inputs.length);
    for (let i = 0; i < inputs.length; i++) xs[i] = inputs[i]!._d;
    if (op.kind === "kernel") {
      // the implementation a plan would choose at the global tolerance (eager_fused.ts: half
      // matmul accumulating in float32, lora_linear's one-pass epilogue)
      const y = tolerantPrimitive(this.device, op, xs, attrs as object, shape, dtype);
      if (y) return new Tensor(y, this.device);
    } else if ((op.kind === "elementwise" || op.kind === "reduce") && dtype === "float32") {
      // a large float32 elementwise op: the generated kernel a plan would run (eager_fused.ts)
      let literals = 0; // a bit per wrapped scalar input (no array per op: this runs for every eager op)
      for (let i = 0; i < inputs.length; i++) if (inputs[i]!._literal) literals |= 1 << i;
      const y = plannedElementwise(this.device, op, xs, literals, attrs, shape, dtype);
      if (y) return new Tensor(y, this.device);
    }
    return new Tensor(backendFor(this.device).run(op, xs, attrs, shape, dtype), this.device);
  }
  _constant(data: TensorData): Tensor {
    const t = new Tensor(data, this.device);
    t._literal = true;
    return t;
  }
  protected _on(device: string, data: TensorData): Tensor {
    return new Tensor(data, device);
  }
  _data(): TensorData {
    return this._d;
  }
  protected override _isDense(): boolean {
    return this._pend === null && isDense(this._d);
  }
  /** Register a pending `.grad` so the next flush computes it (torch keeps `.grad` in a buffer). */
  protected override _onGrad(prev: Tensor | null, g: Tensor | null): void {
    if (prev !== null && prev._buf === null) releaseValue(prev);
    if (g !== null && g._buf === null) retainValue(g);
  }
  /**
   * A pending value reading this tensor's current value (this tensor itself when already
   * pending): ops on it are recorded, not run, until something reads them.
   * @param consumed - (optimizers) every value computed from it is written back before anything
   *   else can write this buffer, so no copy-on-write registration is needed for it
   */
  deferred(consumed = false): Tensor {
    if (this._buf === null) return this;
    if (consumed && this._pend === null) return Tensor._pending(privateSource(this._graphBuf(), this.device), this.device);
    return Tensor._pending(this._node(), this.device);
  }
  /** Same storage, no autograd history; shares the version counter (torch.Tensor.detach). */
  detach(): Tensor {
    let t: Tensor;
    if (this._buf === null) {
      t = Tensor._pending(this._pend!, this.device);
      t._shared = this._shared = true;
    } else t = new Tensor(this._d, this.device);
    t._vc = this._version_counter();
    return t;
  }
  /** A view shares the storage unless reshape had to copy (strides that cannot express it). */
  protected override _viewAliases(op: OpDef, out: Tensor): boolean {
    if (this._buf === null) return true; // a pending value is dense
    return op.name !== "reshape" || viewStrides(this._d.shape, this._d.strides, out.shape) !== null;
  }
  /**
   * A composite of elementwise ops (gelu, silu) as one plan: `fn` records on a pending alias of
   * this tensor (deferred.ts), and reading the result runs it, so a large float32 tensor on the
   * native backend makes one pass with the plan's generated kernel instead of 4–6 eager kernels,
   * each a pass over memory (gelu on 4M elements: 12.9 ms -> about 2.2). Only when no gradient is
   * recorded (the alias is not this tensor for autograd), nothing is pending, and eager_fused.ts's
   * `plansEager` admits its size (a transcendental's threshold), backend and options.
   */
  protected override _elementwisePlan(fn: (x: Tensor) => Tensor): Tensor | null {
    if (this._pend !== null || (this.requires_grad && is_grad_enabled()) || this.dtype !== "float32") return null;
    if (!plansEager(this.device, this.numel(), PLANNED_MIN_ELEMENTS)) return null;
    const y = fn(Tensor._pending(sourceNode(this._graphBuf(), this.device), this.device));
    void y._d; // one plan now (queued on native: a read of the result waits for it)
    return y;
  }
  /** softmax as one fused kernel (eager_fused.ts) when no gradient is recorded and nothing is pending. */
  protected override _fusedSoftmax(dim: number): Tensor | null {
    if (this._pend !== null || (this.requires_grad && is_grad_enabled())) return null;
    const y = fusedSoftmax(this.device, this._d, dim);
    return y === null ? null : new Tensor(y, this.device);
  }
  /**
   * rms_norm / layer_norm as one fused kernel (eager_fused.ts) when no gradient is recorded,
   * nothing is pending and weight/bias have x's dtype, device and the normalized shape.
   */
  override _fusedNorm(kind: "rms_norm" | "layer_norm", dims: number, n: number, weight: Tensor | null, bias: Tensor | null, eps: number): Tensor | null {
    if (this._pend !== null || weight?._pend != null || bias?._pend != null || !normOperandsFit(this, dims, weight, bias)) return null;
    const y = fusedNorm(this.device, kind, this._d, dims, n, weight?._d ?? null, bias?._d ?? null, eps);
    return y === null ? null : new Tensor(y, this.device);
  }
  protected override _checkView(shape: readonly number[]): void {
    if (this._buf === null) return; // a pending value is dense: every view applies
    checkView(this._d.shape, this._d.strides, shape);
  }
  /**
   * (Optimizers, caches) `copy_(src)` under no_grad, where the written value is only held by
   * Loom's own code: the node of that value is a private reader of this buffer (marked stale by
   * the next write instead of getting a copy of the old contents: no copy per step).
   */
  _write_private(src: Tensor): void {
    this._private = true;
    try {
      no_grad(() => this.copy_(src));
    } finally {
      this._private = false;
    }
  }
  /**
   * A LazyTensor over this tensor for a module forward (nn/execution.ts `lift`): as `lazy()`, but
   * its source node is a private reader (no copy-on-write: a later write of this buffer marks it
   * stale). A pending value gives its node.
   */
  _lift(): LazyTensor {
    if (this._buf === null) return this.lazy();
    const l = this._lazyOver(privateSource(this._graphBuf(), this.device), true);
    l._originPrivate = true;
    return l;
  }
  /**
   * A LazyTensor over `node` standing for this tensor: it shares the version counter, gradients
   * reaching it come back here, and (`origin`: it reads this buffer) in-place writes to it write
   * this tensor.
   */
  private _lazyOver(node: Node, origin: boolean): LazyTensor {
    const l = new LazyTensor(node, this.device);
    if (origin) l._origin = this;
    l._vc = this._version_counter(); // reads this storage: a write to it outdates l
    if (this.requires_grad) l._linkTo(this);
    return l;
  }
  /** In-place write of `src`'s value (a LazyTensor lifted from this tensor was written). */
  _assign_from(src: Tensor): void {
    this._assign(src);
  }
  protected _assign(src: Tensor): void {
    if (this._buf === null) {
      if (!this._shared) {
        // a pending value nothing else aliases: the write is a new value (no buffer to write yet)
        const n = src._node();
        this._increment_version();
        this._pend = n;
        return;
      }
      this._settle(); // views or copies share it: give them one buffer, then write it
    }
    const d = this._buf!;
    const { shape, strides } = d;
    if (shape.some((s, i) => s > 1 && strides[i] === 0)) {
      throw new LoomValueError("[in-place] unsupported operation: more than one element of the written-to tensor refers to a single memory location; make it contiguous() first");
    }
    if (src._pend !== null && canDeferWrite(d)) {
      // a pending source: the write waits for the next flush and runs in its plan (an assign)
      this._increment_version();
      this._pend = src._pend;
      recordWrite(this, d, this._private);
      return;
    }
    let dst = this._d; // flushes a pending write to this storage first
    // pending values (a module forward's outputs) may read this buffer through private lifts:
    // compute them now, before the write makes those reads stale
    if (hasPrivateReaders(dst, this.device)) {
      flush(this.device);
      dst = this._d;
    }
    const sd = src._d;
    this._increment_version(); // saved for backward before this write: backward refuses it
    beforeWrite(dst, this.device); // pending lazy graphs reading this buffer keep the old values
    if (backendFor(this.device).write?.(dst, sd)) return; // device memory (webgpu)
    // Read src fully before writing: it may alias this storage (x.copy_(x.t()), x.t().copy_(x)),
    // and toContiguous returns an already dense buffer as is, so copy a shared one first.
    const s = sd.data === dst.data ? { ...sd, data: dst.data.slice() as TypedArray } : sd;
    const v = toContiguous(s, this.dtype); // dense from offset 0, this dtype's array type
    const out = dst.data;
    // a dense destination (a whole tensor, rows of one) takes one block copy, not a callback per element
    if (isDense(dst)) out.set(v.data.subarray(0, v.data.length), dst.offset);
    else forEachStrided(this.shape, [dst], (i, idx) => { out[idx[0]!] = v.data[i]!; });
  }
  /**
   * A LazyTensor reading this tensor's buffer (no copy). Gradients flowing into it come back
   * to this tensor, so eager parameters can be used inside lazy code. A pending value gives its
   * node; a pending write is made first (so a loop's graphs do not chain step after step).
   */
  lazy(): LazyTensor {
    if (this._buf === null) return this._lazyOver(this._pend!, false);
    return this._lazyOver(sourceNode(this._graphBuf(), this.device), true);
  }
  /** Already computed: returns this (so code can call eval() on either kind). */
  eval(): Tensor {
    return this;
  }
  realize(): Tensor {
    return this;
  }
}
