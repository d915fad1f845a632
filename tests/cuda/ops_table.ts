/**
 * The opcode table the CUDA library exports, derived without building it: the registry's
 * numbering (src/backends/native/optable.ts) restricted to the ops with a CUDA kernel
 * (native/cuda/loom_cuda.cu has_kernel). library.test.ts checks this list against the built library.
 */
import { registryOpcodes } from "../../src/backends/native/optable.ts";

/** Non-elementwise ops with a CUDA kernel (every elementwise op has one). */
export const CUDA_KERNEL_OPS = ["sum", "amax", "amin", "matmul", "lora_linear", "quantized_linear", "fused_elementwise", "fused_reduce"] as const;

/** Opcode of each op with a CUDA kernel, as loom_cuda_op_names gives it. */
export function cudaOpcodes(): Map<string, number> {
  const { elementwise, kernels } = registryOpcodes();
  const m = new Map<string, number>();
  elementwise.forEach((n, i) => m.set(n, i));
  kernels.forEach((n, i) => { if ((CUDA_KERNEL_OPS as readonly string[]).includes(n)) m.set(n, elementwise.length + i); });
  return m;
}
