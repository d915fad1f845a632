/**
 * What a backend is to the layers above: something that runs a registry op over buffers.
 * Backends see TensorData (buffers with strides) and op definitions, never Tensors or graph nodes.
 */
import type { OpDef } from "../graph/op.ts";
import type { DType } from "../tensor/dtype.ts";
import type { TensorData } from "../tensor/storage.ts";

export interface Backend {
  readonly name: string;
  /**
   * Run `op` on `inputs`; `shape`/`dtype` are the output's, already inferred by the op's rules.
   * Views return a TensorData sharing the input's storage; other ops return a new buffer.
   */
  run(op: OpDef, inputs: readonly TensorData[], attrs: unknown, shape: readonly number[], dtype: DType): TensorData;
}
