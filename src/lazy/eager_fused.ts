/**
 * Eager dispatch of composites to their fused kernels. An eager softmax written op by op (amax,
 * sub, exp, sum, div) runs five kernels and five passes over memory; the compiler's pattern pass
 * turns the same decomposition into one `fused_softmax` when it is lazy. Eager tensors ask the
 * kernel catalog (backends/catalog.ts) for the same fused op, chosen as a plan chooses it
 * (scheduler/select.ts `candidates` at the global tolerance), and run it now through the
 * implementation's `runner`, chosen and prepared once per layout and options object, then cached
 * (a kernel database written later by `loom tune` is seen after the next set_compiler_options).
 * So eager and lazy run the same kernel: at `tolerance: "exact"` the exact fused kernel (the
 * bits of the unfused ops), at the default float32 tolerance the bounded row kernel
 * (native/kernels/rows_f32.c).
 *
 * The same for rms_norm and layer_norm (functional.ts) with their fused_rms_norm /
 * fused_layer_norm. log_softmax has no fused op: it stays op by op. And for the primitives whose
 * implementations differ by tolerance (`tolerantPrimitive`, any grad mode: the op is the
 * registry's own, so autograd records it as usual): float16/bfloat16 matmul, float32 lora_linear.
 *
 * Used only where no gradient is recorded (the fused ops have no gradient rules: they exist only
 * inside compiled plans, after autograd), the compiler's `patterns` option is on, the backend has
 * a catalog with a runnable implementation, and the dtype is one the pattern pass matches.
 */
import type { Application } from "../backends/catalog.ts";
import { is_grad_enabled } from "../autograd/grad_mode.ts";
import type { OpDef } from "../graph/op.ts";
import { patternDtype, type FusedSoftmaxAttrs, type NormAttrs } from "../graph/passes/fused_ops.ts";
import { FUSED_OPS, OPS } from "../graph/registry.ts";
import { compilerOptions } from "../scheduler/options.ts";
import { candidates } from "../scheduler/select.ts";
import { promoteWithScalar, type DType } from "../tensor/dtype.ts";
import { numel, shapesEqual } from "../tensor/shape.ts";
import { scalarData, type TensorData } from "../tensor/storage.ts";
import { Node } from "../graph/node.ts";
import { realize } from "../scheduler/realize.ts";
import { backendFor } from "./device.ts";
import { sourceNode } from "./readers.ts";
import type { TensorOps } from "./surface.ts";

type Runner = (inputs: readonly TensorData[]) => TensorData;
/** The layout of one input a cached choice was made for. */
interface Layout { dtype: DType; shape: readonly number[]; strides: readonly number[] }
/** A chosen runner (null: no implementation runs it) and the input layouts it was chosen for. */
interface Choice { layouts: readonly Layout[]; run: Runner | null }
/**
 * Chosen runners by (backend, op, attrs) and then by the inputs' layouts (dtypes, shapes,
 * strides), compared element by element: no key string is built from the shapes on every call
 * (a third of a small eager softmax's dispatch). Valid for the options object they were chosen
 * under (set_compiler_options replaces it: a new tolerance chooses again). Bounded: cleared past
 * MAX_CACHED choices.
 */
const cache = new Map<string, Choice[]>();
let cached = 0;
let cacheOptions: unknown = null;
const MAX_CACHED = 512;

/** Whether `inputs` have the layouts a choice was made for. */
function sameLayouts(ls: readonly Layout[], inputs: readonly TensorData[]): boolean {
  if (ls.length !== inputs.length) return false;
  for (let i = 0; i < ls.length; i++) {
    const l = ls[i]!, t = inputs[i]!;
    if (l.dtype !== t.dtype || !shapesEqual(l.shape, t.shape) || !shapesEqual(l.strides, t.strides)) return false;
  }
  return true;
}

/**
 * The application's result computed now by the best runnable implementation of `op` on
 * `device`, or null when none applies (the caller then runs the decomposition op by op).
 * `key` names the attributes (with op and layouts it keys the cached choice); `attrs` builds them,
 * called only when the choice is not cached yet.
 */
export function runFused(device: string, op: OpDef, inputs: readonly TensorData[], attrs: () => unknown, key: string, shape: readonly number[], dtype: DType): TensorData | null {
  if (!compilerOptions().patterns) return null;
  return runBest(device, op, inputs, attrs, key, shape, dtype);
}

/** Primitive ops, by output dtype, with a bounded catalog implementation that eager ops should also run. */
const TOLERANT: ReadonlyMap<OpDef, readonly DType[]> = new Map<OpDef, readonly DType[]>([
  [OPS.matmul, ["float16", "bfloat16"]],
  [OPS.lora_linear, ["float32"]],
]);

