/**
 * The shape of an op definition. Every op is defined once (see registry.ts): shape and dtype
 * inference, the reference implementation (the js backend runs it; it is the living spec), and
 * the gradient rule written with tensor methods, so backward graphs are built from ops too and
 * are lazy when the forward was.
 */
import type { DType } from "../tensor/dtype.ts";
import type { TensorData } from "../tensor/storage.ts";

/** What shape/dtype inference sees of an operand. */
export interface Meta {
  readonly shape: readonly number[];
  readonly dtype: DType;
}

/**
 * The tensor methods gradient rules may use. Both `Tensor` and `LazyTensor` implement it
 * (through the one shared surface), so a rule written once yields eager or lazy gradients.
 */
export interface Diff<T> extends Meta {
  add(o: T | number): T;
  sub(o: T | number): T;
  mul(o: T | number): T;
  div(o: T | number): T;
  neg(): T;
  exp(): T;
  log(): T;
  pow(o: T | number): T;
  sign(): T;
  eq(o: T | number): T;
  ne(o: T | number): T;
  gt(o: T | number): T;
  lt(o: T | number): T;
  le(o: T | number): T;
  logical_or(o: T | number): T;
  where(condition: T, other: T | number): T;
  to(dtype: DType): T;
  sum(dim?: number | readonly number[] | null, keepdim?: boolean): T;
  reshape(shape: readonly number[]): T;
  expand(shape: readonly number[]): T;
  permute(dims: readonly number[]): T;
  transpose(d0: number, d1: number): T;
  matmul(o: T): T;
  /** Sum broadcast dims away so the result has `shape` (the adjoint of broadcasting). */
  sum_to_size(shape: readonly number[]): T;
  zeros_like(): T;
  sin(): T;
  floor(): T;
  cos(): T;
  narrow(dim: number, start: number, length: number): T;
  /** Apply a registry op to (this, ...rest); used by rules that need a primitive directly. */
  _apply<A>(op: OpDef<A>, rest: readonly T[], attrs: A): T;
}

/** A gradient rule: given dL/dout, return dL/dinput for each input (null = no gradient). */
/**
 * A gradient rule: given dL/dout, return dL/dinput for each input (null = no gradient).
 * `needs[i]` says whether input i wants a gradient, so rules skip work for constants.
 */
export type GradFn<A> = <T extends Diff<T>>(
  g: T, inputs: readonly T[], out: T, attrs: A, needs: readonly boolean[],
) => (T | null)[];

interface OpBase<A> {
  readonly name: string;
  /** Output shape; throws LoomShapeError naming the op and operands. */
  shape(inputs: readonly Meta[], attrs: A): number[];
  /** Output dtype; throws LoomDtypeError naming the dtypes. */
  dtype(inputs: readonly Meta[], attrs: A): DType;
  /** Gradient rule; absent for non-differentiable ops (comparisons, argmax, casts to int). */
  readonly grad?: GradFn<A>;
  /** Canonical attrs for structural hashing and display. */
  readonly describe?: (attrs: A) => string;
}

/** Pointwise op over broadcast operands; `ref` maps input values to the output value. */
export interface ElementwiseOp<A = {}> extends OpBase<A> {
  readonly kind: "elementwise";
  readonly arity: 1 | 2 | 3;
  readonly ref: (a: number, b: number, c: number) => number;
}

/** Reduction over `attrs.dim` (sorted, normalized) with `keepdim`: out = fold(step, init). */
export interface ReduceOp<A extends ReduceAttrs = ReduceAttrs> extends OpBase<A> {
  readonly kind: "reduce";
  readonly arity: 1;
  readonly init: number;
  readonly step: (acc: number, x: number) => number;
}
export interface ReduceAttrs {
  readonly dim: readonly number[];
  readonly keepdim: boolean;
}

/** A view: new shape/strides/offset over the same storage, never a copy. */
export interface ViewOp<A = {}> extends OpBase<A> {
  readonly kind: "view";
  readonly arity: 1;
  /** Returns the view, or null when no view exists (reshape of non-viewable strides: copy first). */
  readonly ref: (x: TensorData, attrs: A) => TensorData | null;
}

/** Any other op: `ref` fills the contiguous, zeroed `out` from the inputs. */
export interface KernelOp<A = {}> extends OpBase<A> {
  readonly kind: "kernel";
  readonly arity: number | "variadic";
  readonly ref: (inputs: readonly TensorData[], attrs: A, out: TensorData) => void;
}

export type OpDef<A = any> = ElementwiseOp<A> | ReduceOp<A & ReduceAttrs> | ViewOp<A> | KernelOp<A>;

/** Identity helper that gives an op literal its precise type. */
export function defineOp<A, O extends OpDef<A>>(op: O): O {
  return op;
}
