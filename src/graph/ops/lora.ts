/**
 * LoRA linear as one op: y = x Wᵀ + b + s · (x Aᵀ) Bᵀ, never materializing W + s·B·A.
 * Source: Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models"; PEFT
 * `lora.Linear.forward`. The decomposition (two matmuls, a scale and adds) is the reference
 * the kernel and its gradient are tested against.
 */
import { LoomDtypeError, LoomShapeError, fmtShape } from "../../tensor/errors.ts";
import { toFloat64 } from "../../tensor/storage.ts";
import { defineOp, type KernelOp } from "../op.ts";
import { gemm, pack } from "./linalg_index.ts";

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
    const fin = x!.shape[x!.shape.length - 1]!;
    const fout = W!.shape[0]!, r = A!.shape[0]!;
    const M = out.data.length / fout;
    const X = toFloat64(x!);
    const Wt = new Float64Array(fin * fout), At = new Float64Array(fin * r), Bt = new Float64Array(r * fout);
    pack(W!.data, W!.offset, fin, fout, W!.strides[1]!, W!.strides[0]!, Wt); // Wᵀ [in, out]
    pack(A!.data, A!.offset, fin, r, A!.strides[1]!, A!.strides[0]!, At); // Aᵀ [in, r]
    pack(B!.data, B!.offset, r, fout, B!.strides[1]!, B!.strides[0]!, Bt); // Bᵀ [r, out]
    const Y = new Float64Array(M * fout), H = new Float64Array(M * r), D = new Float64Array(M * fout);
    gemm(X, Wt, Y, M, fout, fin);
    gemm(X, At, H, M, r, fin);
    gemm(H, Bt, D, M, fout, r);
    const bias = a.has_bias ? toFloat64(b!) : null;
    for (let i = 0; i < M; i++) {
      for (let j = 0; j < fout; j++) {
        const k = i * fout + j;
        out.data[k] = Y[k]! + (bias ? bias[j]! : 0) + a.scaling * D[k]!;
      }
    }
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
