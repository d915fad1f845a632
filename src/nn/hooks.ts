/**
 * Module hooks (torch.nn.Module.register_forward_pre_hook, register_forward_hook,
 * register_full_backward_pre_hook, register_full_backward_hook). They run around `Module.call`
 * (a module written with a plain `forward` override) or `Module.forward` (a generic
 * `forward_lazy` module, which Loom's built-in layers also use to call their children), so hooks
 * on an inner layer fire, as `module(x)` fires them in torch.
 *
 * Backward hooks are built from tensor hooks (`register_hook`): the output's hook sees
 * grad_output; the input goes through an alias (a view) inside the call, whose hook sees the
 * gradient reaching the input from this module only (torch's BackwardHook does the same with
 * identity nodes). As in torch, a backward pre-hook may replace grad_output and a backward hook
 * grad_input. Backward hooks take modules with one tensor input and one tensor output (the common
 * case: layers, blocks); other signatures raise rather than give a partial grad tuple.
 */
import type { RemovableHandle } from "../autograd/engine.ts";
import { TensorOps } from "../lazy/surface.ts";
import { LoomValueError } from "../tensor/errors.ts";

type AnyTensor = TensorOps<any>;
/** (module, args) -> replacement args (an array, or one value), or nothing. */
export type ForwardPreHook<M> = (module: M, args: unknown[]) => unknown;
/** (module, args, output) -> replacement output, or nothing. */
export type ForwardHook<M> = (module: M, args: unknown[], output: unknown) => unknown;
/** (module, grad_output) -> replacement grad_output, or nothing. */
export type BackwardPreHook<M> = (module: M, grad_output: AnyTensor[]) => AnyTensor[] | void;
/** (module, grad_input, grad_output) -> replacement grad_input, or nothing. */
export type BackwardHook<M> = (module: M, grad_input: AnyTensor[], grad_output: AnyTensor[]) => AnyTensor[] | void;

/** An ordered hook list whose entries can be removed by handle. */
class HookList<F> {
  readonly items: { fn: F }[] = [];
  add(fn: F): RemovableHandle {
    const entry = { fn };
    this.items.push(entry);
    return { remove: () => { const i = this.items.indexOf(entry); if (i >= 0) this.items.splice(i, 1); } };
  }
  get size(): number {
    return this.items.length;
  }
}

/** The hooks of one module. */
export class ModuleHooks<M> {
  readonly forwardPre = new HookList<ForwardPreHook<M>>();
  readonly forward = new HookList<ForwardHook<M>>();
  readonly backwardPre = new HookList<BackwardPreHook<M>>();
  readonly backward = new HookList<BackwardHook<M>>();

  get empty(): boolean {
    return this.forwardPre.size + this.forward.size + this.backwardPre.size + this.backward.size === 0;
  }

  /**
   * The module's forward with the hooks around it. `run(args, prepare)` runs the forward on
   * `args`, calling `prepare` on the arguments the computation actually receives (lazy lifts of
   * eager inputs in lazy mode), where the input's alias is made, inside the graph.
   * @throws LoomValueError when backward hooks are registered and the call does not take one
   *   tensor and return one tensor
   */
  call(module: M, name: string, args: unknown[], run: (args: unknown[], prepare: (xs: unknown[]) => unknown[]) => unknown): unknown {
    for (const { fn } of this.forwardPre.items) {
      const r = fn(module, args);
      if (r !== undefined) args = Array.isArray(r) ? r : [r];
    }
    const backward = this.backwardPre.size + this.backward.size > 0;
    if (backward && (args.length !== 1 || !(args[0] instanceof TensorOps))) {
      throw new LoomValueError(`[${name}] backward hooks take a module called with one tensor; got ${args.length} argument(s)`);
    }
    let alias: AnyTensor | null = null;
    // the gradient reaching this alias is the one from this module's use of the input alone
    const prepare = (xs: unknown[]): unknown[] => {
      const x = xs[0] as AnyTensor;
      return backward && x.requires_grad ? [(alias = x.view(x.shape as number[]))] : xs;
    };
    let out = run(args, prepare);
    for (const { fn } of this.forward.items) {
      const r = fn(module, args, out);
      if (r !== undefined) out = r;
    }
    if (backward) {
      if (!(out instanceof TensorOps)) throw new LoomValueError(`[${name}] backward hooks take a module that returns one tensor`);
      if (out.requires_grad) this.hookGradients(module, alias, out);
    }
    return out;
  }

  /** Tensor hooks on the output (grad_output, pre-hooks) and the input's alias (grad_input, hooks). */
  private hookGradients(module: M, alias: AnyTensor | null, out: AnyTensor): void {
    let gradOutput: AnyTensor[] = [];
    out.register_hook((g: AnyTensor) => {
      let go = [g];
      for (const { fn } of this.backwardPre.items) go = fn(module, go) ?? go;
      gradOutput = go;
      // torch calls full backward hooks with grad_input (None) when no input requires grad
      if (!alias) for (const { fn } of this.backward.items) fn(module, [], go);
      return go[0];
    });
    alias?.register_hook((g: AnyTensor) => {
      let gi = [g];
      for (const { fn } of this.backward.items) gi = fn(module, gi, gradOutput) ?? gi;
      return gi[0];
    });
  }
}
