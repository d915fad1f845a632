/**
 * Tensor creation (torch.tensor, zeros, ones, full, empty, arange, linspace, eye, rand, randn,
 * randint and the *_like forms). Creation is eager: it makes data; call `.lazy()` to use it in a
 * lazy graph (or just mix it in: eager operands of lazy ops are lifted automatically).
 */
import { DEFAULT_FLOAT, isFloating, isIntegral, type DType, type TypedArray } from "../tensor/dtype.ts";
import { LoomValueError, fmtShape } from "../tensor/errors.ts";
import { default_generator, type Generator } from "../tensor/rng.ts";
import { checkShape, numel } from "../tensor/shape.ts";
import { allocData, fromValues } from "../tensor/storage.ts";
import type { NestedList } from "./surface.ts";
import { Tensor } from "./tensor.ts";

export interface TensorOptions {
  dtype?: DType;
  requires_grad?: boolean;
  device?: string;
}
export interface RandomOptions extends TensorOptions {
  generator?: Generator;
}

type ShapeArgs = (number | readonly number[])[];
function shapeOf(op: string, args: ShapeArgs): number[] {
  const s = args.length === 1 && Array.isArray(args[0]) ? (args[0] as number[]) : (args as number[]);
  return checkShape(op, s);
}
/** Split `(...sizes, options?)` varargs. */
function splitArgs<O>(args: unknown[]): [ShapeArgs, O] {
  const last = args[args.length - 1];
  if (last !== undefined && typeof last === "object" && !Array.isArray(last)) return [args.slice(0, -1) as ShapeArgs, last as O];
  return [args as ShapeArgs, {} as O];
}
/** Apply `device` (made on the host, then moved) and `requires_grad`. */
function finish(t: Tensor, o: TensorOptions): Tensor {
  const d = o.device && o.device !== "cpu" ? t.to(o.device) : t;
  return o.requires_grad ? d.requires_grad_(true) : d;
}
/** The device of a `*_like` template (torch: the result is on the template's device). */
const deviceOf = (t: { shape: readonly number[] }): string | undefined => (t as { device?: string }).device;

const TYPED_DTYPE: [new (...a: any[]) => TypedArray, DType][] = [
  [Float32Array, "float32"], [Float64Array, "float64"], [Int32Array, "int32"], [Int8Array, "int8"], [Uint8Array, "uint8"],
];

/**
 * torch.tensor: a new tensor from nested arrays, a number, a boolean or a typed array (1-D).
 *
 * dtype, unless `opts.dtype` is given: bools -> bool; numbers that are all integers -> int64;
 * any non-integer number -> float32; a typed array -> its element type (Float32Array ->
 * float32, Int32Array -> int32...; others float32).
 *
 * The one difference from PyTorch: JavaScript numbers do not tell `1.0` from `1`, so
 * `tensor([1.0, 2.0])` is int64 here (float32 in torch), and a following `.mean()`, `.softmax()`
 * or `.var()` throws a LoomDtypeError that says what to do. Write the dtype when the values are
 * integral floats: `tensor([1.0, 2.0], { dtype: "float32" })`, `tensor(new Float32Array([1, 2]))`
 * or `tensor([1, 2]).float()`. All-integer arrays stay int64 because that is torch's rule for
 * `torch.tensor([1, 2])` and what token ids and indices need. One exception serves the common
 * `torch.tensor([1.0, 2.0], requires_grad=True)`: with `requires_grad: true` and no dtype, an
 * all-integer array is float32 (only floats can require gradients; torch would raise there).
 * full() and arange() follow the same rules (`full([2], 1.0)` and `arange(0, 3)` are int64, float32
 * with `requires_grad: true`), and so do scalars: `where(c, 1.0, 0.0)` and `add(2.0, intTensor)`
 * are int64.
 * @throws LoomValueError on ragged nested arrays
 */
