/**
 * CUDA device memory: a pool of device buffers bucketed by size, and the reclamation of buffers
 * whose tensors became unreachable.
 *
 * A tensor's buffer is owned by a `CudaStorage` (storage.ts); buckets, free lists and the return
 * of dead tensors' buffers (FinalizationRegistry + WeakRef sweep) are ../device_pool.ts.
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
import { bucket, PooledBuffers, type PoolStats } from "../device_pool.ts";

export { bucket };

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

/** Counters for tests and benchmarks (`created`: cudaMalloc calls, the pool misses). */
export interface DeviceMemoryStats extends PoolStats {
  /** Times free buffers were given back to the driver after a failed allocation. */
  trims: number;
}

/** The CUDA pool: buffers from `alloc`, given back to the driver only when an allocation fails. */
export class DevicePool extends PooledBuffers<DBuf, DeviceMemoryStats> {
  /** @param gc - a full garbage collection (the runtime's; a no-op where there is none) */
  constructor(private readonly alloc: DeviceAllocator, gc: () => void = () => {}) {
    super({ created: 0, reused: 0, released: 0, liveBytes: 0, pooledBytes: 0, sweeps: 0, trims: 0 }, 256 * 2 ** 20, gc);
  }

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
    this.created(size);
    return { addr, size };
  }

  /** Give every free buffer back to the driver. */
  trim(): void {
    this.stats.trims++;
    this.dropFree((b) => this.alloc.free(b.addr));
  }
}
