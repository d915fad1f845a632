/**
 * The CUDA library without a GPU: it builds with nvcc wherever nvcc exists (a compile error fails
 * here, and CI runs this where nvcc is present), it loads (cudart is static: no driver needed to
 * dlopen), its opcode table is the registry's, and its command-buffer parser accepts what the
 * encoder writes and refuses malformed buffers before launching anything.
 */
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { FUSED_OPS, OPS } from "../../src/graph/registry.ts";
import { buildCuda, cudaLibPath } from "../../src/backends/cuda/build.ts";
import { CommandWriter, selectKernel } from "../../src/backends/cuda/encode.ts";
import { COUNTER_HEAD, parseOpNames } from "../../src/backends/cuda/ffi.ts";
import { registryOpcodes } from "../../src/backends/native/optable.ts";
import { ffi } from "../../src/runtime/ffi.ts";
import { NVCC } from "./device.ts";
import { CUDA_KERNEL_OPS } from "./ops_table.ts";

if (!NVCC) console.warn("[skip] CUDA library build: nvcc not found (set NVCC or install the CUDA toolkit)");

const SYMBOLS = {
  loom_cuda_abi_version: { args: [], returns: "i32" },
  loom_cuda_op_names: { args: [], returns: "ptr" },
  loom_cuda_error: { args: [], returns: "ptr" },
  loom_cuda_device_count: { args: [], returns: "i32" },
  loom_cuda_submit: { args: ["ptr", "f64"], returns: "i32" },
  loom_cuda_counters: { args: ["ptr"], returns: "void" },
} as const;

