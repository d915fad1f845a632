/**
 * Shape and indexing ops (src/lazy/shape_ops.ts, scatter_ops.ts, einsum.ts): values and gradients
 * against torch 1.13 goldens (gen_shape_ops_goldens.py -> shape_ops_goldens.json) on every
 * backend, eager == lazy (bit-equal under the exact compiler tolerance), float64 finite
 * differences, in-place scatter_, data-dependent shapes on lazy inputs, and the errors.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { readFileSync } from "node:fs";
import { expectClose, fromArr, type Arr } from "../nn/helpers.ts";
import { thrown } from "../thrown.ts";

interface Case { name: string; op: string; args: Record<string, any>; inputs: Arr[]; output: Arr; grad_output?: Arr; grads?: (Arr | null)[] }
// non-finite floats are written as strings (JSON has no Infinity/NaN)
const NONFINITE: Record<string, number> = { inf: Infinity, "-inf": -Infinity, nan: NaN };
const golden = JSON.parse(readFileSync(new URL("./shape_ops_goldens.json", import.meta.url), "utf8"), (_k, v) => (typeof v === "string" && v in NONFINITE ? NONFINITE[v] : v)) as { cases: Case[] };

/** The loom call for a golden case (methods and free functions both exercised). */
function call<S extends loom.TensorOps<S>>(c: Case, xs: S[]): S {
  const a = c.args, [x, y] = xs as [S, S];
  const idx = () => x._constant(fromArr(a.index as Arr)._data());
  switch (c.op) {
    case "repeat": return x.repeat(...(a.sizes as number[]));
    case "tile": return loom.tile(x, a.dims);
    case "repeat_interleave": return Array.isArray(a.repeats)
      ? x.repeat_interleave(x._constant(loom.tensor(a.repeats)._data()), a.dim)
      : loom.repeat_interleave(x, a.repeats, a.dim);
    case "flip": return c.name === "flip" ? loom.flip(x, a.dims) : x.flip(a.dims);
    case "fliplr": return x.fliplr();
    case "flipud": return loom.flipud(x);
    case "roll": return x.roll(a.shifts, a.dims);
    case "select": return loom.select(x, a.dim, a.index);
    case "outer": return x.outer(y);
    case "diag": return loom.diag(x, a.diagonal);
    case "diagonal": return x.diagonal(a.offset, a.dim1, a.dim2);
    case "masked_select": return loom.masked_select(x, y);
    case "nonzero": return x.nonzero();
    case "scatter": return loom.scatter(x, a.dim, idx(), y);
    case "scatter_value": return x.scatter(a.dim, idx(), a.value);
    case "scatter_reduce": return x.scatter_reduce(a.dim, idx(), y, a.reduce, { include_self: a.include_self });
    case "round": return loom.round(x, { decimals: a.decimals });
    case "rsub": return loom.rsub(x, y, { alpha: a.alpha });
    case "einsum": return loom.einsum(a.equation, ...xs);
    case "pad": return loom.nn.F.pad(x, a.pad, { mode: a.mode, value: a.value });
  }
  throw new Error(`no op ${c.op}`);
}

/** Output values and input gradients (backward of sum(out * grad_output)). */
function run(c: Case, lazy: boolean) {
  const leaves = c.inputs.map((a) => {
    const t = fromArr(a);
    return t.is_floating_point() ? t.requires_grad_(true) : t;
  });
  const out = call(c, leaves.map((t) => (lazy ? t.lazy() : t)) as any[]) as loom.Tensor | loom.LazyTensor;
  const value = { shape: [...out.shape], dtype: out.dtype, data: Array.from(out.dataSync()) };
  let grads: (number[] | null)[] = [];
  if (c.grad_output) {
    const g = fromArr(c.grad_output);
    (out as any).mul(lazy ? g.lazy() : g).sum().backward();
    grads = leaves.map((t) => (t.grad ? Array.from(t.grad.dataSync()) : t.is_floating_point() ? new Array<number>(t.numel()).fill(0) : null));
  }
  return { value, grads };
}

