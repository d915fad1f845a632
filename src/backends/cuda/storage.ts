/**
 * Tensors whose values live in a CUDA device buffer. `CudaData` is a `TensorData` (all that
 * layers above a backend see), so views are stride arithmetic over a shared `CudaStorage`, as on
 * the CPU and on webgpu. Reading `.data` (CPU code touching a CUDA tensor: printing, `tolist()`,
 * another backend) reads the buffer back synchronously (after every queued kernel, through pinned
 * staging) and caches the host copy until the buffer is written again.
 *
 * Device buffers hold exactly the bytes of Loom's CPU storage for the dtype (src/tensor/dtype.ts:
 * int64 as float64 words, float16/bfloat16 as raw bits, bool as bytes), so transfers are plain
 * byte copies.
 */
import { allocArray, itemsize, type DType, type TypedArray } from "../../tensor/dtype.ts";
import type { TensorData } from "../../tensor/storage.ts";
import { DeviceData } from "../device_data.ts";
import type { DBuf, DevicePool } from "./memory.ts";

/** What a storage needs from the device: readbacks (storage.ts stays free of the FFI). */
export interface Readback {
  readonly pool: DevicePool;
  /** Copy `bytes` at device address `addr` into `dst`, after all queued work (throws the device's error). */
  readInto(dst: TypedArray, addr: number, bytes: number): void;
  /** The same without blocking JavaScript. */
  readIntoAsync(dst: TypedArray, addr: number, bytes: number): Promise<void>;
}

/** One device buffer holding `length` elements of `dtype`. */
export class CudaStorage {
  private host: TypedArray | null = null;

  /**
   * `owned`: the buffer returns to the pool when this storage is collected, and reads are cached.
   * Workspace regions are not owned, and not cached: one region has a storage per dtype, and a
   * write through one would leave another's cached copy stale.
   */
  constructor(readonly buf: DBuf, readonly dtype: DType, readonly length: number, private readonly dev: Readback, private readonly owned = true) {
    if (owned) dev.pool.own(this, buf);
  }

  /** Device address of element `i`. */
  addrOf(i: number): number {
    return this.buf.addr + i * itemsize[this.dtype];
  }

  /** The values in Loom's CPU layout (a synchronous readback, cached until the next write). */
  hostSync(): TypedArray {
    if (this.host) return this.host;
    const a = allocArray(this.dtype, this.length);
    this.dev.readInto(a, this.buf.addr, this.length * itemsize[this.dtype]);
    if (this.owned) this.host = a;
    return a;
  }

  /** Fill the host cache without blocking JavaScript. */
  async hostAsync(): Promise<TypedArray> {
    if (this.host) return this.host;
    const a = allocArray(this.dtype, this.length);
    await this.dev.readIntoAsync(a, this.buf.addr, this.length * itemsize[this.dtype]);
    if (this.owned) this.host ??= a;
    return this.host ?? a;
  }

  /** The buffer is (about to be) written on the device: drop the host copy. */
  invalidate(): void {
    this.host = null;
  }
}

/** A strided view on a CudaStorage (../device_data.ts). */
export class CudaData extends DeviceData<CudaStorage> {}

export function isCuda(t: TensorData): t is CudaData {
  return t instanceof CudaData;
}
