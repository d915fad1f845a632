/**
 * Deferred eager state: writes of eager tensors, and eager values, that wait to run in one plan.
 *
 * An eager `Tensor` can be *pending*:
 * - a pending **value** has no buffer yet: its value is a lazy graph node (`Tensor._pend`). It
 *   comes from lazy code handing results back to eager code without computing them: a lazy
 *   module forward in "lazy" execution mode, gradients of eager parameters from a lazy graph, and
 *   any eager op with a pending input (the op is recorded, not run).
 * - a pending **write** (an assign) has its buffer, and `_pend` is the value the buffer will hold:
 *   `copy_`, `mul_`, an optimizer update or a KV-cache append whose source is pending.
 *
 * Reading a pending tensor (`item()`, `dataSync()`, an op that needs its buffer, a lazy use that
 * is not a plain value) *flushes* its device: ONE plan computes the value read, every retained
 * value (gradients stored in `.grad`, a module forward's outputs) and every pending write, and
 * writes the assigned buffers last (scheduler/realize.ts `assigns`). So the PyTorch loop
 * `loss.backward(); opt.step(); loss.item()` in lazy mode runs forward, backward and the update as
 * one plan, which the plan cache compiles once.
 *
 * Eager semantics are kept: a read of a written buffer (through any tensor over that storage)
 * flushes first; lazy graphs outside the plan that read a written buffer get a copy of the old
 * values before the plan runs (copy-on-write, readers.ts); a write whose destination is not a
 * dense row-major buffer flushes and runs at once.
 */
import type { Node } from "../graph/node.ts";
import { OPS } from "../graph/registry.ts";
import { realize, type Assign } from "../scheduler/realize.ts";
import { isContiguous } from "../tensor/shape.ts";
import type { TensorData } from "../tensor/storage.ts";
import { backendFor } from "./device.ts";
import { beforeWrite, storageKey, trackPrivate, trackReader } from "./readers.ts";

/** What this file needs of a pending eager tensor (lazy/tensor.ts implements it). */
export interface PendingTensor {
  readonly device: string;
  /** The pending value's node; null once settled. */
  _pend: Node | null;
  /** A pending value: take the realized buffer. A pending write: the buffer holds the value now. */
  _settled(): void;
}

interface DeviceState {
  /** Pending writes in record order: tensor -> its destination buffer, and whether the write is private. */
  writes: Map<PendingTensor, { dest: TensorData; priv: boolean }>;
  /** Pending values computed at the next flush (held strongly until then). */
  values: Set<PendingTensor>;
  /** Values computed at the next flush while they are alive (module outputs). */
  weak: WeakRef<PendingTensor>[];
}
const devices = new Map<string, DeviceState>();
/** Storages with a pending write: an eager read of any of them flushes first. */
const written = new Set<object>();
/**
 * Storages an asynchronous command buffer (native) may still be writing, by device: an eager read
 * of any of them waits for the device first (`settleRead`).
 */
const inflight = new Map<object, string>();

function stateOf(device: string): DeviceState {
  let s = devices.get(device);
  if (!s) devices.set(device, (s = { writes: new Map(), values: new Set(), weak: [] }));
  return s;
}

/**
 * Whether a pending write targets `d`'s storage (checked on every eager read; `d.data` is only
 * touched while writes are pending: reading it may wait for a command buffer).
 */
export function hasPendingWrite(d: TensorData, device: string): boolean {
  if (written.size === 0 && inflight.size === 0) return false;
  const k = storageKey(d, device);
  return written.has(k) || inflight.has(k);
}

/** Whether a write of `d`'s storage is recorded and not yet flushed (not: still running on the device). */
export function hasUnflushedWrite(d: TensorData, device: string): boolean {
  return written.size > 0 && written.has(storageKey(d, device));
}

/**
 * Before an eager read of `d`: a pending write to its storage is made (a flush of `device`), and
 * a write still running on the device is waited for.
 */
export function settleRead(d: TensorData, device: string): void {
  const k = storageKey(d, device);
  if (written.has(k)) flush(device, [], true);
  waitWrites(k);
}

/** Wait for a device still writing storage `k` (asynchronous command buffers). */
function waitWrites(k: object): void {
  const dev = inflight.get(k);
  if (dev === undefined) return;
  backendFor(dev).synchronize?.();
  for (const [s, v] of inflight) if (v === dev) inflight.delete(s);
}

/**
 * Whether a write of a whole tensor into `dest` can be deferred: the plan writes dense row-major
 * buffers (any offset), so other layouts are written at once.
 */
export function canDeferWrite(dest: TensorData): boolean {
  return isContiguous(dest.shape, dest.strides);
}

/**
 * Record that `t`'s buffer `dest` gets `t._pend`'s value at the next flush of its device.
 * Another tensor's pending write over the same storage is flushed first (writes through two
 * views of one buffer keep their order).
 */
