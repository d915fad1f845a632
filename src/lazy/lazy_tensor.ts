/**
 * LazyTensor: same methods as Tensor, but ops record graph nodes; `eval()` computes the pending
 * graph (each node once, however many users) and returns an eager Tensor. Shape and dtype
 * errors are raised when the op is recorded, not at eval.
 */
import { set_grad_materializer } from "../autograd/engine.ts";
import { is_grad_enabled } from "../autograd/grad_mode.ts";
import { Node, toDot } from "../graph/node.ts";
import { OPS } from "../graph/registry.ts";
import type { OpDef, ViewOp } from "../graph/op.ts";
import type { CompiledPlan } from "../scheduler/plan.ts";
import { planFor } from "../scheduler/realize.ts";
import { flush, flushWith, ownValue, retainValue, setFlush, storageKey } from "./deferred.ts";
import type { DType } from "../tensor/dtype.ts";
import { contiguousStrides } from "../tensor/shape.ts";
import type { TensorData } from "../tensor/storage.ts";
import { backendFor } from "./device.ts";
import { TensorOps } from "./surface.ts";
import { checkView, Tensor } from "./tensor.ts";

// ---- eager storage read by pending lazy graphs: copy on write ------------------------------------
// A lazy graph reads its eager inputs when it is realized. Realized plans keep only their roots
// (intermediates live in a reused workspace), so a later realize may recompute from the inputs;
// to give eager semantics anyway, an eager buffer written in place first gives the lazy source
// nodes still reading it a copy of the old values.
// A buffer has one source node per layout (dtype, offset, shape, strides), so its reader list is
// bounded by the views in use, not by how often `lazy()` was called: a loop calling `x.lazy()`
// 20,000 times registers one reader (WeakRefs of dropped nodes are not cleared within a
// synchronous loop, so pruning them could not bound the list).
const readers = new WeakMap<object, Readers>();

/**
 * The source nodes over one buffer, by layout; `limit`: the size at which dead entries are pruned;
 * `last`: the node made or found last (a loop calling `x.lazy()` finds it without building a key).
 */
interface Readers {
  nodes: Map<string, WeakRef<Node>>;
  limit: number;
  last: WeakRef<Node> | null;
}

const layoutKey = (d: TensorData): string => `${d.dtype}|${d.offset}|${d.shape.join(",")}|${d.strides.join(",")}`;

/** A lazy source node over an eager tensor's buffer (registered for copy-on-write). */
export function sourceNode(d: TensorData, device: string): Node {
  const storage = storageKey(d, device);
  let r = readers.get(storage);
  if (!r) readers.set(storage, (r = { nodes: new Map(), limit: 32, last: null }));
  // the same TensorData (a tensor's `_d`) as last time: that node reads this very layout
  const prev = r.last?.deref();
  if (prev !== undefined && prev.realized === d) return prev;
  const key = layoutKey(d);
  const old = r.nodes.get(key)?.deref();
  if (old?.realized && old.realized.offset === d.offset && storageKey(old.realized, device) === storage) {
    r.last = new WeakRef(old);
    return old;
  }
  const n = Node.source(d);
  r.nodes.set(key, (r.last = new WeakRef(n)));
  if (r.nodes.size > r.limit) {
    // drop collected nodes; the next prune waits until the map doubles (amortized O(1) per add)
    for (const [k, w] of r.nodes) if (w.deref() === undefined) r.nodes.delete(k);
    r.limit = Math.max(32, 2 * r.nodes.size);
  }
  return n;
}

/**
 * Private readers of a storage: nodes that only Loom's own code holds (a module forward's lifts,
 * values an optimizer or cache update wrote). A write of the storage marks them stale instead of
 * copying the old values for them (a copy per step of every parameter and cache otherwise);
 * using a stale node raises (Node.checkNotStale).
 */
const privates = new WeakMap<object, WeakRef<Node>[]>();

/** Register `n` (reading `d`'s storage) as a private reader: see `privates`. */
export function trackPrivate(n: Node, d: TensorData, device: string): void {
  const storage = storageKey(d, device);
  let l = privates.get(storage);
  if (!l) privates.set(storage, (l = []));
  l.push(new WeakRef(n));
  // a buffer read often and never written: drop collected entries when the list doubles
  if (l.length >= 64 && (l.length & (l.length - 1)) === 0) {
    const live = l.filter((w) => w.deref() !== undefined);
    l.length = 0;
    l.push(...live);
  }
}

/** Whether `d`'s storage has private readers (an eager write flushes the pending values that may use them first). */
export function hasPrivateReaders(d: TensorData, device: string): boolean {
  return privates.has(storageKey(d, device));
}

