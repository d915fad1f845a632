/**
 * Tensor creation (torch.tensor, zeros, ones, full, empty, arange, linspace, eye, *_like, rand,
 * randn, randint): dtype inference, shapes, values and options. Expected values follow torch's
 * documented definitions (arange: start + i·step for i < ceil((end - start) / step)).
 */
import { describe, expect, test } from "bun:test";
import {
  LoomAutogradError, LoomValueError, Tensor, arange, empty, empty_like, eye, full, full_like, linspace, ones,
  ones_like, rand, rand_like, randint, randn, randn_like, tensor, zeros, zeros_like, type DType,
} from "../../src/index.ts";

describe("tensor()", () => {
  test("dtype inference: bools -> bool, integers -> int64, any fraction -> float32", () => {
    const cases: [Parameters<typeof tensor>[0], DType, number[]][] = [
      [[1, 2, 3], "int64", [3]],
      [[1.5, 2], "float32", [2]],
      [[true, false], "bool", [2]],
      [[[1, 2], [3, 4]], "int64", [2, 2]],
      [[[0.5], [1], [2]], "float32", [3, 1]],
      [5, "int64", []],
      [2.5, "float32", []],
      [true, "bool", []],
      [[], "float32", [0]], // torch.tensor([]) is float32 of shape [0]
      [[[], []], "float32", [2, 0]],
      [[true, 2], "int64", [2]], // a number among bools promotes to int64
    ];
    for (const [data, dtype, shape] of cases) {
      const t = tensor(data);
      expect([t.dtype, t.shape]).toEqual([dtype, shape]);
    }
    expect(tensor([[1, 2], [3, 4]]).tolist()).toEqual([[1, 2], [3, 4]]);
    expect(tensor([true, false]).tolist()).toEqual([true, false]);
    expect(tensor(2.5).item()).toBe(2.5);
  });

  test("typed arrays keep their dtype; dtype option converts", () => {
    expect(tensor(new Float64Array([1, 2])).dtype).toBe("float64");
    expect(tensor(new Int32Array([1, 2])).dtype).toBe("int32");
    expect(tensor(new Uint8Array([255])).tolist()).toEqual([255]);
    expect(tensor(new Float32Array([0.5])).dtype).toBe("float32");
    const f = tensor([1, 2], { dtype: "float64" });
    expect([f.dtype, f.tolist()]).toEqual(["float64", [1, 2]]);
    expect(tensor([1.9, -1.9], { dtype: "int32" }).tolist()).toEqual([1, -1]);
    expect(tensor([0.1], { dtype: "float32" }).tolist()).toEqual([Math.fround(0.1)]);
  });

  test("the data is copied", () => {
    const src = new Float32Array([1, 2]);
    const t = tensor(src);
    src[0] = 9;
    expect(t.tolist()).toEqual([1, 2]);
  });

  test("ragged input throws LoomValueError", () => {
    expect(() => tensor([[1, 2], [3]])).toThrow(LoomValueError);
    expect(() => tensor([[1, 2], [3]])).toThrow(/ragged/);
    expect(() => tensor([[1, 2], 3] as never)).toThrow(LoomValueError);
    expect(() => tensor([1, [2]] as never)).toThrow(LoomValueError);
    expect(() => tensor([[[1], [2]], [[3], [4, 5]]])).toThrow(LoomValueError);
    expect(() => tensor(["a"] as never)).toThrow(LoomValueError);
  });

  test("requires_grad option", () => {
    const t = tensor([1, 2], { dtype: "float32", requires_grad: true });
    expect(t.requires_grad).toBe(true);
    expect(t.is_leaf).toBe(true);
    // [1.0, 2.0] is all integers in JS (1.0 === 1): int64, but float32 when it will require grad
    // (torch.tensor([1.0, 2.0], requires_grad=True) is float32; integers cannot require grad)
    expect(tensor([1, 2]).dtype).toBe("int64");
    const g = tensor([1.0, 2.0], { requires_grad: true });
    expect([g.dtype, g.requires_grad, g.tolist()]).toEqual(["float32", true, [1, 2]]);
    expect(() => tensor([true], { requires_grad: true })).toThrow(LoomAutogradError);
    expect(() => tensor([1, 2], { dtype: "int64", requires_grad: true })).toThrow("got int64: pass { dtype: \"float32\" }");
    expect(tensor([0.5], { requires_grad: true }).requires_grad).toBe(true);
  });
});

