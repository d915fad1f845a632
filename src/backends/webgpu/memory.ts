/// <reference types="@webgpu/types" />
/**
 * GPU memory: a pool of storage buffers bucketed by size, and the reclamation of buffers whose
 * tensors became unreachable.
 *
 * A tensor's buffer is owned by a `GpuStorage`. When the storage is garbage collected its buffer
 * goes back to the pool, found two ways: a `FinalizationRegistry` (runs between event-loop
 * turns) and, for synchronous loops that never yield, a sweep of `WeakRef`s after a forced
 * collection once enough memory was handed out since the last sweep. Either way each buffer is
 * returned once.
 *
 * Reuse is safe without waiting for the GPU: all work goes through one queue in order, so a
 * buffer's last reader runs before its next writer. The exception is `queue.writeBuffer`, which
 * lands before the not-yet-submitted batch; uploads therefore take only buffers that the current
 * batch does not touch (`lastBatch`).
 */
import { gc } from "../../runtime/sync.ts";

/** A pooled GPU buffer. `size` is its bucket size in bytes. */
export interface PBuf {
  readonly gpu: GPUBuffer;
  readonly size: number;
  /** Unique id (bind groups are cached by the ids of their buffers). */
  readonly id: number;
  /** Id of the last command batch that used it (see CommandQueue). */
  lastBatch: number;
}

/** Counters for tests and benchmarks. */
export interface MemoryStats {
  /** GPU buffers created (pool misses). */
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

/** Bucket size: multiples of 256 B up to 64 KiB, then 8 steps per power of two. */
export function bucket(bytes: number): number {
  const b = Math.max(bytes, 16);
  if (b <= 65536) return Math.ceil(b / 256) * 256;
  const p = 2 ** Math.floor(Math.log2(b));
  const step = p / 8;
  return Math.ceil(b / step) * step;
}

interface Owner { buf: PBuf; returned: boolean }
let nextBufferId = 1;

export class BufferPool {
  readonly stats: MemoryStats = { created: 0, reused: 0, released: 0, liveBytes: 0, pooledBytes: 0, sweeps: 0 };
  private readonly free = new Map<number, PBuf[]>();
  private readonly registry = new FinalizationRegistry<Owner>((o) => this.giveBack(o));
  private owners: { ref: WeakRef<object>; owner: Owner }[] = [];
  private sinceSweep = 0;
  private createdSinceSweep = 0;
  /**
   * Buffers created since the last sweep that trigger the next one: each GPUBuffer costs a native
   * callback in bun-webgpu, so many small tensors must be recycled even when their bytes are few.
   */
  sweepCount = 1024;
  /** At least this many bytes handed out since the last sweep trigger the next one. */
  sweepFloor = 64 * 2 ** 20;
  /** Bytes handed out since the last sweep that trigger the next one (max of floor and live). */
  private sweepEvery = this.sweepFloor;

  constructor(private readonly device: GPUDevice, private readonly usage: number) {}

  /**
   * A buffer of at least `bytes`. `avoidBatch`: skip buffers the given (unsubmitted) batch uses,
   * for destinations of `queue.writeBuffer`.
   */
  acquire(bytes: number, avoidBatch = -1): PBuf {
    const size = bucket(bytes);
    this.sinceSweep += size;
    if (this.sinceSweep > Math.min(this.sweepEvery, Math.max(this.sweepFloor, this.stats.liveBytes))) this.sweep();
    const list = this.free.get(size);
    if (list && list.length) {
      let i = list.length - 1;
      if (avoidBatch >= 0) while (i >= 0 && list[i]!.lastBatch === avoidBatch) i--;
      if (i >= 0) {
        const b = list[i]!;
        list.splice(i, 1);
        this.stats.reused++;
        this.stats.liveBytes += size;
        return b;
      }
    }
    if (++this.createdSinceSweep > this.sweepCount && this.owners.length > 0) {
      this.sweep();
      return this.acquire(bytes, avoidBatch);
    }
    const gpu = this.device.createBuffer({ size, usage: this.usage });
    this.stats.created++;
    this.stats.pooledBytes += size;
    this.stats.liveBytes += size;
    return { gpu, size, id: nextBufferId++, lastBatch: -1 };
  }

  /** Return a buffer now (temporaries whose last use is already encoded). */
  release(b: PBuf): void {
    this.stats.released++;
    this.stats.liveBytes -= b.size;
    let list = this.free.get(b.size);
    if (!list) this.free.set(b.size, (list = []));
    list.push(b);
  }

  /** Tie `buf` to `holder`: when the holder is collected, the buffer returns to the pool. */
  own(holder: object, buf: PBuf): void {
    const owner: Owner = { buf, returned: false };
    this.registry.register(holder, owner, owner);
    this.owners.push({ ref: new WeakRef(holder), owner });
  }

  private giveBack(o: Owner): void {
    if (o.returned) return;
    o.returned = true;
    this.release(o.buf);
  }

  /**
   * Force a collection and return the buffers of dead holders (synchronous loops never run
   * FinalizationRegistry callbacks, but WeakRefs are cleared by the collection).
   */
  sweep(): void {
    this.sinceSweep = 0;
    this.createdSinceSweep = 0;
    this.stats.sweeps++;
    gc();
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

  /** Destroy all free buffers (memory pressure). Use CommandQueue.trim, which drops cached bind groups first. */
  trim(): void {
    for (const list of this.free.values()) {
      for (const b of list) {
        this.stats.pooledBytes -= b.size;
        b.gpu.destroy();
      }
    }
    this.free.clear();
  }
}
