/**
 * The strided view of a device tensor (webgpu `GpuData`, cuda `CudaData`): a `TensorData` (all
 * that layers above a backend see) over a shared storage, so views are stride arithmetic as on
 * the CPU. Each backend subclasses it, so `instanceof` tells the backends' tensors apart.
 */
import type { DType, TypedArray } from "../tensor/dtype.ts";
import type { TensorData } from "../tensor/storage.ts";

/** What a view needs from its storage: the dtype and a synchronous readback (cached by the storage). */
export interface HostReadable {
  readonly dtype: DType;
  hostSync(): TypedArray;
}

/**
 * A strided view on a device storage `S`. `data` is an own enumerable accessor, so CPU code that
 * copies a TensorData with a spread gets the values, not a missing field.
 */
export class DeviceData<S extends HostReadable> implements TensorData {
  declare readonly data: TypedArray;
  readonly dtype: DType;

  constructor(readonly storage: S, readonly shape: readonly number[], readonly strides: readonly number[], readonly offset: number) {
    this.dtype = storage.dtype;
    Object.defineProperty(this, "data", { get: () => this.storage.hostSync(), enumerable: true });
  }
}
