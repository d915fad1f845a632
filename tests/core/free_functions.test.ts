/**
 * The free functions (src/lazy/free_functions*.ts): each equals its method on eager and lazy
 * tensors (values, dtypes and gradients, on every backend); the forms that are not a method call
 * (a scalar first operand, where with two scalars, round(decimals), keyword arguments) match
 * torch 1.13 goldens (gen_free_functions_goldens.py); and every Tensor method that torch also has
 * at top level has a free function (torch_top_level.json), so the surface cannot silently drift.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import * as loom from "../../src/index.ts";
import * as freeFns from "../../src/lazy/free_functions.ts";
import * as freeShape from "../../src/lazy/free_functions_shape.ts";
import { BACKENDS, useBackend } from "../backends.ts";

type T = loom.Tensor;
const f64 = { dtype: "float64" } as const;
const X = () => loom.tensor([[1.5, -2.25, 0.5], [3.0, 0.75, -1.0]], f64);
const P = () => loom.tensor([[0.5, 1.25, 2.0], [1.5, 0.25, 3.0]], f64);
const I = () => loom.tensor([[1, -2, 3], [4, 5, -6]]);
const B = () => loom.tensor([[true, false, true], [false, true, true]]);
const idx = (v: number[]) => loom.tensor(v);

interface Case {
  inputs: () => T[];
  free: (...xs: any[]) => unknown;
  method: (...xs: any[]) => unknown;
  /** In-place: inputs must not require grad. */
  nograd?: boolean;
}
/** Keyed by free function name, ":variant" for further forms of one function. */
const CASES: Record<string, Case> = {
  "add": { inputs: () => [X(), P()], free: (a, b) => loom.add(a, b, { alpha: 2.5 }), method: (a, b) => a.add(b, { alpha: 2.5 }) },
  "add:scalar other": { inputs: () => [X()], free: (a) => loom.add(a, 1.5), method: (a) => a.add(1.5) },
  "sub": { inputs: () => [X(), P()], free: (a, b) => loom.sub(a, b, { alpha: -0.5 }), method: (a, b) => a.sub(b, { alpha: -0.5 }) },
  "rsub": { inputs: () => [X(), P()], free: (a, b) => loom.rsub(a, b, { alpha: 2 }), method: (a, b) => a.rsub(b, { alpha: 2 }) },
  "mul": { inputs: () => [X(), P()], free: (a, b) => loom.mul(a, b), method: (a, b) => a.mul(b) },
  "div": { inputs: () => [X(), P()], free: (a, b) => loom.div(a, b), method: (a, b) => a.div(b) },
  "div:floor": { inputs: () => [I()], free: (a) => loom.div(a, 4, { rounding_mode: "floor" }), method: (a) => a.div(4, { rounding_mode: "floor" }) },
  "floor_divide": { inputs: () => [I()], free: (a) => loom.floor_divide(a, 3), method: (a) => a.floor_divide(3) },
  "remainder": { inputs: () => [X(), P()], free: (a, b) => loom.remainder(a, b), method: (a, b) => a.remainder(b) },
  "pow": { inputs: () => [P(), X()], free: (a, b) => loom.pow(a, b), method: (a, b) => a.pow(b) },
  "pow:scalar exponent": { inputs: () => [X()], free: (a) => loom.pow(a, 3), method: (a) => a.pow(3) },
  "maximum": { inputs: () => [X(), P()], free: (a, b) => loom.maximum(a, b), method: (a, b) => a.maximum(b) },
  "minimum": { inputs: () => [X(), P()], free: (a, b) => loom.minimum(a, b), method: (a, b) => a.minimum(b) },
  ...Object.fromEntries(
    (["square", "neg", "abs", "sign", "exp", "log", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "erf", "floor", "ceil", "round", "isnan"] as const)
      .map((n): [string, Case] => [n, { inputs: () => [P().sub(X().mul(0.25))], free: (a) => (loom as any)[n](a), method: (a) => a[n]() }]),
  ),
  "logical_not": { inputs: () => [B()], free: (a) => loom.logical_not(a), method: (a) => a.logical_not() },
  "clamp": { inputs: () => [X()], free: (a) => loom.clamp(a, -1, 1), method: (a) => a.clamp(-1, 1) },
  "clamp:keyword max": { inputs: () => [X()], free: (a) => loom.clamp(a, { max: 0.5 }), method: (a) => a.clamp(null, 0.5) },
  "clamp:tensor bounds": { inputs: () => [X(), P()], free: (a, b) => loom.clamp(a, b.neg(), b), method: (a, b) => a.clamp(b.neg(), b) },
  "clip": { inputs: () => [X()], free: (a) => loom.clip(a, { min: -1 }), method: (a) => a.clip(-1) },
  "clamp_": { inputs: () => [X()], free: (a) => loom.clamp_(a, -1, 1), method: (a) => a.clamp_(-1, 1), nograd: true },
  "fill_": { inputs: () => [X()], free: (a) => loom.fill_(a, 2.5), method: (a) => a.fill_(2.5), nograd: true },
  "zero_": { inputs: () => [X()], free: (a) => loom.zero_(a), method: (a) => a.zero_(), nograd: true },
  ...Object.fromEntries(
    (["eq", "ne", "lt", "le", "gt", "ge"] as const).flatMap((n): [string, Case][] => [
      [n, { inputs: () => [X(), P()], free: (a, b) => (loom as any)[n](a, b), method: (a, b) => a[n](b) }],
      [`${n}:scalar`, { inputs: () => [X()], free: (a) => (loom as any)[n](a, 0.5), method: (a) => a[n](0.5) }],
    ]),
  ),
  "logical_and": { inputs: () => [B(), B().logical_not()], free: (a, b) => loom.logical_and(a, b), method: (a, b) => a.logical_and(b) },
  "logical_or": { inputs: () => [B(), I()], free: (a, b) => loom.logical_or(a, b), method: (a, b) => a.logical_or(b) },
  "masked_fill": { inputs: () => [X(), B()], free: (a, m) => loom.masked_fill(a, m, 0.5), method: (a, m) => a.masked_fill(m, 0.5) },
  "sum": { inputs: () => [X()], free: (a) => loom.sum(a, 1, true), method: (a) => a.sum(1, true) },
  "sum:all": { inputs: () => [X()], free: (a) => loom.sum(a), method: (a) => a.sum() },
  "sum:dtype": { inputs: () => [I()], free: (a) => loom.sum(a, { dim: 0, dtype: "float32" }), method: (a) => a.sum(0, false, { dtype: "float32" }) },
  "mean": { inputs: () => [X()], free: (a) => loom.mean(a, [0, 1], { keepdim: true }), method: (a) => a.mean([0, 1], true) },
  "amax": { inputs: () => [X()], free: (a) => loom.amax(a, -1), method: (a) => a.amax(-1) },
  "amin": { inputs: () => [X()], free: (a) => loom.amin(a, { dim: 0, keepdim: true }), method: (a) => a.amin(0, true) },
  "any": { inputs: () => [B()], free: (a) => loom.any(a, 1), method: (a) => a.any(1) },
  "all": { inputs: () => [B()], free: (a) => loom.all(a), method: (a) => a.all() },
  "logsumexp": { inputs: () => [X()], free: (a) => loom.logsumexp(a, 1), method: (a) => a.logsumexp(1) },
  "argmax": { inputs: () => [X()], free: (a) => loom.argmax(a, { dim: 1 }), method: (a) => a.argmax(1) },
  "argmin": { inputs: () => [X()], free: (a) => loom.argmin(a), method: (a) => a.argmin() },
  "max": { inputs: () => [X()], free: (a) => loom.max(a, 1), method: (a) => a.max(1) },
  "max:all": { inputs: () => [X()], free: (a) => loom.max(a), method: (a) => a.max() },
  "max:other": { inputs: () => [X(), P()], free: (a, b) => loom.max(a, b), method: (a, b) => a.max(b) },
  "min": { inputs: () => [X()], free: (a) => loom.min(a, { dim: 0, keepdim: true }), method: (a) => a.min(0, true) },
  "min:all": { inputs: () => [X()], free: (a) => loom.min(a), method: (a) => a.min() },
  "var": { inputs: () => [X()], free: (a) => loom.var(a, 1, false, true), method: (a) => a.var(1, { unbiased: false, keepdim: true }) },
  "var:correction": { inputs: () => [X()], free: (a) => loom.var(a, { correction: 0 }), method: (a) => a.var(undefined, { correction: 0 }) },
  "std": { inputs: () => [X()], free: (a) => loom.std(a, 0), method: (a) => a.std(0) },
  "cumsum": { inputs: () => [X()], free: (a) => loom.cumsum(a, 1), method: (a) => a.cumsum(1) },
  "norm": { inputs: () => [X()], free: (a) => loom.norm(a, 3, 1), method: (a) => a.norm(3, 1) },
  "norm:fro": { inputs: () => [X()], free: (a) => loom.norm(a), method: (a) => a.norm() },
  "numel": { inputs: () => [X()], free: (a) => loom.numel(a), method: (a) => a.numel() },
  "is_floating_point": { inputs: () => [I()], free: (a) => loom.is_floating_point(a), method: (a) => a.is_floating_point() },
  "reshape": { inputs: () => [X()], free: (a) => loom.reshape(a, [3, -1]), method: (a) => a.reshape([3, -1]) },
  "flatten": { inputs: () => [X().reshape([2, 3, 1])], free: (a) => loom.flatten(a, 1), method: (a) => a.flatten(1) },
  "unflatten": { inputs: () => [X()], free: (a) => loom.unflatten(a, 1, [3, 1]), method: (a) => a.unflatten(1, [3, 1]) },
  "squeeze": { inputs: () => [X().reshape([2, 1, 3])], free: (a) => loom.squeeze(a), method: (a) => a.squeeze() },
  "unsqueeze": { inputs: () => [X()], free: (a) => loom.unsqueeze(a, -1), method: (a) => a.unsqueeze(-1) },
  "permute": { inputs: () => [X()], free: (a) => loom.permute(a, [1, 0]), method: (a) => a.permute([1, 0]) },
  "transpose": { inputs: () => [X()], free: (a) => loom.transpose(a, 0, 1), method: (a) => a.transpose(0, 1) },
  "swapaxes": { inputs: () => [X()], free: (a) => loom.swapaxes(a, 0, 1), method: (a) => a.swapaxes(0, 1) },
  "t": { inputs: () => [X()], free: (a) => loom.t(a), method: (a) => a.t() },
  "narrow": { inputs: () => [X()], free: (a) => loom.narrow(a, 1, 1, 2), method: (a) => a.narrow(1, 1, 2) },
  "clone": { inputs: () => [X()], free: (a) => loom.clone(a), method: (a) => a.clone() },
  "split": { inputs: () => [X()], free: (a) => loom.split(a, [1, 2], 1), method: (a) => a.split([1, 2], 1) },
  "chunk": { inputs: () => [X()], free: (a) => loom.chunk(a, 2, { dim: 1 }), method: (a) => a.chunk(2, 1) },
  "gather": { inputs: () => [X()], free: (a) => loom.gather(a, 1, idx([0, 2, 1, 1]).reshape([2, 2])), method: (a) => a.gather(1, idx([0, 2, 1, 1]).reshape([2, 2])) },
  "scatter_add": { inputs: () => [X(), P()], free: (a, s) => loom.scatter_add(a, 0, idx([1, 0, 1, 0, 0, 1]).reshape([2, 3]), s), method: (a, s) => a.scatter_add(0, idx([1, 0, 1, 0, 0, 1]).reshape([2, 3]), s) },
  "index_select": { inputs: () => [X()], free: (a) => loom.index_select(a, 1, idx([2, 0])), method: (a) => a.index_select(1, idx([2, 0])) },
  "index_add": { inputs: () => [X(), P()], free: (a, s) => loom.index_add(a, 0, idx([1, 0]), s, { alpha: 2 }), method: (a, s) => a.index_add(0, idx([1, 0]), s, { alpha: 2 }) },
  "index_put": { inputs: () => [X(), P()], free: (a, v) => loom.index_put(a, [[1, 1]], v.narrow(0, 0, 1).squeeze(0).narrow(0, 0, 1), { accumulate: true }), method: (a, v) => a.index_put([[1, 1]], v.narrow(0, 0, 1).squeeze(0).narrow(0, 0, 1), true) },
  "index_put_": { inputs: () => [X()], free: (a) => loom.index_put_(a, [null, [0, 2]], 7.5), method: (a) => a.index_put_([null, [0, 2]], 7.5), nograd: true },
  "mm": { inputs: () => [X(), P()], free: (a, b) => loom.mm(a, b.t()), method: (a, b) => a.mm(b.t()) },
  "bmm": { inputs: () => [X(), P()], free: (a, b) => loom.bmm(a.unsqueeze(0), b.t().unsqueeze(0)), method: (a, b) => a.unsqueeze(0).bmm(b.t().unsqueeze(0)) },
};

