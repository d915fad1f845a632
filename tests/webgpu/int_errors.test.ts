/**
 * WebGPU integer results that used to be silently wrong (issue 9): integer floor_divide/remainder
 * by 0 gave 0, a cast of inf/NaN to an integer dtype stored ±2^31 or 0. A GPU kernel cannot throw, so a kernel that can fault records the
 * fault in its own error cell, and every read of its output (and of what is computed from it)
 * raises the js reference's error (tests/core/numerics.test.ts runs the op-level cases eagerly and
 * lazily). Here: faults inside every kind of fused kernel, kernels that cannot fault binding no
 * error ring, and the storage-buffer limit with the ring bound.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { webgpuBackend } from "../../src/backends/webgpu/index.ts";
import { compile_plan, type LazyTensor } from "../../src/lazy/lazy_tensor.ts";
import { WEBGPU } from "../backends.ts";

const G = (t: loom.Tensor) => t.to("webgpu");
const ZERO_DIV = (dt: string) => `[floor_divide] ZeroDivisionError: integer division by zero (${dt})`;
const values = (t: { dataSync(): ArrayLike<number> }) => Array.from(t.dataSync());

describe.if(WEBGPU)("webgpu integer faults in fused kernels", () => {
  test("fused_elementwise: the fault raises on every read of the result and of what is computed from it, not elsewhere", () => {
    const a = G(loom.tensor([7, -7, 3], { dtype: "int64" })), z = G(loom.tensor([2, 0, 1], { dtype: "int64" }));
    const bad = a.lazy().floor_divide(z.lazy()).mul(3).eval();
    const good = a.lazy().floor_divide(G(loom.tensor([2, 2, 1], { dtype: "int64" })).lazy()).mul(3).eval();
    // floor(7/2)·3 = 9, floor(-7/2)·3 = -12, 3·3 = 9
    expect(good.tolist()).toEqual([9, -12, 9]);
    expect(() => bad.tolist()).toThrow(ZERO_DIV("int64"));
    expect(() => bad.tolist()).toThrow(ZERO_DIV("int64")); // the error stays with the tensor
    expect(() => (bad as unknown as loom.Tensor).add(1).tolist()).toThrow(ZERO_DIV("int64"));
    expect(() => bad.lazy().float().sum().item()).toThrow(ZERO_DIV("int64"));
    expect(() => bad.tolist()).toThrow(loom.LoomValueError);
  });

  test("fused_reduce: a fault in the prologue, and a cast of inf in the epilogue of a multi-pass reduction", () => {
    const a = G(loom.tensor([[1, 2], [3, 4]], { dtype: "int32" })), z = G(loom.tensor([[1, 0], [1, 1]], { dtype: "int32" }));
    expect(() => a.lazy().remainder(z.lazy()).sum(1).tolist()).toThrow("[remainder] ZeroDivisionError: integer division by zero (int32)");
    // rows of 4096 × 1e35: 4.096e38 > float32 max 3.4e38, so the sum is inf (partial sums of
    // 1024 × 1e35 = 1e38 stay finite: the overflow happens in the last pass, where the epilogue runs)
    const big = G(loom.full([2, 4096], 1e35, { dtype: "float32" }));
    expect(() => big.lazy().sum(1).long().tolist()).toThrow("[cast] cannot convert Infinity to int64: integer tensors hold integers only");
    expect(big.lazy().mul(1e-35).sum(1).long().tolist()).toEqual([4096, 4096]);
  });

  test("fused_matmul: a cast of inf in the epilogue", () => {
    // [2^127, 2^127] · [1, 1] = 2^128: inf in float32 (max ≈ 2^128 - 2^104)
    const x = G(loom.full([2, 2], 2 ** 127, { dtype: "float32" })), y = G(loom.ones([2, 2]));
    expect(() => x.lazy().matmul(y.lazy()).int().tolist()).toThrow("[cast] cannot convert Infinity to int32");
    expect(x.lazy().mul(2 ** -125).matmul(y.lazy()).int().tolist()).toEqual([[8, 8], [8, 8]]); // 4 + 4, exact
  });

  test("fused_softmax and fused_attention: a cast of inf in the prologue", () => {
    const x = G(loom.tensor([[1, Infinity, 2], [0, 1, 2]], { dtype: "float32" }));
    const sm = x.lazy().long().float().softmax(-1) as LazyTensor;
    expect(compile_plan([sm]).instructions.map((i) => i.op.name)).toEqual(["fused_softmax"]);
    expect(() => sm.tolist()).toThrow("[cast] cannot convert Infinity to int64");
    // scores q·kᵀ = 1 scaled by 1e38·1e10 overflow to inf before the cast
    const q = G(loom.ones([1, 2, 1])), k = G(loom.ones([1, 2, 1])), v = G(loom.tensor([[[1], [3]]], { dtype: "float32" }));
    const att = (s: number) => q.lazy().matmul(k.lazy().transpose(-2, -1)).mul(1e38).mul(s).long().float().softmax(-1).matmul(v.lazy()) as LazyTensor;
    expect(compile_plan([att(1e10)]).instructions.map((i) => i.op.name)).toEqual(["fused_attention"]);
    expect(() => att(1e10).tolist()).toThrow("[cast] cannot convert Infinity to int64");
    // finite: equal scores, uniform weights, each row the mean of v = 2
    expect(att(1e-38).tolist()).toEqual([[[2], [2]]]);
  });

  test("NaN and -inf casts (eager and fused); integer pow with a negative tensor exponent is torch's 1 / ±1 / 0", () => {
    const f = G(loom.tensor([1, -Infinity], { dtype: "float32" }));
    expect(() => f.to("uint8").tolist()).toThrow("[cast] cannot convert -Infinity to uint8");
    expect(() => f.lazy().mul(0).int().tolist()).toThrow("[cast] cannot convert NaN to int32"); // -inf·0 = NaN
    const i = G(loom.tensor([2, 3], { dtype: "int64" }));
    // torch 1.13: pow(tensor([3, 4]), tensor([1, -2])) = [3, 0]; pow(tensor([1, -1, -1, 5]), tensor([-3, -3, -2, -1])) = [1, -1, 1, 0]
    expect(i.lazy().add(1).pow(G(loom.tensor([1, -2], { dtype: "int64" })).lazy()).tolist()).toEqual([3, 0]);
    expect(G(loom.tensor([1, -1, -1, 5], { dtype: "int32" })).pow(G(loom.tensor([-3, -3, -2, -1], { dtype: "int32" }))).tolist()).toEqual([1, -1, 1, 0]);
    expect(i.lazy().add(1).pow(2).tolist()).toEqual([9, 16]);
  });
});

describe.if(WEBGPU)("webgpu kernels that cannot fault bind no error ring", () => {
  /** Error cells handed out while `fn` runs and realizes. */
  function cellsDuring(fn: () => void): number {
    const q = webgpuBackend().q;
    const orig = q.errorCell.bind(q);
    let n = 0;
    q.errorCell = (sites) => {
      n++;
      return orig(sites);
    };
    try {
      fn();
    } finally {
      q.errorCell = orig;
    }
    return n;
  }

  test("float ops and integer ops that cannot fault: no cells; integer division: one per kernel", () => {
    const x = G(loom.tensor([1, 2, 3], { dtype: "float32" })), k = G(loom.tensor([1, 2, 3], { dtype: "int64" }));
    expect(cellsDuring(() => {
      x.mul(2).exp().div(x).sum().item();
      x.lazy().mul(2).exp().div(x.lazy()).floor_divide(3).softmax(0).sum().item();
      k.add(1).mul(k).tolist();
      k.lazy().add(1).mul(k.lazy()).sum().item();
      x.long().tolist(); // a cast from float can fault ...
    })).toBe(1); // ... and is the only kernel here that binds a cell
    expect(cellsDuring(() => k.floor_divide(k).tolist())).toBe(1);
    expect(cellsDuring(() => k.lazy().floor_divide(k.lazy()).add(1).remainder(k.lazy()).sum().item())).toBe(1); // one fused kernel
  });

  test("a fused reduction with maxKernelInputs inputs, long rows and a faulting epilogue stays within the limit", () => {
    // limit-1 prologue inputs of ones [2, 2048] summed per row, floor-divided by a last input d:
    // row sums are (limit-1)·2048 (int64: torch sums int32 as int64); the last pass binds out, the
    // inputs, the partials and the ring
    const limit = webgpuBackend().maxKernelInputs;
    const xs = Array.from({ length: limit - 1 }, () => G(loom.ones([2, 2048], { dtype: "int32" })).lazy());
    const run = (d: number[]) => {
      const s = xs.reduce((p, t) => p.add(t)).sum(1).floor_divide(G(loom.tensor(d, { dtype: "int32" })).lazy());
      const plan = compile_plan([s as LazyTensor]);
      for (const I of plan.instructions) expect(new Set(I.args.map((a) => a.slot)).size).toBeLessThanOrEqual(limit);
      return s.tolist();
    };
    expect(run([1, 2])).toEqual([(limit - 1) * 2048, (limit - 1) * 1024]);
    expect(() => run([1, 0])).toThrow(ZERO_DIV("int64"));
  });
});