export function recordWrite(t: PendingTensor, dest: TensorData, priv = false): void {
  const s = stateOf(t.device);
  if (!s.writes.has(t)) {
    // (a write still running on the device needs no flush: this one runs after it, in order)
    if (hasUnflushedWrite(dest, t.device)) {
      const node = t._pend;
      flush(t.device);
      t._pend = node;
    }
    written.add(storageKey(dest, t.device));
  }
  s.writes.set(t, { dest, priv });
}

/** Compute `t` (a pending value) at the next flush of its device even if nobody reads it first. */
export function retainValue(t: PendingTensor, weak = false): void {
  const s = stateOf(t.device);
  if (weak) s.weak.push(new WeakRef(t));
  else s.values.add(t);
}

/** Undo retainValue (a `.grad` replaced before the flush). */
export function releaseValue(t: PendingTensor): void {
  devices.get(t.device)?.values.delete(t);
}

/** Pending writes and retained values on `device` (for tests and explain). */
export function pendingCount(device = "cpu"): { writes: number; values: number } {
  const s = devices.get(device);
  return { writes: s?.writes.size ?? 0, values: (s?.values.size ?? 0) + (s?.weak.length ?? 0) };
}

/** Forget `s`'s pending writes and retained values (after a flush, or a failed one). */
function clearState(s: DeviceState, device: string): void {
  for (const w of s.writes.values()) written.delete(storageKey(w.dest, device));
  s.writes.clear();
  s.values.clear();
  s.weak.length = 0;
}

/**
 * Run everything pending on `device` as one plan: `extra` (values being read), the retained
 * values, and the writes (last). Lazy graphs outside the plan that read a written buffer get a
 * copy of its old values first (readers.ts `beforeWrite`); after the plan a written node is a
 * reader of its destination (a private one for private writes), so a later write copies it or
 * marks it stale.
 * @throws whatever the plan throws (LoomOutOfMemoryError before anything runs, a value error of
 *   a kernel); the pending writes are then dropped, as a raising eager op stops what follows it
 */
export function flush(device: string, extra: readonly Node[] = [], now = false): void {
  const s = devices.get(device);
  if (s === undefined || (s.writes.size === 0 && s.values.size === 0 && s.weak.length === 0)) {
    // nothing pending (the common realize): compute `extra` alone, without the bookkeeping below
    realize(extra, backendFor(device), device, false, [], undefined, now);
    return;
  }
  const values: PendingTensor[] = [];
  for (const t of s.values) if (t._pend) values.push(t);
  for (const w of s.weak) {
    const t = w.deref();
    if (t?._pend && !s.values.has(t)) values.push(t);
  }
  const writes = [...s.writes];
  const roots = [...extra, ...values.map((t) => t._pend!)];
  const assigns: Assign[] = writes.map(([t, w]) => ({ node: t._pend!, dest: w.dest }));
  const backend = backendFor(device);
  try {
    realize(roots, backend, device, false, assigns, () => {
      for (const a of assigns) {
        // the old values are copied on the host: a write still running there must finish first
        waitWrites(storageKey(a.dest, device));
        beforeWrite(a.dest, device);
      }
    }, now);
  } catch (e) {
    // The plan failed (a bad index, a plan over the memory limit): as when an eager op raises,
    // nothing after the failure happens. The writes are dropped (their tensors keep their values,
    // the writes come last in the plan); pending values stay pending, so reading one raises again.
    for (const [t] of writes) t._pend = null;
    clearState(s, device);
    throw e;
  }
  // buffers an asynchronous command buffer writes: eager reads of them wait for it (settleRead)
  if (backend.synchronize && !backend.deviceMemory) for (const a of assigns) inflight.set(storageKey(a.dest, device), device);
  clearState(s, device);
  for (const [t, { dest, priv }] of writes) {
    const n = t._pend!;
    if (!n.realized) {
      // the node's value now lives in the destination: a later write there copies it (or marks
      // a private reader stale), and a tensor taking this value copies it (`ownValue`)
      n.realized = dest;
      n.assigned = true;
      n.inputs = [];
      if (priv) trackPrivate(n, dest, device);
      else trackReader(n, dest, device);
    }
    t._settled();
  }
  for (const t of values) t._settled();
}

/**
 * The value of realized node `n` for a tensor to own: its buffer, or a copy when the buffer is an
 * assign's destination (the destination's tensor may be written again; the value must not change).
 */
export function ownValue(n: Node, device: string): TensorData {
  const d = n.realized!;
  if (!n.assigned) return d;
  waitWrites(storageKey(d, device));
  return backendFor(device).run(OPS.contiguous, [d], {}, d.shape, d.dtype);
}
