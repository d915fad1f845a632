/**
 * Advanced indexing (integer lists and tensors, bool masks, mixed with basic items) and indexed
 * assignment (index_put, index_put_, set), against PyTorch goldens from
 * tests/core/gen_indexing_goldens.py (values and gradients; every value is exact in float32, so
 * the comparison is exact), eager and lazy, on every backend and on webgpu; gradients also by
 * finite differences (gradcheck); error messages asserted. Before this suite, index() ignored list,
 * tensor and mask items and returned the whole tensor.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import * as loom from "../../src/index.ts";
import {
  LazyTensor, LoomAutogradError, LoomDtypeError, LoomIndexError, LoomShapeError, LoomValueError, Tensor, arange,
  gradcheck, no_grad, tensor, zeros,
} from "../../src/index.ts";
import { BACKENDS, WEBGPU, useBackend } from "../backends.ts";
import { thrown } from "../thrown.ts";

type J = any;
interface Arr { shape: number[]; data: number[] }
interface Case {
  kind: "get" | "put" | "set";
  name: string;
  shape: number[];
  items: J[];
  out: Arr;
  grad?: Arr;
  vgrad?: Arr;
  values?: Arr;
  accumulate?: boolean;
}
const golden = JSON.parse(readFileSync(new URL("./indexing_goldens.json", import.meta.url), "utf8")) as { torch_version: string; cases: Case[] };

type T = loom.Tensor | loom.LazyTensor;
interface Target { device: string; lazy: boolean }

/** x = arange(n) * 0.25 - 1 (float32), as the generator. */
function base(shape: number[], device: string): Tensor {
  return arange(shape.reduce((p, s) => p * s, 1)).float().mul(0.25).sub(1).reshape(shape).to(device);
}
/** The generator's upstream gradient g[i] = ((7 i) % 11 - 5) * 0.25. */
function upstream(shape: readonly number[], device: string): Tensor {
  const n = shape.reduce((p, s) => p * s, 1);
  return tensor(Array.from({ length: n }, (_, i) => (((7 * i) % 11) - 5) * 0.25), { dtype: "float32" }).reshape(shape as number[]).to(device);
}
const arr = (a: Arr, device: string) => tensor(a.data, { dtype: "float32" }).reshape(a.shape).to(device);

/** A golden index item as Loom spells it; index tensors live on x's device and are lazy when x is. */
function item(it: J, t: Target): J {
  if ("i" in it) return it.i;
  if ("s" in it) return { start: it.s[0], stop: it.s[1], step: it.s[2] };
  if ("str" in it) return it.str;
  if ("none" in it) return null;
  if ("e" in it) return "...";
  if ("l" in it) return it.l;
  const x = tensor(it.t, { dtype: it.dtype }).to(t.device);
  return t.lazy ? x.lazy() : x;
}
const lift = (x: Tensor, t: Target): T => (t.lazy ? x.lazy() : x);

function expectArr(got: T | null, want: Arr, what: string) {
  expect(got, what).not.toBeNull();
  expect([what, got!.shape]).toEqual([what, want.shape]);
  expect([what, Array.from(got!.dataSync())]).toEqual([what, want.data]);
}

function runGet(c: Case, t: Target) {
  const x = base(c.shape, t.device).requires_grad_(true);
  const r = lift(x, t).index(...c.items.map((i) => item(i, t)));
  expect(r.isLazy).toBe(t.lazy); // the indexed tensor stays lazy (only masks/indices are realized)
  expectArr(r, c.out, "out");
  (r as any).mul(lift(upstream(r.shape, t.device), t)).sum().backward();
  expectArr(x.grad, c.grad!, "grad");
}

function runPut(c: Case, t: Target) {
  const x = base(c.shape, t.device).requires_grad_(true);
  const v = arr(c.values!, t.device).requires_grad_(true);
  const indices = c.items.map((i) => item(i, t));
  const r = (lift(x, t) as any).index_put(indices, lift(v, t), c.accumulate) as T;
  expectArr(r, c.out, "out");
  (r as any).mul(lift(upstream(r.shape, t.device), t)).sum().backward();
  expectArr(x.grad, c.grad!, "grad");
  expectArr(v.grad, c.vgrad!, "vgrad");
  // the in-place form gives the same values
  const y = lift(base(c.shape, t.device), t) as any;
  expect(y.index_put_(indices, lift(arr(c.values!, t.device), t), c.accumulate)).toBe(y);
  expectArr(y, c.out, "index_put_");
}

