/**
 * nn.functional (also exported as `nn.F`): torch.nn.functional's names, generic over Tensor and
 * LazyTensor. Everything is defined once in src/lazy/functional.ts; this module re-exports it so
 * ported code can write `F.cross_entropy(logits, targets)`.
 */
export * from "../lazy/functional.ts";
