/**
 * The js backend: pure TypeScript, always available, the reference every other backend is
 * checked against. It runs any registry op from its definition alone: elementwise ops loop
 * their scalar `ref`, reductions fold `step`, views apply stride arithmetic and kernel ops call
 * their `ref`. float16/bfloat16 are computed in float32 and rounded on store.
 */
import { OPS, type OpName } from "../../graph/registry.ts";
import type { ElementwiseOp, OpDef, ReduceOp } from "../../graph/op.ts";
import { encoder, isHalf, type DType } from "../../tensor/dtype.ts";
import { broadcastStrides, numel } from "../../tensor/shape.ts";
import {
  allocData, forEachStrided, isDense, toContiguous, viewOf, type TensorData,
} from "../../tensor/storage.ts";
import type { Backend } from "../backend.ts";

/** Counts ops executed, in total and per op name, so tests can see what ran. */
export interface JsStats { ops: number; byOp: Map<string, number> }

function runElementwise(op: ElementwiseOp<any>, ins: readonly TensorData[], out: TensorData): void {
  const f = op.ref;
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

  /** A registry op by name (for tests and tools). */
  static op(name: OpName): OpDef {
    return OPS[name];
  }
}

export const jsBackend = new JsBackend();
