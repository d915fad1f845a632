/**
 * Loom: a PyTorch-like tensor framework for Bun, Deno and the browser. `import * as loom from "loom-tensor"`.
 */
import "./runtime/globals.ts"; // first: a browser bundle gets a minimal `process` before any module reads it
export { Tensor } from "./lazy/tensor.ts";
export { LazyTensor, realizeAll, compile_plan, explain } from "./lazy/lazy_tensor.ts";
export { TensorOps, type Scalar, type NestedList } from "./lazy/surface.ts";
export * from "./lazy/creation.ts";
export * from "./lazy/functional.ts";
export * from "./lazy/free_functions.ts";
export * from "./lazy/free_functions_shape.ts";
export {
  diag, diagonal, flip, fliplr, flipud, masked_select, nonzero, outer, repeat, repeat_interleave, roll, select, tile,
} from "./lazy/shape_ops.ts";
export { scatter, scatter_reduce, type ScatterReduce } from "./lazy/scatter_ops.ts";
export { argsort, kthvalue, msort, multinomial, sort, topk, type ValuesIndices } from "./lazy/sort_ops.ts";
export { einsum } from "./lazy/einsum.ts";
export { quantized_linear, packed_words, NF4_CODE, QUANT_ERROR_BOUND, QUANT_FORMATS, type QuantFormat, type QuantizedLinearOptions } from "./lazy/quantized_ops.ts";
export { slice, type IndexItem, type IndexList, type IndexTensor, type Slice } from "./lazy/indexing.ts";
export { gradcheck, type GradcheckOptions, type GradcheckFailure } from "./lazy/gradcheck.ts";
export * as autograd from "./lazy/autograd_api.ts";
export * as linalg from "./lazy/linalg.ts";
export { no_grad, enable_grad, inference_mode, is_grad_enabled, set_grad_enabled, GradModeGuard } from "./autograd/grad_mode.ts";
export { manual_seed, Generator, default_generator } from "./tensor/rng.ts";
export { promoteTypes as promote_types, type DType } from "./tensor/dtype.ts";
export * from "./tensor/errors.ts";
export { realizeStats } from "./scheduler/realize.ts";
export { Dim, mark_dynamic } from "./lazy/dynamic_shapes.ts";
export { save, load, get_rng_state, set_rng_state } from "./lazy/serialization.ts";
export { symbolicStats } from "./scheduler/symbolic.ts";
export { clear_plan_cache, planCacheStats } from "./scheduler/compile.ts";
export { CompiledPlan } from "./scheduler/plan.ts";
export {
  LoomOutOfMemoryError, get_compiler_options, get_memory_limit, set_compiler_options, set_memory_limit,
  with_compiler_options, type CompilerOptions,
} from "./scheduler/options.ts";
export { OPS, type OpName } from "./graph/registry.ts";
export { jsBackend } from "./backends/js/backend.ts";
export { runtime_info, type RuntimeInfo } from "./lazy/runtime_info.ts";
export { init_webgpu, webgpuStatus as webgpu_status } from "./backends/webgpu/index.ts";
export { init_cuda, cudaStatus as cuda_status } from "./backends/cuda/index.ts";
export * as io from "./io/index.ts";
export * as nn from "./nn/index.ts";
export * as optim from "./optim/index.ts";
export * as amp from "./optim/amp.ts";
export { autocast, is_autocast_enabled, get_autocast_dtype } from "./lazy/autocast.ts";
export * as data from "./data/index.ts";
export * as lora from "./lora/index.ts";
export * as weights from "./weights/index.ts";
export { compress, type CompressOptions, type CompressReport } from "./weights/compress.ts";
export * as models from "./models/index.ts";
export * as tokenizers from "./tokenizers/index.ts";
export { AutoTokenizer } from "./tokenizers/auto.ts";
export * as distributed from "./distributed/index.ts";