/** Tensors of a result (a tensor, a list, {values, indices}) or the plain value (numel...). */
function parts(r: unknown): unknown[] {
  if (Array.isArray(r)) return r.flatMap(parts);
  if (r instanceof loom.TensorOps) return [r];
  if (typeof r === "object" && r !== null && "values" in r) return [(r as any).values, (r as any).indices];
  return [r];
}
/** Values, dtypes, shapes and the gradients of sum(out * w), w_k = 1 + (k mod 5) / 7. */
function run(c: Case, lazy: boolean, fn: (...xs: any[]) => unknown) {
  const leaves = c.inputs().map((x) => (x.dtype === "float64" && !c.nograd ? x.requires_grad_(true) : x));
  const outs = parts(fn(...leaves.map((x) => (lazy ? x.lazy() : x))));
  let loss: any = null;
  const values = outs.map((o) => {
    if (!(o instanceof loom.TensorOps)) return o;
    expect(o.isLazy).toBe(lazy);
    if (o.requires_grad) {
      const w = loom.tensor(Array.from({ length: o.numel() }, (_, k) => 1 + (k % 5) / 7), { dtype: o.dtype }).reshape([...o.shape]);
      const s = o.mul(lazy ? w.lazy() : w).sum();
      loss = loss ? loss.add(s) : s;
    }
    return { shape: [...o.shape], dtype: o.dtype, data: Array.from(o.dataSync()) };
  });
  if (loss) loss.backward();
  return { values, grads: leaves.map((x) => (x.grad ? Array.from(x.grad.dataSync()) : null)) };
}