function runSet(c: Case, t: Target) {
  const y = lift(base(c.shape, t.device), t) as any;
  expect(y.set(...c.items.map((i) => item(i, t)), lift(arr(c.values!, t.device), t))).toBe(y);
  expectArr(y, c.out, "set");
}

const RUN = { get: runGet, put: runPut, set: runSet };

function goldenSuite(device: string) {
  for (const lazy of [false, true]) {
    describe(`${lazy ? "lazy" : "eager"} (torch ${golden.torch_version} goldens)`, () => {
      for (const c of golden.cases) {
        test(`${c.kind} ${c.name}`, () => RUN[c.kind](c, { device, lazy }), 60_000); // webgpu compiles kernels on first use
      }
    });
  }
}

describe.each(BACKENDS)("on %s", (backend) => {
  useBackend(backend);
  goldenSuite("cpu");
  dtypeTests("cpu");
});

function dtypeTests(device: string) {
  test("integer and bool tensors index and are assigned like float ones", () => {
    for (const lazy of [false, true]) {
      const t: Target = { device, lazy };
      const xi = lift(arange(12).reshape(3, 4).to(device), t) as any; // x[i][j] = 4i + j
      expect(xi.index([2, 0], ":2").tolist()).toEqual([[8, 9], [0, 1]]);
      const b = lift(tensor([[true, false], [false, true]]).to(device), t) as any;
      expect(b.index(":", [1, 1, 0]).tolist()).toEqual([[false, false, true], [true, true, false]]);
      // accumulate on int64, every row: column 1 gets 10 + 20, column 3 gets 5
      const acc = xi.index_put([null, [1, 3, 1]], lift(tensor([10, 5, 20]).to(device), t), true);
      expect(acc.index(0).tolist()).toEqual([0, 31, 2, 8]);
      xi.set([true, false, true], -1);
      expect(xi.tolist()).toEqual([[-1, -1, -1, -1], [4, 5, 6, 7], [-1, -1, -1, -1]]);
      b.set(0, [1], true);
      expect(b.tolist()).toEqual([[true, true], [false, true]]);
    }
  }, 60_000);

  test("assigned values arrive bit for bit: -0, NaN, -inf (no arithmetic on the written values)", () => {
    for (const lazy of [false, true]) {
      const y = lift(tensor([1, 2, 3, 4], { dtype: "float32" }).to(device), { device, lazy }) as any;
      y.set([2, 0, 1, 0], tensor([5, -0, NaN, -Infinity], { dtype: "float32" }).to(device)); // y[0] written twice: -inf wins
      const got = Array.from(y.dataSync() as Float64Array);
      expect(got.map((v) => Object.is(v, -0) ? "-0" : v)).toEqual([-Infinity, NaN, 5, 4]);
      const z = lift(tensor([1, 2], { dtype: "float32" }).to(device), { device, lazy }) as any;
      z.set([1], -0);
      expect(Object.is(z.dataSync()[1], -0)).toBe(true);
    }
  }, 60_000);
}

describe.if(WEBGPU)("on webgpu", () => {
  goldenSuite("webgpu");
  dtypeTests("webgpu");
});

// ---- gradients by finite differences (float64, js reference backend) ---------------------------
describe.each([false, true])("gradcheck (lazy=%s)", (lazy) => {
  useBackend("js");
  const x0 = () => arange(24).double().mul(0.37).sin().reshape(2, 3, 4);
  const L = (t: any) => (lazy ? t.lazy() : t);
  const ok = (f: (...xs: any[]) => any, inputs: Tensor[]) => expect(gradcheck(f, inputs)).toEqual([]);

  test("get: duplicates, masks, separated and adjacent advanced dims", () => {
    ok((x) => L(x).index([1, 1, 0], ":", [3, 3, 0]), [x0()]);
    ok((x) => L(x).index(":", [0, 1], [2, 2]), [x0()]);
    ok((x) => L(x).index(tensor([[true, false, true], [true, true, false]])), [x0()]);
    ok((x) => L(x).index("...", [[0], [3]], "1:"), [x0().reshape(2, 4, 3)]);
    // second order too (index_select's gradient is index_add, whose gradient is index_select)
    expect(gradcheck((x: any) => L(x).index([1, 1, 0], ":", [3, 3, 0]).square(), [x0()], { check_grad_grad: true })).toEqual([]);
  });

  test("index_put: accumulate with duplicates, overwrite with duplicates (the last write wins)", () => {
    const v0 = tensor([0.5, -1.5, 2.25], { dtype: "float64" });
    const idx = [tensor([0, 1, 0]), tensor([2, 2, 2])];
    ok((x, v) => L(x).index_put(idx, L(v), true), [x0().index(0), v0]);
    // without accumulate, element 0 of v is overwritten by element 2 (both write x[0][2]), so its
    // true derivative is 0; torch 1.13 hands it the gradient too (its backward gathers g[idx]).
    ok((x, v) => L(x).index_put(idx, L(v), false), [x0().index(0), v0]);
    const x = x0().index(0).requires_grad_(true), v = v0.detach().requires_grad_(true);
    L(x).index_put(idx, L(v)).sum().backward();
    expect(Array.from(v.grad!.dataSync())).toEqual([0, 1, 1]);
    expect(Array.from(x.grad!.dataSync())).toEqual([1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1]); // x[0][2], x[1][2] replaced
  });
});

