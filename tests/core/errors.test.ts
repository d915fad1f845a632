/**
 * Error types and messages: every message names the op and its operands (shapes, dtypes, dims),
 * and lazy tensors raise the same error when the op is recorded, before anything is evaluated.
 * Messages that follow PyTorch's wording are asserted against torch's text.
 */
import { describe, expect, test } from "bun:test";
import {
  LoomAutogradError, LoomDtypeError, LoomIndexError, LoomShapeError, LoomValueError, Tensor, autograd, cat,
  OPS, realizeStats, stack, tensor, where, zeros, type TensorOps,
} from "../../src/index.ts";
import { thrown } from "../thrown.ts";

type T = TensorOps<any>;
const MODES: [string, (t: Tensor) => T][] = [
  ["eager", (t) => t],
  ["lazy", (t) => t.lazy()],
];


describe.each(MODES)("%s", (_mode, lift) => {
  const z = (...s: number[]) => lift(zeros(s));

  describe("shape errors name the op and both shapes", () => {
    test("add", () => {
      const e = thrown(() => z(2, 3).add(z(4)));
      expect(e).toBeInstanceOf(LoomShapeError);
      expect(e.message).toBe("[add] shapes [2, 3] and [4] cannot be broadcast together (dim -1: 3 vs 4)");
      expect(thrown(() => z(2, 3).mul(z(3, 3))).message).toMatch(/^\[mul\] shapes \[2, 3\] and \[3, 3\]/);
      expect(thrown(() => z(5, 1, 2).where(lift(zeros([3, 2], { dtype: "bool" })), z(4, 1, 1))).message).toMatch(/^\[where\] .*\[5, 3, 2\] and \[4, 1, 1\]/);
    });

    test("matmul", () => {
      const e = thrown(() => z(2, 3).matmul(z(4, 5)));
      expect(e).toBeInstanceOf(LoomShapeError);
      expect(e.message).toBe("[matmul] shapes [2, 3] and [4, 5]: 3 != 4");
      expect(thrown(() => z(3).matmul(z(4, 5))).message).toBe("[matmul] shapes [3] and [4, 5]: 3 != 4");
      expect(thrown(() => z(2, 3).matmul(z(4))).message).toBe("[matmul] shapes [2, 3] and [4]: 3 != 4");
      expect(thrown(() => z(7, 2, 3).matmul(z(7, 4, 5))).message).toBe("[matmul] shapes [7, 2, 3] and [7, 4, 5]: 3 != 4");
      // batch dims that do not broadcast
      expect(thrown(() => z(2, 2, 3).matmul(z(3, 3, 5))).message).toMatch(/^\[matmul\] shapes \[2\] and \[3\]/);
      expect(thrown(() => z().matmul(z(3)))).toBeInstanceOf(LoomShapeError);
    });

    test("cat and stack", () => {
      const e = thrown(() => cat([z(2, 3), z(2, 4)], 0));
      expect(e).toBeInstanceOf(LoomShapeError);
      expect(e.message).toBe("[cat] sizes of tensors must match except in dimension 0: got [2, 3] and [2, 4]");
      expect(thrown(() => cat([z(2, 3), z(2, 3, 1)], 1)).message).toMatch(/\[2, 3\] and \[2, 3, 1\]/);
      // torch: "stack expects each tensor to be equal size, but got [2] at entry 0 and [3] at entry 1"
      const s = thrown(() => stack([z(2), z(2), z(3)]));
      expect(s).toBeInstanceOf(LoomShapeError);
      expect(s.message).toBe("[stack] expects each tensor to be equal size, but got [2] at entry 0 and [3] at entry 2");
    });

    test("expand", () => {
      // torch: "The expanded size of the tensor (4) must match the existing size (2) at non-singleton dimension 0"
      const e = thrown(() => z(2, 3).expand(4, 3));
      expect(e).toBeInstanceOf(LoomShapeError);
      expect(e.message).toBe("[expand] the expanded size of the tensor (4) must match the existing size (2) at non-singleton dimension 0. Target sizes: [4, 3]. Tensor sizes: [2, 3]");
      expect(thrown(() => z(2, 3).expand(3)).message).toMatch(/number of sizes provided \(1\) must be greater or equal to the number of dimensions in the tensor \(2\)/);
      // torch: "The expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension 0"
      expect(thrown(() => z(3).expand(-1, 3)).message).toMatch(/^\[expand\] the expanded size of the tensor \(-1\) isn't allowed in a leading, non-existing dimension 0/);
      expect(thrown(() => z(1).expand(-2))).toBeInstanceOf(LoomShapeError);
    });

    test("reshape and view with -1 misused", () => {
      const x = z(3, 4);
      expect(thrown(() => x.reshape(-1, -1)).message).toBe("[reshape] only one dimension can be inferred");
      // torch: "shape '[5, -1]' is invalid for input of size 12"
      expect(thrown(() => x.reshape(5, -1)).message).toBe("[reshape] shape '[5, -1]' is invalid for input of size 12");
      expect(thrown(() => x.reshape(5, 2)).message).toBe("[reshape] shape '[5, 2]' is invalid for input of size 12");
      expect(thrown(() => x.view(0, -1))).toBeInstanceOf(LoomShapeError);
      expect(thrown(() => x.reshape(-2, 6))).toBeInstanceOf(LoomShapeError);
      expect(thrown(() => x.view(7, -1)).message).toMatch(/^\[view\] shape '\[7, -1\]'/);
    });

    test("split, unflatten, masked_fill", () => {
      expect(thrown(() => z(5).split([2, 2]))).toBeInstanceOf(LoomShapeError);
      expect(thrown(() => z(5).split([2, 2])).message).toMatch(/sum exactly to 5/);
      expect(thrown(() => z(2, 6).unflatten(1, [4, -1]))).toBeInstanceOf(LoomShapeError);
    });
  });

  describe("dtype errors name the dtypes", () => {
    test("matmul float32 vs float64", () => {
      const e = thrown(() => z(2, 2).matmul(lift(zeros([2, 2], { dtype: "float64" }))));
      expect(e).toBeInstanceOf(LoomDtypeError);
      expect(e.message).toBe("[matmul] expected both operands to have the same dtype, but got float32 and float64");
    });

    test("where with a non-bool condition", () => {
      const cond = lift(tensor([1, 0]));
      const e = thrown(() => z(2).where(cond, 1));
      expect(e).toBeInstanceOf(LoomDtypeError);
      expect(e.message).toBe("[where] condition must be a bool tensor, got int64");
      expect(thrown(() => where(lift(zeros(2)), z(2), z(2))).message).toMatch(/got float32/);
      expect(thrown(() => z(2).masked_fill(lift(tensor([1, 0])), 0)).message).toMatch(/^\[masked_fill\] .*int64/);
    });

    test("mean / var / softmax of integers", () => {
      const i = lift(tensor([1, 2, 3]));
      const e = thrown(() => i.mean());
      expect(e).toBeInstanceOf(LoomDtypeError);
      // torch: "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Long";
      // Loom adds what to do, since tensor([1.0, 2.0]) is int64 in JS (creation.ts tensor())
      expect(e.message).toBe('[mean] expected a floating point tensor, got int64: pass { dtype: "float32" } to tensor() (or full, arange) or call .float() first (JavaScript numbers do not tell 1.0 from 1, so tensor([1.0, 2.0]) is int64)');
      for (const [op, f] of [["var", () => i.var()], ["std", () => i.std()], ["softmax", () => i.softmax(0)], ["log_softmax", () => i.log_softmax(0)]] as const) {
        const err = thrown(f);
        expect(err).toBeInstanceOf(LoomDtypeError);
        expect(err.message).toStartWith(`[${op}] expected a floating point tensor, got int64: pass { dtype: "float32" } to tensor()`);
      }
      expect(thrown(() => lift(tensor([true, false])).mean()).message).toBe("[mean] expected a floating point tensor, got bool: call .float() first");
      expect(thrown(() => lift(tensor([true])).neg()).message).toMatch(/^\[neg\].*bool/);
    });

    test("requires_grad on an integer tensor", () => {
      const e = thrown(() => lift(tensor([1, 2])).requires_grad_());
      expect(e).toBeInstanceOf(LoomAutogradError);
      // torch: "only Tensors of floating point dtype can require gradients"
      expect(e.message).toStartWith('only Tensors of floating point dtype can require gradients, got int64: pass { dtype: "float32" } to tensor()');
      expect(thrown(() => { lift(tensor([true])).requires_grad = true; }).message).toMatch(/got bool/);
    });

    test("index tensors must be integers (gather: int64, as torch)", () => {
      const e = thrown(() => z(3).gather(0, z(2)));
      expect(e).toBeInstanceOf(LoomDtypeError);
      expect(e.message).toBe("[gather] expected dtype int64 for index, got float32");
      expect(thrown(() => z(3, 2).index_select(0, z(2))).message).toMatch(/^\[index_select\].*float32/);
    });
  });

  describe("dims and indices out of range", () => {
    test("dim 3 for a 2-D tensor", () => {
      const x = z(2, 3);
      const e = thrown(() => x.sum(3));
      expect(e).toBeInstanceOf(LoomIndexError);
      // torch: "Dimension out of range (expected to be in range of [-2, 1], but got 3)"
      expect(e.message).toBe("[sum] dim 3 is out of range for a tensor of 2 dims (expected to be in range of [-2, 1])");
      expect(thrown(() => x.softmax(-3)).message).toMatch(/^\[softmax\] dim -3 .*\[-2, 1\]/);
      expect(thrown(() => x.transpose(0, 2)).message).toMatch(/^\[transpose\] dim 2/);
      expect(thrown(() => x.unsqueeze(3)).message).toMatch(/^\[unsqueeze\] dim 3 .*\[-3, 2\]/);
      expect(thrown(() => x.permute(0, 2))).toBeInstanceOf(LoomIndexError);
      expect(thrown(() => x.permute(0, 0))).toBeInstanceOf(LoomShapeError);
      expect(thrown(() => x.size(2))).toBeInstanceOf(LoomIndexError);
      expect(thrown(() => x.narrow(5, 0, 1))).toBeInstanceOf(LoomIndexError);
      expect(thrown(() => x.split(1, 2))).toBeInstanceOf(LoomIndexError);
      expect(thrown(() => x.sum([0, 0])).message).toMatch(/appears multiple times/);
      expect(thrown(() => cat([x, x], 2))).toBeInstanceOf(LoomIndexError);
    });

    test("index 5 for size 3", () => {
      const x = lift(tensor([1, 2, 3]));
      const e = thrown(() => x.index(5));
      expect(e).toBeInstanceOf(LoomIndexError);
      // torch: "index 5 is out of bounds for dimension 0 with size 3"
      expect(e.message).toBe("[index] index 5 is out of bounds for dimension 0 with size 3");
      expect(thrown(() => x.index(-4)).message).toBe("[index] index -4 is out of bounds for dimension 0 with size 3");
      expect(thrown(() => x.index(0, 0))).toBeInstanceOf(LoomIndexError); // too many indices
      expect(thrown(() => x.index("...", "..."))).toBeInstanceOf(LoomIndexError);
      expect(thrown(() => x.index("::-1"))).toBeInstanceOf(LoomValueError);
      expect(thrown(() => x.narrow(0, 2, 2)).message).toMatch(/^\[narrow\]/);
    });

    test("gather index out of bounds", () => {
      const x = lift(tensor([10, 20, 30]).float());
      const idx = lift(tensor([0, 3]));
      // data-dependent: raised when the kernel runs (eager: now; lazy: at eval)
      const run = () => {
        const r = x.gather(0, idx);
        return r.tolist();
      };
      const e = thrown(run);
      expect(e).toBeInstanceOf(LoomIndexError);
      expect(e.message).toBe("[gather] index 3 is out of bounds for dimension 0 with size 3");
      expect(thrown(() => x.index_select(0, lift(tensor([-4]))).tolist()).message).toMatch(/^\[index_select\] index -4/);
    });
  });

  describe("autograd misuse", () => {
    test("item() on a multi-element tensor", () => {
      const e = thrown(() => z(2, 3).item());
      expect(e).toBeInstanceOf(LoomValueError);
      // torch: "a Tensor with 6 elements cannot be converted to Scalar"
      expect(e.message).toBe("[item] a Tensor with 6 elements cannot be converted to Scalar");
      expect(z(1, 1).add(2).item()).toBe(2);
    });

    test("backward on a non-scalar without a gradient", () => {
      const x = z(3).requires_grad_();
      const e = thrown(() => x.mul(2).backward());
      expect(e).toBeInstanceOf(LoomAutogradError);
      expect(e.message).toBe("grad can be implicitly created only for scalar outputs");
      expect(thrown(() => autograd.grad(x.mul(2), x)).message).toBe("grad can be implicitly created only for scalar outputs");
    });

    test("backward of a tensor that does not require grad", () => {
      const e = thrown(() => z(1).sum().backward());
      expect(e).toBeInstanceOf(LoomAutogradError);
      expect(e.message).toBe("element 0 of tensors does not require grad and does not have a grad_fn");
    });

    test("gradient of the wrong shape", () => {
      const x = z(3).requires_grad_();
      expect(thrown(() => x.mul(2).backward(z(4))).message).toBe("[backward] gradient of shape [4] does not match tensor of shape [3]");
    });

    test("a second backward without retain_graph", () => {
      const x = z(3).requires_grad_();
      const y = x.mul(x).sum();
      y.backward();
      const e = thrown(() => y.backward());
      expect(e).toBeInstanceOf(LoomAutogradError);
      expect(e.message).toMatch(/^Trying to backward through the graph a second time.*retain_graph/);
    });

    test("setting requires_grad = false on a non-leaf", () => {
      const y = z(2).requires_grad_().mul(2);
      expect(thrown(() => { y.requires_grad = false; })).toBeInstanceOf(LoomAutogradError);
      expect(thrown(() => z(2).retain_grad())).toBeInstanceOf(LoomAutogradError);
    });
  });
});

describe("lazy errors are raised at record time", () => {
  test("nothing is evaluated before the error", () => {
    const a = zeros(2, 3).lazy().exp(); // pending node
    const before = realizeStats.realizes;
    expect(() => a.add(zeros(4).lazy())).toThrow(LoomShapeError);
    expect(() => a.matmul(zeros(4, 5).lazy())).toThrow("[matmul] shapes [2, 3] and [4, 5]: 3 != 4");
    expect(() => a.matmul(zeros([3, 2], { dtype: "float64" }).lazy())).toThrow(LoomDtypeError);
    expect(() => a.reshape(5, -1)).toThrow(LoomShapeError);
    expect(() => a.sum(2)).toThrow(LoomIndexError);
    expect(() => a.index(2)).toThrow(LoomIndexError);
    expect(() => a.where(a, 0)).toThrow(LoomDtypeError);
    expect(() => cat([a, zeros(3, 3).lazy()], 1)).toThrow(LoomShapeError);
    expect(() => a.expand(4, 3)).toThrow(LoomShapeError);
    expect(() => a.to("int64").mean()).toThrow(LoomDtypeError);
    expect(realizeStats.realizes).toBe(before);
    expect(a.sum().item()).toBe(6); // exp(0) · 6, and the graph still works afterwards
  });

  test("mixing eager and lazy operands reports the same error", () => {
    expect(() => zeros(2, 3).add(zeros(4).lazy() as never)).toThrow("[add] shapes [2, 3] and [4] cannot be broadcast together (dim -1: 3 vs 4)");
  });
});

describe("registry shape inference checks attrs it is given directly", () => {
  test("slice: a range outside the dim raises LoomIndexError naming the range and the shape", () => {
    const x = [{ shape: [2, 4], dtype: "float32" as const }];
    expect(OPS.slice.shape(x, { dim: 1, start: 1, end: 4, step: 1 })).toEqual([2, 3]);
    expect(OPS.slice.shape(x, { dim: 1, start: 3, end: 3, step: 1 })).toEqual([2, 0]);
    expect(() => OPS.slice.shape(x, { dim: 1, start: 8, end: 9, step: 1 })).toThrow(/\[slice\] dim 1 8:9:1 is out of range for shape \[2, 4\]/);
    expect(() => OPS.slice.shape(x, { dim: 1, start: 0, end: 5, step: 1 })).toThrow(LoomIndexError);
    expect(() => OPS.slice.shape(x, { dim: 2, start: 0, end: 1, step: 1 })).toThrow(LoomIndexError);
  });
});
