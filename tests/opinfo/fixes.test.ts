/**
 * Regression tests for the mismatches the OpInfo suite found and that were fixed locally
 * (each also covered by its OpInfo sample in opinfo.test.ts). Expected values are PyTorch 1.13's,
 * quoted in comments, on every backend.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { BACKENDS, WEBGPU, useBackend } from "../backends.ts";

function suite(device: string) {
  const t = (data: any, dtype: loom.DType) => loom.tensor(data, { dtype, device });

  test("dtype= on sum/mean/cumsum/softmax/log_softmax casts first; rsub takes alpha (were unsupported)", () => {
    for (const lazy of [false, true]) {
      const L = (x: loom.Tensor) => (lazy ? x.lazy() : x);
      // torch.rsub(tensor([1, 2]), 10, alpha=2) = 10 - 2·[1, 2] = [8, 6]
      expect(L(t([1, 2], "float32")).rsub(10, { alpha: 2 }).tolist()).toEqual([8, 6]);
      // torch.sum(tensor([1, 2, 3], dtype=int32), dtype=int32): int32 6 (default would be int64)
      const s = L(t([1, 2, 3], "int32")).sum(undefined, false, { dtype: "int32" }).eval();
      expect([s.dtype, s.item()]).toEqual(["int32", 6]);
      // torch.mean(tensor([1, 2]), dtype=float32) = 1.5 (an int64 input alone is refused)
      const m = L(t([1, 2], "int64")).mean(undefined, false, { dtype: "float32" }).eval();
      expect([m.dtype, m.item()]).toEqual(["float32", 1.5]);
      const c = L(t([1, 2, 3], "int32")).cumsum(0, { dtype: "int32" }).eval();
      expect([c.dtype, c.tolist()]).toEqual(["int32", [1, 3, 6]]);
      // softmax([0, ln 3]) = [1/4, 3/4]; computed in float64 when dtype=float64
      if (device !== "webgpu") {
        const x = L(t([0, Math.log(3)], "float32"));
        const p = loom.softmax(x, 0, { dtype: "float64" }).eval();
        expect(p.dtype).toBe("float64");
        expect((p.tolist() as number[]).map((v) => +v.toFixed(7))).toEqual([0.25, 0.75]);
        const lp = loom.log_softmax(x, 0, { dtype: "float64" }).eval();
        expect((lp.tolist() as number[]).map((v) => +v.toFixed(7))).toEqual([+Math.log(0.25).toFixed(7), +Math.log(0.75).toFixed(7)]);
      }
    }
  });

  test("gelu rejects an unknown approximate (torch: RuntimeError)", () => {
    const x = t([1, 2], "float32");
    expect(() => loom.gelu(x, "asdf" as any)).toThrow("[gelu] approximate argument must be either none or tanh, got 'asdf'");
    expect(() => loom.gelu(x.lazy(), "asdf" as any)).toThrow(loom.LoomValueError);
  });

  test("square of bool is int64 (torch.square(torch.tensor([True, False])) = tensor([1, 0]))", () => {
    for (const x of [t([true, false], "bool"), t([true, false], "bool").lazy()]) {
      const y = x.square().eval();
      expect(y.dtype).toBe("int64");
      expect(y.tolist()).toEqual([1, 0]);
    }
  });

  test("sum_to_size([]) sums: a 0-d int32 tensor becomes int64 (torch: tensor(4, dtype=int64))", () => {
    for (const x of [t(4, "int32"), t(4, "int32").lazy()]) {
      const y = x.sum_to_size([]).eval();
      expect(y.dtype).toBe("int64");
      expect(y.item()).toBe(4);
    }
    expect(t([1, 2, 3], "int32").sum_to_size([]).eval().item()).toBe(6);
  });

  test("bool scatter_add and index_add are logical or: no 2 stored in a bool tensor", () => {
    // torch: x.scatter_add(0, i, s) and x.index_add(0, i, s) are tensor([True, True, True]) for
    // x = [False, False, True], i = [0, 0, 1], s = [True, True, True]; sum() of either is 3
    for (const lazy of [false, true]) {
      const l = (v: loom.Tensor): any => (lazy ? v.lazy() : v);
      const x = l(t([false, false, true], "bool")), i = l(t([0, 0, 1], "int64")), s = l(t([true, true, true], "bool"));
      for (const y of [x.scatter_add(0, i, s), x.index_add(0, i, s)]) {
        expect(y.dtype).toBe("bool");
        expect(Array.from(y.eval().dataSync())).toEqual([1, 1, 1]);
        expect(y.long().sum().item()).toBe(3);
      }
    }
  });

  test("scatter_add and index_add reject a source of another dtype (torch: RuntimeError)", () => {
    const x = t([1, 2], "float32"), i = t([0, 1], "int64"), s = t([1, 2], "int64");
    expect(() => x.scatter_add(0, i, s)).toThrow("[scatter_add] self (float32) and source (int64) must have the same dtype");
    expect(() => x.lazy().index_add(0, i.lazy(), s.lazy())).toThrow("[index_add] self (float32) and source (int64) must have the same dtype");
  });
}

describe.each(BACKENDS)("opinfo fixes on %s", (backend) => {
  useBackend(backend);
  suite("cpu");

  // float64/int64 only: WGSL's f32 % is x - y·trunc(x/y), so webgpu keeps the old rounding
  test("remainder is fmod moved to the divisor's sign, exact for large operands", () => {
    // torch.remainder(tensor([-1e20, 1e20, 7.5, -7.5, 5., -0.]), tensor([-501., 501., -2., 2., inf, 3.]))
    //   = [-388, 388, -0.5, 0.5, 5, -0.] (float64); a - floor(a/b)·b gave 0 for ±1e20
    const a = loom.tensor([-1e20, 1e20, 7.5, -7.5, 5, -0], { dtype: "float64" });
    const b = loom.tensor([-501, 501, -2, 2, Infinity, 3], { dtype: "float64" });
    for (const r of [a.remainder(b), a.lazy().remainder(b.lazy()).eval()]) {
      expect(Array.from(r.dataSync())).toEqual([-388, 388, -0.5, 0.5, 5, -0]);
    }
    // torch.remainder(tensor([2**52 + 1, -(2**52) - 3]), tensor([7, 5])) = [3, 1]
    const i = loom.tensor([2 ** 52 + 1, -(2 ** 52) - 3], { dtype: "int64" }).remainder(loom.tensor([7, 5], { dtype: "int64" }));
    expect(i.tolist()).toEqual([3, 1]);
  });
});
describe.if(WEBGPU)("opinfo fixes on webgpu", () => suite("webgpu"));
