/**
 * Generated js kernels against the reference semantics: the inlined expressions equal the
 * registry refs on edge values, and generated kernels equal the program interpreter for every
 * dtype's rounding (float32/64, half types, ints with wrap-around, bool, int64).
 */
import { expect, test } from "bun:test";
import { elementwiseKernel, INLINE, reduceKernel } from "../../src/backends/js/codegen.ts";
import type { ElementwiseOp } from "../../src/graph/op.ts";
import { interpret, type Program } from "../../src/graph/passes/program.ts";
import { FUSED_OPS, OPS } from "../../src/graph/registry.ts";
import type { DType } from "../../src/tensor/dtype.ts";
import { allocData, fromValues, toFloat64 } from "../../src/tensor/storage.ts";

const EDGE = [0, -0, 1, -1, 0.5, -2.5, 3.7, 1e-300, -1e300, 65504, 2 ** 31, -(2 ** 31) - 1, 300, Infinity, -Infinity, NaN];

test("inlined expressions are the registry refs", () => {
  for (const name of Object.keys(INLINE)) {
    const op = (OPS as unknown as Record<string, ElementwiseOp<any>>)[name]!;
    const f = new Function("a", "b", "c", `return ${INLINE[name]!("a", "b", "c")};`) as (a: number, b: number, c: number) => number;
    for (const a of EDGE) for (const b of EDGE) {
      const c = name === "where" ? (a ? 1 : 0) : 0;
      const [x, y, z] = name === "where" ? [c, a, b] : [a, b, 0];
      expect(Object.is(f(x, y, z), op.ref(x, y, z))).toBe(true);
    }
  }
});

/** A program computing op(in0, in1) then `then` over [n], with loads of the given dtypes. */
function prog(n: number, dtIn: DType, op: string, dtOut: DType, then: string, dtThen: DType): Program {
  const O = OPS as unknown as Record<string, ElementwiseOp<any>>;
  return {
    shape: [n],
    code: [
      { k: "load", input: 0, strides: [1], offset: 0, dtype: dtIn },
      { k: "load", input: 1, strides: [0], offset: 2, dtype: dtIn }, // a broadcast scalar read at offset 2
      { k: "op", op: O[op]!, args: [0, 1], dtype: dtOut },
      { k: "op", op: O[then]!, args: [2, 0], dtype: dtThen },
    ],
    out: 3,
  };
}

test("generated elementwise kernels round like the interpreter for every dtype", () => {
  const cases: [DType, string, DType, string, DType][] = [
    ["float32", "mul", "float32", "add", "float32"],
    ["float64", "div", "float64", "sub", "float64"],
    ["float16", "mul", "float16", "add", "float16"],
    ["bfloat16", "add", "bfloat16", "mul", "bfloat16"],
    ["int32", "mul", "int32", "add", "int32"],
    ["int8", "mul", "int8", "sub", "int8"],
    ["uint8", "add", "uint8", "mul", "uint8"],
    ["int64", "floor_divide", "int64", "sub", "int64"], // remainder by the zeros of a raises (tests/core/numerics)
    ["float32", "gt", "bool", "logical_and", "bool"],
    ["float32", "maximum", "float32", "pow", "float32"],
  ];
  const vals = [1.5, -2.25, 7, 100, -128, 3.3, 250, 0.1, -0.7, 12];
  for (const [din, op, dout, then, dthen] of cases) {
    const p = prog(vals.length, din, op, dout, then, dthen);
    const a = fromValues(din, [vals.length], vals.map((v) => (din === "bool" ? +(v > 0) : v)));
    const b = fromValues(din, [3], [3, 9, din === "int64" || din.startsWith("int") || din === "uint8" ? 3 : 1.75]);
    const want = allocData(dthen, [vals.length]);
    interpret(p, [a, b], want);
    const got = allocData(dthen, [vals.length]);
    elementwiseKernel(p)([a, b], got);
    expect(Array.from(toFloat64(got))).toEqual(Array.from(toFloat64(want)));
  }
});

test("generated reductions fold in the reference order (float32 sums over strided dims)", () => {
  const x = fromValues("float32", [3, 4, 5], Array.from({ length: 60 }, (_, i) => Math.sin(i) * 10 ** (i % 7)));
  for (const dim of [[0], [1], [2], [0, 2], [0, 1, 2]]) {
    const prologue: Program = { shape: [3, 4, 5], code: [{ k: "load", input: 0, strides: [20, 5, 1], offset: 0, dtype: "float32" }], out: 0 };
    const attrs = { prologue, reduce: OPS.sum, dim, keepdim: false, dtype: "float32" as DType, epilogue: null };
    const shape = FUSED_OPS.fused_reduce.shape([], attrs);
    const want = allocData("float32", shape);
    FUSED_OPS.fused_reduce.ref([x], attrs, want);
    const got = allocData("float32", shape);
    reduceKernel(attrs)([x], got);
    expect(Array.from(got.data)).toEqual(Array.from(want.data));
  }
});