describe.each(BACKENDS)("shape ops match torch on %s", (backend) => {
  useBackend(backend);
  for (const c of golden.cases) {
    test(c.name, () => {
      const e = run(c, false);
      // sums and matmuls may round differently from torch's float32 loops
      const tol = { rtol: 1e-5, atol: 2e-6 };
      expect(e.value.dtype).toBe(c.output.dtype);
      expectClose(e.value.data, c.output, { ...tol, what: `${c.name} value` });
      expect(e.value.shape).toEqual(c.output.shape);
      c.grads?.forEach((g, i) => { if (g) expectClose(e.grads[i]!, g, { ...tol, what: `${c.name} grad ${i}` }); });
      const l = loom.with_compiler_options({ tolerance: "exact" }, () => run(c, true));
      if (backend === "js") {
        expect(l.value).toEqual(e.value);
        expect(l.grads).toEqual(e.grads);
      } else {
        expect(l.value.shape).toEqual(e.value.shape);
        expectClose(l.value.data, e.value.data, { ...tol, what: `${c.name} lazy value` });
        l.grads.forEach((g, i) => { if (g) expectClose(g, e.grads[i]!, { ...tol, what: `${c.name} lazy grad ${i}` }); });
      }
    });
  }
});

describe("finite differences (float64, js)", () => {
  const r = (...shape: number[]) => loom.randn(shape, { dtype: "float64", generator: new loom.Generator(shape.reduce((a, b) => a * 7 + b, 3)) });
  const idx = loom.tensor([[0, 1, 0, 2], [0, 1, 2, 2], [1, 1, 0, 2]]);
  const cases: [string, (...xs: loom.Tensor[]) => loom.Tensor, loom.Tensor[]][] = [
    ["scatter_reduce prod", (x, s) => x.scatter_reduce(0, idx, s, "prod"), [r(3, 4), r(3, 4)]],
    ["scatter_reduce amax", (x, s) => x.scatter_reduce(0, idx, s, "amax", { include_self: false }), [r(3, 4), r(3, 4)]],
    ["scatter_reduce mean", (x, s) => x.scatter_reduce(0, idx, s, "mean"), [r(3, 4), r(3, 4)]],
    ["einsum bilinear", (a, w, b) => loom.einsum("bn,anm,bm->ba", a, w, b), [r(2, 3), r(4, 3, 5), r(2, 5)]],
    ["einsum trace", (a) => loom.einsum("ii", a), [r(3, 3)]],
    ["pad reflect", (x) => loom.nn.F.pad(x, [2, 1], { mode: "reflect" }), [r(2, 4)]],
    ["pad circular", (x) => loom.nn.F.pad(x, [1, 3], { mode: "circular" }), [r(2, 3)]],
    ["roll + flip + repeat", (x) => x.roll(1, 0).flip(1).repeat(2, 1), [r(3, 2)]],
    ["diag", (x) => loom.diag(x, -1).mul(2).diag(-1), [r(3)]],
  ];
  for (const [name, f, xs] of cases) test(name, () => { expect(loom.gradcheck(f, xs)).toEqual([]); });
});

