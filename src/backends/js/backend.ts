/**
 * The js backend: pure TypeScript, always available, the reference every other backend is
 * checked against. It runs any registry op from its definition alone: elementwise ops loop
 * their scalar `ref`, reductions fold `step`, views apply stride arithmetic and kernel ops call
 * their `ref`. float16/bfloat16 are computed in float32 and rounded on store.
 */
import { FUSED_OPS, OPS, type OpName } from "../../graph/registry.ts";
import type { ElementwiseOp, OpDef, ReduceOp } from "../../graph/op.ts";
import { softmaxDenseRows, type AttentionAttrs, type FusedMatmulAttrs, type FusedReduceAttrs, type FusedSoftmaxAttrs } from "../../graph/passes/fused_ops.ts";
import { intResultCheck } from "../../graph/ops/elementwise.ts";
import { gemm, pack } from "../../graph/ops/linalg_index.ts";
import type { Program } from "../../graph/passes/program.ts";
import { encoder, isHalf, type DType } from "../../tensor/dtype.ts";
import { broadcastStrides, numel } from "../../tensor/shape.ts";
import {
  allocData, forEachStrided, isDense, toContiguous, viewOf, type TensorData,
} from "../../tensor/storage.ts";
import type { Backend, InputLayout, PreparedKernel } from "../backend.ts";
import { attentionKernel, elementwiseKernel, matmulKernel, reduceKernel, softmaxKernel, type GeneratedKernel } from "./codegen.ts";

/** Counts ops executed, in total and per op name, so tests can see what ran. */
export interface JsStats { ops: number; byOp: Map<string, number> }

function runElementwise(op: ElementwiseOp<any>, ins: readonly TensorData[], out: TensorData): void {
  const chk = intResultCheck(op.name, out.dtype);
  const ref = op.ref;
  const f = chk ? (a: number, b: number, c: number) => chk(ref(a, b, c), a, b) : ref;
  const dst = out.data;
  const n = dst.length;
  const enc = out.dtype === "int64" || out.dtype === "bool" ? encoder(out.dtype) : null;
  const dense = ins.every((x) => isDense(x) && numel(x.shape) === n);
  if (dense && !enc) {
    // fast path: no broadcasting, no strides
    if (op.arity === 1) {
      const a = ins[0]!.data, ao = ins[0]!.offset;
      for (let i = 0; i < n; i++) dst[i] = f(a[ao + i]!, 0, 0);
    } else if (op.arity === 2) {
      const a = ins[0]!.data, ao = ins[0]!.offset, b = ins[1]!.data, bo = ins[1]!.offset;
      for (let i = 0; i < n; i++) dst[i] = f(a[ao + i]!, b[bo + i]!, 0);
    } else {
      const a = ins[0]!.data, b = ins[1]!.data, c = ins[2]!.data;
      const ao = ins[0]!.offset, bo = ins[1]!.offset, co = ins[2]!.offset;
      for (let i = 0; i < n; i++) dst[i] = f(a[ao + i]!, b[bo + i]!, c[co + i]!);
    }
    return;
  }
  const views = ins.map((x) => ({ strides: broadcastStrides(x.shape, x.strides, out.shape), offset: x.offset }));
  const [a, b, c] = ins.map((x) => x.data);
  const put = enc ? (i: number, v: number) => { dst[i] = enc(v); } : (i: number, v: number) => { dst[i] = v; };
  if (op.arity === 1) forEachStrided(out.shape, views, (i, idx) => put(i, f(a![idx[0]!]!, 0, 0)));
  else if (op.arity === 2) forEachStrided(out.shape, views, (i, idx) => put(i, f(a![idx[0]!]!, b![idx[1]!]!, 0)));
  else forEachStrided(out.shape, views, (i, idx) => put(i, f(a![idx[0]!]!, b![idx[1]!]!, c![idx[2]!]!)));
}

function runReduce(op: ReduceOp, x: TensorData, dims: readonly number[], out: TensorData): void {
  // Move reduced dims last: each output element is then one contiguous run of the copy.
  const kept = x.shape.map((_, i) => i).filter((i) => !dims.includes(i));
  const order = [...kept, ...dims];
  const perm = viewOf(x, order.map((d) => x.shape[d]!), order.map((d) => x.strides[d]!), x.offset);
  const src = toContiguous(perm).data;
  const r = dims.reduce((p, d) => p * x.shape[d]!, 1);
  const dst = out.data;
  const step = op.step;
  for (let o = 0; o < dst.length; o++) {
    let acc = op.init;
    const base = o * r;
    for (let k = 0; k < r; k++) acc = step(acc, src[base + k]!);
    dst[o] = acc;
  }
}

export class JsBackend implements Backend {
  readonly name = "js";
  readonly stats: JsStats = { ops: 0, byOp: new Map() };

