/// <reference types="@webgpu/types" />
/**
 * GPU memory: a pool of storage buffers bucketed by size, and the reclamation of buffers whose
 * tensors became unreachable.
 *
 * A tensor's buffer is owned by a `GpuStorage`; buckets, free lists and the return of dead
 * tensors' buffers (FinalizationRegistry + WeakRef sweep) are ../device_pool.ts.
 *
 * Reuse is safe without waiting for the GPU: all work goes through one queue in order, so a
 * buffer's last reader runs before its next writer. The exception is `queue.writeBuffer`, which
 * lands before the not-yet-submitted batch; uploads therefore take only buffers that the current
 * batch does not touch (`lastBatch`).
 */
import { gc } from "../../runtime/sync.ts";
import { bucket, PooledBuffers, type PoolStats } from "../device_pool.ts";

export { bucket };

/** A pooled GPU buffer. `size` is its bucket size in bytes. */
export interface PBuf {
  readonly gpu: GPUBuffer;
  readonly size: number;
  /** Unique id (bind groups are cached by the ids of their buffers). */
  readonly id: number;
  /** Id of the last command batch that used it (see CommandQueue). */
  lastBatch: number;
}

/** Counters for tests and benchmarks (`created`: GPU buffers created, the pool misses). */
export type MemoryStats = PoolStats;

let nextBufferId = 1;

/** The WebGPU pool: storage buffers of one `usage` from `device`. */
export class BufferPool extends PooledBuffers<PBuf, MemoryStats> {
  private createdSinceSweep = 0;
  /**
   * Buffers created since the last sweep that trigger the next one: each GPUBuffer costs a native
   * callback in bun-webgpu, so many small tensors must be recycled even when their bytes are few.
   */
  sweepCount = 1024;

  constructor(private readonly device: GPUDevice, private readonly usage: number) {
    super({ created: 0, reused: 0, released: 0, liveBytes: 0, pooledBytes: 0, sweeps: 0 }, 64 * 2 ** 20, gc);
  }

  /**
   * A buffer of at least `bytes`. `avoidBatch`: skip buffers the given (unsubmitted) batch uses,
   * for destinations of `queue.writeBuffer`.
   */
  acquire(bytes: number, avoidBatch = -1): PBuf {
    const size = bucket(bytes);
    this.sinceSweep += size;
    if (this.sinceSweep > Math.min(this.sweepEvery, Math.max(this.sweepFloor, this.stats.liveBytes))) this.sweep();
    const hit = this.take(size, avoidBatch >= 0 ? (b) => b.lastBatch === avoidBatch : undefined);
    if (hit) return hit;
    if (++this.createdSinceSweep > this.sweepCount && this.ownedCount > 0) {
      this.sweep();
      return this.acquire(bytes, avoidBatch);
    }
    const gpu = this.device.createBuffer({ size, usage: this.usage });
    this.created(size);
    return { gpu, size, id: nextBufferId++, lastBatch: -1 };
  }

  protected override onSweep(): void {
    this.createdSinceSweep = 0;
  }

  /** Destroy all free buffers (memory pressure). Use CommandQueue.trim, which drops cached bind groups first. */
  trim(): void {
    this.dropFree((b) => b.gpu.destroy());
  }
}
