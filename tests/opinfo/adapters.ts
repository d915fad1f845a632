/**
 * OpInfo call -> Loom call, one adapter per OpInfo entry of tests/opinfo/goldens/ (names as in
 * torch's op_db, "name.variant"). An adapter gets the decoded `input`, positional `args` and
 * `kwargs` of the sample (tensors already Loom tensors, eager or lazy) and calls the same methods
 * on Tensor and LazyTensor. A form Loom has no spelling for throws `Unsupported(reason)`: such a
 * sample must be listed in unsupported.json, so the list is the complete record of what Loom
 * cannot express.
 */
import * as loom from "../../src/index.ts";
import { NN_ADAPTERS } from "./adapters_nn.ts";
import { SHAPE_ADAPTERS } from "./adapters_shape.ts";

export class Unsupported extends Error {}

type T = loom.Tensor | loom.LazyTensor;
/** A torch.dtype argument, decoded ({"dtype": name} in the goldens). */
export class DT { constructor(readonly name: string) {} }
export interface Call { input: any; args: any[]; kwargs: Record<string, any>; device?: string }
export interface Adapter { run: (c: Call) => T | T[]; creation?: boolean }

/** Reads positional-or-keyword parameters in order; unknown keywords are Unsupported. */
export function params(c: Call, names: string[], ignore: string[] = []): any[] {
  const known = new Set([...names, ...ignore]);
  for (const k of Object.keys(c.kwargs)) {
    if (k === "device" && (c.kwargs[k] === "cpu" || c.kwargs[k] === null)) continue;
    if (k === "memory_format") throw new Unsupported("keyword memory_format=");
    if (!known.has(k)) throw new Unsupported(`keyword ${k}=`);
  }
  if (c.args.length > names.length) throw new Unsupported(`${c.args.length} positional arguments`);
  return names.map((n, i) => (i < c.args.length ? c.args[i] : c.kwargs[n]));
}
const dtypeOf = (d: any): loom.DType | undefined => {
  if (d === undefined || d === null) return undefined;
  if (!(d instanceof DT)) throw new Unsupported(`dtype argument ${d}`);
  return d.name as loom.DType;
};
export const isT = (v: any): v is T => v instanceof loom.Tensor || v instanceof loom.LazyTensor;

/** Ops whose torch form takes a Python scalar as self: Loom's free functions (loom.mul(2.5, t)) wrap it as torch does. */
const SCALAR_SELF = new Set(["add", "sub", "mul", "div", "floor_divide", "remainder", "pow"]);
const scalarSelf = (m: string, c: Call, ...rest: unknown[]): T => {
  if (!SCALAR_SELF.has(m)) throw new Unsupported("Python scalar as self");
  return (loom as any)[m](c.input, ...rest);
};