// ---- in-place semantics ------------------------------------------------------------------------
describe("set / index_put_ in place", () => {
  test("eager: views see the write; a pending lazy graph keeps the old values (copy on write)", () => {
    const y = zeros(3, 4);
    const row = y.index(1); // a view
    const pending = y.lazy().add(1); // not realized yet
    y.set([1, 2], "1:3", tensor([[5, 6]], { dtype: "float32" }));
    expect(row.tolist()).toEqual([0, 5, 6, 0]);
    expect(pending.eval().index(1).tolist()).toEqual([1, 1, 1, 1]);
  });

  test("eager basic items write through the view; a source aliasing the target is read first", () => {
    const y = arange(6).float().reshape(2, 3); // [[0, 1, 2], [3, 4, 5]]
    const pending = y.lazy().mul(1);
    y.set(0, y.index(1)); // y[0] = y[1]
    y.set(1, "::2", y.index(0, "1:")); // y[1, ::2] = y[0, 1:] = [4, 5]
    expect(y.tolist()).toEqual([[3, 4, 5], [4, 4, 5]]);
    expect(pending.tolist()).toEqual([[0, 1, 2], [3, 4, 5]]);
  });

  test("lazy: the tensor is rebound; another lazy tensor holding the old value keeps it", () => {
    const y = zeros(2, 2).lazy();
    const old = y.add(0);
    y.index_put_([tensor([1])], 3);
    expect(y.tolist()).toEqual([[0, 0], [3, 3]]);
    expect(old.tolist()).toEqual([[0, 0], [0, 0]]);
  });

  test("a tensor that requires grad refuses in-place assignment (as every in-place op)", () => {
    const x = zeros(3).requires_grad_(true);
    expect(() => x.set([0], 1)).toThrow(LoomAutogradError);
    expect(() => x.lazy().index_put_([[0]], 1)).toThrow(LoomAutogradError);
    no_grad(() => x.set([0, 0], 2)); // allowed under no_grad
    expect(x.tolist()).toEqual([2, 0, 0]);
  });

  test("a lazy mask is realized when recorded; the indexed tensor stays pending", () => {
    const x = arange(6).float().lazy().sub(2); // [-2..3]
    const r = x.index(x.gt(0));
    expect(r).toBeInstanceOf(LazyTensor);
    expect(r.shape).toEqual([3]);
    expect(r.node.realized).toBeFalsy();
    expect(r.tolist()).toEqual([1, 2, 3]);
  });
});

// ---- errors ------------------------------------------------------------------------------------
const expectErr = (f: () => unknown, E: Function, msg: string) => {
  const e = thrown(f);
  expect(e).toBeInstanceOf(E);
  expect(e.message).toBe(msg);
};

