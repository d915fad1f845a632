/**
 * Bounded float32 row kernels of the native backend (native/kernels/rows_f32.c) as catalog
 * implementations of the named patterns fused_softmax, fused_rms_norm and fused_layer_norm, and
 * fused_attention with those softmax rows (fused.c k_fused_attention_f32x).
 * The exact kernels (fused.c) replay each decomposition op by op in 512-element double blocks,
 * rounding every intermediate to float32; these read each row once as float32, compute
 * everything after the prologue in double lanes and round the result to float32 once, except
 * fused_softmax.f32x, which evaluates exp in float32 lanes (twice the lanes) for a looser bound.
 *
 * Bounds (|y − ref| ≤ atol + rtol·|ref|, ref = the decomposition in float64, rounded to float32):
 * let u = 2^-53 (double rounding), γ_k = k·u/(1 − k·u) (a sum of k terms, Higham, Accuracy and
 * Stability of Numerical Algorithms, §4.2; the kernels' 8-lane sums need n/8 + 3 sequential adds,
 * the portable build n), and the kernel's own double exp (rows_f32.c exp_neg: Cody–Waite
 * reduction and a degree-9 Taylor polynomial, relative error < 1e-11 from the remainder term).
 * - softmax and rms_norm: every value is a product/quotient of positive sums, so the double
 *   result p̂ has relative error ε ≤ γ_n + 2e-11 + 12u ≤ 2.4e-9 for n ≤ 2^24 (rms_norm: eps ≥ 0,
 *   so s/n + eps does not cancel); rounding once to float32 (2^-24·|p̂|) against float32(ref)
 *   (2^-24·|ref|) gives |y − fl(ref)| ≤ (2^-23 + 2ε)·|ref| below 2.4e-7·|ref|, plus 2^-149 per
 *   rounding where the result is subnormal: atol 2^-148. softmax's exponent argument v − max(v)
 *   is formed in double from two floats: a relative error of exp of at most u·|v − m| ≤ 700u
 *   (arguments below −700 are taken as −700: an absolute error below 1e-304), inside ε.
 * - layer_norm (the corrected two pass, in double): the mean's error η is removed to first order
 *   by the second centring pass; what remains in the normalized value t = (x − μ)·rsqrt(var + eps)
 *   is at most γ_n·(1 + |η|/σ) + 8u·|t| in absolute terms (σ² = var; for float32 rows |η|/σ is
 *   at most 2^24·√n·γ_n, second order), so the affine y = t·w + b adds ε_a·|w| + 4u·(|y| + |b|)
 *   with ε_a ≤ γ_n ≤ 1.8e-12 for n ≤ 2^14. With |w| ≤ 2^10 and |b| ≤ 2^20 that is below 4.2e-9:
 *   atol 1e-8, rtol 2.4e-7.
 * Value conditions checked by the kernel at run time (eps ≥ 0; layer_norm's |w| ≤ 2^10 and
 * |b| ≤ 2^20) send the instruction to the exact kernel instead, as `applies` false would.
 * - softmax with float32 exponentials (`native.fused_softmax.f32x`, rows_f32.c expf_row; rank 5, so
 *   the default tolerance prefers it): u = 2^-24 now. Each e = exp(v − m) in float32 lanes:
 *   (a) argument: TwoSum gives d + c = v − m exactly; k = round(d·L), L = fl32(log2 e), so
 *   |d − k·ln2| ≤ 0.5/L + |k|·|1/L − ln2| ≤ 0.346574 + 1.2e-6 and |r| ≤ R = 0.3466 (|c| ≤ 87u);
 *   r1 = d − k·C1 is exact (C1 = 355/512; see expf_row), r2 = fl(r1 − k·C2) and r = fl(r2 + c)
 *   round twice (2·R·u) and fl32(C2) is off ln2 − C1 by 1.7e-12 (·|k| ≤ 126): |Δr| ≤ 4.16e-8,
 *   a relative error of e^r of at most that (1 + 1e-7);
 *   (b) polynomial: the degree-7 Taylor remainder R^8/8!·e^R over e^-R is ≤ 1.04e-8; the float
 *   coefficients 1/i! (i ≥ 2) are off by u/i!: ≤ u·(e^R − 1 − R)·e^2R ≤ 8.1e-9;
 *   (c) Horner in 7 fmas: each rounds its partial value q_i once (u·|q_i|), reaching the result
 *   times r^i: ≤ u·max_|r|≤R Σ_{i<7} |q_i(r)|·|r|^i / P(r) = 1.5001u = 8.95e-8 (evaluated on a
 *   fine grid of r; to first order in u);
 *   (d) 2^k through the exponent bits is exact (k ∈ [−126, 0]); p·2^k rounds only where it is
 *   subnormal (2^-150 absolute); d < −87 gives 0 (true value < exp(−87) < 1.7e-38).
 *   So e = exp(v − m)·(1 + ε), |ε| ≤ E = 1.50e-7 where e is normal (the exhaustive check over
 *   every float32 d in [−87, 0] against exp in double measured 7.9e-8, 1.32u). Z = Σ e in double
 *   (8 lanes: γ_{n/8+3} with 2^-53, ≤ 1.6e-11 for n ≤ 2^20) has relative error ≤ E + 1.6e-11;
 *   ρ = fl32(1/Z in double) adds u + 2^-53, y = fl32(e·ρ) adds u. Hence
 *   |y − ref| ≤ (2E + 2u + 2^-52 + O(u²))·|ref| ≤ 4.2e-7·|ref|, and against fl32(ref) another
 *   u·|ref|: 4.8e-7, below rtol 5e-7. The absolute term: the cut-off entries (< 1.7e-38 after
 *   dividing by Z ≥ 1) and three subnormal roundings (e, y, fl32(ref): 2^-150 each) stay below
 *   atol 2^-125 (2.35e-38). Rows up to MAX_SOFTMAX_ROW (the sum term is negligible there).
 * - rms_norm with float32 scaling (`native.fused_rms_norm.f32x`, rank 5): the sum of squares and
 *   rs = 1/sqrt(s/n + eps) are the double lanes' (relative error ε ≤ 2.4e-9, as above); then
 *   rf = fl32(rs), t_j = fl32(rf·w_j) and y_j = fl32(x_j·t_j) in float32 lanes (no conversions:
 *   W4 is bandwidth-bound again). Where rf and every nonzero t_j are normal (the kernel checks
 *   each row's rf against a range set from max|w| and min nonzero |w|, and runs the double lanes
 *   otherwise), each of the three roundings is relative (u = 2^-24), so y = ref·(1 + η) with
 *   |η| ≤ ε + 3u + O(u²), plus 2^-150 where y is subnormal; against fl32(ref) another u·|ref|
 *   (and 2^-150): |y − fl32(ref)| ≤ (4u + ε)·|ref| + 2^-149 ≤ 2.41e-7·|ref| + 2^-149: rtol 2.5e-7,
 *   atol 2^-148. y cannot overflow where ref does not: |x_j|·rs ≤ sqrt(n) (x_j² ≤ s, eps ≥ 0),
 *   and the kernel takes the float lanes only when sqrt(n)·max|w| ≤ 2^126 and w is finite.
 * The softmax prologue (scale, additive mask, `where` mask: + − · / neg where cast, logical_not
 * of bools; float32 or bool loads) is evaluated in float32, which rounds each op as the exact
 * kernel does (double has more than 2·24 + 2 bits): ref is the softmax in float64 of those
 * prologue values (the same values the exact kernel and the unfused ops feed to softmax).
 */
