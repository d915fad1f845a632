/**
 * Serializing op applications into the shim's command-buffer format (see native/shim.c):
 *   instruction = [opcode, nwords, nin, nattr, attr[nattr], out tensor, in tensor × nin]
 *   tensor      = [address, dtype, ndim, offset, shape[ndim], strides[ndim]]
 * Addresses are exact as doubles (below 2^53). The writer can keep every buffer it names, so a
 * queued command buffer holds them alive until it has run.
 *
 * Fused ops carry expression programs in their attrs (native/kernels/common.h):
 *   program = [nd, shape[nd], nregs, ncode, out, code...]
 *   LOAD [0, dst, input, offset, strides[nd]] · OP [1, dst, opcode, dtype, a, b, c] · ACC [2, dst]
 *   · CONST [3, ...as LOAD] (all strides 0: a dedicated register filled once per task)
 * with registers allocated here (a register is reused once its value is dead).
 */
import { ptr, type Pointer } from "bun:ffi";
import type { OpDef } from "../../graph/op.ts";
import { INDEX_CALLERS, type IndexAttrs } from "../../graph/ops/linalg_index.ts";
import type { OpName } from "../../graph/registry.ts";
import type { QuantFormat, QuantizedLinearAttrs } from "../../graph/ops/quantized.ts";
import type {
  AttentionAttrs, FusedMatmulAttrs, FusedReduceAttrs, FusedSoftmaxAttrs, LoraAttrs as FusedLoraAttrs, NormAttrs,
} from "../../graph/passes/fused_ops.ts";
import type { Program } from "../../graph/passes/program.ts";
import type { DType, TypedArray } from "../../tensor/dtype.ts";
import { broadcastStrides, normalizeDim } from "../../tensor/shape.ts";
import type { TensorData } from "../../tensor/storage.ts";
import type { FusedStep } from "../backend.ts";

/** Dtype codes of native/kernels/common.h. */
export const DTYPE_CODE: Record<DType, number> = {
  float32: 0, float64: 1, float16: 2, bfloat16: 3, int32: 4, int64: 5, int8: 6, uint8: 7, bool: 8,
};
/** Most dims a tensor may have in a native instruction (LOOM_MAXD). */
export const MAX_DIMS = 16;
/** Most inputs of one instruction (LOOM_MAXIN); a registry elementwise op has at most 3. */
export const MAX_INPUTS = 64;
/** Most codes of one program (LOOM_MAXCODE) and loads of a reduction/pattern prologue. */
export const MAX_CODE = 2048;
export const MAX_PATTERN_LOADS = 256;

/** Raw storage of a tensor whose `data` may be a getter that waits for a pending command buffer. */
export const RAW = Symbol("loom.native.raw");

/** The typed array behind `t` without waiting for the command buffer that writes it. */
export function rawData(t: TensorData): TypedArray {
  return ((t as { [RAW]?: TypedArray })[RAW] ?? t.data) as TypedArray;
}

/** Address of a typed array's first element (0 for an empty one: kernels never read it). */
export function addr(a: TypedArray): number {
  return a.length === 0 ? 0 : ptr(a);
}

type OpCodes = ReadonlyMap<string, number>;
type AttrEncoder = (attrs: any, inputs: readonly { shape: readonly number[] }[], codes: OpCodes) => number[];
const none: AttrEncoder = () => [];
const dimAttr: AttrEncoder = (a) => [a.dim];
/** [dim, caller]: caller numbers INDEX_CALLERS from 1 (0 = none) so the kernel words errors as the reference does. */
const indexAttr: AttrEncoder = (a: IndexAttrs) => [a.dim, a.caller ? INDEX_CALLERS.indexOf(a.caller) + 1 : 0];
const reduceAttr: AttrEncoder = (a) => [a.dim.length, ...a.dim];
const argAttr: AttrEncoder = (a, [x]) => [a.dim === null || x!.shape.length === 0 ? -1 : normalizeDim("arg", a.dim, x!.shape.length)];
const REDUCE_KIND: Record<string, number> = { sum: 0, amax: 1, amin: 2 };
/** native/kernels/quant.c's format codes. */
const QUANT_FORMAT_CODE: Record<QuantFormat, number> = { q8_0: 0, q4_0: 1, nf4: 2, int8: 3 };