describe.each(BACKENDS)("in place and data-dependent shapes on %s", (backend) => {
  useBackend(backend);
  test("scatter_ writes through the in-place path: views see it, the version counter moves", () => {
    const x = loom.zeros([2, 3]);
    const row = x.select(0, 1);
    const v0 = x._version;
    const ret = x.scatter_(1, loom.tensor([[2], [0]]), loom.tensor([[5], [7]]).float());
    expect(ret).toBe(x);
    expect(x.tolist()).toEqual([[0, 0, 5], [7, 0, 0]]);
    expect(row.tolist()).toEqual([7, 0, 0]);
    expect(x._version).toBeGreaterThan(v0);
    const l = loom.zeros([3]).lazy();
    l.scatter_reduce_(0, loom.tensor([0, 0, 2]).lazy(), loom.tensor([1, 2, 3]).float().lazy(), "sum");
    expect(l.tolist()).toEqual([3, 0, 3]);
  });
  test("scatter_ on a leaf that requires grad is refused", () => {
    const x = loom.zeros([3]).requires_grad_();
    const e = thrown(() => x.scatter_(0, loom.tensor([0]), 1));
    expect(e).toBeInstanceOf(loom.LoomAutogradError);
    expect(e.message).toContain("[scatter_]");
  });
  test("masked_select, nonzero and repeat_interleave realize a lazy operand; the input stays lazy", () => {
    const x = loom.tensor([[1, -2, 3], [-4, 5, -6]]).float();
    const m = x.lazy().gt(0);
    const sel = x.lazy().mul(2).masked_select(m);
    expect(sel.isLazy).toBe(true);
    expect(sel.tolist()).toEqual([2, 6, 10]);
    expect(m.nonzero().tolist()).toEqual([[0, 0], [0, 2], [1, 1]]);
    const [r, c] = loom.nonzero(m, { as_tuple: true });
    expect([r!.tolist(), c!.tolist()]).toEqual([[0, 0, 1], [0, 2, 1]]);
    expect(loom.nonzero(loom.tensor(3), { as_tuple: true }).map((t) => t.tolist())).toEqual([[0]]);
    expect(loom.repeat_interleave(loom.tensor([2, 0, 1])).tolist()).toEqual([0, 0, 2]); // torch.repeat_interleave(repeats)
    expect(x.lazy().repeat_interleave(loom.tensor([2, 0]).lazy(), 0).tolist()).toEqual([[1, -2, 3], [1, -2, 3]]);
  });
  test("to(other) takes dtype and device; round(decimals) has a zero gradient", () => {
    const x = loom.tensor([1.25, 2.5]).float().requires_grad_();
    expect(x.to(loom.tensor([1])).dtype).toBe("int64");
    expect(x.to(loom.zeros([1], { dtype: "float64" })).dtype).toBe("float64");
    x.round({ decimals: 1 }).sum().backward();
    expect(x.grad!.tolist()).toEqual([0, 0]);
  });
  test("a lazy einsum + flip + roll + pad chain records without running and realizes as one plan", () => {
    const a = loom.randn([2, 3, 4]), b = loom.randn([2, 4, 5]);
    const before = loom.realizeStats.realizes;
    const l = loom.nn.F.pad(loom.einsum("bij,bjk->bik", a.lazy(), b.lazy()).flip(1).roll(1, 2), [1, 1], { mode: "reflect" });
    expect(l.isLazy).toBe(true);
    expect(loom.realizeStats.realizes).toBe(before); // nothing ran while recording
    const want = loom.nn.F.pad(a.matmul(b).flip(1).roll(1, 2), [1, 1], { mode: "reflect" });
    expectClose(Array.from(l.dataSync()), Array.from(want.dataSync()), { what: "bmm" });
    expect(loom.realizeStats.realizes).toBe(before + 1); // one plan for the chain
  });
});

