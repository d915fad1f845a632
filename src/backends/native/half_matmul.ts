/**
 * Half-precision products accumulated in float32: `native.matmul.f32acc.bfloat16` and
 * `native.matmul.f32acc.float16`, catalog implementations of the registry's `matmul` for float16
 * and bfloat16 operands and output (the shim's `matmul_f32acc`, native/kernels/matmul.c).
 *
 * The exact kernel converts half operands to double, multiplies with dgemm and rounds each result
 * once: the float64 reference's bits, at twice sgemm's cost per flop. This one packs the operands
 * to float32 (exact: halves are float32 values) and runs sgemm, as torch's CPU half matmul
 * (oneDNN) accumulates in float32, then rounds once to the output dtype.
 *
 * Error bound (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., §3.1): each
 * product of two halves is exact in float32 (8 + 8 or 11 + 11 significant bits ≤ 24), so the
 * float32 dot product s̃ of length K satisfies |s̃ − s| ≤ γ_K·Σ|a·b| with γ_K ≈ K·2^-24. Where that
 * is below half an ulp of the output dtype at s (the regime torch's own half matmul is held to),
 * round(s̃) and the reference round(s) are equal or adjacent: |y − ref| ≤ 1 ulp ≤ 2^-7·|ref| for
 * bfloat16 (8 significant bits) and 2^-10·|ref| for float16 (11), plus float16's subnormal spacing
 * 2^-24 in absolute terms. The contracts below state exactly that; torch.testing.assert_close's
 * defaults for these dtypes (rtol 1.6e-2 and 1e-3, atol 1e-5) admit them, so the default tolerance
 * (catalog.ts DEFAULT_TOLERANCE, per output dtype) chooses them and "exact" never does.
 */
import type { Application, Contract, Implementation } from "../catalog.ts";
import type { NativeBackend } from "./backend.ts";

/** The shim kernel. */
const KERNEL = "matmul_f32acc";
/** Ahead of the exact kernel (rank 100): half the flop cost wherever it applies. */
const RANK = 20;

/** One ulp of the output dtype, relative (and float16's subnormal spacing as atol): see the file comment. */
export const HALF_MATMUL_CONTRACTS = {
  bfloat16: { kind: "bound", atol: 0, rtol: 2 ** -7, source: "src/backends/native/half_matmul.ts (exact half products, float32 sum, one rounding: ≤ 1 bfloat16 ulp)" },
  float16: { kind: "bound", atol: 2 ** -24, rtol: 2 ** -10, source: "src/backends/native/half_matmul.ts (exact half products, float32 sum, one rounding: ≤ 1 float16 ulp)" },
} as const satisfies Record<string, Contract>;

/** Whether `a` is a product of this half dtype (both operands and the output) the shim takes. */
function applies(b: NativeBackend, a: Application, dtype: "float16" | "bfloat16"): boolean {
  return a.dtype === dtype && a.inputs.length === 2 && a.inputs.every((t) => t.dtype === dtype) && b.fits(a.op, a.inputs, a.shape);
}

/** The float32-accumulating half matmuls on `b` (none when the shim lacks the kernel). */
export function halfMatmulImplementations(b: NativeBackend): Implementation[] {
  if (!b.lib.opcodes.has(KERNEL)) return [];
  return (["bfloat16", "float16"] as const).map((dtype) => ({
    id: `native.matmul.f32acc.${dtype}`, op: "matmul", contract: HALF_MATMUL_CONTRACTS[dtype], rank: RANK,
    doc: `${dtype} operands packed to float32, sgemm (float32 accumulation, as torch's CPU half matmul), one rounding to ${dtype}: ≤ 1 ulp from the float64 reference`,
    applies: (a: Application) => applies(b, a, dtype),
    prepare: () => b.instruction(KERNEL, []),
    runner: (a: Application) => b.kernelRunner(KERNEL, [], a.shape, a.dtype),
  }));
}
