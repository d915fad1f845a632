/**
 * Optimizer: the base of SGD, Adam and AdamW (torch.optim.Optimizer semantics).
 *
 * Parameters are eager Tensors (nn.Parameter is one; optim does not import nn). Each param group
 * carries its own hyperparameters; `state` maps a parameter to its per-parameter state (eager
 * tensors and numbers). Updates run under no_grad with in-place ops on the parameters' buffers;
 * parameters whose `.grad` is null are skipped; a LazyTensor grad is realized first.
 */
import { enable_grad, no_grad } from "../autograd/grad_mode.ts";
import { zeros_like } from "../lazy/creation.ts";
import { LazyTensor } from "../lazy/lazy_tensor.ts";
import { TensorOps } from "../lazy/surface.ts";
import { Tensor } from "../lazy/tensor.ts";
import { flush } from "../lazy/deferred.ts";
import { LoomValueError } from "../tensor/errors.ts";

/** Hyperparameters shared by every optimizer: the learning rate (per step). */
export interface BaseHyperparams {
  lr: number;
}

/** One parameter group: its parameters and hyperparameters (schedulers add `initial_lr`). */
export type ParamGroup<H extends BaseHyperparams = BaseHyperparams> = H & { params: Tensor[]; initial_lr?: number };

/** What a constructor accepts for a group: params plus any hyperparameters to override. */
export type ParamGroupInput<H extends BaseHyperparams = BaseHyperparams> = Partial<H> & { params: Iterable<Tensor> | Tensor; initial_lr?: number };

/** Either an iterable of tensors (one group) or a list of groups (torch's two forms). */
export type ParamsInput<H extends BaseHyperparams = BaseHyperparams> = Iterable<Tensor> | Iterable<ParamGroupInput<H>>;

/** Per-parameter state: tensors (eager) and numbers such as `step`; null for "not yet made". */
export type ParamState = Record<string, Tensor | number | null>;

/**
 * torch's optimizer state dict: state keyed by the parameter's index across all groups (in
 * order), and the groups with their parameters replaced by those indices.
 */
export interface OptimizerStateDict {
  state: Record<number, ParamState>;
  param_groups: (Record<string, unknown> & { params: number[] })[];
}

/** A new eager tensor with t's values (t.clone()). */
export function clone_tensor(t: Tensor): Tensor {
  return no_grad(() => zeros_like(t).copy_(t));
}

function isTensor(x: unknown): x is TensorOps<any> {
  return x instanceof TensorOps;
}

export abstract class Optimizer<H extends BaseHyperparams = BaseHyperparams> {
  /** The hyperparameters every group falls back to. */
  readonly defaults: H;
  param_groups: ParamGroup<H>[] = [];
  /** Parameter -> its state (momentum buffers, moments, step count...). */
  state = new Map<Tensor, ParamState>();

  /**
   * @param params - tensors, or groups `{params, ...hyperparameters}`
   * @param defaults - hyperparameters for groups that do not set them
   * @throws LoomValueError for an empty parameter list, a non-tensor, a non-leaf or lazy tensor,
   *   or a tensor appearing in two groups
   */
  constructor(params: ParamsInput<H>, defaults: H) {
    this.defaults = defaults;
    if (isTensor(params)) {
      throw new LoomValueError(`[${this.constructor.name}] params argument given to the optimizer should be an iterable of Tensors or dicts, but got a single Tensor`);
    }
    const list = [...(params as Iterable<unknown>)];
    if (list.length === 0) throw new LoomValueError(`[${this.constructor.name}] optimizer got an empty parameter list`);
    const groups = isTensor(list[0]) ? [{ params: list as Tensor[] }] : (list as ParamGroupInput<H>[]);
    for (const g of groups) this.add_param_group(g as ParamGroupInput<H>);
  }

  /**
   * Add a group (torch add_param_group), e.g. when unfreezing layers during fine-tuning. Missing
   * hyperparameters come from `defaults`.
   * @throws LoomValueError as the constructor
   */
  add_param_group(group: ParamGroupInput<H>): void {
    const name = this.constructor.name;
    const raw = group.params;
    const params = isTensor(raw) ? [raw as Tensor] : [...(raw as Iterable<Tensor>)];
    for (const p of params) {
      if (!isTensor(p)) throw new LoomValueError(`[${name}] optimizer can only optimize Tensors, but one of the params is ${(p as object)?.constructor?.name ?? typeof p}`);
      if (p instanceof LazyTensor) throw new LoomValueError(`[${name}] optimizer can only optimize eager Tensors (realize the LazyTensor with .eval() and make it a leaf)`);
      if (!p.is_leaf) throw new LoomValueError(`[${name}] can't optimize a non-leaf Tensor`);
    }
    const taken = new Set(this.param_groups.flatMap((g) => g.params));
    if (params.some((p) => taken.has(p))) throw new LoomValueError(`[${name}] some parameters appear in more than one parameter group`);
    const full = { ...this.defaults, ...group, params } as ParamGroup<H>;
    this.param_groups.push(full);
  }

  /**
   * Reset the gradients of all optimized parameters: to null (default, as torch 2.x), or zeroed
   * in place with set_to_none = false.
   */
  zero_grad(set_to_none = true): void {
    for (const g of this.param_groups) {
      for (const p of g.params) {
        if (!p.grad) continue;
        if (set_to_none) {
          p.grad = null;
        } else if (!p.grad.grad_fn) {
          // in place (torch); a pending gradient is simply rebound to zeros (no flush)
          const g = p.grad;
          no_grad(() => g.zero_());
        } else {
          const z = p.grad.detach();
          no_grad(() => z.zero_());
          p.grad = z;
        }
      }
    }
  }