describe("errors name the op, shapes and dtypes", () => {
  const x = loom.zeros([2, 3]);
  const cases: [string, () => unknown, new (...a: any[]) => Error, string][] = [
    ["repeat fewer dims", () => x.repeat(2), loom.LoomValueError, "[repeat] Number of dimensions of repeat dims can not be smaller"],
    ["repeat negative", () => x.repeat(1, -1), loom.LoomValueError, "[repeat]"],
    ["repeat_interleave size", () => x.repeat_interleave([1, 2], 1), loom.LoomShapeError, "repeats.size(0) = 2 and input.size(1) = 3"],
    ["repeat_interleave negative", () => x.repeat_interleave(-1), loom.LoomValueError, "repeats can not be negative"],
    ["repeat_interleave float repeats", () => x.repeat_interleave(loom.tensor([1.5, 2]).float(), 0), loom.LoomDtypeError, "Long or Int"],
    ["flip repeated dim", () => x.flip([0, -2]), loom.LoomError, "[flip]"],
    ["flip dim range", () => x.flip([2]), loom.LoomIndexError, "[flip] dim 2 is out of range"],
    ["fliplr 1-d", () => loom.zeros([3]).fliplr(), loom.LoomShapeError, "[fliplr] Input must be >= 2-d"],
    ["roll align", () => x.roll([1, 2], [0]), loom.LoomValueError, "shifts and dimensions must align"],
    ["select range", () => x.select(1, 3), loom.LoomIndexError, "select(): index 3 out of range for tensor of size [2, 3] at dimension 1"],
    ["outer 2-d", () => x.outer(loom.zeros([3])), loom.LoomShapeError, "[outer] expected 1-D arguments, got self [2, 3]"],
    ["diag 3-d", () => loom.zeros([2, 2, 2]).diag(), loom.LoomShapeError, "Supports 1D or 2D tensors. Got 3D"],
    ["diagonal same dims", () => x.diagonal(0, 1, -1), loom.LoomValueError, "diagonal dimensions cannot be identical"],
    ["masked_select dtype", () => x.masked_select(loom.ones([3])), loom.LoomDtypeError, "expected BoolTensor for mask, got float32"],
    ["masked_select shape", () => x.masked_select(loom.ones([4], { dtype: "bool" })), loom.LoomShapeError, "[masked_select] shapes [2, 3] and [4]"],
    ["scatter index dtype", () => x.scatter(0, loom.tensor([[0]]).int(), 1), loom.LoomDtypeError, "Expected dtype int64 for index, got int32"],
    ["scatter src dtype", () => x.scatter(0, loom.tensor([[0]]), loom.tensor([[1]])), loom.LoomDtypeError, "Expected self.dtype to be equal to src.dtype, got float32 and int64"],
    ["scatter bounds", () => x.scatter(0, loom.tensor([[2]]), 1), loom.LoomIndexError, "[scatter] index 2 is out of bounds for dimension 0 with size 2"],
    ["scatter shape", () => x.scatter(0, loom.tensor([[0, 1, 0, 1]]), loom.zeros([1, 4])), loom.LoomShapeError, "Expected index [1, 4] to be smaller than self [2, 3] apart from dimension 0"],
    ["scatter ndim", () => x.scatter(1, loom.tensor([0]), 1), loom.LoomShapeError, "same number of dimensions"],
    ["scatter_reduce mode", () => x.scatter_reduce(0, loom.tensor([[0]]), x, "max" as any), loom.LoomValueError, "reduce argument must be either sum, prod, mean, amax or amin"],
    ["round int decimals", () => loom.tensor([15]).round({ decimals: -1 }), loom.LoomDtypeError, "not implemented for 'int64'"],
    ["einsum operand count", () => loom.einsum("ij,jk->ik", x), loom.LoomValueError, "fewer operands were provided"],
    ["einsum subscripts", () => loom.einsum("ijk", x), loom.LoomShapeError, "number of subscripts in the equation (3) does not match the number of dimensions (2) for operand 0"],
    ["einsum sizes", () => loom.einsum("ij,ij->i", x, loom.zeros([2, 4])), loom.LoomShapeError, "subscript j has size 3 and 4"],
    ["einsum output", () => loom.einsum("ij->k", x), loom.LoomValueError, "output subscript k does not appear"],
    ["einsum repeated output", () => loom.einsum("ij->ii", x), loom.LoomValueError, "appears more than once"],
    ["einsum diagonal sizes", () => loom.einsum("ii", x), loom.LoomShapeError, "subscript i is repeated for operand 0 but the sizes don't match, 2 != 3"],
    ["einsum dtype", () => loom.einsum("i,i", loom.zeros([2]), loom.zeros([2], { dtype: "float64" })), loom.LoomDtypeError, "same dtype"],
    ["einsum bad char", () => loom.einsum("i1", x), loom.LoomValueError, "invalid subscript"],
    ["pad odd", () => loom.nn.F.pad(x, [1]), loom.LoomValueError, "Padding length must be divisible by 2"],
    ["pad too long", () => loom.nn.F.pad(x, [1, 1, 1, 1, 1, 1]), loom.LoomValueError, "Padding length too large"],
    ["pad reflect size", () => loom.nn.F.pad(x, [3, 0], { mode: "reflect" }), loom.LoomValueError, "Padding size should be less than the corresponding input dimension"],
    ["pad circular size", () => loom.nn.F.pad(x, [4, 0], { mode: "circular" }), loom.LoomValueError, "wrapping around more than once"],
    ["pad mode", () => loom.nn.F.pad(x, [1, 1], { mode: "edge" as any }), loom.LoomValueError, "Unrecognised padding mode edge"],
    ["pad value with mode", () => loom.nn.F.pad(x, [1, 1], { mode: "reflect", value: 1 }), loom.LoomValueError, "doesn't take in value argument"],
    ["pad crop too far", () => loom.nn.F.pad(x, [-2, -2]), loom.LoomValueError, "negative output size"],
  ];
  for (const [name, f, cls, msg] of cases) {
    test(name, () => {
      const e = thrown(f);
      expect(e).toBeInstanceOf(cls);
      expect(e.message).toContain(msg);
    });
  }
});
