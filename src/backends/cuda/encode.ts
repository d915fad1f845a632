/**
 * The CPU side of the CUDA backend that needs no GPU: which applications run on the device
 * (`selectKernel`, a pure function of the op, layouts, dtypes and the library's opcode table)
 * and the command buffer encoding (`CommandWriter`: the CPU shim's format, native/shim.c, with
 * device addresses). Both are tested without a device (tests/cuda/encode.test.ts).
 *
 * What runs on the device (native/cuda/): every elementwise op with a float or bool result, the
 * fused elementwise programs and fused reductions the graph compiler makes (AdamW's update,
 * GELU, scaled masks... are such programs), sum/amax/amin, matmul, lora_linear, and
 * quantized_linear in all four formats (q8_0, q4_0, nf4, int8; bytes or int32 words; forward,
 * with bias, and the transposed form its gradient runs: native/cuda/quant.cu, every layout the
 * op takes, so only empty tensors, by the general rule, go to the CPU). Softmax,
 * layer/rms norm and attention are composites of those on the surface (and in plans, fused
 * programs and reductions), so they run on the device too. Everything else runs on the CPU with
 * a counter (`CudaStats.fallbacks`, by op and reason): integer-result elementwise ops that may
 * fault (integer division by zero, a non-finite value stored as an integer: the CPU raises the
 * reference's error; `mayFault`), the index ops, cumsum, argmax/argmin, sort, cat, fused ops
 * other than the two above (the compiler does not create them for "cuda"), and programs larger
 * than the device interpreter's registers.
 */
import type { OpDef } from "../../graph/op.ts";
import type { Program } from "../../graph/passes/program.ts";
import { isFloating, isIntegral, type DType } from "../../tensor/dtype.ts";
import { numel } from "../../tensor/shape.ts";
import { DTYPE_CODE, encodeAttrs, encodeProgram } from "../native/program.ts";

/** Most dims of a tensor in an instruction (LC_MAXD), inputs of an instruction (LC_MAXIN). */
export const MAX_DIMS = 16;
export const MAX_INPUTS = 64;
/** Registers a program may use: the device interpreter keeps them per thread (LC_MAXREGS). */
export const MAX_REGS = 32;

/** Layout and dtype of an operand, as the selection sees it. */
export interface Operand {
  readonly shape: readonly number[];
  readonly dtype: DType;
}

/** Where an application runs: the device (opcode and attribute words), or the CPU and why. */
export type Selection = { readonly device: true; readonly code: number; readonly words: readonly number[] } | { readonly device: false; readonly reason: string };

const cpu = (reason: string): Selection => ({ device: false, reason });

/** Ops whose integer result from integer or bool operands is always finite and never divides. */
const SAFE_INT_OPS = new Set(["contiguous", "cast", "neg", "abs", "sign", "relu", "floor", "ceil", "round", "add", "sub", "mul", "maximum", "minimum", "where"]);

/**
 * Whether an elementwise op with result dtype `out` can fault: an integer result, unless the op
 * is in SAFE_INT_OPS and no operand is floating (a float operand may be non-finite).
 */
export function mayFault(op: string, out: DType, operands: readonly DType[]): boolean {
  if (!isIntegral(out)) return false; // only integer results fault (a division by zero, a non-finite value)
  return !SAFE_INT_OPS.has(op) || operands.some(isFloating);
}

/** The programs a fused op's attrs carry. */
function programsOf(op: OpDef, attrs: unknown): Program[] {
  const a = attrs as { program?: Program; prologue?: Program; epilogue?: Program | null };
  if (op.name === "fused_elementwise") return [a.program!];
  if (op.name === "fused_reduce") return [a.prologue!, ...(a.epilogue ? [a.epilogue] : [])];
  return [];
}

