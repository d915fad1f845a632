/**
 * Native kernels against the js reference, op by op, over every dtype Loom stores, with
 * broadcasting, strided (transposed) and offset operands and edge values (NaN, ±0, ±Inf, large
 * integers). Tolerance: bit-exact for ops whose math is the same IEEE sequence (arithmetic,
 * comparisons, rounding, casts, data movement, integer and float64-accumulated sums along rows);
 * transcendental functions (libm vs the JS engine's) within 2 float32 ulps or 1e-14 relative in
 * float64; GEMM and lane-parallel sums within float32 (1e-5) / float64 (1e-12) relative error.
 * A registry op without a native kernel fails here.
 */
import { describe, expect, test } from "bun:test";
import { jsBackend } from "../../src/backends/js/backend.ts";
import { OPS } from "../../src/graph/registry.ts";
import type { OpDef } from "../../src/graph/op.ts";
import { DTYPES, isFloating, type DType } from "../../src/tensor/dtype.ts";
import { fromValues, toFloat64, viewOf, type TensorData } from "../../src/tensor/storage.ts";
import { NATIVE, nativeOrSkip } from "./helpers.ts";

const TRANSCENDENTAL = new Set(["exp", "log", "log1p", "sin", "cos", "tanh", "sigmoid", "erf", "pow", "sqrt", "rsqrt"]);

/** Edge values representable in each dtype (as the js encoders store them). */
function values(d: DType, n: number, salt: number): number[] {
  const base = isFloating(d)
    ? [0, -0, 1, -1, 0.5, -2.5, 3.25, 1e-3, -7.75, 100, NaN, Infinity, -Infinity, 2.5, -0.5, 65504]
    : d === "bool" ? [0, 1, 1, 0, 1]
      : d === "uint8" ? [0, 1, 2, 7, 200, 255, 3, 9]
        : d === "int8" ? [0, 1, -1, 7, -128, 127, -3, 9]
          : [0, 1, -1, 7, -100, 2147483647, -2147483648, 3, -9, 12];
  return Array.from({ length: n }, (_, i) => base[(i * 7 + salt) % base.length]!);
}

function make(d: DType, shape: number[], salt: number): TensorData {
  return fromValues(d, shape, values(d, shape.reduce((p, s) => p * s, 1), salt));
}
/** A transposed view of a fresh [c, r] tensor: strided, same values layout as `shape` [r, c]. */
function transposed(d: DType, r: number, c: number, salt: number): TensorData {
  const t = make(d, [c, r], salt);
  return viewOf(t, [r, c], [1, r], 0);
}

function ulpClose(a: number, b: number, d: DType, op: string): boolean {
  if (Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b))) return true;
  if (!TRANSCENDENTAL.has(op) || !Number.isFinite(a) || !Number.isFinite(b)) return false;
  const rel = Math.abs(a - b) / Math.max(Math.abs(a), Math.abs(b), 1e-30);
  return d === "float64" ? rel < 1e-14 : d === "float32" ? rel < 2.5e-7 : rel < 1e-2;
}

function compare(op: OpDef, inputs: TensorData[], attrs: unknown, tol: "exact" | number = "exact"): string | null {
  const nb = nativeOrSkip();
  const shape = op.shape(inputs, attrs);
  const dtype = op.dtype(inputs, attrs);
  let want: Float64Array;
  try {
    want = toFloat64(jsBackend.run(op, inputs, attrs, shape, dtype));
  } catch (e) {
    // inputs the reference refuses (integer division by zero, a cast of inf to int): native
    // must refuse them with the same typed error and message
    const msg = `${(e as Error).name}: ${(e as Error).message}`;
    try {
      toFloat64(nb.run(op, inputs, attrs, shape, dtype));
    } catch (f) {
      const got = `${(f as Error).name}: ${(f as Error).message}`;
      return got === msg ? null : `${op.name}: native raised "${got}", js "${msg}"`;
    }
    return `${op.name}: js raised "${msg}", native did not`;
  }
  const before = nb.stats.fallbacks;
  const got = toFloat64(nb.run(op, inputs, attrs, shape, dtype));
  if (nb.stats.fallbacks !== before) return `${op.name}: ran on the js fallback`;
  for (let i = 0; i < want.length; i++) {
    const a = got[i]!, b = want[i]!;
    const ok = tol === "exact" ? ulpClose(a, b, dtype, op.name)
      : Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b)) || Math.abs(a - b) <= tol * Math.max(1, Math.abs(b));
    if (!ok) return `${op.name} ${inputs.map((x) => x.dtype).join(",")} -> ${dtype} [${i}]: native ${a}, js ${b}`;
  }
  return null;
}

