/**
 * How a Module's computation runs (DESIGN.md idea 1: one surface, two dispatchers). The
 * computation is a plain `forward(x: Tensor)` override (PyTorch's style) or the generic
 * `forward_lazy<S>`; `Module.call` runs either through `run_forward`, which decides what it sees:
 *
 * - "lazy" (default): eager inputs are lifted to LazyTensors, the computation records a graph,
 *   and the outputs come back as pending eager Tensors (lazy/deferred.ts), computed together at
 *   the first read on their device. Eager tensors combined with the lazy values inside (the
 *   module's parameters and buffers used directly, tensors made inside with `arange`, or passed
 *   through `lift`, or passed to a child module's `call`) are lifted once per call (private
 *   lifts: no copy-on-write copies when the optimizer writes them) and receive pending eager
 *   `.grad` after backward. A plain `forward`
 *   therefore sees LazyTensors, which have Tensor's methods (reading a value, `item()`, computes
 *   it).
 * - "eager": the computation runs directly on the eager tensors, op by op.
 *
 * LazyTensor inputs always give lazy outputs (nothing is realized), whatever the mode.
 */
import { is_grad_enabled } from "../autograd/grad_mode.ts";
import { LazyTensor } from "../lazy/lazy_tensor.ts";
import { mixed_lift, TensorOps } from "../lazy/surface.ts";
import { Tensor } from "../lazy/tensor.ts";
import { LoomValueError } from "../tensor/errors.ts";

/** "lazy": record and realize per call (default); "eager": run op by op. */
export type ExecutionMode = "lazy" | "eager";

let mode: ExecutionMode = "lazy";

/**
 * Set how `Module.call` runs on eager inputs, globally.
 * @throws LoomValueError for anything but "lazy" or "eager"
 */
export function set_execution_mode(m: ExecutionMode): void {
  if (m !== "lazy" && m !== "eager") throw new LoomValueError(`[set_execution_mode] expected "lazy" or "eager", got ${String(m)}`);
  mode = m;
}

/** The current execution mode ("lazy" unless changed). */
export function get_execution_mode(): ExecutionMode {
  return mode;
}

/** Run `fn` with the execution mode set to `m`, restoring the previous mode afterwards. */
export function with_execution_mode<R>(m: ExecutionMode, fn: () => R): R {
  const prev = mode;
  set_execution_mode(m);
  try {
    return fn();
  } finally {
    mode = prev;
  }
}

/**
 * Lifted copies made during one lazy forward: each eager tensor becomes one lazy source node per
 * call (so a weight used twice, e.g. tied embeddings, is one node and one gradient link). Keyed by
 * grad mode too, because a lift made under no_grad carries no gradient link.
 */
interface LiftScope {
  grad: Map<Tensor, LazyTensor>;
  nograd: Map<Tensor, LazyTensor>;
}
let scope: LiftScope | null = null;

/**
 * `t` as a tensor of the same kind as `like`: lifted to a LazyTensor when `like` is lazy (once per
 * lazy forward call), realized to a Tensor when `like` is eager. Use it in the generic
 * `forward_lazy` to give eager parameters and buffers the input's type (a plain `forward` needs
 * none: eager tensors combined with lazy ones are lifted the same way):
 * `F.linear(x, lift(this.weight, x), lift(this.bias, x))`.
 * Gradients reaching the lifted tensor flow back to the eager `t`.
 */
export function lift<S extends TensorOps<S>>(t: TensorOps<any>, like: S): S;
export function lift<S extends TensorOps<S>>(t: TensorOps<any> | null | undefined, like: S): S | null;
export function lift<S extends TensorOps<S>>(t: TensorOps<any> | null | undefined, like: S): S | null {
  if (t === null || t === undefined) return null;
  if (!like.isLazy) return (t instanceof LazyTensor ? t.eval() : t) as unknown as S;
  return liftToLazy(t) as unknown as S;
}

/** An eager tensor as a LazyTensor, reusing this call's lift when there is one. */
function liftToLazy(t: TensorOps<any>): LazyTensor {
  if (t instanceof LazyTensor) return t;
  const e = t as Tensor;
  if (!scope) return e.lazy();
  const cache = is_grad_enabled() ? scope.grad : scope.nograd;
  let l = cache.get(e);
  if (!l) {
    // a private read: nothing outside this forward holds it, so a later write of e marks it stale
    // instead of copying e's old values for it (every parameter, every step otherwise)
    l = e._lift();
    cache.set(e, l);
  }
  return l;
}

/** Map every tensor inside arrays and plain objects (the shapes forward args/outputs take). */
function mapTree(v: unknown, f: (t: TensorOps<any>) => unknown): unknown {
  if (v instanceof TensorOps) return f(v);
  if (Array.isArray(v)) return v.map((x) => mapTree(x, f));
  if (v !== null && typeof v === "object" && Object.getPrototypeOf(v) === Object.prototype) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, mapTree(x, f)]));
  }
  return v;
}

function anyLazy(v: unknown): boolean {
  let found = false;
  mapTree(v, (t) => {
    if (t.isLazy) found = true;
    return t;
  });
  return found;
}

/**
 * Every LazyTensor in a forward output as a pending eager Tensor (lazy/deferred.ts): nothing runs
 * yet. The first read on the device computes all of them that are still alive together (shared
 * subgraphs run once), with the gradients, optimizer writes and cache writes recorded since, as
 * one plan: `loss.backward(); opt.step(); loss.item()` is one plan per step.
 */
function deferTree(out: unknown): unknown {
  return mapTree(out, (t) => (t instanceof LazyTensor ? t.defer(true) : t));
}

/**
 * Run a module's computation under the execution rules above.
 * @param fn - the bound forward_lazy, or a plain forward override
 * @param args - forward's arguments; tensors may sit inside arrays and plain objects
 * @returns fn's result with LazyTensors realized to Tensors when the inputs were eager
 *   and the mode is "lazy"
 */
export function run_forward(fn: (...args: any[]) => unknown, args: unknown[]): unknown {
  // Inside a lazy forward, a child's eager arguments (a tensor made in the parent's forward, e.g.
  // `this.wpe.call(arange(T))`) are this call's lifts too, so the child records, not runs
  if (scope) return fn(...args.map((a) => mapTree(a, liftToLazy)));
  // Lazy inputs, or eager mode: call straight through.
  if (mode === "eager" || anyLazy(args)) return fn(...args);
  const prev = scope, prevLift = mixed_lift.fn;
  scope = { grad: new Map(), nograd: new Map() };
  // parameters, buffers and tensors made inside forward meet the lazy inputs as this call's lifts
  mixed_lift.fn = liftToLazy;
  let out: unknown;
  try {
    const lazyArgs = args.map((a) => mapTree(a, liftToLazy));
    out = fn(...lazyArgs);
  } finally {
    scope = prev;
    mixed_lift.fn = prevLift;
  }
  return deferTree(out);
}

