/**
 * What the device buffer pools share (webgpu/memory.ts `BufferPool`, cuda/memory.ts
 * `DevicePool`): size buckets, free lists per bucket, and the reclamation of buffers whose
 * tensors became unreachable.
 *
 * A tensor's buffer is owned by its storage object (`own`). When the storage is garbage
 * collected its buffer goes back to the pool, found two ways: a `FinalizationRegistry` (runs
 * between event-loop turns) and, for synchronous loops that never yield, a sweep of `WeakRef`s
 * after a forced collection (`sweep`; when to sweep is the subclass's choice). Either way each
 * buffer is returned once.
 *
 * Subclasses allocate (`acquire`) and destroy (`trim`) buffers; this file never touches a device.
 */

/** Bucket size: multiples of 256 B up to 64 KiB, then 8 steps per power of two (at most 12.5% slack). */
export function bucket(bytes: number): number {
  const b = Math.max(bytes, 16);
  if (b <= 65536) return Math.ceil(b / 256) * 256;
  const p = 2 ** Math.floor(Math.log2(b));
  const step = p / 8;
  return Math.ceil(b / step) * step;
}

/** Counters for tests and benchmarks (both pools). */
export interface PoolStats {
  /** Buffers created on the device (pool misses). */
  created: number;
  /** Acquisitions served from the pool. */
  reused: number;
  /** Buffers handed back to the pool. */
  released: number;
  /** Bytes in buffers currently owned by storages or temporaries. */
  liveBytes: number;
  /** Bytes in all pool buffers (live + free). */
  pooledBytes: number;
  /** Forced collections run to find unreachable tensors. */
  sweeps: number;
}

interface Owner<B> { buf: B; returned: boolean }

/** A pool of buffers `B` (each with its bucket `size`), counted in `stats` `S`. */
export abstract class PooledBuffers<B extends { readonly size: number }, S extends PoolStats = PoolStats> {
  protected readonly free = new Map<number, B[]>();
  private readonly registry = new FinalizationRegistry<Owner<B>>((o) => this.giveBack(o));
  private owners: { ref: WeakRef<object>; owner: Owner<B> }[] = [];
  /** Bytes handed out since the last sweep. */
  protected sinceSweep = 0;
  /** At least this many bytes handed out since the last sweep trigger the next one. */
  sweepFloor: number;
  /** Bytes handed out since the last sweep that trigger the next one (max of floor and live). */
  protected sweepEvery: number;

  /**
   * @param stats - the counters (a subclass may add its own)
   * @param sweepFloor - initial `sweepFloor` in bytes
   * @param gc - a full garbage collection (the runtime's; a no-op where there is none)
   */
  constructor(readonly stats: S, sweepFloor: number, private readonly gc: () => void) {
    this.sweepFloor = sweepFloor;
    this.sweepEvery = sweepFloor;
  }

  /**
   * A free buffer of bucket `size`, the most recently returned one that `skip` does not reject;
   * null when there is none.
   */
  protected take(size: number, skip?: (b: B) => boolean): B | null {
    const list = this.free.get(size);
    if (!list) return null;
    let i = list.length - 1;
    if (skip) while (i >= 0 && skip(list[i]!)) i--;
    if (i < 0) return null;
    const b = list[i]!;
    list.splice(i, 1);
    this.stats.reused++;
    this.stats.liveBytes += size;
    return b;
  }

  /** Count a buffer of `size` bytes just created on the device (it is live). */
  protected created(size: number): void {
    this.stats.created++;
    this.stats.pooledBytes += size;
    this.stats.liveBytes += size;
  }

  /** Return a buffer now (a temporary whose last use is already queued on the device). */
  release(b: B): void {
    this.stats.released++;
    this.stats.liveBytes -= b.size;
    let list = this.free.get(b.size);
    if (!list) this.free.set(b.size, (list = []));
    list.push(b);
  }

  /** Tie `buf` to `holder`: when the holder is collected, the buffer returns to the pool. */
  own(holder: object, buf: B): void {
    const owner: Owner<B> = { buf, returned: false };
    this.registry.register(holder, owner, owner);
    this.owners.push({ ref: new WeakRef(holder), owner });
  }

  private giveBack(o: Owner<B>): void {
    if (o.returned) return;
    o.returned = true;
    this.release(o.buf);
  }

  /** Called at the start of each sweep (a subclass resets its own sweep triggers). */
  protected onSweep(): void {}

  /** Number of storages tied to buffers and not yet found dead by a sweep. */
  protected get ownedCount(): number {
    return this.owners.length;
  }

  /**
   * Force a collection and return the buffers of dead holders (a synchronous loop never runs
   * FinalizationRegistry callbacks, but the collection clears WeakRefs).
   */
  sweep(): void {
    this.sinceSweep = 0;
    this.onSweep();
    this.stats.sweeps++;
    this.gc();
    const keep: typeof this.owners = [];
    for (const e of this.owners) {
      if (e.owner.returned) continue;
      if (e.ref.deref() === undefined) {
        this.registry.unregister(e.owner);
        this.giveBack(e.owner);
      } else keep.push(e);
    }
    this.owners = keep;
    // next sweep after as much again as is live now (at least the floor)
    this.sweepEvery = Math.max(this.sweepFloor, this.stats.liveBytes);
  }

  /** Destroy every free buffer with `destroy` and forget them. */
  protected dropFree(destroy: (b: B) => void): void {
    for (const list of this.free.values()) {
      for (const b of list) {
        this.stats.pooledBytes -= b.size;
        destroy(b);
      }
    }
    this.free.clear();
  }

  /** Bytes in free buffers, ready for reuse. */
  get freeBytes(): number {
    return this.stats.pooledBytes - this.stats.liveBytes;
  }
}