describe.skipIf(!NATIVE)("native == js reference", () => {
  test("every registry op has a native kernel but argsort (views are stride arithmetic)", () => {
    const nb = nativeOrSkip();
    const missing = Object.values(OPS).filter((op) => !nb.supports(op)).map((op) => op.name);
    expect(missing).toEqual(["argsort"]); // sort/topk run the js reference (tests/core/sort_ops.test.ts)
  });

  const elementwise = Object.values(OPS).filter((op) => op.kind === "elementwise");
  for (const op of elementwise) {
    test(`${op.name}: every dtype, broadcast and strided`, () => {
      const errs: string[] = [];
      for (const d of DTYPES) {
        const args = (k: number) => Array.from({ length: op.arity }, (_, i) =>
          op.name === "where" && i === 0 ? make("bool", [5, 1], k) : i === 1 ? transposed(d, 5, 3, k + i) : make(d, [5, 3], k + i));
        const bcast = Array.from({ length: op.arity }, (_, i) =>
          op.name === "where" && i === 0 ? make("bool", [3], 2) : i === 1 ? make(d, [4, 1, 3], 5) : make(d, [2, 3], 1));
        for (const ins of [args(0), args(3), bcast]) {
          let ok = true;
          const attrs: any = op.name === "cast" ? { dtype: DTYPES[(DTYPES.indexOf(d) + 3) % DTYPES.length] } : {};
          try { op.shape(ins, attrs); op.dtype(ins, attrs); } catch { ok = false; }
          if (ok) errs.push(compare(op, ins, attrs) ?? "");
        }
      }
      expect(errs.filter((e) => e)).toEqual([]);
    });
  }

  test("cast between every pair of dtypes", () => {
    const errs: string[] = [];
    for (const from of DTYPES) for (const to of DTYPES) errs.push(compare(OPS.cast, [make(from, [16], 0)], { dtype: to }) ?? "");
    expect(errs.filter((e) => e)).toEqual([]);
  });

  test("sum / amax / amin over every dim set, every dtype", () => {
    const errs: string[] = [];
    const dims = [[0], [1], [2], [0, 2], [0, 1, 2], [1, 2]];
    for (const d of DTYPES) {
      const x = make(d, [3, 4, 5], 1);
      const xt = viewOf(make(d, [5, 4, 3], 2), [3, 4, 5], [1, 3, 12], 0);
      for (const op of [OPS.sum, OPS.amax, OPS.amin]) {
        for (const dim of dims) for (const t of [x, xt]) errs.push(compare(op, [t], { dim, keepdim: dim.length === 1 }, isFloating(d) ? 1e-6 : "exact") ?? "");
      }
    }
    expect(errs.filter((e) => e)).toEqual([]);
  });

  test("argmax / argmin (NaN and ties) and cumsum", () => {
    const errs: string[] = [];
    for (const d of DTYPES) {
      const x = transposed(d, 6, 4, 3);
      for (const dim of [null, 0, 1, -1]) {
        errs.push(compare(OPS.argmax, [x], { dim, keepdim: false }) ?? "");
        errs.push(compare(OPS.argmin, [x], { dim, keepdim: dim === 0 }) ?? "");
      }
      if (d !== "float16" && d !== "bfloat16") {
        for (const dim of [0, 1]) for (const reverse of [false, true]) errs.push(compare(OPS.cumsum, [x], { dim, reverse }) ?? "");
      }
    }
    expect(errs.filter((e) => e)).toEqual([]);
  });

  test("matmul: float32, float64 and integer dtypes, batched, broadcast, transposed", () => {
    const errs: string[] = [];
    const r = (d: DType, shape: number[], k: number) => fromValues(d, shape, Array.from({ length: shape.reduce((p, s) => p * s, 1) }, (_, i) => ((i * 37 + k) % 19) - 9));
    for (const d of ["float32", "float64", "int32", "int64", "int8", "float16"] as DType[]) {
      const tol = d === "float32" ? 1e-5 : d === "float16" ? 1e-2 : d === "float64" ? 1e-12 : "exact";
      errs.push(compare(OPS.matmul, [r(d, [7, 5], 1), r(d, [5, 9], 2)], {}, tol) ?? "");
      errs.push(compare(OPS.matmul, [r(d, [2, 3, 7, 5], 1), r(d, [5, 4], 2)], {}, tol) ?? "");
      errs.push(compare(OPS.matmul, [r(d, [3, 1, 4, 6], 1), r(d, [2, 6, 3], 2)], {}, tol) ?? "");
      const bt = viewOf(r(d, [9, 5], 4), [5, 9], [1, 5], 0);
      const at = viewOf(r(d, [5, 7], 3), [7, 5], [1, 7], 0);
      errs.push(compare(OPS.matmul, [at, bt], {}, tol) ?? "");
    }
    const big = (k: number) => fromValues("float32", [96, 130], Array.from({ length: 96 * 130 }, (_, i) => Math.sin(i * 0.37 + k)));
    errs.push(compare(OPS.matmul, [big(0), viewOf(big(1), [130, 96], [1, 130], 0)], {}, 1e-5) ?? "");
    expect(errs.filter((e) => e)).toEqual([]);
  });

  test("lora_linear (with and without bias, strided x) within GEMM tolerance", () => {
    const r = (shape: number[], k: number) => fromValues("float32", shape, Array.from({ length: shape.reduce((p, s) => p * s, 1) }, (_, i) => Math.cos(i * 0.91 + k)));
    const errs = [
      compare(OPS.lora_linear, [r([2, 3, 6], 0), r([5, 6], 1), r([2, 6], 2), r([5, 2], 3)], { scaling: 2, has_bias: false }, 1e-5),
      compare(OPS.lora_linear, [viewOf(r([6, 4], 0), [4, 6], [1, 4], 0), r([5, 6], 1), r([2, 6], 2), r([5, 2], 3), r([5], 4)], { scaling: 0.5, has_bias: true }, 1e-5),
    ];
    expect(errs.filter((e) => e)).toEqual([]);
  });

  test("gather, scatter_add, index_select, index_add, tri, cat, slice_backward over dtypes", () => {
    const errs: string[] = [];
    const idx = (vals: number[], shape: number[], d: DType = "int64") => fromValues(d, shape, vals);
    for (const d of DTYPES) {
      const x = make(d, [4, 5], 1);
      const xt = transposed(d, 4, 5, 2);
      errs.push(compare(OPS.gather, [xt, idx([0, 3, 1, 3, 2, 0], [2, 3])], { dim: 0 }) ?? "");
      errs.push(compare(OPS.gather, [x, idx([4, 0, 1, 2], [4, 1])], { dim: 1 }) ?? "");
      errs.push(compare(OPS.index_select, [x, idx([4, 0, 1, 2], [4], "int32")], { dim: 1 }) ?? ""); // int32 index (gather: int64 only, as torch)
      errs.push(compare(OPS.scatter_add, [x, idx([0, 3, 1, 0, 2, 0], [2, 3]), make(d, [2, 3], 5)], { dim: 0 }) ?? "");
      errs.push(compare(OPS.index_select, [xt, idx([3, 0, 0, 2], [4])], { dim: 0 }) ?? "");
      errs.push(compare(OPS.index_select, [x, idx([4, 1], [2])], { dim: 1 }) ?? "");
      errs.push(compare(OPS.index_add, [x, idx([1, 1, 3], [3]), make(d, [4, 3], 7)], { dim: 1 }) ?? "");
      // 0-d operands count as [1] (PyTorch); native used to read shape[0]/stride[0] of a 0-d tensor
      const x0 = make(d, [], 3), i0 = idx([0], []);
      errs.push(compare(OPS.gather, [x0, i0], { dim: 0 }) ?? "");
      errs.push(compare(OPS.gather, [x0, idx([0, 0], [2])], { dim: 0 }) ?? "");
      errs.push(compare(OPS.gather, [make(d, [5], 2), idx([4], [])], { dim: 0 }) ?? "");
      errs.push(compare(OPS.scatter_add, [x0, i0, make(d, [], 4)], { dim: 0 }) ?? "");
      errs.push(compare(OPS.scatter_add, [x0, idx([0, 0], [2]), make(d, [2], 4)], { dim: 0 }) ?? "");
      errs.push(compare(OPS.index_select, [x0, i0], { dim: 0 }) ?? "");
      errs.push(compare(OPS.index_select, [x, idx([2], [])], { dim: 1 }) ?? "");
      errs.push(compare(OPS.index_add, [x0, idx([0, 0], [2]), make(d, [2], 6)], { dim: 0 }) ?? "");
      errs.push(compare(OPS.index_add, [x, idx([4], []), make(d, [4, 1], 6)], { dim: 1 }) ?? "");
      errs.push(compare(OPS.tri, [xt], { diagonal: 0, upper: false }) ?? "");
      errs.push(compare(OPS.tri, [make(d, [2, 3, 4], 3)], { diagonal: 1, upper: true }) ?? "");
      errs.push(compare(OPS.cat, [x, xt, make("int8", [4, 2], 0)], { dim: 1 }) ?? "");
      // k_cat's block copies: inputs dense from the cat dim on (row views of a wider buffer, a
      // slice along dim 1 of a 3-d tensor), along the first, a middle and the last dim
      errs.push(compare(OPS.cat, [viewOf(make(d, [4, 9], 5), [4, 3], [9, 1], 2), x], { dim: 1 }) ?? "");
      errs.push(compare(OPS.cat, [make(d, [2, 5], 6), x, viewOf(make(d, [3, 5], 7), [1, 5], [5, 1], 10)], { dim: 0 }) ?? "");
      errs.push(compare(OPS.cat, [make(d, [2, 3, 4], 8), viewOf(make(d, [2, 6, 4], 9), [2, 2, 4], [24, 4, 1], 4)], { dim: 1 }) ?? "");
      errs.push(compare(OPS.slice_backward, [make(d, [4, 2], 4)], { dim: 1, start: 1, end: 5, step: 2, input_shape: [4, 5] }) ?? "");
    }
    expect(errs.filter((e) => e)).toEqual([]);
  });

  test("index errors carry the reference's message and type", () => {
    const nb = nativeOrSkip();
    const x = make("float32", [3, 2], 0);
    const i = fromValues("int64", [1], [5]);
    expect(() => nb.run(OPS.index_select, [x, i], { dim: 0 }, [1, 2], "float32")).toThrow("[index_select] index 5 is out of bounds for dimension 0 with size 3");
    // negative indices are out of bounds (no wrap); a calling composite words the error (IndexAttrs.caller)
    const neg = fromValues("int64", [1], [-1]);
    const errOf = (f: () => unknown) => { try { f(); } catch (e) { return e as Error; } return null; };
    for (const attrs of [{ dim: 0 }, { dim: 0, caller: "embedding" }, { dim: 0, caller: "cross_entropy" }, { dim: 0, caller: "one_hot" }]) {
      for (const bad of [neg, i]) {
        const want = errOf(() => jsBackend.run(OPS.index_select, [x, bad], attrs, [1, 2], "float32"))!;
        const got = errOf(() => nb.run(OPS.index_select, [x, bad], attrs, [1, 2], "float32"))!;
        expect([got.constructor.name, got.message]).toEqual([want.constructor.name, want.message]);
      }
    }
    expect(errOf(() => nb.run(OPS.gather, [x, fromValues("int64", [1, 1], [-1])], { dim: 0, caller: "cross_entropy" }, [1, 1], "float32"))!.message).toBe("[cross_entropy] Target -1 is out of bounds.");
    const e = fromValues("float32", [0, 3], []);
    expect(() => nb.run(OPS.argmax, [viewOf(e, [3, 0], [1, 3], 0)], { dim: 1, keepdim: false }, [3], "int64")).toThrow("expected reduction dim");
  });
});