/**
 * A primitive op whose implementations differ by tolerance, run now by the catalog's best at the
 * global tolerance, as a plan chooses it: a float16/bfloat16 matmul accumulates in float32
 * (native/half_matmul.ts) and a float32 lora_linear adds its rank-r update in one double pass
 * (native/lora.ts) at the default tolerance; "exact" runs the exact kernels. Null for any other
 * op or dtype (TOLERANT) and where no implementation runs it: the backend's own kernel then
 * does. `xs`: the op's inputs; `attrs` its attributes (their values key the cached choice);
 * `shape`/`dtype`: the output's.
 */
export function tolerantPrimitive(device: string, op: OpDef, xs: readonly TensorData[], attrs: object, shape: readonly number[], dtype: DType): TensorData | null {
  if (!TOLERANT.get(op)?.includes(dtype)) return null;
  return runBest(device, op, xs, () => attrs, Object.values(attrs).join(","), shape, dtype);
}

/** Primitive float32 ops whose eager kernel (double libm per element) is several times a plan's generated one. */
const TRANSCENDENTAL = new Set(["exp", "log", "log1p", "sin", "cos", "tanh", "sigmoid", "erf"]);
/** Elements from which a one-op plan of a transcendental pays for its fixed cost (a plan-cache hit: ~10–20 µs). */
export const PLANNED_MIN_ELEMENTS = 1 << 16;
/** The same for the other elementwise ops (memory-bound: the plan's gain per element is smaller). */
export const PLANNED_MIN_ELEMENTS_SIMPLE = 1 << 18;

/**
 * A large float32 elementwise op or reduction (sum, amax, amin) of native eager tensors run as a one-op plan, so the catalog's
 * generated float32 kernel (backends/native/jit_fast.ts: 16 lanes, libmvec for transcendentals,
 * within torch.testing's float32 tolerance, the double kernel's value for every element it cannot
 * certify) runs instead of the eager interpreter's double arithmetic, as a lazy plan would. On 4M
 * elements: erf about 5 -> 1.3 ms, tanh 5.4 -> 1.5, mul 3.2 -> 1.9, pow(2) 2.1 -> 1.4, a row mean 1.5 -> 0.7.
 * Any grad mode: the op is the registry's own, so autograd records it as usual. Null (the
 * backend's own kernel runs) at tolerance "exact" or without the plan cache, below
 * PLANNED_MIN_ELEMENTS (transcendentals) / PLANNED_MIN_ELEMENTS_SIMPLE elements, when an input or
 * the output is not float32, and on other backends. The result may still be being computed (an
 * asynchronous plan): reads wait. Bit i of `literals`: input i is a wrapped scalar (Tensor._constant).
 */
export function plannedElementwise(device: string, op: OpDef, xs: readonly TensorData[], literals: number, attrs: unknown, shape: readonly number[], dtype: DType): TensorData | null {
  const n = op.kind === "reduce" ? numel(xs[0]!.shape) : numel(shape); // a reduction's work is its input
  if (dtype !== "float32" || !plansEager(device, n, TRANSCENDENTAL.has(op.name) ? PLANNED_MIN_ELEMENTS : PLANNED_MIN_ELEMENTS_SIMPLE)) return null;
  for (let i = 0; i < xs.length; i++) if (xs[i]!.dtype !== "float32") return null;
  // wrapped scalars as the constants a lazy recording makes, so the plan folds them as it would
  // there (pow(x, 2) -> x·x); other inputs as their buffers
  const node = new Node(op, xs.map((x, i) => ((literals >> i) & 1 ? Node.constant(x) : sourceNode(x, device))), attrs, shape, dtype);
  realize([node], backendFor(device), device);
  return node.realized;
}

/**
 * Whether eager work of `n` elements on `device` runs as a plan (plannedElementwise, and the
 * composites of Tensor._elementwisePlan): at least `min` elements, the native backend, a
 * tolerance other than "exact" (where the eager kernels give the exact bits) and the plan cache on.
 */
export function plansEager(device: string, n: number, min: number): boolean {
  if (n < min) return false;
  const opts = compilerOptions();
  return opts.tolerance !== "exact" && opts.cache && backendFor(device).name === "native";
}

/** runFused without the `patterns` switch (for primitive ops, whose choice is only the tolerance's). */
function runBest(device: string, op: OpDef, inputs: readonly TensorData[], attrs: () => unknown, key: string, shape: readonly number[], dtype: DType): TensorData | null {
  const opts = compilerOptions();
  if (cacheOptions !== opts || cached > MAX_CACHED) {
    cache.clear();
    cached = 0;
    cacheOptions = opts;
  }
  // the backend's name, not the device's: "cpu" is js or native (set_default_backend)
  const backend = backendFor(device);
  const k = `${backend.name}|${op.name}|${key}`;
  let choices = cache.get(k);
  if (!choices) cache.set(k, (choices = []));
  let choice: Choice | undefined;
  for (const c of choices) if (sameLayouts(c.layouts, inputs)) { choice = c; break; }
  if (!choice) {
    let run: Runner | null = null;
    if (backend.implementations) {
      const a: Application = { op, inputs, attrs: attrs(), shape, dtype };
      const impl = candidates(backend, a, opts.tolerance).find((i) => i.runner);
      if (impl) run = impl.runner!(a);
    }
    choice = { layouts: inputs.map((t) => ({ dtype: t.dtype, shape: t.shape.slice(), strides: t.strides.slice() })), run };
    choices.push(choice);
    cached++;
  }
  return choice.run === null ? null : choice.run(inputs);
}

