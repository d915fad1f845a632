/**
 * Python-style indexing for `Tensor.index(...)`, with PyTorch's rules for basic and advanced
 * indices (torch's __getitem__; numpy's "Indexing on ndarrays").
 *
 * Basic items: integers (drop their dim), slices ("1:5:2", ":" or {start, stop, step}), null (a new
 * axis of size 1) and "..." (the remaining dims). Basic indexing alone gives a chain of views.
 *
 * Advanced items: integer lists (nested too), int64/int32 tensors of any shape, and bool masks
 * (nested bool lists, bool or uint8 tensors; a k-dim mask consumes k dims and must match their
 * sizes). All advanced indices broadcast together to one shape B. As in PyTorch, the integers and
 * null items are applied first; then if the dims the advanced indices address are adjacent, B takes
 * their place in the result, otherwise B comes first.
 *
 * Index values are read on the host when the index is recorded: an eager index tensor is read, a
 * lazy index tensor or mask is realized (only it, the indexed tensor stays lazy). A mask's result
 * shape depends on its values, and reading integer indices lets an out-of-range index raise
 * PyTorch's IndexError now, naming the index, instead of inside a kernel. The gather itself is one
 * `index_select` over the advanced dims merged into one, so gradients come from its registry rule.
 */
import type { DType } from "../tensor/dtype.ts";
import { LoomIndexError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { broadcastShapes, broadcastStrides, contiguousStrides, numel } from "../tensor/shape.ts";
import { forEachStrided, fromValues, toFloat64, type TensorData } from "../tensor/storage.ts";

export interface Slice {
  start?: number | null;
  stop?: number | null;
  step?: number | null;
}
/** A tensor used as an index (Tensor or LazyTensor; structural, so this file needs no surface import). */
export interface IndexTensor {
  readonly shape: readonly number[];
  readonly dtype: DType;
  _data(): TensorData;
}
/** Nested lists of integers (an integer index) or of booleans (a mask). */
export type IndexList = readonly (number | boolean | IndexList)[];
export type IndexItem = number | null | "..." | string | Slice | IndexList | IndexTensor;

/** What the index machinery needs from a tensor (TensorOps provides it). */
export interface Indexable<T> {
  readonly shape: readonly number[];
  _slice(dim: number, start: number, end: number, step: number): T;
  reshape(shape: readonly number[]): T;
  permute(dims: readonly number[]): T;
  index_select(dim: number, index: T): T;
  _constant(data: TensorData): T;
}

/** `loom.slice(start, stop, step)`, Python's slice object. */
export function slice(start?: number | null, stop?: number | null, step?: number | null): Slice {
  return { start, stop, step };
}

function parseSliceString(s: string): Slice {
  const parts = s.split(":");
  if (parts.length < 2 || parts.length > 3) throw new LoomValueError(`[index] cannot parse '${s}' as a slice; use "start:stop:step"`);
  const num = (p: string | undefined) => {
    if (p === undefined || p.trim() === "") return null;
    const v = Number(p);
    if (!Number.isInteger(v)) throw new LoomValueError(`[index] slice bound '${p}' in '${s}' is not an integer`);
    return v;
  };
  return { start: num(parts[0]), stop: num(parts[1]), step: num(parts[2]) };
}

/** Clamp Python slice bounds for a positive step into [0, size] (as PySlice_AdjustIndices). */
function adjust(sl: Slice, size: number): [number, number, number] {
  const step = sl.step ?? 1;
  if (step <= 0) throw new LoomValueError(`[index] step must be greater than zero, got ${step}`);
  const clamp = (v: number | null | undefined, dflt: number) => {
    if (v === null || v === undefined) return dflt;
    const x = v < 0 ? v + size : v;
    return Math.min(Math.max(x, 0), size);
  };
  const start = clamp(sl.start, 0);
  const stop = Math.max(start, clamp(sl.stop, size));
  return [start, stop, step];
}

// ---- items -> normalized items -------------------------------------------------------------------

/** One advanced index as host values: `kind` int (consumes 1 dim) or mask (consumes shape.length dims). */
interface AdvItem { kind: "ints" | "mask"; shape: number[]; values: Float64Array }
type Norm =
  | { kind: "int"; v: number }
  | { kind: "slice"; sl: Slice }
  | { kind: "none" }
  | { kind: "ellipsis" }
  | AdvItem;

const SLICE_KEYS = new Set(["start", "stop", "step"]);

function isIndexTensor(it: unknown): it is IndexTensor {
  return typeof it === "object" && it !== null && !Array.isArray(it) && typeof (it as IndexTensor)._data === "function";
}

function isPlainObject(it: unknown): it is object {
  if (typeof it !== "object" || it === null) return false;
  const proto = Object.getPrototypeOf(it);
  return proto === Object.prototype || proto === null;
}

function describeItem(it: unknown): string {
  if (it === undefined) return "undefined";
  if (typeof it === "object" && it !== null) return it.constructor?.name ?? "object";
  return `${typeof it} ${String(it)}`;
}

/** Nested JS lists -> shape and flat values; all leaves numbers (integers) or all booleans. */
function parseList(op: string, list: IndexList): AdvItem {
  const shape: number[] = [];
  for (let l: unknown = list; Array.isArray(l); l = l[0]) {
    shape.push(l.length);
    if (l.length === 0) break;
  }
  const values: number[] = [];
  let bools = 0, ints = 0;
  const walk = (l: unknown, d: number) => {
    if (d === shape.length) {
      if (typeof l === "boolean") bools++;
      else if (typeof l === "number" && Number.isInteger(l)) ints++;
      else throw new LoomIndexError(`[${op}] tensors used as indices must be long, int, byte or bool tensors; the list holds ${describeItem(l)}`);
      values.push(Number(l));
      return;
    }
    if (!Array.isArray(l) || l.length !== shape[d]) {
      throw new LoomIndexError(`[${op}] an index list must be rectangular, got ${JSON.stringify(list)} (expected length ${shape[d]} at depth ${d})`);
    }
    for (const e of l) walk(e, d + 1);
  };
  walk(list, 0);
  if (bools && ints) throw new LoomIndexError(`[${op}] an index list mixes booleans and integers: ${JSON.stringify(list)}`);
  return { kind: bools ? "mask" : "ints", shape, values: Float64Array.from(values) };
}

function normalize(op: string, it: unknown): Norm {
  if (it === null) return { kind: "none" };
  if (it === "...") return { kind: "ellipsis" };
  if (typeof it === "number") {
    if (!Number.isInteger(it)) throw new LoomIndexError(`[${op}] an integer index must be an integer, got ${it}`);
    return { kind: "int", v: it };
  }
  if (typeof it === "string") return { kind: "slice", sl: parseSliceString(it) };
  if (typeof it === "boolean") {
    throw new LoomIndexError(`[${op}] a bool scalar index (${it}) is not supported; use null for a new axis`);
  }
  if (Array.isArray(it)) return parseList(op, it);
  if (isIndexTensor(it)) {
    const d = it.dtype;
    const mask = d === "bool" || d === "uint8";
    if (!mask && d !== "int64" && d !== "int32") {
      throw new LoomIndexError(`[${op}] tensors used as indices must be long, int, byte or bool tensors, got ${d}`);
    }
    if (mask && it.shape.length === 0) {
      throw new LoomIndexError(`[${op}] a 0-d bool index tensor is not supported; use null for a new axis`);
    }
    // a lazy index is realized here: its values decide the result shape (mask) and range errors
    return { kind: mask ? "mask" : "ints", shape: [...it.shape], values: toFloat64(it._data()) };
  }
  if (isPlainObject(it) && Object.keys(it).every((k) => SLICE_KEYS.has(k))) {
    const sl = it as Slice;
    for (const k of SLICE_KEYS) {
      const v = sl[k as keyof Slice];
      if (v !== undefined && v !== null && !Number.isInteger(v)) {
        throw new LoomValueError(`[${op}] slice ${k} must be an integer or null, got ${String(v)}`);
      }
    }
    return { kind: "slice", sl };
  }
  throw new LoomIndexError(`[${op}] unsupported index item: ${describeItem(it)}; use integers, slices, null, "...", integer or bool lists, or index tensors`);
}

// ---- the plan --------------------------------------------------------------------------------------

/** One advanced index over the source dims `dims`: coords[c][e] is element e's coordinate along dims[c]. */
interface Adv { dims: number[]; shape: number[]; coords: Float64Array[] }

/** A parsed index against a source shape: which views to take and where the advanced result goes. */
export interface IndexPlan {
  /** The indexed tensor's shape. */
  readonly shape: readonly number[];
  /** Per source dim: the slice to take (an integer k is k:k+1, its dim absent from `layout`), or null (whole dim). */
  readonly sel: ({ start: number; stop: number; step: number } | null)[];
  /** Result dims after the basic items: a source dim, or null for a new axis (dropped dims absent). */
  readonly layout: (number | null)[];
  readonly adv: Adv[];
  /** The advanced indices broadcast together (B). */
  readonly advShape: number[];
  /** Positions in `layout` of the advanced source dims, ascending. */
  readonly advPos: number[];
  /** True when the advanced dims are not adjacent: B goes first. */
  readonly front: boolean;
  /** The result shape. */
  readonly outShape: number[];
}

/** The shape the advanced indices broadcast to (PyTorch's rules, as every op broadcasts). */
function broadcastAll(op: string, shapes: number[][]): number[] {
  try {
    return shapes.reduce<number[]>((acc, sh) => broadcastShapes(op, acc, sh), []);
  } catch {
    throw new LoomIndexError(`[${op}] shape mismatch: indexing tensors could not be broadcast together with shapes ${shapes.map(fmtShape).join(", ")}`);
  }
}

/** For each element of `to` (row-major), the flat index of the element of `from` it broadcasts from. */
function broadcastMap(from: readonly number[], to: readonly number[]): Int32Array {
  const out = new Int32Array(numel(to));
  const strides = broadcastStrides(from, contiguousStrides(from), to);
  forEachStrided(to, [{ strides, offset: 0 }], (e, idx) => { out[e] = idx[0]!; });
  return out;
}

/**
 * Parse `items` against `shape` (reading index tensors on the host).
 * @throws LoomIndexError for too many indices, out-of-range integers, a mask whose shape does not
 *   match the dims it indexes, index shapes that do not broadcast, and unsupported items
 */
export function planIndex(op: string, shape: readonly number[], items: readonly unknown[]): IndexPlan {
  const norm = items.map((it) => normalize(op, it));
  const consumes = (n: Norm) => (n.kind === "none" || n.kind === "ellipsis" ? 0 : n.kind === "mask" ? n.shape.length : 1);
  if (norm.filter((n) => n.kind === "ellipsis").length > 1) throw new LoomIndexError(`[${op}] an index can only have a single ellipsis ('...')`);
  const consuming = norm.reduce((p, n) => p + consumes(n), 0);
  if (consuming > shape.length) {
    throw new LoomIndexError(`[${op}] too many indices for tensor of dimension ${shape.length} (got ${consuming})`);
  }
  const sel: IndexPlan["sel"] = shape.map(() => null);
  const layout: (number | null)[] = [];
  const adv: Adv[] = [];
  let dim = 0;
  for (const n of norm) {
    if (n.kind === "ellipsis") {
      for (const end = dim + shape.length - consuming; dim < end; dim++) layout.push(dim);
    } else if (n.kind === "none") {
      layout.push(null);
    } else if (n.kind === "int") {
      const size = shape[dim]!;
      if (n.v < -size || n.v >= size) throw new LoomIndexError(`[${op}] index ${n.v} is out of bounds for dimension ${dim} with size ${size}`);
      const k = n.v < 0 ? n.v + size : n.v;
      sel[dim++] = { start: k, stop: k + 1, step: 1 };
    } else if (n.kind === "slice") {
      const [start, stop, step] = adjust(n.sl, shape[dim]!);
      sel[dim] = { start, stop, step };
      layout.push(dim++);
    } else {
      adv.push(n.kind === "mask" ? maskAdv(op, n, shape, dim) : intAdv(op, n, shape, dim));
      for (const d of adv[adv.length - 1]!.dims) layout.push(d);
      dim += consumes(n);
    }
  }
  for (; dim < shape.length; dim++) layout.push(dim);

  const basicShape = layout.map((d) => (d === null ? 1 : sliceLen(sel[d] ?? null, shape[d]!)));
  const advDims = new Set(adv.flatMap((a) => a.dims));
  const advPos = layout.flatMap((d, p) => (d !== null && advDims.has(d) ? [p] : []));
  const advShape = adv.length ? broadcastAll(op, adv.map((a) => a.shape)) : [];
  const front = advPos.some((p, i) => i > 0 && p !== advPos[i - 1]! + 1);
  let outShape = basicShape;
  if (adv.length) {
    const rest = basicShape.filter((_, p) => !advPos.includes(p));
    const p0 = front ? 0 : advPos[0]!;
    outShape = [...rest.slice(0, p0), ...advShape, ...rest.slice(p0)];
  }
  return { shape, sel, layout, adv, advShape, advPos, front, outShape };
}

function sliceLen(s: { start: number; stop: number; step: number } | null, size: number): number {
  return s ? Math.ceil((s.stop - s.start) / s.step) : size;
}

/** An integer index into source dim `dim`: negative values wrap, out-of-range ones throw. */
function intAdv(op: string, n: AdvItem, shape: readonly number[], dim: number): Adv {
  const size = shape[dim]!;
  const c = new Float64Array(n.values.length);
  n.values.forEach((v, i) => {
    if (v < -size || v >= size) throw new LoomIndexError(`[${op}] index ${v} is out of bounds for dimension ${dim} with size ${size}`);
    c[i] = v < 0 ? v + size : v;
  });
  return { dims: [dim], shape: n.shape, coords: [c] };
}

/** A mask over source dims dim..dim+k-1 becomes k coordinate lists of its true elements (nonzero). */
function maskAdv(op: string, n: AdvItem, shape: readonly number[], dim: number): Adv {
  const k = n.shape.length;
  const indexed = shape.slice(dim, dim + k);
  if (n.shape.some((s, i) => s !== indexed[i])) {
    throw new LoomIndexError(`[${op}] The shape of the mask ${fmtShape(n.shape)} at index ${dim} does not match the shape of the indexed tensor ${fmtShape(shape)} at index ${dim}`);
  }
  let count = 0;
  for (const v of n.values) if (v !== 0) count++;
  const coords = Array.from({ length: k }, () => new Float64Array(count));
  let j = 0;
  n.values.forEach((v, flat) => {
    if (v === 0) return;
    for (let d = k - 1, r = flat; d >= 0; d--) {
      coords[d]![j] = r % n.shape[d]!;
      r = Math.floor(r / n.shape[d]!);
    }
    j++;
  });
  return { dims: Array.from({ length: k }, (_, i) => dim + i), shape: [count], coords };
}

/**
 * For each element of B (row-major), Σ over the advanced source dims (ascending) of its coordinate
 * times `mult[dim]`: the linear index into the merged advanced dims, or an offset into storage.
 */
export function advOffsets(plan: IndexPlan, mult: (dim: number) => number): Float64Array {
  const out = new Float64Array(numel(plan.advShape));
  for (const a of plan.adv) {
    const map = broadcastMap(a.shape, plan.advShape);
    a.dims.forEach((d, c) => {
      const m = mult(d), coords = a.coords[c]!;
      for (let e = 0; e < out.length; e++) out[e]! += coords[map[e]!]! * m;
    });
  }
  return out;
}

/** The basic items as views, with int dims dropped and new axes inserted (the `layout` shape). */
function basicViews<T extends Indexable<T>>(x: T, plan: IndexPlan): T {
  let r = x;
  plan.sel.forEach((s, d) => {
    if (s && !(s.start === 0 && s.stop === x.shape[d] && s.step === 1)) r = r._slice(d, s.start, s.stop, s.step);
  });
  return r.reshape(plan.layout.map((d) => (d === null ? 1 : r.shape[d]!)));
}

/** x[items] for a parsed plan: views for basic items, one index_select for the advanced ones. */
export function applyIndex<T extends Indexable<T>>(x: T, plan: IndexPlan): T {
  let r = basicViews(x, plan);
  if (!plan.adv.length) return r;
  let pos = plan.advPos;
  if (plan.front) {
    const rest = r.shape.map((_, p) => p).filter((p) => !pos.includes(p));
    r = r.permute([...pos, ...rest]);
    pos = pos.map((_, i) => i);
  }
  const p0 = pos[0]!, m = pos.length;
  const sizes = pos.map((p) => r.shape[p]!);
  r = r.reshape([...r.shape.slice(0, p0), numel(sizes), ...r.shape.slice(p0 + m)]); // advanced dims merged
  // the linear index into the merged dims: source dims ascending, row-major
  const mult = new Map<number, number>();
  const srcDims = plan.advPos.map((p) => plan.layout[p]!);
  for (let i = srcDims.length - 1, s = 1; i >= 0; i--) {
    mult.set(srcDims[i]!, s);
    s *= plan.shape[srcDims[i]!]!;
  }
  const lin = advOffsets(plan, (d) => mult.get(d)!);
  r = r.index_select(p0, r._constant(fromValues("int64", [lin.length], lin)));
  return r.reshape(plan.outShape);
}
