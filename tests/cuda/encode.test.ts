/**
 * The CUDA backend's CPU side, without a GPU or nvcc: the command encoding (hand-derived words
 * in the CPU shim's format) and the kernel selection (which applications run on the device, and
 * why the others go to the CPU). Pure functions of their arguments: no library, no device.
 */
import { describe, expect, test } from "bun:test";
import { OPS, FUSED_OPS } from "../../src/graph/registry.ts";
import type { Program } from "../../src/graph/passes/program.ts";
import { CommandWriter, MAX_REGS, mayFault, programProblem, selectKernel } from "../../src/backends/cuda/encode.ts";
import { parseOpNames } from "../../src/backends/cuda/ffi.ts";
import { cudaOpcodes } from "./ops_table.ts";

const codes = cudaOpcodes();
const f32 = (shape: number[]) => ({ shape, dtype: "float32" as const });
const i64 = (shape: number[]) => ({ shape, dtype: "int64" as const });

describe("command encoding", () => {
  test("an instruction is [opcode, nwords, nin, nattr, attrs, out, ins] with tensors [addr, dtype, nd, offset, shape, strides]", () => {
    const w = new CommandWriter(4); // grows
    const out = { addr: 0x7f0000001000, dtype: "float32" as const, shape: [2, 3], strides: [3, 1], offset: 0 };
    const a = { addr: 0x7f0000002000, dtype: "float64" as const, shape: [3], strides: [1], offset: 5 };
    w.instr(22, [7, 8], out, [a]);
    // words: 4 header + 2 attrs + (4 + 2·2) out + (4 + 2·1) in = 20
    expect(Array.from(w.buf.subarray(0, w.n))).toEqual([
      22, 20, 1, 2, 7, 8,
      0x7f0000001000, 0, 2, 0, 2, 3, 3, 1,
      0x7f0000002000, 1, 1, 5, 3, 1,
    ]);
    expect(w.count).toBe(1);
    w.instr(0, [], { ...out, shape: [], strides: [] }, []);
    expect(w.n).toBe(20 + 8); // a 0-d output, no inputs
    expect(Array.from(w.buf.subarray(20, 28))).toEqual([0, 8, 0, 0, 0x7f0000001000, 0, 0, 0]);
    w.reset();
    expect([w.n, w.count, w.keep.length]).toEqual([0, 0, 0]);
  });

  test("device addresses up to 2^53 survive the double words exactly", () => {
    const w = new CommandWriter();
    const addr = 2 ** 52 + 4096;
    w.instr(1, [], { addr, dtype: "bool", shape: [1], strides: [1], offset: 0 }, []);
    expect(w.buf[4]).toBe(addr);
  });

  test("loom_cuda_op_names parses to one opcode per named op (empty names have no kernel)", () => {
    expect(parseOpNames("neg,,add,").opcodes).toEqual(new Map([["neg", 0], ["add", 2]]));
    expect(parseOpNames("neg,,add,").opEnd).toBe(3);
  });
});

