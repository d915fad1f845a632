/**
 * Tensors whose values live in a GPU buffer. `GpuData` is a `TensorData` (all that layers above a
 * backend see), so views are stride arithmetic over a shared `GpuStorage`, as on the CPU.
 * Reading `.data` (CPU code touching a GPU tensor: printing, `tolist()`, another backend) reads
 * the buffer back synchronously and caches the host copy until the buffer is written again.
 */
import type { DType, TypedArray } from "../../tensor/dtype.ts";
import type { TensorData } from "../../tensor/storage.ts";
import { fromGpuBytes } from "./dtype.ts";
import type { PBuf } from "./memory.ts";
import type { CommandQueue } from "./queue.ts";

/** One GPU buffer holding `length` elements of `dtype` (4 bytes each, see dtype.ts). */
export class GpuStorage {
  private host: TypedArray | null = null;

  /** `owned`: the buffer returns to the pool when this storage is collected (not workspace regions). */
  constructor(readonly buf: PBuf, readonly dtype: DType, readonly length: number, private readonly q: CommandQueue, owned = true) {
    if (owned) q.pool.own(this, buf);
  }

  /** The values in Loom's CPU layout (synchronous readback, cached). */
  hostSync(): TypedArray {
    if (!this.host) this.host = fromGpuBytes(this.dtype, this.q.readSync(this.buf, 0, this.length * 4), this.length);
    return this.host;
  }

  /** Fill the host cache without blocking JavaScript. */
  async hostAsync(): Promise<TypedArray> {
    if (!this.host) {
      const raw = await this.q.read(this.buf, 0, this.length * 4);
      this.host ??= fromGpuBytes(this.dtype, raw, this.length);
    }
    return this.host;
  }

  /** The buffer was written on the GPU: drop the host copy. */
  invalidate(): void {
    this.host = null;
  }
}

/**
 * A strided view on a GpuStorage. `data` is an own enumerable accessor so that CPU code that
 * copies a TensorData with a spread gets the values, not a missing field.
 */
export class GpuData implements TensorData {
  declare readonly data: TypedArray;
  readonly dtype: DType;

  constructor(readonly storage: GpuStorage, readonly shape: readonly number[], readonly strides: readonly number[], readonly offset: number) {
    this.dtype = storage.dtype;
    Object.defineProperty(this, "data", { get: () => this.storage.hostSync(), enumerable: true });
  }
}

export function isGpu(t: TensorData): t is GpuData {
  return t instanceof GpuData;
}
