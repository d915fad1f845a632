/**
 * Tensors whose values live in a GPU buffer. `GpuData` is a `TensorData` (all that layers above a
 * backend see), so views are stride arithmetic over a shared `GpuStorage`, as on the CPU.
 * Reading `.data` (CPU code touching a GPU tensor: printing, `tolist()`, another backend) reads
 * the buffer back synchronously and caches the host copy until the buffer is written again.
 *
 * A storage also holds the error cells of the kernels that wrote it and of everything its
 * contents were computed from (a kernel cannot throw on the GPU: a bad index, an integer division
 * by 0...): each read of the storage resolves them and raises the recorded error (LoomIndexError,
 * LoomValueError) while any holds one, as the native backend raises a failed command buffer's
 * error on every read of its outputs.
 */
import type { DType, TypedArray } from "../../tensor/dtype.ts";
import type { TensorData } from "../../tensor/storage.ts";
import { DeviceData } from "../device_data.ts";
import { fromGpuBytes } from "./dtype.ts";
import type { PBuf } from "./memory.ts";
import { raiseCells, type CommandQueue, type ErrCell } from "./queue.ts";

/** Unresolved cells a storage may hold before they are resolved (a readback) to keep the lists short. */
const MAX_CELLS = 64;

/** One GPU buffer holding `length` elements of `dtype` (4 bytes each, see dtype.ts). */
export class GpuStorage {
  private host: TypedArray | null = null;
  /** Error cells of this storage's contents: unresolved, or holding an error (resolved clean ones are dropped). */
  private cells: readonly ErrCell[] = [];

  /** `owned`: the buffer returns to the pool when this storage is collected (not workspace regions). */
  constructor(readonly buf: PBuf, readonly dtype: DType, readonly length: number, private readonly q: CommandQueue, owned = true) {
    if (owned) q.pool.own(this, buf);
  }

  /**
   * The values in Loom's CPU layout (synchronous readback, cached).
   * @throws LoomIndexError / LoomValueError, on every read, if a kernel that these values come
   * from faulted (a bad index, an integer division by 0, a cast of inf to an integer dtype...)
   */
  hostSync(): TypedArray {
    if (!this.host) this.host = fromGpuBytes(this.dtype, this.q.readSync(this.buf, 0, this.length * 4, this.cells), this.length);
    this.check();
    return this.host;
  }

  /** Fill the host cache without blocking JavaScript (raises as hostSync). */
  async hostAsync(): Promise<TypedArray> {
    if (!this.host) {
      const raw = await this.q.read(this.buf, 0, this.length * 4, this.cells);
      this.host ??= fromGpuBytes(this.dtype, raw, this.length);
    }
    this.check();
    return this.host;
  }

  /** The cells that readers of this storage must check. */
  errorCells(): readonly ErrCell[] {
    return this.cells;
  }

  /**
   * Record the error cells of new contents: `replace` for a kernel writing the whole storage,
   * else added to the cells of the contents it keeps (an in-place write of a view).
   */
  setErrorCells(cells: readonly ErrCell[], replace: boolean): void {
    if (replace && cells.length === 0 && this.cells.length === 0) return;
    const all = new Set(replace ? cells : [...this.cells, ...cells]);
    let list = [...all].filter((c) => c.state !== null);
    if (list.filter((c) => c.state === undefined).length > MAX_CELLS) {
      this.q.resolve(list);
      list = list.filter((c) => c.state !== null);
    }
    this.cells = list;
  }

  /** Raise the error of a fault these values come from (resolving pending cells first). */
  private check(): void {
    if (this.cells.length === 0) return;
    if (this.cells.some((c) => c.state === undefined)) this.q.resolve(this.cells);
    this.cells = this.cells.filter((c) => c.state !== null);
    raiseCells(this.cells);
  }

  /** The buffer was written on the GPU: drop the host copy. */
  invalidate(): void {
    this.host = null;
  }
}

/** A strided view on a GpuStorage (../device_data.ts). */
export class GpuData extends DeviceData<GpuStorage> {}

export function isGpu(t: TensorData): t is GpuData {
  return t instanceof GpuData;
}
