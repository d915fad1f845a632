/**
 * Serializing op applications into the shim's command-buffer format (see native/shim.c):
 *   instruction = [opcode, nwords, nin, nattr, attr[nattr], out tensor, in tensor × nin]
 *   tensor      = [address, dtype, ndim, offset, shape[ndim], strides[ndim]]
 * Addresses are exact as doubles (below 2^53). The writer keeps every buffer it names, so a
 * queued command buffer holds them alive until it has run.
 */
import { ptr } from "bun:ffi";
import type { OpDef } from "../../graph/op.ts";
import type { OpName } from "../../graph/registry.ts";
import type { DType, TypedArray } from "../../tensor/dtype.ts";
import { normalizeDim } from "../../tensor/shape.ts";
import type { TensorData } from "../../tensor/storage.ts";

/** Dtype codes of native/kernels/common.h. */
export const DTYPE_CODE: Record<DType, number> = {
  float32: 0, float64: 1, float16: 2, bfloat16: 3, int32: 4, int64: 5, int8: 6, uint8: 7, bool: 8,
};
/** Most dims a tensor may have in a native instruction (LOOM_MAXD). */
export const MAX_DIMS = 16;
/** Most inputs of one instruction (LOOM_MAXIN; elementwise and fused: LOOM_EW_MAXIN). */
export const MAX_INPUTS = 64;
export const MAX_EW_INPUTS = 16;

type AttrEncoder = (attrs: any, inputs: readonly TensorData[]) => number[];
const none: AttrEncoder = () => [];
const dimAttr: AttrEncoder = (a) => [a.dim];
const reduceAttr: AttrEncoder = (a) => [a.dim.length, ...a.dim];
const argAttr: AttrEncoder = (a, [x]) => [a.dim === null || x!.shape.length === 0 ? -1 : normalizeDim("arg", a.dim, x!.shape.length)];

/**
 * Each non-view op's attributes as numbers, keyed by registry name (elementwise ops have none:
 * the output dtype travels in the output tensor).
 */
export const ATTR_ENCODERS: { readonly [K in OpName]?: AttrEncoder } = {
  sum: reduceAttr, amax: reduceAttr, amin: reduceAttr, argmax: argAttr, argmin: argAttr,
  cumsum: (a, [x]) => [x!.shape.length === 0 ? 0 : normalizeDim("cumsum", a.dim, x!.shape.length), a.reverse ? 1 : 0],
  slice_backward: (a) => [a.dim, a.start, a.end, a.step],
  cat: dimAttr, gather: dimAttr, scatter_add: dimAttr, index_select: dimAttr, index_add: dimAttr,
  tri: (a) => [a.diagonal, a.upper ? 1 : 0],
  lora_linear: (a) => [a.scaling, a.has_bias ? 1 : 0],
  matmul: none,
};

/** The attribute encoder of a non-view op (elementwise ops: none). */
export function attrEncoder(op: OpDef): AttrEncoder {
  return op.kind === "elementwise" ? none : ATTR_ENCODERS[op.name as OpName] ?? none;
}

/** Address of a typed array's first element (0 for an empty one: kernels never read it). */
export function addr(a: TypedArray): number {
  return a.length === 0 ? 0 : ptr(a);
}

/** A growable command buffer. */
export class ProgramWriter {
  buf: Float64Array;
  n = 0;
  /** Buffers named by the program, held alive while it may run. */
  readonly keep: TypedArray[] = [];
  count = 0;

  constructor(capacity = 256, private readonly retain = false) {
    this.buf = new Float64Array(capacity);
  }

  reset(): void {
    this.n = 0;
    this.count = 0;
    this.keep.length = 0;
  }

  private reserve(words: number): void {
    if (this.n + words <= this.buf.length) return;
    const b = new Float64Array(Math.max(this.buf.length * 2, this.n + words));
    b.set(this.buf.subarray(0, this.n));
    this.buf = b;
  }

  private tensor(t: TensorData): void {
    const nd = t.shape.length;
    const b = this.buf;
    let n = this.n;
    b[n++] = addr(t.data);
    b[n++] = DTYPE_CODE[t.dtype];
    b[n++] = nd;
    b[n++] = t.offset;
    for (let i = 0; i < nd; i++) b[n++] = t.shape[i]!;
    for (let i = 0; i < nd; i++) b[n++] = t.strides[i]!;
    this.n = n;
    if (this.retain) this.keep.push(t.data);
  }

  /** Append one instruction. */
  instr(opcode: number, attrs: readonly number[], out: TensorData, ins: readonly TensorData[]): void {
    let words = 4 + attrs.length + 4 + 2 * out.shape.length;
    for (const x of ins) words += 4 + 2 * x.shape.length;
    this.reserve(words);
    const start = this.n;
    const b = this.buf;
    b[start] = opcode;
    b[start + 1] = words;
    b[start + 2] = ins.length;
    b[start + 3] = attrs.length;
    for (let i = 0; i < attrs.length; i++) b[start + 4 + i] = attrs[i]!;
    this.n = start + 4 + attrs.length;
    this.tensor(out);
    for (const x of ins) this.tensor(x);
    this.count++;
  }
}