  /**
   * One update of every parameter that has a gradient.
   * @param closure - re-evaluates the model and returns the loss (run with grad enabled)
   * @returns the closure's loss, if given
   */
  step(closure?: () => Tensor | number): Tensor | number | undefined {
    const loss = closure ? enable_grad(closure) : undefined;
    no_grad(() => {
      for (const group of this.param_groups) this._update_group(group);
    });
    // Updates are recorded as pending writes (lazy/deferred.ts). With pending gradients (lazy
    // execution) they wait for the next read, to run in one plan with the forward and backward;
    // with eager gradients they run now, as one plan, so the step has PyTorch's eager semantics.
    const devices = new Set<string>();
    let pending = false;
    for (const group of this.param_groups) {
      for (const p of group.params) {
        const g = p.grad as Tensor | null;
        if (!g) continue;
        devices.add(p.device);
        if (g instanceof Tensor && g.is_pending) pending = true;
      }
    }
    if (!pending) for (const d of devices) flush(d);
    return loss;
  }

  /** Apply this optimizer's rule to one group (called under no_grad). */
  protected abstract _update_group(group: ParamGroup<H>): void;

  /** The eager gradient of p, or null (a LazyTensor grad is realized). */
  protected _grad(p: Tensor): Tensor | null {
    const g = p.grad as Tensor | LazyTensor | null;
    if (!g) return null;
    return g instanceof LazyTensor ? g.eval() : g;
  }

  /** The state of p, created empty on first use. */
  protected _state(p: Tensor): ParamState {
    let s = this.state.get(p);
    if (!s) {
      s = {};
      this.state.set(p, s);
    }
    return s;
  }

  /**
   * The state as torch lays it out: `{state: {index: {...}}, param_groups: [{...hyper, params:
   * [indices]}]}`, indices counting parameters across groups in order. State tensors are the live
   * buffers (as torch; serialize or clone them to keep a snapshot).
   */
  state_dict(): OptimizerStateDict {
    const index = new Map<Tensor, number>();
    let next = 0;
    const param_groups = this.param_groups.map((g) => {
      const { params, ...hyper } = g;
      const ids = params.map((p) => {
        if (!index.has(p)) index.set(p, next++);
        return index.get(p)!;
      });
      return { ...structuredCopy(hyper), params: ids };
    });
    const state: Record<number, ParamState> = {};
    for (const [p, s] of this.state) {
      const i = index.get(p);
      if (i !== undefined) state[i] = { ...s };
    }
    return { state, param_groups };
  }

  /**
   * Restore state and hyperparameters from `state_dict` (torch load_state_dict): tensors are
   * copied (and floating ones converted to the parameter's dtype, except `step`), groups take the
   * saved hyperparameters and keep their current parameters.
   * @throws LoomValueError if the number of groups or of parameters per group differs
   */
  load_state_dict(state_dict: OptimizerStateDict): void {
    const name = this.constructor.name;
    const saved = state_dict.param_groups;
    if (saved.length !== this.param_groups.length) {
      throw new LoomValueError(`[${name}.load_state_dict] loaded state dict has a different number of parameter groups (${saved.length} saved, ${this.param_groups.length} in the optimizer)`);
    }
    saved.forEach((g, i) => {
      if (g.params.length !== this.param_groups[i]!.params.length) {
        throw new LoomValueError(`[${name}.load_state_dict] loaded state dict contains a parameter group that doesn't match the size of optimizer's group (group ${i}: ${g.params.length} saved, ${this.param_groups[i]!.params.length} in the optimizer)`);
      }
    });
    const idMap = new Map<number, Tensor>();
    saved.forEach((g, i) => g.params.forEach((id, j) => idMap.set(id, this.param_groups[i]!.params[j]!)));
    const state = new Map<Tensor, ParamState>();
    for (const [k, s] of Object.entries(state_dict.state)) {
      const p = idMap.get(Number(k));
      if (!p) continue;
      const copy: ParamState = {};
      for (const [key, v] of Object.entries(s as Record<string, unknown>)) {
        if (v instanceof TensorOps) {
          const t = v instanceof LazyTensor ? v.eval() : (v as Tensor);
          const cast = key !== "step" && p.is_floating_point() && t.is_floating_point() ? no_grad(() => t.to(p.dtype)) : t;
          copy[key] = clone_tensor(cast);
        } else {
          copy[key] = v as number | null;
        }
      }
      state.set(p, copy);
    }
    this.state = state;
    this.param_groups = saved.map((g, i) => {
      const { params: _ids, ...hyper } = g;
      return { ...structuredCopy(hyper), params: this.param_groups[i]!.params } as unknown as ParamGroup<H>;
    });
  }
}

/** Deep copy of plain hyperparameter values (numbers, booleans, arrays such as betas). */
function structuredCopy<T>(v: T): T {
  if (Array.isArray(v)) return v.map(structuredCopy) as T;
  if (v !== null && typeof v === "object" && Object.getPrototypeOf(v) === Object.prototype) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, structuredCopy(x)])) as T;
  }
  return v;
}