/**
 * The attrs of `fused_softmax` over a buffer `x` along `dim`: the prologue is x itself, one load
 * with x's own strides, as the pattern pass builds it for `x.softmax(dim)` of a leaf (used by the
 * eager path below and by LazyTensor._fusedSoftmax, so both make the pattern pass's node).
 */
export function leafSoftmaxAttrs(x: Pick<TensorData, "shape" | "strides" | "dtype">, dim: number): FusedSoftmaxAttrs {
  return { dim, prologue: { shape: x.shape, code: [{ k: "load", input: 0, strides: x.strides, offset: 0, dtype: x.dtype }], out: 0 } };
}

/**
 * softmax of `x` over `dim` (normalized, non-empty) as one fused kernel (leafSoftmaxAttrs). Null
 * where no fused implementation runs (see the file comment).
 */
export function fusedSoftmax(device: string, x: TensorData, dim: number): TensorData | null {
  if (!patternDtype(x.dtype) || x.shape.length === 0) return null;
  return runFused(device, FUSED_OPS.fused_softmax, [x], () => leafSoftmaxAttrs(x, dim), `${dim}`, x.shape, x.dtype);
}

/**
 * rms_norm (inputs [x, n, eps, w?]) or layer_norm ([x, n, n, n, eps, w?, b?]) of `x` over its
 * last `dims` dims as one fused kernel, as the pattern pass builds it for functional.ts's
 * decomposition: n and eps are the 0-d constants the decomposition's `div(n)` and `add(eps)`
 * wrap (surface.ts `_wrap`: PyTorch's scalar promotion), so the exact kernel rounds as they do.
 * `w`, `b`: x's dtype and the normalized shape (checked by the caller). Null where no fused
 * implementation runs.
 */
export function fusedNorm(device: string, kind: "rms_norm" | "layer_norm", x: TensorData, dims: number, n: number, w: TensorData | null, b: TensorData | null, eps: number): TensorData | null {
  if (!patternDtype(x.dtype) || dims < 1 || numel(x.shape) === 0) return null;
  const ins = [x, ...normConstants(kind, x.dtype, n, eps)];
  if (w) ins.push(w);
  if (b) ins.push(b);
  const attrs = (): NormAttrs => ({ dims, has_weight: w !== null, has_bias: b !== null });
  const op = kind === "rms_norm" ? FUSED_OPS.fused_rms_norm : FUSED_OPS.fused_layer_norm;
  return runFused(device, op, ins, attrs, `${dims}${w ? "w" : ""}${b ? "b" : ""}`, x.shape, x.dtype);
}

/**
 * The 0-d constants a fused norm takes after x: [n, eps] (rms_norm) or [n, n, n, eps]
 * (layer_norm), wrapped as the decomposition's `div(n)` and `add(eps)` wrap them (surface.ts
 * `_wrap`: PyTorch's scalar promotion), so the exact kernel rounds as they do. Shared by the
 * eager dispatch above and the lazy recording of a fused norm (LazyTensor._fusedNorm).
 */
export function normConstants(kind: "rms_norm" | "layer_norm", dtype: DType, n: number, eps: number): TensorData[] {
  const cn = scalarData(promoteWithScalar(dtype, n), n), ce = scalarData(promoteWithScalar(dtype, eps), eps);
  return kind === "rms_norm" ? [cn, ce] : [cn, cn, cn, ce];
}

/**
 * Whether x (normalized over its last `dims` dims), weight and bias fit a fused norm as the
 * pattern pass would make it: no gradient is recorded through any of them (fused ops have no
 * gradient rules), one device and dtype, weight and bias of the normalized shape.
 */
export function normOperandsFit(x: TensorOps<any>, dims: number, weight: TensorOps<any> | null, bias: TensorOps<any> | null): boolean {
  const grad = is_grad_enabled();
  const nd = x.shape.length;
  for (const t of [x, weight, bias]) {
    if (t === null) continue;
    if ((grad && t.requires_grad) || t.device !== x.device || t.dtype !== x.dtype) return false;
    if (t !== x && (t.shape.length !== dims || t.shape.some((s, i) => s !== x.shape[nd - dims + i]))) return false;
  }
  return true;
}
