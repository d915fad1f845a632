/**
 * Generated epilogues for products: `fused_matmul` (matmul, then an elementwise epilogue such as
 * bias + GELU or a residual add) as the exact kernels' GEMM followed by a generated elementwise
 * kernel (jit.ts) in place of the shim's interpreted epilogue. The interpreter evaluates the
 * epilogue one element at a time through a generic program loop in double; on the W7 training
 * step's [16, 128, 1536] products that second pass cost about as much as a third of the GEMM.
 *
 * The product is the exact kernel's (the same `matmul` kernel, the same bits); only the epilogue
 * differs, with the contract of the generated elementwise kernel it runs (FAST_CONTRACT for
 * float32 with the running error bound, JIT_CONTRACT in double), relative to the epilogue
 * evaluated in float64 on that product. The product is written into the output buffer and the
 * epilogue reads it there element for element (each element read before it is written, by the
 * same thread), so no scratch buffer is needed.
 */
import type { FusedElementwiseAttrs, FusedMatmulAttrs } from "../../graph/passes/fused_ops.ts";
import type { Instr, Program } from "../../graph/passes/program.ts";
import { FUSED_OPS, OPS } from "../../graph/registry.ts";
import { contiguousStrides, numel } from "../../tensor/shape.ts";
import type { InputLayout, PreparedKernel } from "../backend.ts";
import type { Application, Implementation } from "../catalog.ts";
import type { NativeBackend } from "./backend.ts";
import { common, FAST_CONTRACT, JIT_CONTRACT, jitKernel } from "./jit.ts";
import { genElementwise, unsupported } from "./jit_codegen.ts";
import { genElementwiseFast, unsupportedFast } from "./jit_fast.ts";

/**
 * The epilogue as a plain elementwise program over the inputs plus one more, the product: each
 * `acc` becomes a dense load of input `nin` (the product's elements in order, as `acc` reads them).
 */
export function epilogueProgram(attrs: FusedMatmulAttrs, nin: number): Program {
  const p = attrs.epilogue;
  const strides = contiguousStrides(p.shape);
  const code: Instr[] = p.code.map((c) => (c.k === "acc" ? { k: "load", input: nin, strides, offset: 0, dtype: c.dtype } : c));
  return { shape: p.shape, code, out: p.out };
}

/** The elementwise application running the epilogue: the fused op's inputs, then the dense product. */
function epilogueApplication(a: Application): Application {
  const attrs = a.attrs as FusedMatmulAttrs;
  const product: InputLayout = { shape: a.shape, strides: contiguousStrides(a.shape), dtype: attrs.dtype };
  const program = epilogueProgram(attrs, a.inputs.length);
  return { op: FUSED_OPS.fused_elementwise, inputs: [...a.inputs, product], attrs: { program } satisfies FusedElementwiseAttrs, shape: a.shape, dtype: a.dtype };
}

/** Whether the product can go into the output buffer (one dtype, one element count) and the epilogue kernel applies. */
function fits(b: NativeBackend, a: Application): boolean {
  const attrs = a.attrs as FusedMatmulAttrs;
  return attrs.dtype === a.dtype && numel(attrs.shape) === numel(a.shape) && common(b, epilogueApplication(a));
}

/** GEMM into `out` (viewed with the product's shape), then the generated epilogue in place. */
function prepare(b: NativeBackend, a: Application, generate: (p: Program) => ReturnType<typeof genElementwise>): PreparedKernel {
  const attrs = a.attrs as FusedMatmulAttrs;
  const gemm = b.prepare(OPS.matmul, [a.inputs[0]!, a.inputs[1]!], {}, attrs.shape, attrs.dtype);
  const ea = epilogueApplication(a);
  const epilogue = jitKernel(b, ea, generate((ea.attrs as FusedElementwiseAttrs).program));
  const pstrides = contiguousStrides(attrs.shape), ostrides = contiguousStrides(a.shape);
  return (ins, out) => {
    gemm([ins[0]!, ins[1]!], b.view(out, attrs.shape, pstrides, out.offset));
    epilogue([...ins, b.view(out, a.shape, ostrides, out.offset)], out);
  };
}

/** The generated-epilogue implementations of fused_matmul (native catalog). */
export function jitMatmulImplementations(b: NativeBackend): Implementation[] {
  const program = (a: Application) => epilogueProgram(a.attrs as FusedMatmulAttrs, a.inputs.length);
  return [
    {
      id: "native.fused_matmul.jit_f32", op: "fused_matmul", contract: FAST_CONTRACT, rank: 40,
      doc: "the exact kernels' GEMM into the output, then the epilogue as a generated float32 elementwise kernel (running error bound, else double) in place",
      applies: (a) => fits(b, a) && a.dtype === "float32" && unsupportedFast(program(a)) === null,
      prepare: (a) => prepare(b, a, genElementwiseFast),
    },
    {
      id: "native.fused_matmul.jit", op: "fused_matmul", contract: JIT_CONTRACT, rank: 50,
      doc: "the exact kernels' GEMM into the output, then the epilogue as a generated elementwise kernel evaluated in double, in place",
      applies: (a) => fits(b, a) && unsupported(program(a), false) === null,
      prepare: (a) => prepare(b, a, genElementwise),
    },
  ];
}
