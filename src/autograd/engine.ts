/**
 * Reverse-mode automatic differentiation over recorded op applications, with PyTorch's semantics:
 * leaves accumulate into `.grad`, non-leaves only when `retain_grad()` was called, the graph is
 * released after backward unless `retain_graph`, and with `create_graph` the backward pass is
 * itself recorded, so higher derivatives work.
 *
 * The engine knows tensors only through `AutogradTensor`: gradient rules are written with tensor
 * methods, so for lazy tensors every gradient is a lazy graph too.
 */
import type { Diff } from "../graph/op.ts";
import { LoomAutogradError, fmtShape } from "../tensor/errors.ts";
import { shapesEqual } from "../tensor/shape.ts";
import { enable_grad, no_grad } from "./grad_mode.ts";

/** How an output was made: the inputs and the rule giving their gradients (torch's grad_fn). */
export interface GradFnNode<T> {
  readonly name: string;
  readonly inputs: readonly T[];
  /** dL/dinputs from dL/dout; null where an input needs no gradient. */
  apply(g: T): (T | null)[];
  released: boolean;
}

export interface AutogradTensor<T> extends Diff<T> {
  requires_grad: boolean;
  /** A copy with its own dense storage. */
  clone(): T;
  grad: T | null;
  grad_fn: GradFnNode<T> | null;
  _retains_grad: boolean;
  detach(): T;
  contiguous(): T;
}

export interface BackwardOptions {
  retain_graph?: boolean;
  create_graph?: boolean;
}

/**
 * Converts gradients to the kind (eager or lazy) of the tensors that receive them, all at once.
 * Installed by the lazy layer: gradients of eager parameters used in lazy code arrive as lazy
 * graphs, and realizing them together makes one plan instead of one per parameter.
 */
export type GradMaterializer = (pairs: readonly { target: unknown; grad: unknown }[]) => unknown[];
let materialize: GradMaterializer = (pairs) => pairs.map((p) => p.grad);
export function set_grad_materializer(fn: GradMaterializer): void {
  materialize = fn;
}

/** Tensors reachable from `roots` through grad_fn inputs, in topological order (inputs first). */
function topoOrder<T extends AutogradTensor<T>>(roots: readonly T[]): T[] {
  const order: T[] = [];
  const seen = new Set<T>();
  // iterative post-order DFS: deep graphs (thousands of ops) must not overflow the JS stack
  const stack: [T, number][] = [];
  for (const r of roots) {
    if (seen.has(r)) continue;
    seen.add(r);
    stack.push([r, 0]);
    while (stack.length) {
      const top = stack[stack.length - 1]!;
      const [t, i] = top;
      const ins = t.grad_fn?.inputs ?? [];
      if (i < ins.length) {
        top[1]++;
        const c = ins[i]!;
        if (c.requires_grad && !seen.has(c)) {
          seen.add(c);
          stack.push([c, 0]);
        }
      } else {
        stack.pop();
        order.push(t);
      }
    }
  }
  return order;
}

/** Check the gradient's shape and give it the tensor's dtype (torch casts at every edge). */
function fitGrad<T extends AutogradTensor<T>>(t: T, g: T): T {
  if (!shapesEqual(t.shape, g.shape)) {
    throw new LoomAutogradError(`[backward] gradient of shape ${fmtShape(g.shape)} does not match tensor of shape ${fmtShape(t.shape)}`);
  }
  return g.dtype === t.dtype ? g : g.to(t.dtype);
}

/**
 * Propagate `grads` from `roots` backwards. Returns the gradient reaching each tensor in `wanted`
 * (for autograd.grad); when `accumulate` is set, leaves (and tensors that retain grad) get `.grad`.
 */
export function runBackward<T extends AutogradTensor<T>>(
  roots: readonly T[],
  grads: readonly T[],
  opts: BackwardOptions & { accumulate: boolean; wanted?: readonly T[] },
): Map<T, T> {
  const retain = opts.retain_graph ?? opts.create_graph ?? false;
  const create = opts.create_graph ?? false;
  for (const r of roots) {
    if (!r.requires_grad) {
      throw new LoomAutogradError("element 0 of tensors does not require grad and does not have a grad_fn");
    }
  }
  const wanted = new Set(opts.wanted ?? []);
  const found = new Map<T, T>();
  const body = () => {
    const pending = new Map<T, T>();
    const stores: [T, T][] = [];
    roots.forEach((r, i) => {
      const g = fitGrad(r, grads[i]!);
      const prev = pending.get(r);
      pending.set(r, prev ? prev.add(g) : g);
    });
    const order = topoOrder(roots);
    for (let k = order.length - 1; k >= 0; k--) {
      const t = order[k]!;
      const g = pending.get(t);
      if (!g) continue;
      pending.delete(t);
      if (wanted.has(t)) found.set(t, g);
      const fn = t.grad_fn;
      if (opts.accumulate && (!fn || t._retains_grad)) stores.push([t, g]);
      if (!fn) continue;
      if (fn.released) {
        throw new LoomAutogradError(
          `Trying to backward through the graph a second time (through ${fn.name}); specify retain_graph: true on the first backward`,
        );
      }
      const ig = fn.apply(g);
      fn.inputs.forEach((inp, i) => {
        const g0 = ig[i];
        if (!g0 || !inp.requires_grad) return;
        const gi = fitGrad(inp, g0);
        const prev = pending.get(inp);
        pending.set(inp, prev ? prev.add(gi) : gi);
      });
      if (!retain) fn.released = true;
    }
    // Convert every gradient leaving the graph to its tensor's kind in one batch, then store.
    const found_list = [...found];
    const conv = materialize([...stores, ...found_list].map(([t, g]) => ({ target: t, grad: g }))) as T[];
    stores.forEach(([t], i) => {
      const g = conv[i]!;
      const stored = create ? g : g.detach();
      // A first .grad gets its own buffer (torch's AccumulateGrad contract): g may be a stride-0
      // view, another leaf's grad or the caller's gradient, and .grad may be updated in place.
      t.grad = t.grad ? (create ? t.grad.add(stored) : t.grad.detach().add(stored)) : stored.clone();
    });
    found_list.forEach(([t], i) => found.set(t, conv[stores.length + i]!));
  };
  if (create) enable_grad(body);
  else no_grad(body);
  return found;
}