describe.each(BACKENDS)("free function == method on %s", (backend) => {
  useBackend(backend);
  for (const [name, c] of Object.entries(CASES)) {
    test(name, () => {
      for (const lazy of [false, true]) {
        const want = run(c, lazy, c.method);
        expect(run(c, lazy, c.free)).toEqual(want);
      }
    });
  }
});

test("every free function has a case above", () => {
  const names = [...Object.keys(freeFns), ...Object.keys(freeShape)].filter((n) => typeof (loom as any)[n] === "function");
  const covered = new Set(Object.keys(CASES).map((k) => k.split(":")[0]));
  expect(names.filter((n) => !covered.has(n))).toEqual([]);
});

// ---- torch goldens for the calls that are not a method call ---------------------------------

interface Arr { dtype: loom.DType; shape: number[]; data: number[] }
interface Golden { fn: string; args: unknown[]; kwargs: Record<string, unknown>; inputs: Arr[]; outs: Arr[]; grads: (Arr | null)[] | null }
const GOLDENS: Record<string, Golden> = JSON.parse(readFileSync(`${import.meta.dir}/free_functions_goldens.json`, "utf8")).cases;

/** |got - want| <= 1e-12 (float64), 2e-6 relative (float32); integers and bools exact. */
function expectClose(got: T, want: Arr, what: string) {
  expect({ what, dtype: got.dtype, shape: [...got.shape] }).toEqual({ what, dtype: want.dtype, shape: want.shape });
  const g = Array.from(got.dataSync());
  const tol = want.dtype === "float64" ? 1e-12 : want.dtype === "float32" ? 2e-6 : 0;
  g.forEach((v, i) => {
    const w = want.data[i]!;
    if (Math.abs(v - w) > tol * Math.max(1, Math.abs(w))) throw new Error(`${what}[${i}]: got ${v}, torch ${w}`);
  });
}