describe("kernel selection", () => {
  test("float elementwise ops, reductions, matmul and lora_linear run on the device with the native attribute words", () => {
    const add = selectKernel(OPS.add, [f32([2, 3]), f32([3])], {}, [2, 3], "float32", codes);
    expect(add).toEqual({ device: true, code: codes.get("add")!, words: [] });
    // sum over dims [0, 2] of [2, 3, 4]: words [ndims, dims...]
    expect(selectKernel(OPS.sum, [f32([2, 3, 4])], { dim: [0, 2], keepdim: false }, [3], "float32", codes)).toEqual({ device: true, code: codes.get("sum")!, words: [2, 0, 2] });
    expect(selectKernel(OPS.matmul, [f32([4, 5]), f32([5, 6])], {}, [4, 6], "float32", codes)).toEqual({ device: true, code: codes.get("matmul")!, words: [] });
    // lora_linear: [scaling, has_bias]
    const lora = selectKernel(OPS.lora_linear, [f32([2, 6]), f32([5, 6]), f32([2, 6]), f32([5, 2])], { scaling: 2, has_bias: false }, [2, 5], "float32", codes);
    expect(lora).toEqual({ device: true, code: codes.get("lora_linear")!, words: [2, 0] });
    // comparisons give bool: no fault possible
    expect(selectKernel(OPS.lt, [f32([3]), f32([3])], {}, [3], "bool", codes).device).toBe(true);
  });

  test("quantized_linear runs on the device in all four formats, forward, with bias, transposed and as int32 words; words [format, transposed, has_bias]", () => {
    const u8 = (shape: number[]) => ({ shape, dtype: "uint8" as const });
    const i8 = (shape: number[]) => ({ shape, dtype: "int8" as const });
    const i32 = (shape: number[]) => ({ shape, dtype: "int32" as const });
    const q = codes.get("quantized_linear")!;
    expect(q).toBeDefined();
    const qa = (format: string, has_bias: boolean, transposed: boolean) => ({ format, has_bias, transposed });
    // W [3, 64]: q8_0 rows of 2·34 bytes, q4_0 2·18, nf4 64/2 with 3 absmax, int8 64 with 3 scales
    const x = f32([2, 5, 64]);
    expect(selectKernel(OPS.quantized_linear, [x, u8([3, 68]), f32([3])], qa("q8_0", true, false), [2, 5, 3], "float32", codes)).toEqual({ device: true, code: q, words: [0, 0, 1] });
    expect(selectKernel(OPS.quantized_linear, [x, u8([3, 36])], qa("q4_0", false, false), [2, 5, 3], "float32", codes)).toEqual({ device: true, code: q, words: [1, 0, 0] });
    expect(selectKernel(OPS.quantized_linear, [x, u8([3, 32]), f32([3])], qa("nf4", false, false), [2, 5, 3], "float32", codes)).toEqual({ device: true, code: q, words: [2, 0, 0] });
    expect(selectKernel(OPS.quantized_linear, [x, i8([3, 64]), f32([3]), f32([3])], qa("int8", true, false), [2, 5, 3], "float32", codes)).toEqual({ device: true, code: q, words: [3, 0, 1] });
    // the gradient's transposed form: x [..., N] -> [..., K]; and the int32 word form of the bytes
    expect(selectKernel(OPS.quantized_linear, [f32([4, 3]), u8([3, 36])], qa("q4_0", false, true), [4, 64], "float32", codes)).toEqual({ device: true, code: q, words: [1, 1, 0] });
    expect(selectKernel(OPS.quantized_linear, [f32([4, 64]), i32([3, 17])], qa("q8_0", false, false), [4, 3], "float32", codes)).toEqual({ device: true, code: q, words: [0, 0, 0] });
    // what still goes to the CPU: empty tensors (the generic rule), and a library built without the kernel
    expect(selectKernel(OPS.quantized_linear, [f32([0, 64]), u8([3, 36])], qa("q4_0", false, false), [0, 3], "float32", codes)).toEqual({ device: false, reason: "empty output" });
    const old = new Map([...codes].filter(([n]) => n !== "quantized_linear"));
    expect(selectKernel(OPS.quantized_linear, [x, u8([3, 36])], qa("q4_0", false, false), [2, 5, 3], "float32", old)).toEqual({ device: false, reason: "no CUDA kernel for quantized_linear" });
  });

  test("integer results that may fault go to the CPU, with the reason; safe integer ops stay on the device", () => {
    const fd = selectKernel(OPS.floor_divide, [i64([3]), i64([3])], {}, [3], "int64", codes);
    expect(fd).toEqual({ device: false, reason: "integer result (int64) that may fault: the CPU kernels raise it" });
    // float -> int cast: inf/NaN cannot be stored in an int64 (the CPU raises)
    expect(selectKernel(OPS.cast, [f32([3])], {}, [3], "int64", codes).device).toBe(false);
    // int + int, int copy: finite, never divide
    expect(selectKernel(OPS.add, [i64([3]), i64([3])], {}, [3], "int64", codes).device).toBe(true);
    expect(selectKernel(OPS.contiguous, [i64([3])], {}, [3], "int64", codes).device).toBe(true);
    expect(mayFault("pow", "int32", ["int32", "int32"])).toBe(true); // 10^400 is inf
    expect(mayFault("mul", "int32", ["int32", "bool"])).toBe(false);
    expect(mayFault("mul", "int32", ["int32", "float32"])).toBe(true);
    expect(mayFault("div", "float32", ["int32", "int32"])).toBe(false);
  });

  test("ops without a CUDA kernel, empty tensors and too many dims go to the CPU", () => {
    expect(selectKernel(OPS.index_select, [f32([5, 3]), i64([2])], { dim: 0 }, [2, 3], "float32", codes)).toEqual({ device: false, reason: "no CUDA kernel for index_select" });
    expect(selectKernel(OPS.add, [f32([0, 3]), f32([0, 3])], {}, [0, 3], "float32", codes)).toEqual({ device: false, reason: "empty output" });
    const deep = new Array(17).fill(1);
    expect(selectKernel(OPS.neg, [f32(deep)], {}, deep, "float32", codes)).toEqual({ device: false, reason: "more than 16 dims" });
    expect(selectKernel(FUSED_OPS.fused_softmax, [f32([2, 3])], {}, [2, 3], "float32", codes).device).toBe(false);
  });

  test("fused programs: on the device within the interpreter's registers, on the CPU beyond", () => {
    const load = (input: number) => ({ k: "load" as const, input, strides: [1], offset: 0, dtype: "float32" as const });
    // x·y + x: registers are reused once dead, so this needs 3
    const small: Program = {
      shape: [8],
      code: [load(0), load(1), { k: "op", op: OPS.mul as never, args: [0, 1], dtype: "float32" }, { k: "op", op: OPS.add as never, args: [2, 0], dtype: "float32" }],
      out: 3,
    };
    expect(programProblem(small, codes)).toBe("");
    const sel = selectKernel(FUSED_OPS.fused_elementwise, [f32([8]), f32([8])], { program: small }, [8], "float32", codes);
    expect(sel.device).toBe(true);
    // MAX_REGS + 1 loads all live until one sum at the end: MAX_REGS + 2 registers
    const n = MAX_REGS + 1;
    const code: Program["code"][number][] = Array.from({ length: n }, (_, i) => load(i));
    let acc = 0;
    for (let i = 1; i < n; i++) { code.push({ k: "op", op: OPS.add as never, args: [acc, i], dtype: "float32" }); acc = code.length - 1; }
    // reading every load again at the end keeps them all live
    for (let i = 0; i < n; i++) { code.push({ k: "op", op: OPS.add as never, args: [acc, i], dtype: "float32" }); acc = code.length - 1; }
    const big: Program = { shape: [8], code, out: acc };
    expect(programProblem(big, codes)).toMatch(/^program of \d+ registers \(the device interpreter holds 32\)$/);
    const ins = Array.from({ length: n }, () => f32([8]));
    expect(selectKernel(FUSED_OPS.fused_elementwise, ins, { program: big }, [8], "float32", codes).device).toBe(false);
    // an integer floor_divide inside a program
    const intProg: Program = {
      shape: [4],
      code: [{ ...load(0), dtype: "int64" }, { ...load(1), dtype: "int64" }, { k: "op", op: OPS.floor_divide as never, args: [0, 1], dtype: "int64" }],
      out: 2,
    };
    expect(programProblem(intProg, codes)).toBe("program op floor_divide has an integer result (int64) that may fault");
  });
});