import type { Program } from "../../graph/passes/program.ts";
import type { AttentionAttrs, FusedSoftmaxAttrs, NormAttrs } from "../../graph/passes/fused_ops.ts";
import { isContiguous, normalizeDim, numel } from "../../tensor/shape.ts";
import type { Contract, Implementation } from "../catalog.ts";
import type { InputLayout } from "../backend.ts";
import type { NativeBackend } from "./backend.ts";
import { encodeAttrs } from "./program.ts";

/** Below the exact kernels' 100: presumed faster wherever it applies. */
const RANK = 10;
/** Longest rms_norm row the bound covers (the sum's γ_n). */
export const MAX_ROW = 2 ** 24;
/** Longest softmax row taken: per-thread scratch is 8 bytes (exponentials) + 4 per register per element. */
export const MAX_SOFTMAX_ROW = 2 ** 20;
/** Longest layer_norm row the bound covers (its absolute term grows with n). */
export const MAX_LN_ROW = 2 ** 14;
/** Most codes in a softmax prologue (the kernel keeps one row buffer per register, at most 64). */
const MAX_PROLOGUE = 32;
/** Prologue ops evaluated in float32 with the exact kernel's rounding (bools as 0/1), by result dtype. */
const PROLOGUE_OPS = { float32: new Set(["add", "sub", "mul", "div", "neg", "where", "cast", "contiguous"]), bool: new Set(["logical_not", "cast", "contiguous"]) };

