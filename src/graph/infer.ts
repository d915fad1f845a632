/**
 * Shape and dtype inference helpers shared by the op definitions.
 */
import { isFloating, isIntegral, promoteFloat, promoteTypes, type DType } from "../tensor/dtype.ts";
import { LoomDtypeError } from "../tensor/errors.ts";
import { broadcastShapes } from "../tensor/shape.ts";
import type { Meta } from "./op.ts";

function category(d: DType): number {
  return d === "bool" ? 0 : isIntegral(d) ? 1 : 2;
}

/**
 * torch.result_type for tensor operands: dimensioned tensors decide the dtype; a 0-d tensor
 * (a wrapped Python scalar included) only wins when its category (bool < int < float) is higher.
 */
export function resultType(inputs: readonly Meta[]): DType {
  let dimmed: DType | null = null;
  let zero: DType | null = null;
  for (const m of inputs) {
    if (m.shape.length > 0) dimmed = dimmed === null ? m.dtype : promoteTypes(dimmed, m.dtype);
    else zero = zero === null ? m.dtype : promoteTypes(zero, m.dtype);
  }
  if (dimmed === null) return zero!;
  if (zero === null) return dimmed;
  return category(zero) > category(dimmed) ? zero : dimmed;
}

/** Broadcast shape of all inputs, errors naming the op. */
export function broadcastAll(op: string, inputs: readonly Meta[]): number[] {
  let s = [...inputs[0]!.shape];
  for (let i = 1; i < inputs.length; i++) s = broadcastShapes(op, s, inputs[i]!.shape);
  return s;
}

export const sameShape = (inputs: readonly Meta[]): number[] => [...inputs[0]!.shape];
export const sameDtype = (inputs: readonly Meta[]): DType => inputs[0]!.dtype;
export const floatDtype = (inputs: readonly Meta[]): DType => promoteFloat(inputs[0]!.dtype);
export const boolDtype = (): DType => "bool";

/**
 * What to do about a non-floating tensor where an op needs a float. An integer one is usually
 * `tensor([1.0, 2.0])`: JavaScript numbers do not tell 1.0 from 1, so the array is all integers
 * and the tensor int64 (as torch.tensor([1, 2])).
 */
export function floatHint(d: DType): string {
  if (d === "bool") return "call .float() first";
  return 'pass { dtype: "float32" } to tensor() (or full, arange) or call .float() first (JavaScript numbers do not tell 1.0 from 1, so tensor([1.0, 2.0]) is int64)';
}

/**
 * Throws `[op] expected a floating point tensor, got int64: pass { dtype: "float32" } to tensor()
 * or call .float() first (...)` unless the dtype is floating (mean, var, std, softmax...).
 */
export function requireFloat(op: string, d: DType): DType {
  if (!isFloating(d)) throw new LoomDtypeError(`[${op}] expected a floating point tensor, got ${d}: ${floatHint(d)}`);
  return d;
}

/** Throws unless `d` is an integer dtype (for indices). */
export function requireIndex(op: string, d: DType): void {
  if (!isIntegral(d)) throw new LoomDtypeError(`[${op}] expected an index tensor of dtype int64 or int32, got ${d}`);
}
/** gather / scatter_add take int64 indices only (torch: "Expected dtype int64 for index"). */
export function requireInt64Index(op: string, d: DType): void {
  if (d !== "int64") throw new LoomDtypeError(`[${op}] expected dtype int64 for index, got ${d}`);
}
