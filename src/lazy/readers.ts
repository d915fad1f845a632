/**
 * Who reads an eager tensor's buffer from lazy graphs, and what a write of that buffer does to
 * them (copy on write, or stale for private readers). Storages are named by `storageKey` (the host
 * array, or a backend's device storage).
 *
 * A lazy graph reads its eager inputs when it is realized. Realized plans keep only their roots
 * (intermediates live in a reused workspace), so a later realize may recompute from the inputs;
 * to give eager semantics anyway, an eager buffer written in place first gives the lazy source
 * nodes still reading it a copy of the old values (`beforeWrite`).
 * A buffer has one source node per layout (dtype, offset, shape, strides), so its reader list is
 * bounded by the views in use, not by how often `lazy()` was called: a loop calling `x.lazy()`
 * 20,000 times registers one reader (WeakRefs of dropped nodes are not cleared within a
 * synchronous loop, so pruning them could not bound the list).
 */
import { Node } from "../graph/node.ts";
import { OPS } from "../graph/registry.ts";
import type { TensorData } from "../tensor/storage.ts";
import { backendFor } from "./device.ts";

/** The object naming `d`'s storage on `device` (its host array, or the backend's device storage). */
export function storageKey(d: TensorData, device: string): object {
  const b = backendFor(device);
  return b.storageOf ? b.storageOf(d) : d.data;
}

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

/** The reader list of `storage`, made on first use. */
function readersOf(storage: object): Readers {
  let r = readers.get(storage);
  if (!r) readers.set(storage, (r = { nodes: new Map(), limit: 32, last: null }));
  return r;
}

/** Add a reader under `key`; drop collected nodes when the map passes its limit (then doubled: amortized O(1) per add). */
function addReader(r: Readers, key: string, n: Node): WeakRef<Node> {
  const w = new WeakRef(n);
  r.nodes.set(key, w);
  if (r.nodes.size > r.limit) {
    for (const [k, x] of r.nodes) if (x.deref() === undefined) r.nodes.delete(k);
    r.limit = Math.max(32, 2 * r.nodes.size);
  }
  return w;
}

/** A lazy source node over an eager tensor's buffer (registered for copy-on-write). */
export function sourceNode(d: TensorData, device: string): Node {
  const storage = storageKey(d, device);
  const r = readersOf(storage);
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
  r.last = addReader(r, key, n);
  return n;
}

/**
 * Private readers of a storage: nodes that only Loom's own code holds (a module forward's lifts,
 * values an optimizer or cache update wrote). A write of the storage marks them stale instead of
 * copying the old values for them (a copy per step of every parameter and cache otherwise);
 * using a stale node raises (node.ts staleError).
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
  addReader(readersOf(storageKey(d, device)), `${layoutKey(d)}#${n.id}`, n);
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

