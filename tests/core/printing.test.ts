/**
 * toString follows torch's repr (torch/_tensor_str.py): 4 decimals, one notation per tensor
 * (integer-valued floats as "1.", scientific when max/min > 1000, max > 1e8 or min < 1e-4),
 * columns padded to the widest nonzero finite value, 7-space continuation indent, a blank line
 * between 3-D blocks. Loom names dtypes and grad_fns with its own names ("float64", "<mul>").
 */
import { describe, expect, test } from "bun:test";
import { arange, tensor, zeros, type DType } from "../../src/index.ts";

const f = (v: Parameters<typeof tensor>[0], dtype: DType = "float32") => tensor(v, { dtype });

describe("torch-style repr", () => {
  test("1-D floats: integer-valued, fixed, negative", () => {
    expect(String(f([1, 2, 3]))).toBe("tensor([1., 2., 3.])");
    expect(String(f([1.5, 2]))).toBe("tensor([1.5000, 2.0000])");
    expect(String(f([-1.5, 2]))).toBe("tensor([-1.5000,  2.0000])");
    expect(String(f([0, 10]))).toBe("tensor([ 0., 10.])");
    expect(String(f([0.001, 0.01]))).toBe("tensor([0.0010, 0.0100])");
    expect(String(f([0, 0]))).toBe("tensor([0., 0.])");
  });

  test("scientific notation for the whole tensor", () => {
    expect(String(f([1e-5, 1]))).toBe("tensor([1.0000e-05, 1.0000e+00])");
    expect(String(f([1, 1000, 100000]))).toBe("tensor([1.0000e+00, 1.0000e+03, 1.0000e+05])");
    expect(String(f([0.1, 100.5]))).toBe("tensor([1.0000e-01, 1.0050e+02])"); // ratio 1005 > 1000
    expect(String(f([1e9]))).toBe("tensor([1.0000e+09])");
    expect(String(f([-2.5e-7, 0]))).toBe("tensor([-2.5000e-07,  0.0000e+00])");
  });

  test("nan and inf do not widen the columns but are padded", () => {
    expect(String(f([1, NaN]))).toBe("tensor([1., nan])");
    expect(String(f([1.5, Infinity, -Infinity]))).toBe("tensor([1.5000,    inf,   -inf])");
    expect(String(f([NaN]))).toBe("tensor([nan])");
  });

  test("integers and bools", () => {
    expect(String(tensor([1, 10, 100]))).toBe("tensor([  1,  10, 100])");
    expect(String(tensor([-5, 3]))).toBe("tensor([-5,  3])");
    expect(String(tensor([true, false]))).toBe("tensor([ True, False])");
    expect(String(tensor([[1, -10], [100, 2]]))).toBe("tensor([[  1, -10],\n        [100,   2]])");
  });

  test("0-d and empty", () => {
    expect(String(tensor(2.5))).toBe("tensor(2.5000)");
    expect(String(tensor(3))).toBe("tensor(3)");
    expect(String(f(7))).toBe("tensor(7.)");
    expect(String(tensor([]))).toBe("tensor([])");
  });

  test("2-D and 3-D layout", () => {
    expect(String(f([[1, 2], [3, 4]]))).toBe("tensor([[1., 2.],\n        [3., 4.]])");
    expect(String(arange(8).reshape(2, 2, 2))).toBe(
      "tensor([[[0, 1],\n" +
      "         [2, 3]],\n" +
      "\n" +
      "        [[4, 5],\n" +
      "         [6, 7]]])",
    );
    expect(String(zeros(2, 1, 2))).toBe("tensor([[[0., 0.]],\n\n        [[0., 0.]]])");
    // a transposed view prints in logical order
    expect(String(f([[1, 2], [3, 4]]).t())).toBe("tensor([[1., 3.],\n        [2., 4.]])");
  });

  test("dtype shown unless float32, int64 or bool", () => {
    expect(String(f([1.5], "float64"))).toBe("tensor([1.5000], dtype=float64)");
    expect(String(tensor([1, 2], { dtype: "int32" }))).toBe("tensor([1, 2], dtype=int32)");
    expect(String(f([0.1], "float16"))).toBe("tensor([0.1000], dtype=float16)"); // 0.0999755859375
    expect(String(f([1, 2], "bfloat16"))).toBe("tensor([1., 2.], dtype=bfloat16)");
    expect(String(tensor([200], { dtype: "uint8" }))).toBe("tensor([200], dtype=uint8)");
  });

  test("requires_grad and grad_fn", () => {
    const x = f([1, 2]).requires_grad_();
    expect(String(x)).toBe("tensor([1., 2.], requires_grad=True)");
    expect(String(x.mul(2))).toBe("tensor([2., 4.], grad_fn=<mul>)");
    expect(String(f([1.5], "float64").requires_grad_())).toBe("tensor([1.5000], dtype=float64, requires_grad=True)");
    expect(String(x.detach())).toBe("tensor([1., 2.])");
  });

  test("lazy tensors print their values; Bun.inspect uses the repr", () => {
    expect(String(tensor([1, 2]).lazy().add(1))).toBe("tensor([2, 3])");
    expect(Bun.inspect(f([0.5]))).toBe("tensor([0.5000])");
  });
});