/** add/sub/rsub with alpha (torch.add(input, other, alpha=...): other * alpha added; rsub: other - alpha * input). */
const withAlpha = (m: "add" | "sub" | "rsub"): Adapter => ({
  run: (c) => {
    const [o, alpha] = params(c, ["other", "alpha"]);
    if (!isT(c.input)) return scalarSelf(m, c, o, alpha === undefined ? undefined : { alpha });
    // a bool alpha stays bool (torch: alpha=False with bool tensors keeps the result bool)
    return (c.input as any)[m](o, alpha === undefined ? undefined : { alpha });
  },
});
const divide = (c: Call) => {
  const [o, m] = params(c, ["other", "rounding_mode"]);
  if (!isT(c.input)) return scalarSelf("div", c, o, m === undefined ? undefined : { rounding_mode: m });
  return c.input.div(o, m === undefined ? undefined : { rounding_mode: m });
};
const unary = (m: string): Adapter => ({ run: (c) => { params(c, []); return c.input[m](); } });
const binary = (m: string): Adapter => ({
  run: (c) => {
    const [o] = params(c, ["other"]);
    if (!isT(c.input)) return scalarSelf(m, c, o);
    return (c.input as any)[m](o);
  },
});
const reduceDim = (m: string): Adapter => ({
  run: (c) => {
    const [dim, keepdim, dtype] = params(c, ["dim", "keepdim", "dtype"]);
    if (dtype !== undefined && m !== "sum" && m !== "mean") throw new Unsupported("keyword dtype=");
    return c.input[m](dim === null ? undefined : dim, keepdim ?? false, dtype === undefined ? undefined : { dtype: dtypeOf(dtype) });
  },
});
const extremes = (m: "max" | "min"): Record<string, Adapter> => ({
  [`${m}.reduction_no_dim`]: unary(m),
  [`${m}.reduction_with_dim`]: {
    run: (c) => {
      const [dim, keepdim] = params(c, ["dim", "keepdim"]);
      const r = c.input[m](dim, keepdim ?? false);
      return [r.values, r.indices];
    },
  },
  [`${m}.binary`]: {
    run: (c) => {
      const [o] = params(c, ["other"]);
      if (!isT(c.input) || !isT(o)) throw new Unsupported("Python scalar operand");
      return (c.input as any)[m](o);
    },
  },
});
const varStd = (m: "var" | "std"): Adapter => ({
  run: (c) => {
    let [dim, unbiased, keepdim, correction] = params(c, ["dim", "unbiased", "keepdim", "correction"]);
    if (typeof dim === "boolean") { unbiased = dim; dim = undefined; } // var(input, unbiased)
    return c.input[m](dim ?? undefined, { unbiased, correction, keepdim: keepdim ?? false });
  },
});
const like = (fill: number | null): Adapter => ({
  run: (c) => {
    const [v, dtype] = fill === null ? params(c, ["fill_value", "dtype"]) : [fill, ...params(c, ["dtype"])];
    const x = c.input as T;
    const dt = dtypeOf(dtype) ?? x.dtype;
    return loom.full_like(x, Number(v), { dtype: dt, device: x.device });
  },
});
const NORM: Adapter = {
  run: (c) => {
    const [p, dim, keepdim, dtype] = params(c, ["p", "dim", "keepdim", "dtype"]);
    if (dtype !== undefined) throw new Unsupported("keyword dtype=");
    if (typeof p === "string" && p !== "fro") throw new Unsupported(`norm p='${p}'`);
    // p='fro' over one or two dims is the 2-norm of the entries (torch.norm docs)
    return c.input.norm(p === "fro" ? 2 : p ?? 2, dim ?? undefined, keepdim ?? false);
  },
};
const shapeArg = (args: any[]): number[] => (args.length === 1 && Array.isArray(args[0]) ? args[0] : args);

/** sort/argsort/msort/topk/kthvalue (src/lazy/sort_ops.ts): results as [values, indices] where torch returns both. */
const SORT_ADAPTERS: Record<string, Adapter> = {
  sort: { run: (c) => { const [dim, descending, stable] = params(c, ["dim", "descending", "stable"]); return [...c.input.sort({ dim: dim ?? -1, descending: descending ?? false, stable: stable ?? false })]; } },
  argsort: { run: (c) => { const [dim, descending, stable] = params(c, ["dim", "descending", "stable"]); return c.input.argsort({ dim: dim ?? -1, descending: descending ?? false, stable: stable ?? false }); } },
  msort: unary("msort"),
  topk: { run: (c) => { const [k, dim, largest, sorted] = params(c, ["k", "dim", "largest", "sorted"]); return [...c.input.topk(k, dim ?? -1, largest ?? true, sorted ?? true)]; } },
  kthvalue: { run: (c) => { const [k, dim, keepdim] = params(c, ["k", "dim", "keepdim"]); return [...c.input.kthvalue(k, dim ?? -1, keepdim ?? false)]; } },
};

