/**
 * loom.nn: Module, Parameter, layers, containers, init, functional (torch.nn).
 *
 * ```ts
 * class MLP extends nn.Module {
 *   fc1 = new nn.Linear(4, 8);
 *   fc2 = new nn.Linear(8, 1);
 *   override forward(x: Tensor): Tensor {   // as in PyTorch: parameters used directly
 *     return this.fc2.call(this.fc1.call(x).relu());
 *   }
 * }
 * const y = new MLP().call(x);  // a Tensor; recorded lazily as one graph (nn.set_execution_mode("eager") runs op by op)
 * ```
 */
export { Parameter, is_parameter } from "./parameter.ts";
export { Module, TensorModule, type IncompatibleKeys, type StateDict } from "./module.ts";
export {
  type ExecutionMode, get_execution_mode, lift, run_forward, set_execution_mode, with_execution_mode,
} from "./execution.ts";
export { Linear, Embedding, type LinearOptions, type EmbeddingOptions } from "./linear.ts";
export { Conv1D, type Conv1DOptions } from "./conv1d.ts";
export {
  ReLU, GELU, SiLU, Tanh, Sigmoid, LeakyReLU, Softmax, LogSoftmax, Identity, Dropout, Flatten, Unflatten,
} from "./activation.ts";
export {
  _Loss, _WeightedLoss, BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss,
  SmoothL1Loss, type BCELossOptions, type BCEWithLogitsLossOptions, type CrossEntropyLossOptions,
  type HuberLossModuleOptions, type KLDivLossOptions, type LossModuleOptions, type NLLLossModuleOptions,
  type SmoothL1LossModuleOptions,
} from "./loss.ts";
export { LayerNorm, RMSNorm, type LayerNormOptions, type RMSNormOptions } from "./normalization.ts";
export { Conv1d, Conv2d, type ConvModuleOptions } from "./conv.ts";
export {
  AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d,
  type AvgPoolModuleOptions, type MaxPoolModuleOptions, type PoolResult,
} from "./pooling.ts";
export { BatchNorm1d, BatchNorm2d, GroupNorm, type BatchNormOptions, type GroupNormOptions } from "./batchnorm.ts";
export { Sequential, ModuleList, ModuleDict, type ModuleDictMembers, type ModuleDictValue } from "./container.ts";
export { CausalSelfAttention, type CausalSelfAttentionOptions } from "./attention.ts";
export {
  MultiheadAttention, type MultiheadAttentionOptions, type MultiheadAttentionForwardOptions,
} from "./multihead_attention.ts";
export {
  TransformerEncoder, TransformerEncoderLayer, deepcopy_module, type EncoderLayerLike, type TransformerActivation,
  type TransformerEncoderForwardOptions, type TransformerEncoderLayerForwardOptions, type TransformerEncoderLayerOptions,
} from "./transformer.ts";
export { clip_grad_norm_, clip_grad_value_ } from "./clip_grad.ts";
export { pad_sequence, type PadSequenceOptions } from "./rnn_utils.ts";
import { clip_grad_norm_, clip_grad_value_ } from "./clip_grad.ts";
import { pad_sequence } from "./rnn_utils.ts";
import { skip_init } from "./init.ts";
/** torch.nn.utils's spellings: `nn.utils.rnn.pad_sequence`, `nn.utils.clip_grad_norm_`, `nn.utils.clip_grad_value_`, `nn.utils.skip_init`. */
export const utils = { rnn: { pad_sequence }, clip_grad_norm_, clip_grad_value_, skip_init } as const;
export * as init from "./init.ts";
export { EmptyInitGuard, init_empty_weights, is_init_empty, skip_init } from "./init.ts";
export * as functional from "./functional.ts";
export * as F from "./functional.ts";
