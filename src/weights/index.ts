/**
 * loom.weights: weights as computation graphs over compact pieces (issue 12): WeightNode and its
 * kinds, the materialization cache, CompressedLinear.
 */
export * from "./cache.ts";
export * from "./node.ts";
export * from "./dense.ts";
export * from "./linear.ts";
export * from "./quantize.ts";
export * from "./quantized.ts";
export * from "./lowrank.ts";
export * from "./sparse.ts";
export * from "./product_quantized.ts";
export * from "./compress.ts";
export * from "./delta.ts";
export * from "./optimize.ts";
export * from "./serialize.ts";
export * from "./gguf.ts";
