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
  /**
   * The output the rule may read (torch saves `result` for exp, sqrt, tanh...); with `versions`,
   * the saved-tensor check covers it too.
   */
  readonly output?: T;
  /**
   * `_version` of inputs[i] (then of `output`) when the op was recorded. While `apply` runs, a
   * tensor among them that the rule uses as an operand must still be at that version (torch's
   * SavedVariable check); shape and dtype reads do not count, so rules that read no data (add,
   * views) never throw. Absent: nothing checked.
   */
  readonly versions?: readonly number[];
}

export interface AutogradTensor<T> extends Diff<T> {
  requires_grad: boolean;
  /** Count of in-place writes to this tensor's storage (shared by its views); torch's `_version`. */
  readonly _version: number;
  /** A copy with its own dense storage. */
  clone(): T;
  grad: T | null;
  grad_fn: GradFnNode<T> | null;
  _retains_grad: boolean;
  /** Gradient hooks (torch.Tensor.register_hook): each may replace the gradient; null when none. */
  _hooks?: { fn: (grad: T) => T | void }[] | null;
  detach(): T;
  contiguous(): T;
}

/** What registering a hook returns (torch.utils.hooks.RemovableHandle): `remove()` unregisters it. */
export interface RemovableHandle {
  remove(): void;
}

export interface BackwardOptions {
  retain_graph?: boolean;
  create_graph?: boolean;
}

/**
 * Converts gradients to the kind (eager or lazy) of the tensors that receive them, for a whole
 * backward at once. Installed by the lazy layer: gradients of eager parameters used in lazy code
 * arrive as lazy graphs and become pending eager values, computed together at the next read.
 */
export type GradMaterializer = (pairs: readonly { target: unknown; grad: unknown }[]) => unknown[];
let materialize: GradMaterializer = (pairs) => pairs.map((p) => p.grad);
export function set_grad_materializer(fn: GradMaterializer): void {
  materialize = fn;
}

/**
 * The record whose rule `runBackward` is running, or null: every op application checks its
 * operands against this record's saved versions (one property read per op outside backward).
 */
export const backward_state: { fn: GradFnNode<any> | null } = { fn: null };

/** Versions of `inputs` and then `output` as they are now, for GradFnNode.versions. */
export function saved_versions<T extends { readonly _version: number }>(inputs: readonly T[], output: T): number[] {
  const v = new Array<number>(inputs.length + 1);
  for (let i = 0; i < inputs.length; i++) v[i] = inputs[i]!._version;
  v[inputs.length] = output._version;
  return v;
}

/**
 * Throw when `t`, used as an operand by the rule of `fn`, is a tensor `fn` saved and was modified
 * in place since (torch: "one of the variables needed for gradient computation has been modified
 * by an inplace operation").
 * @throws LoomAutogradError naming the tensor's dtype and shape, the op, and both versions
 */
export function check_saved<T extends AutogradTensor<T>>(fn: GradFnNode<T>, t: T): void {
  const v = fn.versions;
  if (!v) return;
  const n = fn.inputs.length;
  for (let i = 0; i <= n; i++) {
    if ((i < n ? fn.inputs[i] : fn.output) !== t || t._version === v[i]) continue;
    const which = i < n ? `input ${i}` : "output 0";
    throw new LoomAutogradError(
      `[backward] one of the variables needed for gradient computation has been modified by an inplace operation: [${t.dtype} ${fmtShape(t.shape)}], which is ${which} of ${fn.name}, is at version ${t._version}; expected version ${v[i]} instead. Hint: an in-place write (an optimizer step, x.add_(...) under no_grad) came between the forward and this backward; run the forward again, or clone() the tensor before writing it`,
    );
  }
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
      let g = pending.get(t);
      if (!g) continue;
      pending.delete(t);
      if (t._hooks) for (const h of [...t._hooks]) g = fitGrad(t, h.fn(g) ?? g);
      if (wanted.has(t)) found.set(t, g);
      const fn = t.grad_fn;
      if (opts.accumulate && (!fn || t._retains_grad)) stores.push([t, g]);
      if (!fn) continue;
      if (fn.released) {
        throw new LoomAutogradError(
          `Trying to backward through the graph a second time (through ${fn.name}); specify retain_graph: true on the first backward`,
        );
      }
      const prevFn = backward_state.fn;
      backward_state.fn = fn;
      let ig: (T | null)[];
      try {
        ig = fn.apply(g);
      } finally {
        backward_state.fn = prevFn;
      }
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