const TWO_ULP = 2.4e-7;
const SUBNORMAL = 2 ** -148;
const SOURCE = "src/backends/native/rows.ts (double lanes, one rounding; exp_neg's Taylor remainder < 1e-11; Higham §4.2 sums)";
export const SOFTMAX_CONTRACT: Contract = { kind: "bound", atol: SUBNORMAL, rtol: TWO_ULP, source: SOURCE };
export const RMS_NORM_CONTRACT: Contract = { kind: "bound", atol: SUBNORMAL, rtol: TWO_ULP, source: SOURCE };
/** fused_softmax with float32 exponentials: rows.ts's docstring derives it (within FLOAT32_TOLERANCE). */
export const SOFTMAX_X_CONTRACT: Contract = {
  kind: "bound", atol: 2 ** -125, rtol: 5e-7,
  source: "src/backends/native/rows.ts (float32 exp: TwoSum argument, Cody–Waite, degree-7 Taylor in Horner fmas, E ≤ 1.5e-7; double sum; two float roundings)",
};
/** Preferred over the double-lane softmax where both apply and the tolerance admits it. */
const RANK_X = 5;
/** fused_rms_norm with float32 scaling: rows.ts's docstring derives it (within FLOAT32_TOLERANCE). */
export const RMS_NORM_X_CONTRACT: Contract = {
  kind: "bound", atol: SUBNORMAL, rtol: 2.5e-7,
  source: "src/backends/native/rows.ts (double sum and rsqrt, ε ≤ 2.4e-9; three float32 roundings of normal factors; Higham §4.2 sums)",
};
export const LAYER_NORM_CONTRACT: Contract = { kind: "bound", atol: 1e-8, rtol: TWO_ULP, source: SOURCE };

/**
 * A prologue the kernel evaluates in float32: ops of PROLOGUE_OPS over float32/bool loads (and,
 * for attention, the float32 scores as `acc`).
 */
function simplePrologue(p: Program, inputs: readonly InputLayout[], acc = false): boolean {
  if (p.code.length > MAX_PROLOGUE || p.code[p.out]!.dtype !== "float32") return false;
  return p.code.every((c) => {
    if (c.k === "acc") return acc;
    if (c.k === "load") return (c.dtype === "float32" || c.dtype === "bool") && inputs[c.input]?.dtype === c.dtype;
    return (c.dtype === "float32" || c.dtype === "bool") && PROLOGUE_OPS[c.dtype].has(c.op.name);
  });
}

/** Whether the trailing `dims` dims of x are one contiguous run (outer dims may have any strides). */
function rowsContiguous(x: InputLayout, dims: number): boolean {
  let inner = 1;
  for (let d = x.shape.length - 1; d >= x.shape.length - dims; d--) {
    if (x.shape[d] !== 1 && x.strides[d] !== inner) return false;
    inner *= x.shape[d]!;
  }
  return true;
}

/** fused_softmax.f32 (double exp, `fast` false) or fused_softmax.f32x (float32 exp): the same operands and applications. */
function softmax(b: NativeBackend, fast: boolean): Implementation {
  return {
    id: fast ? "native.fused_softmax.f32x" : "native.fused_softmax.f32", op: "fused_softmax",
    contract: fast ? SOFTMAX_X_CONTRACT : SOFTMAX_CONTRACT, rank: fast ? RANK_X : RANK,
    doc: fast
      ? "float32 rows over the last dim, simple prologue (scale, mask), float32-lane exp (16 per vector), double sum, rtol 5e-7"
      : "float32 rows over the last dim, simple prologue (scale, mask), double lanes and exp, one rounding",
    applies: (a) => {
      const at = a.attrs as FusedSoftmaxAttrs;
      const nd = at.prologue.shape.length;
      if (a.dtype !== "float32" || nd === 0 || !b.fits(a.op, a.inputs, a.shape)) return false;
      if (normalizeDim("softmax", at.dim, nd) !== nd - 1 || at.prologue.shape[nd - 1]! > MAX_SOFTMAX_ROW) return false;
      return simplePrologue(at.prologue, a.inputs);
    },
    prepare: (a) => b.instruction(fast ? "fused_softmax_f32x" : "fused_softmax_f32", encodeAttrs(a.op, a.attrs, a.inputs, b.lib.opcodes)),
    runner: (a) => b.kernelRunner(fast ? "fused_softmax_f32x" : "fused_softmax_f32", encodeAttrs(a.op, a.attrs, a.inputs, b.lib.opcodes), a.shape, a.dtype),
  };
}

/** The norm implementations: the registry op, the shim kernel, contract, rank and doc of each. */
const NORMS = {
  "native.fused_rms_norm.f32": {
    op: "fused_rms_norm", kernel: "fused_rms_norm_f32", contract: RMS_NORM_CONTRACT, rank: RANK,
    doc: "float32 rows (normalized dims contiguous, weight contiguous), sum and scaling in double, one rounding",
  },
  "native.fused_rms_norm.f32x": {
    op: "fused_rms_norm", kernel: "fused_rms_norm_f32x", contract: RMS_NORM_X_CONTRACT, rank: RANK_X,
    doc: "float32 rows (normalized dims contiguous, weight contiguous), sum and rsqrt in double, scaling in float32 lanes, rtol 2.5e-7",
  },
  "native.fused_layer_norm.f32": {
    op: "fused_layer_norm", kernel: "fused_layer_norm_f32", contract: LAYER_NORM_CONTRACT, rank: RANK,
    doc: `float32 rows (normalized dims contiguous, weight/bias contiguous), sums and scaling in double, one rounding; rows up to ${MAX_LN_ROW}`,
  },
} as const;

