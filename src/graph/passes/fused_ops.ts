/**
 * Fused ops: what the fusion passes replace groups of primitives with. Each is a registry entry
 * (see `FUSED_OPS` in registry.ts) whose `ref` follows its decomposition op by op, rounding every
 * intermediate to its dtype exactly as the unfused ops would, so on the js backend a fused op
 * gives the same bits as the graph it replaced (tests compare them).
 *
 * - fused_elementwise: any tree of elementwise ops (with broadcasts and views) as one Program.
 * - fused_reduce: sum/amax/amin of an elementwise prologue, with an elementwise epilogue.
 * - fused_matmul: matmul with an elementwise epilogue (linear+bias+GELU, linear+residual).
 * - fused_softmax, fused_layer_norm, fused_rms_norm, fused_lora_linear, fused_attention: the
 *   named patterns, matched in patterns.ts (their decompositions are written there).
 *
 * They have no gradient rules: they exist only inside compiled plans, after autograd.
 */
import { isFloating, type DType } from "../../tensor/dtype.ts";
import { broadcastShapes, broadcastStrides, numel } from "../../tensor/shape.ts";
import { allocData, forEachStrided, toFloat64, type TensorData } from "../../tensor/storage.ts";
import { defineOp, type KernelOp, type ReduceOp } from "../op.ts";
import { add, div, exp, mul, rsqrt, sub } from "../ops/elementwise.ts";
import { gemm, matmul, pack } from "../ops/linalg_index.ts";
import { loraDecomposed } from "../ops/lora.ts";
import { amax, reducedShape, sum } from "../ops/reduce.ts";
import {
  describeProgram, encodeStored, evaluator, forEachIndex, interpret, programDtype, programOps,
  roundTo, storeRound, type Program,
} from "./program.ts";

// ---- generic fusion ---------------------------------------------------------------------------
export interface FusedElementwiseAttrs { readonly program: Program }

/** A tree of elementwise ops over strided, broadcast loads, evaluated once per output element. */
export const fused_elementwise = defineOp<FusedElementwiseAttrs, KernelOp<FusedElementwiseAttrs>>({
  kind: "kernel", arity: "variadic", name: "fused_elementwise",
  shape: (_i, a) => [...a.program.shape],
  dtype: (_i, a) => programDtype(a.program),
  ref: (ins, a, out) => interpret(a.program, ins, out),
  describe: (a) => programOps(a.program).join(" ") || "copy",
});

export interface FusedReduceAttrs {
  /** Evaluated over the reduction's input index space; its value is folded. */
  readonly prologue: Program;
  readonly reduce: ReduceOp;
  readonly dim: readonly number[];
  readonly keepdim: boolean;
  /** The reduction's own output dtype (the accumulator is rounded to it). */
  readonly dtype: DType;
  /** Evaluated over the reduced shape with `acc`; null = the reduction's value itself. */
  readonly epilogue: Program | null;
}

/**
 * Fold the prologue's values over `dim`, in the js reduce's order: each output element (row-major
 * over the kept dims) folds its elements sequentially, row-major over the reduced dims.
 */
function foldPrologue(a: FusedReduceAttrs, ins: readonly TensorData[]): Float64Array {
  const shape = a.prologue.shape;
  const kept = shape.map((_, i) => i).filter((i) => !a.dim.includes(i));
  const ev = evaluator(a.prologue, ins);
  const accs = new Float64Array(numel(kept.map((d) => shape[d]!)));
  const idx = new Int32Array(shape.length);
  const step = a.reduce.step;
  const round = storeRound(a.dtype);
  forEachIndex(kept.map((d) => shape[d]!), (o, kidx) => {
    kept.forEach((d, i) => { idx[d] = kidx[i]!; });
    let acc = a.reduce.init;
    forEachIndex(a.dim.map((d) => shape[d]!), (_r, ridx) => {
      a.dim.forEach((d, i) => { idx[d] = ridx[i]!; });
      acc = step(acc, ev(idx, 0));
    });
    accs[o] = round(acc);
  });
  return accs;
}

export const fused_reduce = defineOp<FusedReduceAttrs, KernelOp<FusedReduceAttrs>>({
  kind: "kernel", arity: "variadic", name: "fused_reduce",
  shape: (_i, a) => (a.epilogue ? [...a.epilogue.shape] : reducedShape(a.prologue.shape, a.dim, a.keepdim)),
  dtype: (_i, a) => (a.epilogue ? programDtype(a.epilogue) : a.dtype),
  ref: (ins, a, out) => {
    const accs = foldPrologue(a, ins);
    if (a.epilogue) interpret(a.epilogue, ins, out, (f) => accs[f]!);
    else {
      const enc = encodeStored(a.dtype);
      for (let i = 0; i < accs.length; i++) out.data[i] = enc ? enc(accs[i]!) : accs[i]!;
    }
  },
  describe: (a) => [...programOps(a.prologue), `${a.reduce.name}[${a.dim.join(",")}]`, ...(a.epilogue ? programOps(a.epilogue) : [])].join(" "),
});