describe.each(BACKENDS)("free functions match torch on %s", (backend) => {
  useBackend(backend);
  for (const [name, c] of Object.entries(GOLDENS)) {
    test(name, () => {
      for (const lazy of [false, true]) {
        const leaves = c.inputs.map((a) => loom.tensor(a.data as number[], { dtype: a.dtype }).reshape(a.shape));
        if (c.grads) leaves.forEach((l) => { if (l.is_floating_point()) l.requires_grad_(true); });
        const args = c.args.map((a) => (typeof a === "object" && a !== null && "t" in a ? (lazy ? leaves[(a as any).t].lazy() : leaves[(a as any).t]) : a));
        if (Object.keys(c.kwargs).length) args.push(c.kwargs);
        const outs = parts((loom as any)[c.fn](...args)) as any[];
        expect(outs.length).toBe(c.outs.length);
        outs.forEach((o, i) => expectClose(o, c.outs[i]!, `${lazy ? "lazy" : "eager"} out ${i}`));
        if (!c.grads) continue;
        let loss: any = null;
        for (const o of outs.filter((o) => o.requires_grad)) {
          const w = loom.arange(1, o.numel() + 1, 1, { dtype: o.dtype }).reshape([...o.shape]);
          const s = o.mul(lazy ? w.lazy() : w).sum();
          loss = loss ? loss.add(s) : s;
        }
        loss?.backward();
        c.grads.forEach((g, i) => {
          if (g) expectClose(leaves[i]!.grad!, g, `${lazy ? "lazy" : "eager"} grad ${i}`);
          else expect(leaves[i]!.grad).toBeNull();
        });
      }
    });
  }
});