/** The private source node last made over each TensorData (reused until its buffer is written). */
const privateNodes = new WeakMap<TensorData, Node>();

/**
 * A source node over `d` read privately (a module forward's lift): no copy-on-write, stale after
 * a write. One node per TensorData until then, so a loop lifting the same weights every step
 * registers them once.
 */
export function privateSource(d: TensorData, device: string): Node {
  const old = privateNodes.get(d);
  if (old !== undefined && old.realized === d) return old;
  const n = Node.source(d);
  privateNodes.set(d, n);
  trackPrivate(n, d, device);
  return n;
}

/** Make `n` (whose value now lives in `d`, e.g. an assigned node) a reader of `d`'s storage for copy-on-write. */
export function trackReader(n: Node, d: TensorData, device: string): void {
  const storage = storageKey(d, device);
  let r = readers.get(storage);
  if (!r) readers.set(storage, (r = { nodes: new Map(), limit: 32, last: null }));
  r.nodes.set(`${layoutKey(d)}#${n.id}`, new WeakRef(n));
  if (r.nodes.size > r.limit) {
    for (const [k, w] of r.nodes) if (w.deref() === undefined) r.nodes.delete(k);
    r.limit = Math.max(32, 2 * r.nodes.size);
  }
}

/** Source nodes registered over `d`'s storage (for tests: the reader list stays bounded). */
export function readerCount(d: TensorData, device = "cpu"): number {
  return readers.get(storageKey(d, device))?.nodes.size ?? 0;
}

/** Copies made for copy-on-write (tests and benchmarks: a training loop should make none per step). */
export const copyOnWriteStats = { copies: 0, bytes: 0 };

/**
 * Call before writing `d`'s storage in place: lazy nodes still reading it get a copy of the old
 * values (host: one copy of the array; device memory: a device copy of each reader's view).
 */
export function beforeWrite(d: TensorData, device: string): void {
  const storage = storageKey(d, device);
  const p = privates.get(storage);
  if (p) {
    privates.delete(storage);
    for (const w of p) {
      const n = w.deref();
      if (n?.realized && storageKey(n.realized, device) === storage) {
        n.realized = null;
        n.stale = true;
      }
    }
  }
  const r = readers.get(storage);
  if (!r) return;
  readers.delete(storage);
  const host = !backendFor(device).deviceMemory;
  let copy: TensorData["data"] | null = null;
  for (const w of r.nodes.values()) {
    const n = w.deref();
    const v = n?.realized;
    if (!n || !v || storageKey(v, device) !== storage) continue;
    if (host) {
      if (copy === null) {
        copy = (d.data as TensorData["data"]).slice();
        copyOnWriteStats.copies++;
        copyOnWriteStats.bytes += copy.byteLength;
      }
      // a new TensorData of the five fields, not a spread: a backend's private fields describe the
      // old storage (native keeps its raw buffer under a symbol)
      n.realized = { dtype: v.dtype, shape: v.shape, strides: v.strides, offset: v.offset, data: copy };
      n.assigned = false;
    } else {
      n.realized = backendFor(device).run(OPS.contiguous, [v], {}, v.shape, v.dtype);
      copyOnWriteStats.copies++;
      n.assigned = false;
    }
  }
}

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
  _data(): TensorData {
    // with the device's pending writes and retained values: one plan (deferred.ts)
    flush(this.device, [this.node]);
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
    if (origin) {
      // lifted from an eager tensor: write it too (deferred until its device flushes)
      this._origin = null;
      origin._assign_from(Tensor._pending(src.node, this.device));
      this._origin = origin;
    }
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
    this._data();
    const t = new Tensor(ownValue(this.node, this.device), this.device);
    t._vc = this._version_counter(); // t shares the realized storage: a write to t outdates this
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
    const t = Tensor._pending(this.node, this.device);
    t._vc = this._version_counter();
    if (this.requires_grad && is_grad_enabled()) {
      t.grad_fn = { name: "eval", inputs: [this as never], apply: (g) => [(g as Tensor).lazy() as never], released: false };
      t.requires_grad = true;
    }
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
  // lazy gradients of eager tensors stay pending: they are computed with whatever reads them
  // next (an optimizer step's writes, the loss), in one plan (deferred.ts)
  for (const i of toEager) out[i] = (pairs[i]!.grad as LazyTensor).defer();
  return out;
});

// A flush: the plan, copy-on-write of the written buffers for lazy graphs outside it, and the
// written nodes registered as readers of their buffers.
setFlush((device, extra) => flushWith(device, extra, (d) => beforeWrite(d, device), (n, d, priv) => (priv ? trackPrivate(n, d, device) : trackReader(n, d, device))));