export function tensor(data: NestedList | TypedArray | readonly NestedList[], opts: TensorOptions = {}): Tensor {
  if (ArrayBuffer.isView(data)) {
    const hit = TYPED_DTYPE.find(([C]) => data instanceof C);
    const dtype = opts.dtype ?? hit?.[1] ?? "float32";
    return finish(new Tensor(fromValues(dtype, [data.length], data as ArrayLike<number>)), opts);
  }
  const shape: number[] = [];
  let probe: unknown = data;
  while (Array.isArray(probe)) {
    shape.push(probe.length);
    probe = probe[0];
  }
  const flat: number[] = [];
  let sawFloat = false;
  let sawBool = false;
  let sawNumber = false;
  const walk = (v: unknown, d: number): void => {
    if (d === shape.length) {
      if (Array.isArray(v)) throw new LoomValueError(`[tensor] ragged nested sequence: expected a scalar at depth ${d} for shape ${fmtShape(shape)}`);
      if (typeof v === "boolean") { sawBool = true; flat.push(v ? 1 : 0); return; }
      if (typeof v !== "number") throw new LoomValueError(`[tensor] unsupported element ${String(v)}`);
      sawNumber = true;
      if (!Number.isInteger(v)) sawFloat = true;
      flat.push(v);
      return;
    }
    if (!Array.isArray(v) || v.length !== shape[d]) {
      throw new LoomValueError(`[tensor] ragged nested sequence: expected a sequence of length ${shape[d]} at dim ${d}`);
    }
    for (const e of v) walk(e, d + 1);
  };
  walk(data, 0);
  // integral numbers are int64, but a tensor that will require grad must be floating (see above)
  const inferred: DType = sawFloat || (sawNumber && opts.requires_grad) ? DEFAULT_FLOAT : sawNumber ? "int64" : sawBool ? "bool" : DEFAULT_FLOAT;
  return finish(new Tensor(fromValues(opts.dtype ?? inferred, shape, flat)), opts);
}

/**
 * torch.full(size, fill_value): dtype from the value (bool, int64 or float32) unless given; an
 * integral value with `requires_grad: true` is float32 (the rule of tensor()).
 */
export function full(size: readonly number[], fill_value: number | boolean, opts: TensorOptions = {}): Tensor {
  const shape = checkShape("full", size);
  const dtype = opts.dtype ?? (typeof fill_value === "boolean" ? "bool" : Number.isInteger(fill_value) && !opts.requires_grad ? "int64" : DEFAULT_FLOAT);
  const d = allocData(dtype, shape);
  const v = fromValues(dtype, [], [Number(fill_value)]).data[0]!;
  if (v !== 0) d.data.fill(v);
  return finish(new Tensor(d), opts);
}

/** torch.zeros(*size, dtype=float32). */
export function zeros(...args: (number | readonly number[] | TensorOptions)[]): Tensor {
  const [s, o] = splitArgs<TensorOptions>(args);
  return finish(new Tensor(allocData(o.dtype ?? DEFAULT_FLOAT, shapeOf("zeros", s))), o);
}
export function ones(...args: (number | readonly number[] | TensorOptions)[]): Tensor {
  const [s, o] = splitArgs<TensorOptions>(args);
  return full(shapeOf("ones", s), 1, { dtype: DEFAULT_FLOAT, ...o });
}
/** torch.empty: Loom zero-fills (no uninitialized memory in JS). */
export function empty(...args: (number | readonly number[] | TensorOptions)[]): Tensor {
  return zeros(...args);
}
export function zeros_like(t: { shape: readonly number[]; dtype: DType }, opts: TensorOptions = {}): Tensor {
  return zeros([...t.shape], { dtype: t.dtype, device: deviceOf(t), ...opts });
}
export function ones_like(t: { shape: readonly number[]; dtype: DType }, opts: TensorOptions = {}): Tensor {
  return full([...t.shape], 1, { dtype: t.dtype, device: deviceOf(t), ...opts });
}
export function full_like(t: { shape: readonly number[]; dtype: DType }, v: number, opts: TensorOptions = {}): Tensor {
  return full([...t.shape], v, { dtype: t.dtype, device: deviceOf(t), ...opts });
}
export function empty_like(t: { shape: readonly number[]; dtype: DType }, opts: TensorOptions = {}): Tensor {
  return zeros_like(t, opts);
}

/**
 * torch.arange(end) / arange(start, end, step=1): values start + i·step for i < ceil((end-start)/step).
 * int64 when all arguments are integers (and `requires_grad` is not set: see tensor()), else float32. For an integer dtype, start, end and step
 * are truncated to integers first, as torch does (arange(0, 3.1, {dtype: "int64"}) is [0, 1, 2]);
 * torch computes the length from the truncated values for int64 and from the given ones for the
 * other integer dtypes (int32: [0, 1, 2, 3]), and so does Loom.
 * @throws LoomValueError when step is 0 (after truncation) or has the wrong sign
 */
