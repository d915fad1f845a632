/**
 * The expression programs fused kernels carry in their attrs: straight-line code over one index
 * space, where every value is a load (a strided read of an input buffer), an elementwise registry
 * op, or the accumulated result of the reduction/matmul the program is the epilogue of.
 *
 * Exactness: every step is rounded to its node's dtype exactly as storing it in that dtype's
 * buffer and reading it back would (`roundTo`), so a fused program computes the same bits as the
 * unfused ops on the js backend. `interpret` below is the reference; backends may generate code.
 */
import {
  bf16ToFloat, decoder, encoder, floatToBf16, floatToHalf, halfToFloat, isHalf, type DType,
} from "../../tensor/dtype.ts";
import { fmtShape } from "../../tensor/errors.ts";
import { numel } from "../../tensor/shape.ts";
import type { TensorData } from "../../tensor/storage.ts";
import type { ElementwiseOp } from "../op.ts";
import { intResultCheck } from "../ops/elementwise.ts";

/** Read input `input` at base.offset + offset + Σ idx[d]·strides[d] (strides over the program's index space). */
export interface LoadInstr {
  readonly k: "load";
  readonly input: number;
  readonly strides: readonly number[];
  readonly offset: number;
  readonly dtype: DType;
}
export interface OpInstr {
  readonly k: "op";
  readonly op: ElementwiseOp<any>;
  readonly args: readonly number[];
  readonly dtype: DType;
}
/** The reduction's (or matmul's) result at this index, already rounded to `dtype`. */
export interface AccInstr {
  readonly k: "acc";
  readonly dtype: DType;
}
export type Instr = LoadInstr | OpInstr | AccInstr;

export interface Program {
  /** The index space the program is evaluated over. */
  readonly shape: readonly number[];
  readonly code: readonly Instr[];
  /** Index of the instruction whose value is the result. */
  readonly out: number;
}

export function programDtype(p: Program): DType {
  return p.code[p.out]!.dtype;
}

const f32 = Math.fround;
const id = (v: number) => v;

/**
 * The value an elementwise op's result has after being stored in a `d` buffer and read back
 * (the js backend's encoders for int64/bool, typed-array conversion otherwise).
 */
export function roundTo(d: DType): (v: number) => number {
  switch (d) {
    case "float32": return f32;
    case "float64": return id;
    case "int32": return (v) => v | 0;
    case "int8": return (v) => (v << 24) >> 24;
    case "uint8": return (v) => v & 255;
    case "float16": return (v) => halfToFloat(floatToHalf(v));
    case "bfloat16": return (v) => bf16ToFloat(floatToBf16(v));
    case "int64":
    case "bool": return encoder(d)!;
  }
}

/** The value a reduction's accumulator has after being stored in a `d` buffer (no encoder: plain typed-array conversion). */
export function storeRound(d: DType): (v: number) => number {
  switch (d) {
    case "int64": return id;
    case "bool": return (v) => v & 255;
    default: return roundTo(d);
  }
}

/** Storage value for an already rounded value (half types hold bits). */
export function encodeStored(d: DType): ((v: number) => number) | null {
  return d === "float16" ? floatToHalf : d === "bfloat16" ? floatToBf16 : null;
}

/** One-line text of a program: `t2 = mul(t0, t1)` steps joined by `; `. */
export function describeProgram(p: Program): string {
  return p.code.map((c, i) => {
    if (c.k === "load") return `t${i}=in${c.input}`;
    if (c.k === "acc") return `t${i}=acc`;
    return `t${i}=${c.op.name}(${c.args.map((a) => `t${a}`).join(",")})`;
  }).join("; ") + ` -> t${p.out} ${fmtShape(p.shape)}`;
}

/** Op names a program applies, in order (for explain output). */
export function programOps(p: Program): string[] {
  return p.code.flatMap((c) => (c.k === "op" ? [c.op.name] : []));
}

/**
 * A function evaluating `p` at a multi-index (`acc` supplies the accumulated value). This is the
 * reference semantics; it is slow (it interprets) and meant for tests and pattern kernels' specs.
 */
export function evaluator(p: Program, ins: readonly TensorData[]): (idx: ArrayLike<number>, acc: number) => number {
  const n = p.code.length;
  const vals = new Float64Array(n);
  const steps = p.code.map((c) => {
    if (c.k === "load") {
      const t = ins[c.input]!;
      const dec = decoder(t.dtype);
      return { c, data: t.data, base: t.offset + c.offset, dec, round: null, ref: null };
    }
    if (c.k === "acc") return { c, data: null, base: 0, dec: null, round: null, ref: null };
    // integer results are checked as every backend checks them (elementwise.ts intResultCheck)
    const chk = intResultCheck(c.op.name, c.dtype), ref = c.op.ref;
    return { c, data: null, base: 0, dec: null, round: roundTo(c.dtype), ref: chk ? (a: number, b: number, x: number) => chk(ref(a, b, x), a, b) : ref };
  });
  return (idx, acc) => {
    for (let i = 0; i < n; i++) {
      const s = steps[i]!;
      const c = s.c;
      if (c.k === "load") {
        let k = s.base;
        for (let d = 0; d < c.strides.length; d++) k += idx[d]! * c.strides[d]!;
        vals[i] = s.dec ? s.dec(s.data!, k) : s.data![k]!;
      } else if (c.k === "acc") vals[i] = acc;
      else {
        const a = c.args;
        vals[i] = s.round!(s.ref!(vals[a[0]!]!, a.length > 1 ? vals[a[1]!]! : 0, a.length > 2 ? vals[a[2]!]! : 0));
      }
    }
    return vals[p.out]!;
  };
}

/** Visit every multi-index of `shape` in row-major order. */
export function forEachIndex(shape: readonly number[], fn: (flat: number, idx: Int32Array) => void): void {
  const total = numel(shape);
  const idx = new Int32Array(shape.length);
  for (let flat = 0; flat < total; flat++) {
    fn(flat, idx);
    for (let d = shape.length - 1; d >= 0; d--) {
      if (++idx[d]! < shape[d]!) break;
      idx[d] = 0;
    }
  }
}

/**
 * Reference execution of a program into the dense `out` (`acc(flat)` gives the accumulated value
 * at each flat index for epilogues).
 */
export function interpret(p: Program, ins: readonly TensorData[], out: TensorData, acc?: (flat: number) => number): void {
  const ev = evaluator(p, ins);
  const enc = encodeStored(out.dtype);
  const dst = out.data;
  forEachIndex(p.shape, (flat, idx) => {
    const v = ev(idx, acc ? acc(flat) : 0);
    dst[flat] = enc ? enc(v) : v;
  });
}

/** True when the dtype is computed through float32 (half types) by the js backend. */
export function computesAsFloat32(d: DType): boolean {
  return isHalf(d);
}
