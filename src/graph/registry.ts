/**
 * The op registry: every primitive, defined once. Backends key their kernels by these names
 * (`Partial<Record<OpName, Kernel>>`), passes match on them, and tsc checks the table.
 */
import * as ew from "./ops/elementwise.ts";
import * as la from "./ops/linalg_index.ts";
import * as lora from "./ops/lora.ts";
import * as mv from "./ops/movement.ts";
import * as qz from "./ops/quantized.ts";
import * as rd from "./ops/reduce.ts";
import * as rp from "./ops/rope.ts";
import * as so from "./ops/sort.ts";
import * as sp from "./ops/spmm.ts";
import * as fu from "./passes/fused_ops.ts";
import type { OpDef } from "./op.ts";

export const OPS = {
  // elementwise
  neg: ew.neg, abs: ew.abs, sign: ew.sign, exp: ew.exp, log: ew.log, log1p: ew.log1p, sqrt: ew.sqrt,
  rsqrt: ew.rsqrt, reciprocal: ew.reciprocal, sin: ew.sin, cos: ew.cos, tanh: ew.tanh,
  sigmoid: ew.sigmoid, relu: ew.relu, erf: ew.erf_, floor: ew.floor, ceil: ew.ceil, round: ew.round,
  isnan: ew.isnan, logical_not: ew.logical_not, contiguous: ew.contiguous, cast: ew.cast,
  add: ew.add, sub: ew.sub, mul: ew.mul, div: ew.div, floor_divide: ew.floor_divide,
  remainder: ew.remainder, pow: ew.pow, maximum: ew.maximum, minimum: ew.minimum,
  eq: ew.eq, ne: ew.ne, lt: ew.lt, le: ew.le, gt: ew.gt, ge: ew.ge,
  logical_and: ew.logical_and, logical_or: ew.logical_or, where: ew.where,
  // reductions and scans
  sum: rd.sum, amax: rd.amax, amin: rd.amin, argmax: rd.argmax, argmin: rd.argmin, cumsum: rd.cumsum,
  // movement
  reshape: mv.reshape, permute: mv.permute, expand: mv.expand, slice: mv.slice,
  slice_backward: mv.slice_backward, cat: mv.cat,
  // linear algebra and indexing
  matmul: la.matmul, gather: la.gather, scatter_add: la.scatter_add,
  index_select: la.index_select, index_add: la.index_add, tri: la.tri,
  // sorting (sort/topk/kthvalue are argsort + gather on the surface)
  argsort: so.argsort,
  // sparse (CSR) weight times dense input (src/weights/sparse.ts)
  spmm: sp.spmm,
  // fused ops whose decomposition is their reference
  lora_linear: lora.lora_linear,
  // dequantize-and-multiply, the weight never dense (issue 12)
  quantized_linear: qz.quantized_linear,
  // x·cos + rotate_half(x)·sin, HF apply_rotary_pos_emb (issue 13)
  rotary_embedding: rp.rotary_embedding,
} satisfies Record<string, OpDef>;

export type OpName = keyof typeof OPS;

/**
 * Fused ops: created only by the graph compiler's fusion passes (never by the surface), each with
 * a reference `ref` that follows its decomposition op by op (see passes/fused_ops.ts).
 */
export const FUSED_OPS = {
  fused_elementwise: fu.fused_elementwise, fused_reduce: fu.fused_reduce, fused_matmul: fu.fused_matmul,
  fused_softmax: fu.fused_softmax, fused_layer_norm: fu.fused_layer_norm, fused_rms_norm: fu.fused_rms_norm,
  fused_lora_linear: fu.fused_lora_linear, fused_attention: fu.fused_attention,
} satisfies Record<string, OpDef>;

export type FusedOpName = keyof typeof FUSED_OPS;

// Each entry's key must be its op's name, so kernels keyed by name find the right op.
for (const [k, op] of [...Object.entries(OPS), ...Object.entries(FUSED_OPS)]) {
  if (k !== op.name) throw new Error(`op registry: key '${k}' holds op '${op.name}'`);
}