export function arange(start: number, end?: number, step = 1, opts: TensorOptions = {}): Tensor {
  if (end === undefined) { end = start; start = 0; }
  const dtype = opts.dtype ?? ([start, end, step].every(Number.isInteger) && !opts.requires_grad ? "int64" : DEFAULT_FLOAT);
  const int = isIntegral(dtype);
  const [xs, xe, xst] = int ? [Math.trunc(start), Math.trunc(end), Math.trunc(step)] : [start, end, step];
  if (xst === 0) throw new LoomValueError(`[arange] step must be nonzero (step ${step}${int ? ` is ${xst} as ${dtype}` : ""})`);
  if (!((xst > 0 && xe >= xs) || (xst < 0 && xe <= xs))) {
    throw new LoomValueError(`[arange] upper bound and larger bound inconsistent with step sign (start ${start}, end ${end}, step ${step})`);
  }
  const n = Math.ceil(dtype === "int64" ? (xe - xs) / xst : (end - start) / step);
  const vals = Array.from({ length: n }, (_, i) => xs + i * xst);
  return finish(new Tensor(fromValues(dtype, [n], vals)), opts);
}

/** torch.linspace(start, end, steps): evenly spaced, both ends included (float32). */
export function linspace(start: number, end: number, steps: number, opts: TensorOptions = {}): Tensor {
  if (!Number.isInteger(steps) || steps < 0) throw new LoomValueError(`[linspace] number of steps must be non-negative, got ${steps}`);
  const step = steps > 1 ? (end - start) / (steps - 1) : 0;
  // torch fills the second half from the end so `end` is hit exactly
  const vals = Array.from({ length: steps }, (_, i) => (i < steps / 2 ? start + i * step : end - (steps - 1 - i) * step));
  return finish(new Tensor(fromValues(opts.dtype ?? DEFAULT_FLOAT, [steps], vals)), opts);
}

/** torch.eye(n, m = n). */
export function eye(n: number, m: number = n, opts: TensorOptions = {}): Tensor {
  const d = allocData(opts.dtype ?? DEFAULT_FLOAT, checkShape("eye", [n, m]));
  for (let i = 0; i < Math.min(n, m); i++) d.data[i * m + i] = fromValues(d.dtype, [], [1]).data[0]!;
  return finish(new Tensor(d), opts);
}

function random(op: string, args: unknown[], draw: (g: Generator, dtype: DType) => number, bulk?: (g: Generator, out: Float64Array) => void): Tensor {
  const [s, o] = splitArgs<RandomOptions>(args);
  const shape = shapeOf(op, s);
  const dtype = o.dtype ?? DEFAULT_FLOAT;
  if (!isFloating(dtype)) throw new LoomValueError(`[${op}] expected a floating point dtype, got ${dtype}`);
  const g = o.generator ?? default_generator;
  const vals = new Float64Array(numel(shape));
  if (bulk) bulk(g, vals);
  else for (let i = 0; i < vals.length; i++) vals[i] = draw(g, dtype);
  return finish(new Tensor(fromValues(dtype, shape, vals)), o);
}

/** Uniform samples in [0, 1) (torch.rand). */
export function rand(...args: (number | readonly number[] | RandomOptions)[]): Tensor {
  return random("rand", args, (g, d) => (d === "float64" ? g.uniform53() : g.uniform()));
}
/** Standard normal samples (torch.randn). */
export function randn(...args: (number | readonly number[] | RandomOptions)[]): Tensor {
  return random("randn", args, (g) => g.normal(), (g, out) => g.fill_normal(out));
}
/** Uniform integers in [low, high) (torch.randint), int64 by default. */
export function randint(low: number, high: number, size: readonly number[], opts: RandomOptions = {}): Tensor {
  if (!(high > low)) throw new LoomValueError(`[randint] expected low < high, got low=${low}, high=${high}`);
  const shape = checkShape("randint", size);
  const g = opts.generator ?? default_generator;
  const vals = Array.from({ length: numel(shape) }, () => g.randint(low, high));
  return finish(new Tensor(fromValues(opts.dtype ?? "int64", shape, vals)), opts);
}
export function rand_like(t: { shape: readonly number[]; dtype: DType }, opts: RandomOptions = {}): Tensor {
  return rand([...t.shape], { dtype: t.dtype, device: deviceOf(t), ...opts });
}
export function randn_like(t: { shape: readonly number[]; dtype: DType }, opts: RandomOptions = {}): Tensor {
  return randn([...t.shape], { dtype: t.dtype, device: deviceOf(t), ...opts });
}
