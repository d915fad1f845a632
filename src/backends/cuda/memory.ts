/**
 * CUDA device memory: a pool of device buffers bucketed by size, and the reclamation of buffers
 * whose tensors became unreachable.
 *
 * A tensor's buffer is owned by a `CudaStorage` (storage.ts). When the storage is garbage
 * collected its buffer goes back to the pool, found two ways: a `FinalizationRegistry` (runs
 * between event-loop turns) and, for synchronous loops that never yield, a sweep of `WeakRef`s
 * after a forced collection once enough memory was handed out since the last sweep. Either way
 * each buffer is returned once.
 *
 * Reuse needs no wait: uploads, kernels and readbacks all run in order on the library's one
 * stream, so a buffer's last reader runs before its next writer (native/cuda/loom_cuda.cu). Free
 * buffers are given back to the driver (cudaFree, which synchronizes) only when an allocation
 * fails: `trim`, then one retry.
 *
 * The pool itself is plain TypeScript over an allocator (two functions), so its accounting is
 * tested without a GPU (tests/cuda/pool.test.ts).
 */
import { LoomValueError } from "../../tensor/errors.ts";

/** Where device bytes come from: the CUDA library's cudaMalloc/cudaFree (an address; 0 on failure). */
export interface DeviceAllocator {
  malloc(bytes: number): number;
  free(addr: number): void;
}

/** A pooled device buffer: its address and bucket size in bytes. */
export interface DBuf {
  readonly addr: number;
  readonly size: number;
}

/** Counters for tests and benchmarks. */
export interface DeviceMemoryStats {
  /** cudaMalloc calls (pool misses). */
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
  /** Times free buffers were given back to the driver after a failed allocation. */
  trims: number;
}

/** Bucket size: multiples of 256 B up to 64 KiB, then 8 steps per power of two (at most 12.5% slack). */
export function bucket(bytes: number): number {
  const b = Math.max(bytes, 16);
  if (b <= 65536) return Math.ceil(b / 256) * 256;
  const p = 2 ** Math.floor(Math.log2(b));
  const step = p / 8;
  return Math.ceil(b / step) * step;
}

interface Owner { buf: DBuf; returned: boolean }

export class DevicePool {
  readonly stats: DeviceMemoryStats = { created: 0, reused: 0, released: 0, liveBytes: 0, pooledBytes: 0, sweeps: 0, trims: 0 };
  private readonly free = new Map<number, DBuf[]>();
  private readonly registry = new FinalizationRegistry<Owner>((o) => this.giveBack(o));
  private owners: { ref: WeakRef<object>; owner: Owner }[] = [];
  private sinceSweep = 0;
  /** At least this many bytes handed out since the last sweep trigger the next one. */
  sweepFloor = 256 * 2 ** 20;
  private sweepEvery = this.sweepFloor;

  /** @param gc - a full garbage collection (the runtime's; a no-op where there is none) */
  constructor(private readonly alloc: DeviceAllocator, private readonly gc: () => void = () => {}) {}

  /**
   * A buffer of at least `bytes` (uninitialized).
   * @throws LoomValueError when the device cannot allocate it even after returning every dead
   * tensor's buffer and freeing the pool's free buffers
   */
  acquire(bytes: number): DBuf {
    const size = bucket(bytes);
    this.sinceSweep += size;
    if (this.sinceSweep > Math.max(this.sweepEvery, this.sweepFloor)) this.sweep();
    const hit = this.take(size);
    if (hit) return hit;
    let addr = this.alloc.malloc(size);
    if (!addr) {
      // out of device memory: return what dead tensors hold, give the free buffers back, retry
      this.sweep();
      const again = this.take(size);
      if (again) return again;
      this.trim();
      addr = this.alloc.malloc(size);
      if (!addr) throw new LoomValueError(`[cuda] out of device memory allocating ${size} bytes (${this.stats.liveBytes} bytes live in tensors)`);
    }
    this.stats.created++;
    this.stats.pooledBytes += size;
    this.stats.liveBytes += size;
    return { addr, size };
  }

  private take(size: number): DBuf | null {
    const list = this.free.get(size);
    const b = list?.pop();
    if (!b) return null;
    this.stats.reused++;
    this.stats.liveBytes += size;
    return b;
  }

  /** Return a buffer now (a temporary whose last use is already queued on the stream). */
  release(b: DBuf): void {
    this.stats.released++;
    this.stats.liveBytes -= b.size;
    let list = this.free.get(b.size);
    if (!list) this.free.set(b.size, (list = []));
    list.push(b);
  }

  /** Tie `buf` to `holder`: when the holder is collected, the buffer returns to the pool. */
  own(holder: object, buf: DBuf): void {
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
   * Force a collection and return the buffers of dead holders (a synchronous loop never runs
   * FinalizationRegistry callbacks, but the collection clears WeakRefs).
   */
  sweep(): void {
    this.sinceSweep = 0;
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
    this.sweepEvery = Math.max(this.sweepFloor, this.stats.liveBytes);
  }

  /** Give every free buffer back to the driver. */
  trim(): void {
    this.stats.trims++;
    for (const list of this.free.values()) {
      for (const b of list) {
        this.stats.pooledBytes -= b.size;
        this.alloc.free(b.addr);
      }
    }
    this.free.clear();
  }

  /** Bytes in free buffers, ready for reuse. */
  get freeBytes(): number {
    return this.stats.pooledBytes - this.stats.liveBytes;
  }
}