export const ADAPTERS: Record<string, Adapter> = {
  ...SHAPE_ADAPTERS, // tests/opinfo/adapters_shape.ts
  ...SORT_ADAPTERS,
  ...NN_ADAPTERS, // tests/opinfo/adapters_nn.ts
  add: withAlpha("add"),
  sub: withAlpha("sub"),
  ...Object.fromEntries(["mul", "floor_divide", "remainder", "pow", "maximum", "minimum",
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or"].map((m) => [m, binary(m)])),
  rsub: withAlpha("rsub"),
  ...Object.fromEntries(["neg", "abs", "sign", "exp", "log", "log1p", "sqrt", "rsqrt", "reciprocal", "sin",
    "cos", "tanh", "sigmoid", "erf", "floor", "ceil", "round", "logical_not", "isnan", "square",
    "contiguous", "clone", "t"].map((m) => [m, unary(m)])),
  "nn.functional.relu": unary("relu"),
  "nn.functional.silu": unary("silu"),
  "nn.functional.gelu": { run: (c) => loom.gelu(c.input, params(c, ["approximate"])[0] ?? "none") },
  "div.no_rounding_mode": { run: divide },
  "div.floor_rounding": { run: divide },
  "div.trunc_rounding": { run: divide },
  clamp: { run: (c) => { const [lo, hi] = params(c, ["min", "max"]); return c.input.clamp(lo ?? null, hi ?? null); } },
  // OpInfo's where is input.where(condition, other) = torch.where(condition, input, other)
  where: { run: (c) => { const [cond, o] = params(c, ["condition", "other"]); return loom.where(cond, c.input, o); } },
  masked_fill: { run: (c) => { const [m, v] = params(c, ["mask", "value"]); return c.input.masked_fill(m, v); } },
  sum: reduceDim("sum"),
  mean: reduceDim("mean"),
  amax: reduceDim("amax"),
  amin: reduceDim("amin"),
  any: reduceDim("any"),
  all: reduceDim("all"),
  argmax: reduceDim("argmax"),
  argmin: reduceDim("argmin"),
  ...extremes("max"),
  ...extremes("min"),
  var: varStd("var"),
  std: varStd("std"),
  logsumexp: { run: (c) => { const [dim, keepdim] = params(c, ["dim", "keepdim"]); return c.input.logsumexp(dim, keepdim ?? false); } },
  cumsum: {
    run: (c) => {
      const [dim, dtype] = params(c, ["dim", "dtype"]);
      return c.input.cumsum(dim, dtype === undefined ? undefined : { dtype: dtypeOf(dtype) });
    },
  },
  norm: NORM,
  "norm.fro": NORM,
  "norm.inf": NORM,
  matmul: { run: (c) => loom.matmul(c.input, params(c, ["other"])[0]) },
  mm: { run: (c) => c.input.mm(params(c, ["mat2"])[0]) },
  bmm: { run: (c) => c.input.bmm(params(c, ["mat2"])[0]) },
  softmax: { run: (c) => { const [dim, dtype] = params(c, ["dim", "dtype"]); return loom.softmax(c.input, dim, dtype === undefined ? undefined : { dtype: dtypeOf(dtype) }); } },
  log_softmax: { run: (c) => { const [dim, dtype] = params(c, ["dim", "dtype"]); return loom.log_softmax(c.input, dim, dtype === undefined ? undefined : { dtype: dtypeOf(dtype) }); } },
  "nn.functional.layer_norm": {
    run: (c) => {
      const [ns, w, b, eps] = params(c, ["normalized_shape", "weight", "bias", "eps"]);
      return loom.layer_norm(c.input, ns, w ?? null, b ?? null, eps ?? 1e-5);
    },
  },
  // OpInfo calls it as op(weight, idx, **kwargs) = F.embedding(idx, weight, **kwargs)
  "nn.functional.embedding": {
    run: (c) => {
      const [idx, padding_idx] = params(c, ["input", "padding_idx"], ["max_norm", "norm_type", "scale_grad_by_freq", "sparse"]);
      for (const k of ["max_norm", "scale_grad_by_freq", "sparse"]) if (c.kwargs[k]) throw new Unsupported(`keyword ${k}=`);
      return loom.embedding(idx, c.input, padding_idx ?? null);
    },
  },
  "nn.functional.cross_entropy": {
    run: (c) => {
      const [target, weight, ignore_index, reduction, label_smoothing] = params(c, ["target", "weight", "ignore_index", "reduction", "label_smoothing"], ["size_average", "reduce"]);
      if (c.kwargs.size_average !== undefined || c.kwargs.reduce !== undefined) throw new Unsupported("deprecated size_average/reduce");
      return loom.cross_entropy(c.input, target, { weight: weight ?? null, ignore_index, reduction, label_smoothing });
    },
  },
  "nn.functional.mse_loss": {
    run: (c) => {
      const [target, reduction] = params(c, ["target", "reduction"], ["size_average", "reduce"]);
      if (c.kwargs.size_average !== undefined || c.kwargs.reduce !== undefined) throw new Unsupported("deprecated size_average/reduce");
      return loom.mse_loss(c.input, target, reduction ?? "mean");
    },
  },
  "nn.functional.linear": { run: (c) => { const [w, b] = params(c, ["weight", "bias"]); return loom.linear(c.input, w, b ?? null); } },
  "nn.functional.one_hot": { run: (c) => loom.one_hot(c.input, params(c, ["num_classes"])[0] ?? -1) },
  cat: { run: (c): any => loom.cat(c.input, params(c, ["dim"])[0] ?? 0) },
  stack: { run: (c): any => loom.stack(c.input, params(c, ["dim"])[0] ?? 0) },
  split: { run: (c) => { const [s, dim] = params(c, ["split_size_or_sections", "dim"]); return c.input.split(s, dim ?? 0); } },
  "split.list_args": { run: (c) => { const [s, dim] = params(c, ["split_size_or_sections", "dim"]); return c.input.split(s, dim ?? 0); } },
  chunk: { run: (c) => { const [n, dim] = params(c, ["chunks", "dim"]); return c.input.chunk(n, dim ?? 0); } },
  tril: { run: (c) => loom.tril(c.input, params(c, ["diagonal"])[0] ?? 0) },
  triu: { run: (c) => loom.triu(c.input, params(c, ["diagonal"])[0] ?? 0) },
  gather: { run: (c) => { const [dim, index, sparse] = params(c, ["dim", "index", "sparse_grad"]); if (sparse) throw new Unsupported("keyword sparse_grad="); return c.input.gather(dim, index); } },
  scatter_add: { run: (c) => { const [dim, index, src] = params(c, ["dim", "index", "src"]); return c.input.scatter_add(dim, index, src); } },
  index_select: { run: (c) => { const [dim, index] = params(c, ["dim", "index"]); return c.input.index_select(dim, index); } },
  index_add: {
    run: (c) => {
      const [dim, index, source, alpha] = params(c, ["dim", "index", "source", "alpha"]);
      return c.input.index_add(dim, index, source, alpha === undefined ? undefined : { alpha: Number(alpha) });
    },
  },
  reshape: { run: (c) => c.input.reshape(shapeArg(c.args)) },
  view: { run: (c) => { if (isT(c.args[0]) || c.args[0] instanceof DT) throw new Unsupported("view(dtype)"); return c.input.view(shapeArg(c.args)); } },
  reshape_as: { run: (c) => c.input.reshape_as(params(c, ["other"])[0]) },
  view_as: { run: (c) => c.input.view_as(params(c, ["other"])[0]) },
  permute: { run: (c) => c.input.permute(shapeArg(c.args)) },
  transpose: { run: (c) => { const [a, b] = params(c, ["dim0", "dim1"]); return c.input.transpose(a, b); } },
  mT: { run: (c) => { params(c, []); return c.input.mT; } },
  expand: { run: (c) => c.input.expand(shapeArg(c.args)) },
  expand_as: { run: (c) => c.input.expand_as(params(c, ["other"])[0]) },
  squeeze: { run: (c) => c.input.squeeze(params(c, ["dim"])[0]) },
  unsqueeze: { run: (c) => c.input.unsqueeze(params(c, ["dim"])[0]) },
  flatten: { run: (c) => { const [s, e] = params(c, ["start_dim", "end_dim"]); return c.input.flatten(s ?? 0, e ?? -1); } },
  unflatten: { run: (c) => { const [d, sizes] = params(c, ["dim", "sizes"]); return c.input.unflatten(d, sizes); } },
  narrow: {
    run: (c) => {
      const [dim, start, length] = params(c, ["dim", "start", "length"]);
      // narrow(dim, start: 0-d tensor, length) is torch's Tensor overload of the same op
      return c.input.narrow(dim, isT(start) ? start.item() : start, length);
    },
  },
  sum_to_size: { run: (c) => c.input.sum_to_size(shapeArg(c.args)) },
  zeros_like: like(0),
  ones_like: like(1),
  full_like: like(null),
  arange: {
    creation: true,
    run: (c) => {
      const [end, step, dtype] = params(c, ["end", "step", "dtype"], ["requires_grad"]);
      const nums = [c.input, end, step].filter((v) => v !== undefined).map(Number);
      if ([c.input, end, step].some((v) => typeof v === "boolean")) throw new Unsupported("bool start/end");
      return loom.arange(nums[0]!, nums[1], nums[2] ?? 1, { dtype: dtypeOf(dtype), device: c.device });
    },
  },
  linspace: {
    creation: true,
    run: (c) => {
      const [end, steps, dtype] = params(c, ["end", "steps", "dtype"], ["requires_grad"]);
      return loom.linspace(c.input, end, steps, { dtype: dtypeOf(dtype), device: c.device });
    },
  },
  zeros: { creation: true, run: (c) => loom.zeros(c.input, { dtype: dtypeOf(params(c, ["dtype"], ["requires_grad"])[0]), device: c.device }) },
  ones: { creation: true, run: (c) => loom.ones(c.input, { dtype: dtypeOf(params(c, ["dtype"], ["requires_grad"])[0]), device: c.device }) },
  eye: {
    creation: true,
    run: (c) => {
      const [m, dtype] = params(c, ["m", "dtype"], ["requires_grad"]);
      return loom.eye(c.input, m ?? c.input, { dtype: dtypeOf(dtype), device: c.device });
    },
  },
};