/** A norm implementation of NORMS: the same operands and applications for each. */
function norm(b: NativeBackend, id: keyof typeof NORMS): Implementation {
  const { op, kernel, contract, rank, doc } = NORMS[id];
  const rms = op === "fused_rms_norm";
  return {
    id, op, contract, rank, doc,
    applies: (a) => {
      const at = a.attrs as NormAttrs;
      const x = a.inputs[0]!;
      if (a.dtype !== "float32" || x.dtype !== "float32" || !b.fits(a.op, a.inputs, a.shape) || at.dims < 1 || at.dims > x.shape.length) return false;
      const n = numel(x.shape.slice(x.shape.length - at.dims));
      if (n > (rms ? MAX_ROW : MAX_LN_ROW) || !rowsContiguous(x, at.dims)) return false;
      // [x, n, (n, n,) eps, w?, b?]: the constants may have any dtype (read as double); w and b dense float32
      const affine = a.inputs.slice(rms ? 3 : 5);
      return affine.every((t) => t.dtype === "float32" && isContiguous(t.shape, t.strides));
    },
    prepare: (a) => b.instruction(kernel, encodeAttrs(a.op, a.attrs, a.inputs, b.lib.opcodes)),
    runner: (a) => b.kernelRunner(kernel, encodeAttrs(a.op, a.attrs, a.inputs, b.lib.opcodes), a.shape, a.dtype),
  };
}

/**
 * fused_attention with float32 scores and exponentials (native/kernels/fused.c
 * k_fused_attention_f32x): the products q·kᵀ and P·v are the exact kernel's (the same GEMM calls,
 * the same bits); the prologue (scale, mask) runs in float32 with the exact kernel's roundings; the
 * softmax rows are fused_softmax.f32x's. Its bound is SOFTMAX_X_CONTRACT's on P against the
 * softmax in float64 of those scores, the form jit_matmul.ts states for a product's epilogue: the
 * output is P·v by the exact kernel's GEMM, so |Δo| ≤ 5e-7·Σ p·|v| beyond what P·v itself rounds.
 */
export const ATTENTION_X_CONTRACT: Contract = {
  kind: "bound", atol: SOFTMAX_X_CONTRACT.atol, rtol: SOFTMAX_X_CONTRACT.rtol,
  source: "src/backends/native/rows.ts (fused_softmax.f32x's rows on the exact kernel's float32 scores; products as the exact kernel)",
};

function attention(b: NativeBackend): Implementation {
  return {
    id: "native.fused_attention.f32x", op: "fused_attention", contract: ATTENTION_X_CONTRACT, rank: RANK_X,
    doc: "float32 scores by the exact kernel's GEMM, a simple float32 prologue (scale, mask), fused_softmax.f32x rows, P·v by the same GEMM",
    applies: (a) => {
      const at = a.attrs as AttentionAttrs;
      const S = at.prologue.shape[at.prologue.shape.length - 1] ?? 0;
      if (a.dtype !== "float32" || !b.fits(a.op, a.inputs, a.shape) || S > MAX_SOFTMAX_ROW) return false;
      if (!a.inputs.slice(0, 3).every((t) => t.dtype === "float32")) return false;
      return simplePrologue(at.prologue, a.inputs, true);
    },
    prepare: (a) => b.instruction("fused_attention_f32x", encodeAttrs(a.op, a.attrs, a.inputs, b.lib.opcodes)),
    runner: (a) => b.kernelRunner("fused_attention_f32x", encodeAttrs(a.op, a.attrs, a.inputs, b.lib.opcodes), a.shape, a.dtype),
  };
}

/** The bounded row implementations on `b` (none when the shim was built without them). */
export function rowImplementations(b: NativeBackend): Implementation[] {
  const out: Implementation[] = [];
  if (b.lib.opcodes.has("fused_softmax_f32")) out.push(softmax(b, false));
  if (b.lib.opcodes.has("fused_softmax_f32x")) out.push(softmax(b, true));
  for (const id of Object.keys(NORMS) as (keyof typeof NORMS)[]) if (b.lib.opcodes.has(NORMS[id].kernel)) out.push(norm(b, id));
  if (b.lib.opcodes.has("fused_attention_f32x")) out.push(attention(b));
  return out;
}