  run(op: OpDef, inputs: readonly TensorData[], attrs: any, shape: readonly number[], dtype: DType): TensorData {
    this.stats.ops++;
    this.stats.byOp.set(op.name, (this.stats.byOp.get(op.name) ?? 0) + 1);
    return this.runUncounted(op, inputs, attrs, shape, dtype);
  }

  private runUncounted(op: OpDef, inputs: readonly TensorData[], attrs: any, shape: readonly number[], dtype: DType): TensorData {
    if (op.kind === "view") {
      const v = op.ref(inputs[0]!, attrs) ?? op.ref(toContiguous(inputs[0]!), attrs);
      if (!v) throw new Error(`[${op.name}] view failed on a contiguous input`);
      return v;
    }
    const ins = inputs.map((x) => (isHalf(x.dtype) ? toContiguous(x, "float32") : x));
    const half = isHalf(dtype);
    const out = allocData(half ? "float32" : dtype, shape);
    switch (op.kind) {
      case "elementwise": runElementwise(op, ins, out); break;
      case "reduce": runReduce(op, ins[0]!, attrs.dim, out); break;
      case "kernel": op.ref(ins, attrs, out); break;
    }
    return half ? toContiguous(out, dtype) : out;
  }

  /** Every fused op has a kernel here: generated code for the generic ones, `ref` for patterns. */
  readonly fusedOps: readonly string[] = Object.keys(FUSED_OPS);

  /**
   * A kernel for a compiled plan, writing into a preallocated dense buffer. Elementwise ops and
   * reductions (fused or not) are generated code; other ops run their reference `ref`.
   */
  prepare(op: OpDef, inputs: readonly InputLayout[], attrs: any, shape: readonly number[], dtype: DType): PreparedKernel {
    const k = this.kernelFor(op, inputs, attrs, shape, dtype);
    const stats = this.stats;
    const name = op.name;
    return (ins, out) => {
      stats.ops++;
      stats.byOp.set(name, (stats.byOp.get(name) ?? 0) + 1);
      k(ins, out);
    };
  }

  private kernelFor(op: OpDef, inputs: readonly InputLayout[], attrs: any, shape: readonly number[], dtype: DType): GeneratedKernel | PreparedKernel {
    switch (op.name) {
      case "fused_elementwise": return elementwiseKernel((attrs as { program: Program }).program);
      case "fused_reduce": return reduceKernel(attrs as FusedReduceAttrs);
      case "fused_softmax": {
        const a = attrs as FusedSoftmaxAttrs;
        return softmaxKernel(a.prologue, a.dim, softmaxDenseRows, (ins, out) => FUSED_OPS.fused_softmax.ref(ins, a, out));
      }
      case "fused_attention":
        return attentionKernel((attrs as AttentionAttrs).prologue, { pack, gemm, softmax: softmaxDenseRows });
      case "fused_matmul": {
        const mm = OPS.matmul;
        const a = attrs as FusedMatmulAttrs;
        return matmulKernel(a.epilogue, a.dtype, a.shape, (ins, out) => mm.ref(ins, {}, out));
      }
    }
    const loads = inputs.map((x, i): Program["code"][number] => ({ k: "load", input: i, strides: op.kind === "reduce" ? x.strides : broadcastStrides(x.shape, x.strides, shape), offset: 0, dtype: x.dtype }));
    if (op.kind === "elementwise") {
      return elementwiseKernel({ shape, code: [...loads, { k: "op", op: op as ElementwiseOp<any>, args: loads.map((_, i) => i), dtype }], out: loads.length });
    }
    if (op.kind === "reduce") {
      const prologue: Program = { shape: inputs[0]!.shape, code: loads, out: 0 };
      return reduceKernel({ prologue, reduce: op as ReduceOp, dim: attrs.dim, dtype, epilogue: null });
    }
    if (op.kind === "view") throw new Error(`[${op.name}] views are resolved by the plan, not run`);
    const half = isHalf(dtype) || inputs.some((x) => isHalf(x.dtype));
    if (half || op.name.startsWith("fused_") === false && !OVERWRITES.has(op.name)) {
      // ops that expect a zeroed output (or compute halves through float32): run and copy
      const run = (ins: readonly TensorData[], out: TensorData) => {
        if (half) {
          const r = this.runUncounted(op, ins, attrs, shape, dtype);
          out.data.set(r.data.subarray(r.offset, r.offset + out.data.length));
        } else {
          out.data.fill(0);
          op.ref(ins, attrs, out);
        }
      };
      return run;
    }
    return (ins: readonly TensorData[], out: TensorData) => op.ref(ins, attrs, out);
  }

  /** A registry op by name (for tests and tools). */
  static op(name: OpName): OpDef {
    return OPS[name];
  }
}

/** Kernel ops whose `ref` writes every output element (no zeroing needed). */
const OVERWRITES = new Set(["matmul", "gather", "index_select", "cat", "tri", "cumsum", "argmax", "argmin"]);

export const jsBackend = new JsBackend();
