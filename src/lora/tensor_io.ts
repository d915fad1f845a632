/**
 * Conversions between Loom Tensors and loom.io's plain {dtype, shape, data} records, used by the
 * PEFT adapter files here and the Hugging Face checkpoints in src/models.
 */
import type { TensorData as IoTensor, TensorLike } from "../io/index.ts";
import { Tensor } from "../lazy/tensor.ts";
import { contiguousStrides } from "../tensor/shape.ts";
import { toContiguous } from "../tensor/storage.ts";

/** A Tensor viewing a loaded array (no copy). @param t - as returned by loom.io's loaders */
export function tensor_from_io(t: IoTensor): Tensor {
  return new Tensor({ dtype: t.dtype, shape: t.shape.slice(), strides: contiguousStrides(t.shape), offset: 0, data: t.data });
}

/**
 * A dense record of `t` for loom.io's writers: `t`'s own buffer when it is already dense and
 * exactly sized, else a contiguous copy. A LazyTensor is realized first; a tensor on another
 * device (webgpu) is copied to the cpu.
 */
export function tensor_to_io(t: Tensor | { eval(): Tensor }): TensorLike {
  const r = t instanceof Tensor ? t : t.eval();
  const e = r.device === "cpu" ? r : r.to("cpu");
  const d = toContiguous(e._d); // dense, offset 0, exactly numel(shape) elements
  return { dtype: d.dtype, shape: d.shape, data: d.data };
}
