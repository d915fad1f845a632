/**
 * The bounded float32 LoRA linear: `native.lora_linear.f32` and `native.fused_lora_linear.f32`,
 * catalog implementations of the registry's `lora_linear` (x [..., in], W [out, in], A [r, in],
 * B [out, r], b [out]) and of the pattern pass's `fused_lora_linear` (the same with Wᵀ, Aᵀ, Bᵀ and
 * a 0-d scale), both the shim's k_lora_linear (native/kernels/matmul.c) with its fast epilogue.
 *
 * The exact kernel follows the decomposition op by op (graph/ops/lora.ts `loraDecomposed`):
 * Y = x·Wᵀ, H = x·Aᵀ, D = H·Bᵀ (a K = r product written out as a whole [rows, out] matrix), then
 * a second pass R(R(Y + b) + R(D·s)): a K = 8 GEMM is memory-bound, and it and the second pass
 * each stream the whole output again. On a GPT-2 c_attn ([2048, 384] · [1152, 384]ᵀ, r 8, bias)
 * the whole op took 11.2 ms in plans, against 10.5 ms with this implementation (median of 40,
 * alternating); most of what remains above the 9–9.6 ms product is x·Aᵀ, an N = 8 sgemm.
 *
 * This implementation takes Y and H from the same GEMM calls (the exact kernel's products, the
 * same bits), then makes one pass over the output: out = fl32(Y + b + Σ_t H[:, t]·(Bᵀ[t, :]·s)),
 * evaluated in double (Bᵀ·s packed once per call as doubles) and rounded once.
 *
 * Error bound, against that epilogue evaluated in float64 on the same Y and H (the form
 * jit_matmul.ts states for a product's epilogue; Higham, "Accuracy and Stability of Numerical
 * Algorithms", 2nd ed., §3.1): Y + b in double, each Bᵀ·s product and each of the r fused
 * multiply-adds round by at most 2^-53 relative, so the double value is within
 * γ_{r+2}·M ≈ (r + 2)·2^-53·M of the reference, M = |Y| + |b| + |s|·Σ_t |H_t|·|B_t|; the one
 * rounding to float32 adds at most 2^-24·|value|. The contract's rtol 2^-23 covers the rounding
 * with room; its atol 1e-9 covers the double sums wherever (r + 2)·M < 9·10^6 (M is a sum of
 * magnitudes, so the bound holds whenever the terms are not huge and cancelling by more than 2^29).
 * The default float32 tolerance admits it; "exact" keeps the exact kernel (eager's op-by-op bits).
 */
import type { DType } from "../../tensor/dtype.ts";
import type { InputLayout } from "../backend.ts";
import type { Application, Contract, Implementation } from "../catalog.ts";
import type { NativeBackend } from "./backend.ts";
import { encodeAttrs } from "./program.ts";

/** Ahead of the exact kernel (rank 100): the same products, one pass fewer over the output. */
const RANK = 30;

/** See the file comment. */
export const LORA_F32_CONTRACT: Contract = {
  kind: "bound", atol: 1e-9, rtol: 2 ** -23,
  source: "src/backends/native/lora.ts (the exact kernel's products x·Wᵀ and x·Aᵀ; Y + b + H·(Bᵀ·s) in double, one rounding)",
};

/** Registry op name -> the shim instruction running it with the fast epilogue. */
const KERNELS = { lora_linear: "lora_linear_f32", fused_lora_linear: "fused_lora_linear_f32" } as const;

/** Every operand the kernel reads as float32 is float32 (the 0-d scale of fused_lora_linear may be any dtype), B 2-D. */
function operandsFit(op: keyof typeof KERNELS, inputs: readonly InputLayout[], dtype: DType): boolean {
  if (dtype !== "float32") return false;
  const matrices = op === "lora_linear" ? inputs : [...inputs.slice(0, 4), ...inputs.slice(5)]; // skip the scale
  return matrices.every((t) => t.dtype === "float32") && inputs[3]!.shape.length === 2;
}

function implementation(b: NativeBackend, op: keyof typeof KERNELS): Implementation {
  const kernel = KERNELS[op];
  const words = (a: Application) => encodeAttrs(a.op, a.attrs, a.inputs, b.lib.opcodes);
  return {
    id: `native.${op}.f32`, op, contract: LORA_F32_CONTRACT, rank: RANK,
    doc: "x·Wᵀ and x·Aᵀ by the exact kernel's GEMM, then one pass: Y + b + H·(Bᵀ·s) in double, one rounding (no rank-r product matrix, no second pass)",
    applies: (a) => operandsFit(op, a.inputs, a.dtype) && b.fits(a.op, a.inputs, a.shape),
    prepare: (a) => b.instruction(kernel, words(a)),
    runner: (a) => b.kernelRunner(kernel, words(a), a.shape, a.dtype),
  };
}

/** The bounded LoRA implementations on `b` (none when the shim was built without them). */
export function loraImplementations(b: NativeBackend): Implementation[] {
  return (Object.keys(KERNELS) as (keyof typeof KERNELS)[]).filter((op) => b.lib.opcodes.has(KERNELS[op])).map((op) => implementation(b, op));
}