/**
 * Each non-view op's attributes as numbers, keyed by registry (and fused) op name (elementwise
 * ops have none: the output dtype travels in the output tensor).
 */
export const ATTR_ENCODERS: { readonly [K in OpName]?: AttrEncoder } & Record<string, AttrEncoder | undefined> = {
  sum: reduceAttr, amax: reduceAttr, amin: reduceAttr, argmax: argAttr, argmin: argAttr,
  cumsum: (a, [x]) => [x!.shape.length === 0 ? 0 : normalizeDim("cumsum", a.dim, x!.shape.length), a.reverse ? 1 : 0],
  slice_backward: (a) => [a.dim, a.start, a.end, a.step],
  cat: dimAttr, gather: indexAttr, scatter_add: indexAttr, index_select: indexAttr, index_add: indexAttr,
  tri: (a) => [a.diagonal, a.upper ? 1 : 0],
  lora_linear: (a) => [a.scaling, a.has_bias ? 1 : 0],
  quantized_linear: (a: QuantizedLinearAttrs) => [QUANT_FORMAT_CODE[a.format], a.transposed ? 1 : 0, a.has_bias ? 1 : 0],
  rotary_embedding: (a) => [a.transposed ? 1 : 0],
  matmul: none,
  fused_elementwise: (a, _i, c) => encodeProgram(a.program, c),
  fused_reduce: (a: FusedReduceAttrs, _i, c) => {
    const nd = a.prologue.shape.length;
    const dims = [...new Set(a.dim.map((d) => normalizeDim("fused_reduce", d, nd)))].sort((p, q) => p - q);
    const kind = REDUCE_KIND[a.reduce.name];
    if (kind === undefined) throw new Error(`[native] fused_reduce: no kernel for ${a.reduce.name}`);
    return [kind, DTYPE_CODE[a.dtype], dims.length, ...dims, a.epilogue ? 1 : 0, ...encodeProgram(a.prologue, c), ...(a.epilogue ? encodeProgram(a.epilogue, c) : [])];
  },
  fused_matmul: (a: FusedMatmulAttrs, _i, c) => [DTYPE_CODE[a.dtype], a.shape.length, ...a.shape, ...encodeProgram(a.epilogue, c)],
  fused_softmax: (a: FusedSoftmaxAttrs, _i, c) => [normalizeDim("softmax", a.dim, a.prologue.shape.length), ...encodeProgram(a.prologue, c)],
  fused_layer_norm: (a: NormAttrs) => [a.dims, a.has_weight ? 1 : 0, a.has_bias ? 1 : 0],
  fused_rms_norm: (a: NormAttrs) => [a.dims, a.has_weight ? 1 : 0, 0],
  fused_lora_linear: (a: FusedLoraAttrs) => [a.has_bias ? 1 : 0],
  fused_attention: (a: AttentionAttrs, _i, c) => encodeProgram(a.prologue, c),
};

/** The attribute words of a non-view op for these input layouts (elementwise ops: none). */
export function encodeAttrs(op: OpDef, attrs: unknown, inputs: readonly { shape: readonly number[] }[], codes: OpCodes): number[] {
  if (op.kind === "elementwise") return [];
  return (ATTR_ENCODERS[op.name] ?? none)(attrs, inputs, codes);
}