export interface FusedMatmulAttrs {
  /** Over the fused output's shape (the product's elements in order); `acc` is the product. */
  readonly epilogue: Program;
  /** The product's dtype and shape. */
  readonly dtype: DType;
  readonly shape: readonly number[];
}

/** matmul(inputs[0], inputs[1]) followed by an elementwise epilogue over inputs[2...]. */
export const fused_matmul = defineOp<FusedMatmulAttrs, KernelOp<FusedMatmulAttrs>>({
  kind: "kernel", arity: "variadic", name: "fused_matmul",
  shape: (_i, a) => [...a.epilogue.shape],
  dtype: (_i, a) => programDtype(a.epilogue),
  ref: (ins, a, out) => {
    const prod = allocData(a.dtype, a.shape);
    matmul.ref([ins[0]!, ins[1]!], {}, prod);
    interpret(a.epilogue, ins, out, (f) => prod.data[f]!);
  },
  describe: (a) => ["matmul", ...programOps(a.epilogue)].join(" "),
});

// ---- named patterns -----------------------------------------------------------------------------
/** Dense float64 copy of a tensor's values, row-major (exact for float32/float64). */
const values = (t: TensorData) => toFloat64(t);

/**
 * softmax over `dim` of a prologue (scale, mask...) as exp(v - amax(v)) / sum(exp(v - amax(v))),
 * the surface's decomposition, with the amax, difference, exponential, sum and quotient each
 * rounded to the dtype as the unfused ops would.
 */
function softmaxRows(shape: readonly number[], dim: number, D: DType, value: (idx: Int32Array) => number, store: (flat: number, v: number) => void): void {
  const R = roundTo(D), S = storeRound(D);
  const n = shape[dim]!;
  const outer = shape.map((_, i) => i).filter((i) => i !== dim);
  const idx = new Int32Array(shape.length);
  const inner = shape.slice(dim + 1).reduce((p, s) => p * s, 1);
  const v = new Float64Array(n), e = new Float64Array(n);
  forEachIndex(outer.map((d) => shape[d]!), (_o, oidx) => {
    outer.forEach((d, i) => { idx[d] = oidx[i]!; });
    let m = amax.init;
    for (let j = 0; j < n; j++) {
      idx[dim] = j;
      v[j] = value(idx);
      m = amax.step(m, v[j]!);
    }
    m = S(m);
    let z = sum.init;
    for (let j = 0; j < n; j++) {
      e[j] = R(exp.ref(R(sub.ref(v[j]!, m, 0)), 0, 0));
      z = sum.step(z, e[j]!);
    }
    z = S(z);
    // flat index of (outer, j): row-major over the full shape
    let base = 0;
    for (let d = 0; d < shape.length; d++) if (d !== dim) base = base * shape[d]! + idx[d]!; else base = base * shape[d]!;
    for (let j = 0; j < n; j++) store(base + j * inner, R(div.ref(e[j]!, z, 0)));
  });
}

/**
 * The same softmax over contiguous rows of n values already computed (v[r·n + j]), written to
 * out[r·n + j]: the exact sequence softmaxRows applies (for kernels that evaluate the prologue
 * in bulk).
 */
export function softmaxDenseRows(v: Float64Array, rows: number, n: number, D: DType, out: { [i: number]: number }, outOffset = 0): void {
  const R = roundTo(D), S = storeRound(D);
  const e = new Float64Array(n);
  for (let r = 0; r < rows; r++) {
    const o = r * n;
    let m = amax.init;
    for (let j = 0; j < n; j++) m = amax.step(m, v[o + j]!);
    m = S(m);
    let z = sum.init;
    for (let j = 0; j < n; j++) {
      e[j] = R(exp.ref(R(sub.ref(v[o + j]!, m, 0)), 0, 0));
      z = sum.step(z, e[j]!);
    }
    z = S(z);
    for (let j = 0; j < n; j++) out[outOffset + o + j] = R(div.ref(e[j]!, z, 0));
  }
}

export interface FusedSoftmaxAttrs {
  readonly dim: number;
  /** The value softmax is applied to (x, x·scale, masked...), over x's shape. */
  readonly prologue: Program;
}