describe("scalars, keywords and their errors", () => {
  const c = () => loom.tensor([true, false]);
  test("a JS 1.0 is the integer 1: where(c, 1.0, 0.0) is int64, as tensor([1.0]) (see tensor())", () => {
    const r = loom.where(c(), 1.0, 0.0);
    expect(r.dtype).toBe("int64");
    expect(r.float().tolist()).toEqual([1, 0]);
    expect(loom.where(c().lazy(), 0.5, 0).dtype).toBe("float32");
    expect(loom.add(2.0, loom.tensor([1, 2])).dtype).toBe("int64");
  });
  test("a scalar first operand takes the other operand's kind and device", () => {
    const x = loom.tensor([1.5, 2.5]);
    expect(loom.pow(2, x.lazy()).isLazy).toBe(true);
    expect(loom.sub(1, x).tolist()).toEqual([-0.5, -1.5]);
  });
  test("errors name the op", () => {
    const x = loom.tensor([[1.5, 2.5]]);
    const thrown = (f: () => unknown) => { try { f(); } catch (e) { return e as Error; } throw new Error("no error"); };
    const e1 = thrown(() => loom.add(2, 3));
    expect(e1).toBeInstanceOf(loom.LoomValueError);
    expect(e1.message).toBe("[add] expected a tensor operand, got the scalars 2 and 3 (make one a tensor with loom.tensor)");
    expect(thrown(() => loom.rsub(2 as any, x)).message).toMatch(/^\[rsub\] argument 'input' must be a tensor/);
    expect(thrown(() => loom.sum(x, 1, { dim: 0 })).message).toBe("[sum] got multiple values for argument 'dim'");
    expect(thrown(() => loom.sum(x, { axis: 1 } as any)).message).toBe("[sum] got an unexpected keyword argument 'axis' (parameters: dim, keepdim, dtype)");
    expect(thrown(() => (loom.mean as any)(x, 0, true, {}, 1)).message).toMatch(/^\[mean\] takes 2 positional arguments after input but/);
    expect(thrown(() => loom.var(x, { unbiased: false, correction: 0 })).message).toBe("[var] cannot specify both unbiased and correction");
    expect(thrown(() => loom.norm(x, "inf" as any)).message).toMatch(/^\[norm\] p='inf' is not supported/); // 'nuc' is supported (linalg.ts)
    const e2 = thrown(() => loom.round(loom.tensor([1, 2]), { decimals: 1 }));
    expect(e2).toBeInstanceOf(loom.LoomDtypeError);
    expect(e2.message).toBe("[round] decimals=1 needs a floating point tensor, got int64");
    expect(thrown(() => loom.logsumexp(x)).message).toBe("[logsumexp] missing required argument 'dim'");
  });
});