/** Why a program cannot run on the device interpreter ("" when it can). */
export function programProblem(p: Program, opcodes: ReadonlyMap<string, number>): string {
  for (const c of p.code) {
    if (c.k === "op" && mayFault(c.op.name, c.dtype, c.args.map((a) => p.code[a]!.dtype))) return `program op ${c.op.name} has an integer result (${c.dtype}) that may fault`;
  }
  const words = encodeProgram(p, opcodes); // throws for an op without an opcode
  const nregs = words[1 + p.shape.length]!;
  if (nregs > MAX_REGS) return `program of ${nregs} registers (the device interpreter holds ${MAX_REGS})`;
  return "";
}

/**
 * Where `op` applied to `inputs` (output `shape`, `dtype`) runs, given the library's opcodes.
 * Pure: the same answer on a machine without a GPU.
 */
export function selectKernel(op: OpDef, inputs: readonly Operand[], attrs: unknown, shape: readonly number[], dtype: DType,
  opcodes: ReadonlyMap<string, number>): Selection {
  const code = opcodes.get(op.name);
  if (code === undefined) return cpu(`no CUDA kernel for ${op.name}`);
  if (numel(shape) === 0) return cpu("empty output");
  if (shape.length > MAX_DIMS || inputs.some((x) => x.shape.length > MAX_DIMS)) return cpu(`more than ${MAX_DIMS} dims`);
  if (inputs.length > MAX_INPUTS) return cpu(`more than ${MAX_INPUTS} inputs`);
  if (op.kind !== "elementwise" && inputs.some((x) => numel(x.shape) === 0)) return cpu("empty input");
  if (op.kind === "elementwise" && mayFault(op.name, dtype, inputs.map((x) => x.dtype))) return cpu(`integer result (${dtype}) that may fault: the CPU kernels raise it`);
  try {
    for (const p of programsOf(op, attrs)) {
      const why = programProblem(p, opcodes);
      if (why) return cpu(why);
    }
    return { device: true, code, words: encodeAttrs(op, attrs, inputs, opcodes) };
  } catch (e) {
    return cpu((e as Error).message);
  }
}

/** A tensor as an instruction names it: the device address of its storage's element 0, and its view. */
export interface DeviceView {
  readonly addr: number;
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  readonly offset: number;
}

/**
 * A growable command buffer:
 *   instruction = [opcode, nwords, nin, nattr, attr[nattr], out tensor, in tensor × nin]
 *   tensor      = [address, dtype, ndim, offset, shape[ndim], strides[ndim]]
 * `keep` holds whatever must stay alive until the buffer is submitted (the storages it names:
 * a buffer returned to the pool before then could be handed to an upload that runs first).
 */
export class CommandWriter {
  buf: Float64Array;
  n = 0;
  count = 0;
  readonly keep: object[] = [];

  constructor(capacity = 1024) {
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

  private tensor(t: DeviceView, at: number): number {
    const b = this.buf, nd = t.shape.length;
    b[at] = t.addr;
    b[at + 1] = DTYPE_CODE[t.dtype];
    b[at + 2] = nd;
    b[at + 3] = t.offset;
    for (let i = 0; i < nd; i++) {
      b[at + 4 + i] = t.shape[i]!;
      b[at + 4 + nd + i] = t.strides[i]!;
    }
    return at + 4 + 2 * nd;
  }

  /** Append one instruction. */
  instr(opcode: number, attrs: readonly number[], out: DeviceView, ins: readonly DeviceView[]): void {
    let words = 8 + attrs.length + 2 * out.shape.length;
    for (const x of ins) words += 4 + 2 * x.shape.length;
    this.reserve(words);
    const b = this.buf, start = this.n;
    b[start] = opcode;
    b[start + 1] = words;
    b[start + 2] = ins.length;
    b[start + 3] = attrs.length;
    for (let i = 0; i < attrs.length; i++) b[start + 4 + i] = attrs[i]!;
    let at = this.tensor(out, start + 4 + attrs.length);
    for (const x of ins) at = this.tensor(x, at);
    this.n = at;
    this.count++;
  }
}