describe.if(NVCC !== null)("CUDA library (nvcc, no GPU needed)", () => {
  const built = NVCC ? buildCuda({ quiet: true }) : { ok: false as const, reason: "no nvcc" };

  test("builds with nvcc into the content-hashed path", () => {
    if (!built.ok) throw new Error(built.reason); // the compiler's message
    expect(built.path).toBe(cudaLibPath());
    expect(existsSync(built.path)).toBe(true);
  }, 300_000);

  const open = () => {
    if (!built.ok) throw new Error(built.reason);
    return ffi()!.dlopen(built.path, SYMBOLS).symbols;
  };

  test("loads; its opcode table is the registry's, with kernels for exactly the ops the backend expects", () => {
    const sym = open();
    expect(sym.loom_cuda_abi_version()).toBe(1);
    const { opcodes, opEnd } = parseOpNames(ffi()!.cstring(sym.loom_cuda_op_names()));
    const { elementwise, kernels } = registryOpcodes();
    expect(opEnd).toBe(elementwise.length + kernels.length);
    // elementwise ops first, in registry order (their opcodes are the CPU shim's)
    elementwise.forEach((n, i) => expect(opcodes.get(n)).toBe(i));
    expect([...opcodes.keys()].filter((n) => !elementwise.includes(n)).sort()).toEqual([...CUDA_KERNEL_OPS].sort());
    kernels.forEach((n, i) => { if (opcodes.has(n)) expect(opcodes.get(n)).toBe(elementwise.length + i); });
  });

  test("without a GPU the device count is -1 (no driver: the reason) or 0", () => {
    const sym = open();
    const n = sym.loom_cuda_device_count();
    if (n < 0) expect(ffi()!.cstring(sym.loom_cuda_error())).toContain("cudaGetDeviceCount");
    else expect(n).toBeGreaterThanOrEqual(0);
  });

  test("the parser takes what the encoder writes and refuses malformed instructions, launching nothing", () => {
    const sym = open();
    const { opcodes } = parseOpNames(ffi()!.cstring(sym.loom_cuda_op_names()));
    const x = { shape: [2, 3], dtype: "float32" as const };
    const sel = selectKernel(OPS.add, [x, x], {}, [2, 3], "float32", opcodes);
    if (!sel.device) throw new Error(sel.reason);
    const v = (addr: number) => ({ addr, dtype: "float32" as const, shape: [2, 3], strides: [3, 1], offset: 0 });
    const w = new CommandWriter();
    w.instr(sel.code, sel.words, v(4096), [v(8192), v(12288)]);
    const sum = selectKernel(OPS.sum, [x], { dim: [1], keepdim: false }, [2], "float32", opcodes);
    if (!sum.device) throw new Error(sum.reason);
    w.instr(sum.code, sum.words, { addr: 4096, dtype: "float32", shape: [2], strides: [1], offset: 0 }, [v(8192)]);
    const before = new Float64Array(COUNTER_HEAD + opcodes.size + 64);
    sym.loom_cuda_counters(before);
    // well-formed: parsed to the end, then refused for want of a device (-2)
    const gpuHere = sym.loom_cuda_device_count() > 0;
    if (!gpuHere) {
      expect(sym.loom_cuda_submit(w.buf, w.n)).toBe(-2);
      expect(ffi()!.cstring(sym.loom_cuda_error())).toBe("parsed 2 instructions; loom_cuda_init was not called");
    }
    // fused_reduce with prologue and epilogue, lora_linear with a bias: the C parser takes the TS encoders' words
    const load = (input: number, strides: number[]) => ({ k: "load" as const, input, strides, offset: 0, dtype: "float32" as const });
    const prologue = { shape: [2, 3], code: [load(0, [3, 1]), { k: "op" as const, op: OPS.exp as never, args: [0], dtype: "float32" as const }], out: 1 };
    const epilogue = { shape: [2], code: [{ k: "acc" as const, dtype: "float32" as const }, load(1, [1]), { k: "op" as const, op: OPS.div as never, args: [0, 1], dtype: "float32" as const }], out: 2 };
    const fr = selectKernel(FUSED_OPS.fused_reduce, [x, { shape: [2], dtype: "float32" }], { prologue, reduce: OPS.sum, dim: [1], keepdim: false, dtype: "float32", epilogue }, [2], "float32", opcodes);
    if (!fr.device) throw new Error(fr.reason);
    const lora = selectKernel(OPS.lora_linear, [x, x, { shape: [1, 3], dtype: "float32" }, { shape: [2, 1], dtype: "float32" }, { shape: [2], dtype: "float32" }], { scaling: 2, has_bias: true }, [2, 2], "float32", opcodes);
    if (!lora.device) throw new Error(lora.reason);
    const more = new CommandWriter();
    more.instr(fr.code, fr.words, { addr: 4096, dtype: "float32", shape: [2], strides: [1], offset: 0 }, [v(8192), { addr: 16384, dtype: "float32", shape: [2], strides: [1], offset: 0 }]);
    more.instr(lora.code, lora.words, { addr: 4096, dtype: "float32", shape: [2, 2], strides: [2, 1], offset: 0 }, [v(8192), v(12288), v(16384), v(20480), v(24576)]);
    if (!gpuHere) {
      expect(sym.loom_cuda_submit(more.buf, more.n)).toBe(-2);
      expect(ffi()!.cstring(sym.loom_cuda_error())).toBe("parsed 2 instructions; loom_cuda_init was not called");
    }
    // quantized_linear in every format (bias, transposed, int32 words): the parser takes the encoder's words
    const t = (addr: number, dtype: "float32" | "uint8" | "int8" | "int32", shape: number[]) => ({ addr, dtype, shape, strides: shape.map((_, d) => shape.slice(d + 1).reduce((a, b) => a * b, 1)), offset: 0 });
    const ql = (format: string, has_bias: boolean, transposed: boolean, ins: ReturnType<typeof t>[], out: ReturnType<typeof t>) => {
      const sel = selectKernel(OPS.quantized_linear, ins, { format, has_bias, transposed }, out.shape, "float32", opcodes);
      if (!sel.device) throw new Error(sel.reason);
      return { sel, ins, out };
    };
    // W [3, 64]; x [2, 5, 64]
    const qls = [
      ql("q8_0", true, false, [t(4096, "float32", [2, 5, 64]), t(8192, "uint8", [3, 68]), t(12288, "float32", [3])], t(16384, "float32", [2, 5, 3])),
      ql("q4_0", false, true, [t(4096, "float32", [4, 3]), t(8192, "uint8", [3, 36])], t(16384, "float32", [4, 64])),
      ql("nf4", true, false, [t(4096, "float32", [1, 64]), t(8192, "uint8", [3, 32]), t(12288, "float32", [3]), t(20480, "float32", [3])], t(16384, "float32", [1, 3])),
      ql("int8", false, false, [t(4096, "float32", [64]), t(8192, "int32", [3, 16]), t(12288, "float32", [3])], t(16384, "float32", [3])),
    ];
    const qw = new CommandWriter();
    for (const q of qls) qw.instr(q.sel.code, q.sel.words, q.out, q.ins);
    if (!gpuHere) {
      expect(sym.loom_cuda_submit(qw.buf, qw.n)).toBe(-2);
      expect(ffi()!.cstring(sym.loom_cuda_error())).toBe("parsed 4 instructions; loom_cuda_init was not called");
    }
    // malformed quantized_linear instructions are refused, naming the problem
    const refuse = (words: number[], ins: ReturnType<typeof t>[], out: ReturnType<typeof t>, msg: string) => {
      const bad = new CommandWriter();
      bad.instr(qls[0]!.sel.code, words, out, ins);
      expect(sym.loom_cuda_submit(bad.buf, bad.n)).toBe(0);
      expect(ffi()!.cstring(sym.loom_cuda_error())).toBe(`instruction 0 (quantized_linear): ${msg}`);
    };
    const [x64, q4, o3] = [t(4096, "float32", [2, 64]), t(8192, "uint8", [3, 36]), t(16384, "float32", [2, 3])];
    refuse([1, 0, 0], [x64, q4, t(12288, "float32", [3])], o3, "3 operands, expected 2");
    refuse([7, 0, 0], [x64, q4], o3, "unknown format code 7");
    refuse([1, 1, 1], [x64, q4, t(12288, "float32", [3])], o3, "the transposed form takes no bias");
    refuse([1, 0, 0], [x64, t(8192, "uint8", [3, 35])], o3, "row of 35 bytes is not a whole number of 18-byte blocks");
    refuse([1, 0, 0], [t(4096, "float32", [2, 32]), q4], o3, "x's last dim 32, out's 3 for W [3, 64]");
    refuse([2, 0, 0], [x64, t(8192, "uint8", [3, 32]), t(12288, "float32", [2])], o3, "scales must be float32 [3]");
    refuse([3, 0, 1], [x64, t(8192, "int8", [3, 64]), t(12288, "float32", [3]), t(20480, "float32", [4])], o3, "bias must be float32 [3]");
    refuse([1, 0], [x64, q4], o3, "2 attrs, expected 3");
    // an epilogue whose rank differs from the output's is refused (as the CPU shim's prog_run)
    const wrongRank = new CommandWriter();
    wrongRank.instr(fr.code, fr.words, { addr: 4096, dtype: "float32", shape: [2, 1], strides: [1, 1], offset: 0 }, [v(8192), { addr: 16384, dtype: "float32", shape: [2], strides: [1], offset: 0 }]);
    expect(sym.loom_cuda_submit(wrongRank.buf, wrongRank.n)).toBe(0);
    expect(ffi()!.cstring(sym.loom_cuda_error())).toBe("instruction 0: epilogue rank 1 != output rank 2");
    // an opcode without a CUDA kernel (index_select) in instruction 1
    const bad = new CommandWriter();
    bad.instr(sel.code, sel.words, v(4096), [v(8192), v(12288)]);
    bad.instr(registryOpcodes().elementwise.length + registryOpcodes().kernels.indexOf("index_select"), [0, 0], v(4096), [v(8192), v(12288)]);
    expect(sym.loom_cuda_submit(bad.buf, bad.n)).toBe(1);
    expect(ffi()!.cstring(sym.loom_cuda_error())).toContain("bad instruction 1");
    expect(ffi()!.cstring(sym.loom_cuda_error())).toContain("no CUDA kernel");
    // truncated: the word count runs past the buffer
    expect(sym.loom_cuda_submit(w.buf, w.n - 3)).toBe(1);
    // a program whose register count exceeds the interpreter's
    const prog = new CommandWriter();
    const fe = opcodes.get("fused_elementwise")!;
    // [nd=1, shape 6, nregs 40, ncode 1, out 0, LOAD dst 0 input 0 offset 0 stride 1]
    prog.instr(fe, [1, 6, 40, 1, 0, 0, 0, 0, 0, 1], { addr: 4096, dtype: "float32", shape: [6], strides: [1], offset: 0 }, [{ addr: 8192, dtype: "float32", shape: [6], strides: [1], offset: 0 }]);
    expect(sym.loom_cuda_submit(prog.buf, prog.n)).toBe(0);
    expect(ffi()!.cstring(sym.loom_cuda_error())).toContain("program of 40 registers");
    // nothing was launched by any of these
    const after = new Float64Array(before.length);
    sym.loom_cuda_counters(after);
    if (!gpuHere) expect(after[1]).toBe(before[1]!);
  });
});
