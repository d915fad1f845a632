/**
 * LoRA linear as one op: y = x Wᵀ + b + s · (x Aᵀ) Bᵀ, never materializing W + s·B·A.
 * Source: Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models"; PEFT
 * `lora.Linear.forward`. The decomposition (three matmuls, a scale and adds, each rounded as
 * its own op) is the reference: `loraDecomposed` below computes it, for this op and for the
 * compiler's fused_lora_linear (the same math as the LoRA pattern finds it in a graph: tensor
 * scale, transposed operands), so the two are one definition and give the same bits.
 */
import { allocData, toFloat64, type TensorData } from "../../tensor/storage.ts";
import { LoomDtypeError, LoomShapeError, fmtShape } from "../../tensor/errors.ts";
import { broadcastShapes } from "../../tensor/shape.ts";
import { defineOp, type KernelOp } from "../op.ts";
import { roundTo } from "../passes/program.ts";
import { matmul } from "./linalg_index.ts";

/**
 * out = R(R(x @ Wt + b) + R((x @ At) @ Bt · s)) — R rounds to out's dtype as storing each
 * intermediate would; every product is the matmul op's own (pack, gemm, round). Without a bias
 * the first sum is skipped: R(x @ Wt + R(D · s)).
 * @param x - [..., M, in]; Wt - [in, out]; At - [in, r]; Bt - [r, out]; bias - [out] or null
 * @param out - dense [..., M, out]
 */
export function loraDecomposed(x: TensorData, Wt: TensorData, At: TensorData, Bt: TensorData, s: number, bias: TensorData | null, out: TensorData): void {
  const D = out.dtype, R = roundTo(D);
  const mm = (p: TensorData, q: TensorData) => {
    const shape = [...broadcastShapes("matmul", p.shape.slice(0, -2), q.shape.slice(0, -2)), p.shape[p.shape.length - 2]!, q.shape[q.shape.length - 1]!];
    const r = allocData(D, shape);
    matmul.ref([p, q], {}, r);
    return r;
  };
  const Y = mm(x, Wt), H = mm(x, At), Dl = mm(H, Bt);
  const N = out.shape[out.shape.length - 1]!;
  const b = bias ? toFloat64(bias) : null;
  for (let i = 0; i < out.data.length; i++) {
    const base = b ? R(Y.data[i]! + b[i % N]!) : Y.data[i]!;
    out.data[i] = R(base + R(Dl.data[i]! * s));
  }
}

export interface LoraAttrs {
  /** lora_alpha / r (PEFT's `scaling`). */
  readonly scaling: number;
  /** Inputs are [x, W, A, B] or, with a bias, [x, W, A, B, b]. */
  readonly has_bias: boolean;
}

/**
 * @param x - [..., in]; W - [out, in]; A - [r, in]; B - [out, r]; b - [out]
 * @returns [..., out], dtype of x (all operands must share it)
 */
export const lora_linear: KernelOp<LoraAttrs> = defineOp<LoraAttrs, KernelOp<LoraAttrs>>({
  kind: "kernel", arity: "variadic", name: "lora_linear",
  shape: ([x, W, A, B, b], a) => {
    const fin = x!.shape[x!.shape.length - 1];
    const [out, win] = W!.shape;
    const [r, ain] = A!.shape;
    const [bout, br] = B!.shape;
    const ok = W!.shape.length === 2 && A!.shape.length === 2 && B!.shape.length === 2 &&
      win === fin && ain === fin && bout === out && br === r && (!a.has_bias || (b!.shape.length === 1 && b!.shape[0] === out));
    if (!ok) {
      throw new LoomShapeError(`[lora_linear] shapes x ${fmtShape(x!.shape)}, W ${fmtShape(W!.shape)}, A ${fmtShape(A!.shape)}, B ${fmtShape(B!.shape)}${a.has_bias ? `, b ${fmtShape(b!.shape)}` : ""} do not fit x [..., in], W [out, in], A [r, in], B [out, r], b [out]`);
    }
    return [...x!.shape.slice(0, -1), out!];
  },
  dtype: (ins) => {
    const d = ins[0]!.dtype;
    if (ins.some((m) => m.dtype !== d)) throw new LoomDtypeError(`[lora_linear] operands must share a dtype, got ${ins.map((m) => m.dtype).join(", ")}`);
    return d;
  },
  ref: ([x, W, A, B, b], a, out) => {
    // Wᵀ, Aᵀ, Bᵀ as transposed views; a 1-D x as one row
    const t = (m: TensorData): TensorData => ({ ...m, shape: [m.shape[1]!, m.shape[0]!], strides: [m.strides[1]!, m.strides[0]!] });
    const row = (v: TensorData): TensorData => (v.shape.length === 1 ? { ...v, shape: [1, v.shape[0]!], strides: [0, v.strides[0]!] } : v);
    loraDecomposed(row(x!), t(W!), t(A!), t(B!), roundTo(out.dtype)(a.scaling), a.has_bias ? b! : null, row(out));
  },
  grad: (g, [x, W, A, B, b], _o, a, needs) => {
    const fin = x!.shape[x!.shape.length - 1]!, fout = W!.shape[0]!;
    const x2 = x!.reshape([-1, fin]); // [M, in]
    const g2 = g.reshape([-1, fout]); // [M, out]
    const gB = g2.matmul(B!); // [M, r] = dL/d(x Aᵀ) / s
    return [
      needs[0] ? g.matmul(W!).add(gB.matmul(A!).mul(a.scaling).reshape(x!.shape)) : null,
      needs[1] ? g2.transpose(0, 1).matmul(x2) : null,
      needs[2] ? gB.transpose(0, 1).matmul(x2).mul(a.scaling) : null,
      needs[3] ? g2.transpose(0, 1).matmul(x2.matmul(A!.transpose(0, 1))).mul(a.scaling) : null,
      a.has_bias && needs[4] ? g2.sum(0) : null,
    ];
  },
  describe: (a) => `scaling=${a.scaling}${a.has_bias ? " bias" : ""}`,
});