describe("filled tensors", () => {
  test("zeros / ones / empty: float32 by default, shape as varargs or a list", () => {
    const z = zeros(2, 3);
    expect([z.dtype, z.shape, z.tolist()]).toEqual(["float32", [2, 3], [[0, 0, 0], [0, 0, 0]]]);
    expect(zeros([2, 3]).shape).toEqual([2, 3]);
    expect(zeros().shape).toEqual([]);
    expect(zeros(0, 4).numel()).toBe(0);
    expect(zeros(2, { dtype: "int32" }).dtype).toBe("int32");
    const o = ones(2, 2, { dtype: "float16" });
    expect([o.dtype, o.tolist()]).toEqual(["float16", [[1, 1], [1, 1]]]);
    expect(ones([3]).tolist()).toEqual([1, 1, 1]);
    expect(ones(2, { dtype: "bool" }).tolist()).toEqual([true, true]);
    expect(empty(3).shape).toEqual([3]);
    expect(empty([2, 2], { dtype: "int64" }).dtype).toBe("int64");
    expect(() => zeros(-1)).toThrow(LoomValueError);
    expect(() => ones(1.5)).toThrow(LoomValueError);
  });

  test("full infers dtype from the fill value (torch.full)", () => {
    const a = full([2], 7);
    expect([a.dtype, a.tolist()]).toEqual(["int64", [7, 7]]);
    const b = full([2, 1], 1.5);
    expect([b.dtype, b.tolist()]).toEqual(["float32", [[1.5], [1.5]]]);
    const c = full([1], true);
    expect([c.dtype, c.tolist()]).toEqual(["bool", [true]]);
    expect(full([2], 3, { dtype: "float64" }).dtype).toBe("float64");
    expect(full([2], -2.5, { dtype: "int32" }).tolist()).toEqual([-2, -2]);
    expect(full([], Infinity).tolist()).toEqual(Infinity);
  });

  test("eye", () => {
    expect(eye(3).tolist()).toEqual([[1, 0, 0], [0, 1, 0], [0, 0, 1]]);
    expect(eye(2, 3).tolist()).toEqual([[1, 0, 0], [0, 1, 0]]);
    expect(eye(3, 2).tolist()).toEqual([[1, 0], [0, 1], [0, 0]]);
    expect(eye(2, 2, { dtype: "int64" }).dtype).toBe("int64");
    expect(eye(2, 2, { dtype: "bfloat16" }).tolist()).toEqual([[1, 0], [0, 1]]);
    expect(eye(0).shape).toEqual([0, 0]);
  });

  test("*_like keep shape and dtype unless told otherwise", () => {
    const t = tensor([[1, 2, 3]], { dtype: "int32" });
    const z = zeros_like(t);
    expect([z.dtype, z.shape, z.tolist()]).toEqual(["int32", [1, 3], [[0, 0, 0]]]);
    expect(ones_like(t).tolist()).toEqual([[1, 1, 1]]);
    expect(full_like(t, 4).tolist()).toEqual([[4, 4, 4]]);
    expect(full_like(t, 4.7).tolist()).toEqual([[4, 4, 4]]); // int32 truncates
    expect(empty_like(t).shape).toEqual([1, 3]);
    expect(zeros_like(t, { dtype: "float64" }).dtype).toBe("float64");
    const f = zeros(4, 2);
    expect([rand_like(f).shape, rand_like(f).dtype]).toEqual([[4, 2], "float32"]);
    expect(randn_like(zeros([3], { dtype: "float64" })).dtype).toBe("float64");
    // the method forms too
    expect(t.zeros_like().tolist()).toEqual([[0, 0, 0]]);
    expect(t.full_like(9).dtype).toBe("int32");
    // *_like results are independent tensors
    const o = ones_like(f);
    o.add_(1);
    expect(f.sum().item()).toBe(0);
  });
});