export const fused_softmax = defineOp<FusedSoftmaxAttrs, KernelOp<FusedSoftmaxAttrs>>({
  kind: "kernel", arity: "variadic", name: "fused_softmax",
  shape: (_i, a) => [...a.prologue.shape],
  dtype: (_i, a) => programDtype(a.prologue),
  ref: (ins, a, out) => {
    const ev = evaluator(a.prologue, ins);
    softmaxRows(a.prologue.shape, a.dim, out.dtype, (idx) => ev(idx, 0), (f, v) => { out.data[f] = v; });
  },
  describe: (a) => `dim=${a.dim} ${describeProgram(a.prologue)}`,
});

export interface NormAttrs {
  /** How many trailing dims are normalized. */
  readonly dims: number;
  readonly has_weight: boolean;
  readonly has_bias: boolean;
}

/**
 * layer_norm as functional.ts writes it (a corrected two pass): m0 = sum(x)/n; d0 = x - m0;
 * d = d0 - sum(d0)/n; var = sum(d·d)/n; y = d · rsqrt(var + eps) [· w] [+ b].
 * Inputs [x, n, n, n, eps, w?, b?] (n and eps are the graph's own 0-d constants, so their
 * rounding is theirs).
 */
export const fused_layer_norm = defineOp<NormAttrs, KernelOp<NormAttrs>>({
  kind: "kernel", arity: "variadic", name: "fused_layer_norm",
  shape: ([x]) => [...x!.shape],
  dtype: ([x]) => x!.dtype,
  ref: ([x, n1, n2, n3, eps, ...wb], a, out) => {
    const R = roundTo(out.dtype), S = storeRound(out.dtype);
    const X = values(x!);
    const N = x!.shape.slice(x!.shape.length - a.dims).reduce((p, s) => p * s, 1);
    const c1 = values(n1!)[0]!, c2 = values(n2!)[0]!, c3 = values(n3!)[0]!, ce = values(eps!)[0]!;
    const W = a.has_weight ? values(wb[0]!) : null;
    const B = a.has_bias ? values(wb[a.has_weight ? 1 : 0]!) : null;
    const d = new Float64Array(N);
    for (let r = 0; r * N < X.length; r++) {
      const o = r * N;
      let s1 = sum.init;
      for (let j = 0; j < N; j++) s1 = sum.step(s1, X[o + j]!);
      const m0 = R(div.ref(S(s1), c1, 0));
      let s2 = sum.init;
      for (let j = 0; j < N; j++) {
        d[j] = R(sub.ref(X[o + j]!, m0, 0));
        s2 = sum.step(s2, d[j]!);
      }
      const c = R(div.ref(S(s2), c2, 0));
      let s3 = sum.init;
      for (let j = 0; j < N; j++) {
        d[j] = R(sub.ref(d[j]!, c, 0));
        s3 = sum.step(s3, R(mul.ref(d[j]!, d[j]!, 0)));
      }
      const rs = R(rsqrt.ref(R(add.ref(R(div.ref(S(s3), c3, 0)), ce, 0)), 0, 0));
      for (let j = 0; j < N; j++) {
        let y = R(mul.ref(d[j]!, rs, 0));
        if (W) y = R(mul.ref(y, W[j]!, 0));
        if (B) y = R(add.ref(y, B[j]!, 0));
        out.data[o + j] = y;
      }
    }
  },
  describe: (a) => `dims=${a.dims}${a.has_weight ? " weight" : ""}${a.has_bias ? " bias" : ""}`,
});

/** rms_norm: y = x · rsqrt(sum(x·x)/n + eps) [· w]. Inputs [x, n, eps, w?]. */
export const fused_rms_norm = defineOp<NormAttrs, KernelOp<NormAttrs>>({
  kind: "kernel", arity: "variadic", name: "fused_rms_norm",
  shape: ([x]) => [...x!.shape],
  dtype: ([x]) => x!.dtype,
  ref: ([x, n, eps, w], a, out) => {
    const R = roundTo(out.dtype), S = storeRound(out.dtype);
    const X = values(x!);
    const N = x!.shape.slice(x!.shape.length - a.dims).reduce((p, s) => p * s, 1);
    const cn = values(n!)[0]!, ce = values(eps!)[0]!;
    const W = a.has_weight ? values(w!) : null;
    for (let r = 0; r * N < X.length; r++) {
      const o = r * N;
      let s = sum.init;
      for (let j = 0; j < N; j++) s = sum.step(s, R(mul.ref(X[o + j]!, X[o + j]!, 0)));
      const rs = R(rsqrt.ref(R(add.ref(R(div.ref(S(s), cn, 0)), ce, 0)), 0, 0));
      for (let j = 0; j < N; j++) {
        const y = R(mul.ref(X[o + j]!, rs, 0));
        out.data[o + j] = W ? R(mul.ref(y, W[j]!, 0)) : y;
      }
    }
  },
  describe: (a) => `dims=${a.dims}${a.has_weight ? " weight" : ""}`,
});