describe.each([false, true])("errors (lazy=%s): raised when recorded, never a silent result", (lazy) => {
  const x = () => (lazy ? arange(12).float().reshape(3, 4).lazy() : arange(12).float().reshape(3, 4)) as any;
  const x3 = () => (lazy ? zeros(2, 3, 4).lazy() : zeros(2, 3, 4)) as any;

  test("out of range, with the dim of the indexed tensor", () => {
    expectErr(() => x().index([0, 5]), LoomIndexError, "[index] index 5 is out of bounds for dimension 0 with size 3");
    expectErr(() => x().index(":", [-5]), LoomIndexError, "[index] index -5 is out of bounds for dimension 1 with size 4");
    expectErr(() => x().index(tensor([[1], [3]])), LoomIndexError, "[index] index 3 is out of bounds for dimension 0 with size 3");
    expectErr(() => x().index(0, [4]), LoomIndexError, "[index] index 4 is out of bounds for dimension 1 with size 4");
    expectErr(() => x().index_put([tensor([3])], 1), LoomIndexError, "[index_put] index 3 is out of bounds for dimension 0 with size 3");
    expectErr(() => x().set(null, [7], 1), LoomIndexError, "[set] index 7 is out of bounds for dimension 0 with size 3");
  });

  test("masks, broadcasting, dtypes, too many indices", () => {
    expectErr(() => x3().index([true, false, true]), LoomIndexError,
      "[index] The shape of the mask [3] at index 0 does not match the shape of the indexed tensor [2, 3, 4] at index 0");
    expectErr(() => x3().index(":", tensor([[true, false, true, true]])), LoomIndexError,
      "[index] The shape of the mask [1, 4] at index 1 does not match the shape of the indexed tensor [2, 3, 4] at index 1");
    expectErr(() => x().index([0, 1], [0, 1, 2]), LoomIndexError,
      "[index] shape mismatch: indexing tensors could not be broadcast together with shapes [2], [3]");
    expectErr(() => x().index(tensor([1], { dtype: "float32" })), LoomIndexError,
      "[index] tensors used as indices must be long, int, byte or bool tensors, got float32");
    expectErr(() => x().index(tensor([1], { dtype: "int8" })), LoomIndexError,
      "[index] tensors used as indices must be long, int, byte or bool tensors, got int8");
    expectErr(() => x().index([0.5]), LoomIndexError,
      "[index] tensors used as indices must be long, int, byte or bool tensors; the list holds number 0.5");
    expectErr(() => x().index(tensor([[true, false, true, true], [true, true, true, true], [false, false, false, false]]), 0), LoomIndexError,
      "[index] too many indices for tensor of dimension 2 (got 3)");
  });

  test("unsupported forms name themselves", () => {
    expectErr(() => x().index(true as any), LoomIndexError, "[index] a bool scalar index (true) is not supported; use null for a new axis");
    expectErr(() => x().index(tensor(true)), LoomIndexError, "[index] a 0-d bool index tensor is not supported; use null for a new axis");
    expectErr(() => x().index([[0, 1], [2]]), LoomIndexError, "[index] an index list must be rectangular, got [[0,1],[2]] (expected length 2 at depth 1)");
    expectErr(() => x().index([0, true] as any), LoomIndexError, "[index] an index list mixes booleans and integers: [0,true]");
    expectErr(() => x().index({ begin: 1 } as any), LoomIndexError,
      "[index] unsupported index item: Object; use integers, slices, null, \"...\", integer or bool lists, or index tensors");
    expectErr(() => x().index(new Set([1]) as any), LoomIndexError,
      "[index] unsupported index item: Set; use integers, slices, null, \"...\", integer or bool lists, or index tensors");
    expectErr(() => x().index(undefined as any), LoomIndexError,
      "[index] unsupported index item: undefined; use integers, slices, null, \"...\", integer or bool lists, or index tensors");
    expectErr(() => x().index(1.5), LoomIndexError, "[index] an integer index must be an integer, got 1.5");
    expectErr(() => x().index({ start: 0.5 }), LoomValueError, "[index] slice start must be an integer or null, got 0.5");
  });

  test("index_put / set values and indices", () => {
    expectErr(() => x().index_put([tensor([0])], tensor([1], { dtype: "float64" })), LoomDtypeError,
      "[index_put] Index put requires the source and destination dtypes match, got float32 for the destination and float64 for the source");
    expectErr(() => x().index_put([tensor([0, 1])], zeros(3)), LoomShapeError,
      "[index_put] shape mismatch: value tensor of shape [3] cannot be broadcast to indexing result of shape [2, 4]");
    expectErr(() => x().set([0, 1], zeros(2, 1, 4)), LoomShapeError,
      "[set] shape mismatch: value tensor of shape [2, 1, 4] cannot be broadcast to indexing result of shape [2, 4]");
    expectErr(() => x().index_put(tensor([0]) as any, 1), LoomIndexError,
      "[index_put] indices must be an array of index tensors (one per leading dim), got object");
    expectErr(() => x().index_put_([0] as any, 1), LoomIndexError,
      "[index_put_] indices must be index tensors or lists (null for a whole dim), got number 0");
    expectErr(() => x().set(), LoomValueError, "[set] expects the index items followed by the value");
  });
});

test("set with only basic items converts the value like copy_; leading size-1 value dims are dropped", () => {
  const y = zeros([2, 3], { dtype: "int64" });
  y.set(0, "1:", tensor([1.7, -2.5], { dtype: "float32" })); // copy_: truncation toward zero
  y.set(1, [0], tensor([[[9]]])); // value [1, 1, 1] into a [1] result
  expect(y.tolist()).toEqual([[0, 1, -2], [9, 0, 0]]);
});