describe("ranges", () => {
  test("arange with integers is int64", () => {
    const a = arange(5);
    expect([a.dtype, a.tolist()]).toEqual(["int64", [0, 1, 2, 3, 4]]);
    expect(arange(1, 4).tolist()).toEqual([1, 2, 3]);
    expect(arange(-3, 3, 2).tolist()).toEqual([-3, -1, 1]);
    expect(arange(0).shape).toEqual([0]);
    expect(arange(2, 2).shape).toEqual([0]);
  });

  test("arange with a negative step", () => {
    expect(arange(5, 0, -1).tolist()).toEqual([5, 4, 3, 2, 1]);
    // ceil((0 - 10) / -3) = ceil(3.33) = 4 values: 10, 7, 4, 1
    expect(arange(10, 0, -3).tolist()).toEqual([10, 7, 4, 1]);
    expect(arange(1, -1, -0.5).tolist()).toEqual([1, 0.5, 0, -0.5]);
  });

  test("arange with floats is float32", () => {
    const a = arange(0, 1, 0.25);
    expect([a.dtype, a.tolist()]).toEqual(["float32", [0, 0.25, 0.5, 0.75]]);
    expect(arange(1, 2.5, 0.5).tolist()).toEqual([1, 1.5, 2]);
    expect(arange(2.5).tolist()).toEqual([0, 1, 2]); // ceil(2.5) = 3 values
    expect(arange(0, 5, 1, { dtype: "float64" }).dtype).toBe("float64");
  });

  test("arange errors", () => {
    expect(() => arange(0, 5, 0)).toThrow(LoomValueError);
    expect(() => arange(0, 5, -1)).toThrow(LoomValueError);
    expect(() => arange(5, 0)).toThrow(LoomValueError);
  });

  test("linspace includes both ends", () => {
    const l = linspace(0, 1, 5);
    expect([l.dtype, l.tolist()]).toEqual(["float32", [0, 0.25, 0.5, 0.75, 1]]);
    expect(linspace(-1, 1, 1).tolist()).toEqual([-1]);
    expect(linspace(2, 3, 0).shape).toEqual([0]);
    expect(linspace(1, -1, 3).tolist()).toEqual([1, 0, -1]);
    expect(linspace(0, 10, 6, { dtype: "float64" }).tolist()).toEqual([0, 2, 4, 6, 8, 10]);
    // 0.1 steps: the last value is exactly `end` (torch fills the back half from the end)
    const t = linspace(0, 1, 11, { dtype: "float64" }).tolist() as number[];
    expect(t[10]).toBe(1);
    t.forEach((v, i) => expect(Math.abs(v - i / 10)).toBeLessThan(1e-15));
    expect(() => linspace(0, 1, -1)).toThrow(LoomValueError);
  });
});

describe("random", () => {
  test("rand: shape, float32, values in [0, 1)", () => {
    const r = rand(3, 4);
    expect([r.shape, r.dtype]).toEqual([[3, 4], "float32"]);
    expect(rand([5]).shape).toEqual([5]);
    const v = rand(10000).dataSync();
    expect(v.every((x) => x >= 0 && x < 1)).toBe(true);
    expect(rand(2, { dtype: "float64" }).dtype).toBe("float64");
    expect(rand(2, { dtype: "float16" }).dtype).toBe("float16");
    expect(() => rand(2, { dtype: "int64" })).toThrow(LoomValueError);
  });

  test("randn: shape and dtype", () => {
    const r = randn(2, 3, { dtype: "float64" });
    expect([r.shape, r.dtype]).toEqual([[2, 3], "float64"]);
    expect(randn().shape).toEqual([]);
    expect(() => randn(2, { dtype: "bool" })).toThrow(LoomValueError);
  });

  test("randint: [low, high), int64, every value reachable", () => {
    const r = randint(3, 7, [2000]);
    expect([r.shape, r.dtype]).toEqual([[2000], "int64"]);
    const v = Array.from(r.dataSync());
    expect(v.every((x) => Number.isInteger(x) && x >= 3 && x < 7)).toBe(true);
    expect(new Set(v)).toEqual(new Set([3, 4, 5, 6]));
    const neg = Array.from(randint(-5, -2, [500]).dataSync());
    expect(new Set(neg)).toEqual(new Set([-5, -4, -3]));
    expect(randint(0, 2, [2, 2], { dtype: "int32" }).dtype).toBe("int32");
    expect(randint(0, 1, [4]).tolist()).toEqual([0, 0, 0, 0]);
    expect(() => randint(5, 5, [1])).toThrow(LoomValueError);
  });

  test("requires_grad on random and filled tensors", () => {
    expect(randn(3, { requires_grad: true }).requires_grad).toBe(true);
    expect(zeros(3, { requires_grad: true }).is_leaf).toBe(true);
    expect(ones(3, { requires_grad: true }).requires_grad).toBe(true);
    expect(() => zeros(3, { dtype: "int64", requires_grad: true })).toThrow(LoomAutogradError);
    expect(() => full([2], 1, { dtype: "int64", requires_grad: true })).toThrow(LoomAutogradError);
    // an integral fill value (1.0 === 1 in JS) is float32 when it will require grad, as in tensor()
    expect(full([2], 1, { requires_grad: true }).dtype).toBe("float32");
    expect(arange(3, undefined, 1, { requires_grad: true }).dtype).toBe("float32");
  });

  test("creation is eager", () => {
    for (const t of [zeros(1), ones(1), full([1], 1), arange(2), linspace(0, 1, 2), eye(1), rand(1), randn(1), randint(0, 2, [1]), tensor([1])]) {
      expect(t).toBeInstanceOf(Tensor);
    }
  });
});
