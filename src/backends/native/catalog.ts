/**
 * The native backend's kernel catalog (backends/catalog.ts): for each registry op, the exact
 * kernel (`NativeBackend.prepare`: the shim's op-by-op kernels, the same bits as eager) and the
 * faster implementations with an error bound, each in its own file:
 * - rows.ts: float32 row kernels for fused_softmax, fused_rms_norm, fused_layer_norm (bounded)
 * - jit.ts: generated C per fused elementwise/reduce program (`native.fused_elementwise.jit_f32`,
 *   `native.fused_elementwise.jit`, `native.fused_reduce.jit`)
 * - jit_matmul.ts: products with a generated epilogue (`native.fused_matmul.jit_f32`, `.jit`)
 * - half_matmul.ts: float16/bfloat16 products accumulated in float32 (`native.matmul.f32acc.*`)
 * - lora.ts: LoRA linear with a one-pass double epilogue (`native.lora_linear.f32`, `native.fused_lora_linear.f32`)
 */
import { FUSED_OPS, OPS, type FusedOpName, type OpName } from "../../graph/registry.ts";
import type { Application, Implementation } from "../catalog.ts";
import type { NativeBackend } from "./backend.ts";
import { rowImplementations } from "./rows.ts";
import { jitImplementations } from "./jit.ts";
import { jitMatmulImplementations } from "./jit_matmul.ts";
import { halfMatmulImplementations } from "./half_matmul.ts";
import { loraImplementations } from "./lora.ts";

/** Rank of the exact kernels: after every bounded implementation that applies. */
const EXACT_RANK = 100;

/**
 * Ops whose one native kernel is itself the fused implementation (eager runs it too, so it is
 * the exact one), with its error against the float64 reference of the decomposition.
 */
const EXACT_DOCS: { readonly [K in OpName]?: string } = {
  quantized_linear: "fused dequantize-matmul (native/kernels/quant.c: W decoded in registers, GEMV/row tiles for M < 16, panels + sgemm above); vs float64 dequantize-then-matmul |y − ref| ≤ 2^-24·|ref| + (n + 16)·2^-24·Σ|x·w| over the n reduced terms (graph/ops/quantized.ts QUANT_ERROR_BOUND)",
  rotary_embedding: "fused RoPE (native/kernels/rope.c: float32 rows in float over unit-stride halves, vectorized; other dtypes/strides in double): each product and the sum rounded as the decomposition's mul, mul, add store them, so exact against x·cos + rotate_half(x)·sin (float16/bfloat16: float32 steps, one rounding to the half type, as the js reference)",
};

/** The exact implementation of `op`: the backend's own prepare (shim kernel or js fallback). */
function exact(b: NativeBackend, op: OpName | FusedOpName): Implementation {
  return {
    id: `native.${op}.exact`, op, contract: { kind: "exact" }, rank: EXACT_RANK,
    doc: EXACT_DOCS[op as OpName] ?? "the shim's exact kernel (each intermediate rounded as the unfused ops store it; js fallback where the shim lacks the op)",
    applies: () => true,
    prepare: (a: Application) => b.prepare(a.op, a.inputs, a.attrs, a.shape, a.dtype),
    runner: ({ op: o, attrs, shape, dtype }: Application) => (ins) => b.run(o, ins, attrs, shape, dtype), // not `a`: it holds the first call's buffers
  };
}

/** Every registry op's implementations on `b`, exact first. */
export function nativeCatalog(b: NativeBackend): ReadonlyMap<string, readonly Implementation[]> {
  const m = new Map<string, Implementation[]>();
  for (const name of [...Object.keys(OPS), ...Object.keys(FUSED_OPS)] as (OpName | FusedOpName)[]) m.set(name, [exact(b, name)]);
  const add = (impls: readonly Implementation[]) => { for (const i of impls) m.get(i.op)!.push(i); };
  add(rowImplementations(b));
  add(jitImplementations(b));
  add(jitMatmulImplementations(b));
  add(halfMatmulImplementations(b));
  add(loraImplementations(b));
  return m;
}