export interface LoraAttrs { readonly has_bias: boolean }

/**
 * LoRA linear as the graph spells it: (x @ Wᵀ [+ b]) + (x @ Aᵀ @ Bᵀ) · s, every product and sum
 * rounded as its own op. Inputs [x, Wᵀ, Aᵀ, Bᵀ, s, b?] (the transposes are views). The registry's
 * lora_linear in another form (tensor scale, transposed operands): one reference,
 * `loraDecomposed` (ops/lora.ts), and one native kernel.
 */
export const fused_lora_linear = defineOp<LoraAttrs, KernelOp<LoraAttrs>>({
  kind: "kernel", arity: "variadic", name: "fused_lora_linear",
  shape: ([x, wt]) => [...broadcastShapes("fused_lora_linear", x!.shape.slice(0, -2), wt!.shape.slice(0, -2)), x!.shape[x!.shape.length - 2]!, wt!.shape[wt!.shape.length - 1]!],
  dtype: ([x]) => x!.dtype,
  ref: ([x, wt, at, bt, s, b], a, out) => loraDecomposed(x!, wt!, at!, bt!, values(s!)[0]!, a.has_bias ? b! : null, out),
  describe: (a) => (a.has_bias ? "bias" : ""),
});

export interface AttentionAttrs {
  /** Over the scores' shape [..., L, S]; `acc` is q·kᵀ (scale, mask...). */
  readonly prologue: Program;
}

/**
 * softmax(prologue(q @ kᵀ)) @ v without materializing the [..., L, S] scores: one batch entry at a
 * time, each product packed and summed exactly as the matmul op does. Inputs [q, kᵀ, v, ...loads].
 */
export const fused_attention = defineOp<AttentionAttrs, KernelOp<AttentionAttrs>>({
  kind: "kernel", arity: "variadic", name: "fused_attention",
  shape: ([q, _kt, v], a) => [...a.prologue.shape.slice(0, -1), v!.shape[v!.shape.length - 1]!],
  dtype: (_i, a) => programDtype(a.prologue),
  ref: (ins, a, out) => {
    const [q, kt, v] = ins as [TensorData, TensorData, TensorData];
    const D = out.dtype, S = storeRound(D);
    const sshape = a.prologue.shape;
    const nd = sshape.length;
    const L = sshape[nd - 2]!, Sk = sshape[nd - 1]!, E = q.shape[q.shape.length - 1]!, Ev = v.shape[v.shape.length - 1]!;
    const batch = sshape.slice(0, -2);
    const st = (t: TensorData) => broadcastStrides(t.shape.slice(0, -2), t.strides.slice(0, -2), batch);
    const Qp = new Float64Array(L * E), Kp = new Float64Array(E * Sk), Sc = new Float64Array(L * Sk);
    const P = new Float64Array(L * Sk), Vp = new Float64Array(Sk * Ev), O = new Float64Array(L * Ev);
    const ev = evaluator(a.prologue, ins);
    const idx = new Int32Array(nd);
    forEachStrided(batch, [{ strides: st(q), offset: q.offset }, { strides: st(kt), offset: kt.offset }, { strides: st(v), offset: v.offset }], (bi, off) => {
      pack(q.data, off[0]!, L, E, q.strides[q.shape.length - 2]!, q.strides[q.shape.length - 1]!, Qp);
      pack(kt.data, off[1]!, E, Sk, kt.strides[kt.shape.length - 2]!, kt.strides[kt.shape.length - 1]!, Kp);
      gemm(Qp, Kp, Sc, L, Sk, E);
      // the batch position as a multi-index, for the prologue's loads
      let rem = bi;
      for (let d = batch.length - 1; d >= 0; d--) { idx[d] = rem % batch[d]!; rem = Math.floor(rem / batch[d]!); }
      softmaxRows([L, Sk], 1, D, (ij) => {
        idx[nd - 2] = ij[0]!;
        idx[nd - 1] = ij[1]!;
        return ev(idx, S(Sc[ij[0]! * Sk + ij[1]!]!));
      }, (f, p) => { P[f] = p; });
      pack(v.data, off[2]!, Sk, Ev, v.strides[v.shape.length - 2]!, v.strides[v.shape.length - 1]!, Vp);
      gemm(P, Vp, O, L, Ev, Sk);
      out.data.set(O, bi * L * Ev);
    });
  },
  describe: (a) => describeProgram(a.prologue),
});

/** True for the dtypes the named patterns are written for. */
export function patternDtype(d: DType): boolean {
  return isFloating(d) && (d === "float32" || d === "float64");
}