/** Program words with registers allocated by liveness; throws when an op has no native opcode. */
export function encodeProgram(p: Program, codes: OpCodes): number[] {
  const n = p.code.length;
  if (n > MAX_CODE) throw new Error(`[native] program of ${n} codes (most ${MAX_CODE})`);
  const lastUse = new Array<number>(n).fill(-1);
  p.code.forEach((c, i) => { if (c.k === "op") for (const a of c.args) lastUse[a] = i; });
  lastUse[p.out] = n;
  const reg = new Array<number>(n);
  const free: number[] = [];
  // broadcast scalars (all strides 0) get dedicated registers, filled once per task (CONST)
  const isConst = p.code.map((c) => c.k === "load" && c.strides.every((s) => s === 0));
  let nregs = 0;
  p.code.forEach((_c, i) => { if (isConst[i]) reg[i] = nregs++; });
  const body: number[] = [];
  p.code.forEach((c, i) => {
    if (c.k === "op") {
      for (const a of new Set(c.args)) if (lastUse[a] === i && !isConst[a]) free.push(reg[a]!);
    }
    const r = isConst[i] ? reg[i]! : free.length ? free.pop()! : nregs++;
    reg[i] = r;
    if (c.k === "load") body.push(isConst[i] ? 3 : 0, r, c.input, c.offset, ...c.strides);
    else if (c.k === "acc") body.push(2, r);
    else {
      const code = codes.get(c.op.name);
      if (code === undefined) throw new Error(`[native] no kernel for elementwise op ${c.op.name}`);
      const [a = 0, b = a, d = a] = c.args.map((x) => reg[x]!);
      body.push(1, r, code, DTYPE_CODE[c.dtype], a, b, d);
    }
    // a value nobody reads (dead code) frees its register at once
    if (lastUse[i] === -1 && !isConst[i]) free.push(r);
  });
  return [p.shape.length, ...p.shape, Math.max(nregs, 1), n, p.out, ...body];
}

/**
 * A fused elementwise chain (BatchStep) as a program over out's shape: a load per input (the
 * step's inputs are views: their strides broadcast to out), then the chain's ops.
 */
export function chainProgram(chain: readonly FusedStep[], inputs: readonly TensorData[], out: TensorData): Program {
  const code: Program["code"][number][] = inputs.map((x, i) => ({
    k: "load", input: i, strides: broadcastStrides(x.shape, x.strides, out.shape), offset: 0, dtype: x.dtype,
  }));
  for (const f of chain) code.push({ k: "op", op: f.op as never, args: f.args, dtype: f.dtype });
  return { shape: out.shape, code, out: code.length - 1 };
}

/** A growable command buffer. */
export class ProgramWriter {
  buf: Float64Array;
  /** Address of buf (stable while buf is not regrown: the GC does not move typed arrays). */
  bufAddr: Pointer;
  n = 0;
  /** Buffers named by the program, held alive while it may run (retain mode). */
  readonly keep: TypedArray[] = [];
  count = 0;

  constructor(capacity = 256, private readonly retain = false) {
    this.buf = new Float64Array(capacity);
    this.bufAddr = ptr(this.buf);
  }

  reset(): void {
    this.n = 0;
    this.count = 0;
    if (this.keep.length) this.keep.length = 0;
  }

  private reserve(words: number): void {
    if (this.n + words <= this.buf.length) return;
    const b = new Float64Array(Math.max(this.buf.length * 2, this.n + words));
    b.set(this.buf.subarray(0, this.n));
    this.buf = b;
    this.bufAddr = ptr(b);
  }

  private tensor(t: TensorData, at: number): number {
    const nd = t.shape.length;
    const b = this.buf;
    const data = rawData(t);
    b[at] = data.length === 0 ? 0 : ptr(data);
    b[at + 1] = DTYPE_CODE[t.dtype];
    b[at + 2] = nd;
    b[at + 3] = t.offset;
    const sh = t.shape, st = t.strides;
    for (let i = 0; i < nd; i++) {
      b[at + 4 + i] = sh[i]!;
      b[at + 4 + nd + i] = st[i]!;
    }
    if (this.retain) this.keep.push(data);
    return at + 4 + 2 * nd;
  }

  /** Append one instruction. */
  instr(opcode: number, attrs: readonly number[], out: TensorData, ins: readonly TensorData[]): void {
    const na = attrs.length;
    let words = 8 + na + 2 * out.shape.length;
    for (let k = 0; k < ins.length; k++) words += 4 + 2 * ins[k]!.shape.length;
    this.reserve(words);
    const start = this.n;
    const b = this.buf;
    b[start] = opcode;
    b[start + 1] = words;
    b[start + 2] = ins.length;
    b[start + 3] = na;
    for (let i = 0; i < na; i++) b[start + 4 + i] = attrs[i]!;
    let at = this.tensor(out, start + 4 + na);
    for (let k = 0; k < ins.length; k++) at = this.tensor(ins[k]!, at);
    this.n = at;
    this.count++;
  }
}