// ---- coverage against torch's top-level names -------------------------------------------------

const TORCH_TOP_LEVEL = new Set<string>(JSON.parse(readFileSync(`${import.meta.dir}/torch_top_level.json`, "utf8")).names);
/** Public methods of the one surface (other files may add more to its prototype). */
const METHODS = Object.getOwnPropertyNames(loom.TensorOps.prototype).filter((n) => !n.startsWith("_") && n !== "constructor");
/**
 * Tensor methods that torch also has at top level but Loom deliberately does not export as a
 * free function, each with its reason. Empty today: every such method has one.
 */
const EXCEPTIONS: Record<string, string> = {};
/** The torch top-level names Loom exports (a removal fails; a new export needs no entry). */
const TORCH_NAMES_IN_LOOM = [
  "abs", "add", "all", "amax", "amin", "any", "arange", "argmax", "argmin", "bmm", "cat", "ceil", "chunk", "clamp", "clamp_", "clip",
  "clone", "cos", "cumsum", "div", "dropout", "embedding", "empty", "empty_like", "eq", "erf", "exp", "eye", "fill_", "flatten", "floor",
  "floor_divide", "full", "full_like", "gather", "ge", "gt", "index_add", "index_put", "index_put_", "index_select", "is_floating_point",
  "isnan", "layer_norm", "le", "linspace", "log", "log1p", "log_softmax", "logical_and", "logical_not", "logical_or", "logsumexp", "lt",
  "manual_seed", "masked_fill", "matmul", "max", "maximum", "mean", "min", "minimum", "mm", "mul", "narrow", "ne", "neg", "norm", "numel",
  "ones", "ones_like", "permute", "pow", "rand", "rand_like", "randint", "randn", "randn_like", "reciprocal", "relu", "remainder",
  "reshape", "round", "rsqrt", "rsub", "save", "load", "scatter_add", "sigmoid", "sign", "sin", "softmax", "split", "sqrt", "square",
  "squeeze", "stack", "std", "sub", "sum", "swapaxes", "t", "tanh", "tensor", "transpose", "tril", "triu", "unflatten", "unsqueeze",
  "var", "where", "zero_", "zeros", "zeros_like",
];

describe("coverage of torch's top-level functions", () => {
  test("every Tensor method torch has at top level is a Loom free function, or a listed exception", () => {
    const missing = METHODS.filter((n) => TORCH_TOP_LEVEL.has(n) && typeof (loom as any)[n] !== "function" && !(n in EXCEPTIONS));
    expect(missing).toEqual([]);
  });
  test("each exception is still a method torch has at top level and Loom does not export", () => {
    for (const n of Object.keys(EXCEPTIONS)) {
      expect({ n, method: METHODS.includes(n), torch: TORCH_TOP_LEVEL.has(n), loom: typeof (loom as any)[n] }).toEqual({ n, method: true, torch: true, loom: "undefined" });
    }
  });
  test("the listed torch names are Loom functions", () => {
    expect(TORCH_NAMES_IN_LOOM.filter((n) => !TORCH_TOP_LEVEL.has(n) || typeof (loom as any)[n] !== "function")).toEqual([]);
  });
});
