/**
 * Adagrad (torch.optim.Adagrad, PyTorch 1.13's single-tensor dense update, in PyTorch's operation
 * order so results match to float32 rounding).
 */
import { full_like } from "../lazy/creation.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { LoomValueError } from "../tensor/errors.ts";
import { Optimizer, type ParamGroup, type ParamsInput } from "./optimizer.ts";

export interface AdagradHyperparams {
  /** Learning rate, per step (default 1e-2). */
  lr: number;
  /** Decay of the learning rate: step t uses lr / (1 + (t - 1) · lr_decay) (default 0). */
  lr_decay: number;
  /** L2 penalty λ added to the gradient (default 0). */
  weight_decay: number;
  /**
   * Starting value of the sum of squared gradients (default 0). As in torch, the constructor's
   * value fills every parameter's accumulator; a group's own value is kept but not used.
   */
  initial_accumulator_value: number;
  /** Added to the denominator √sum, absolute (default 1e-10). */
  eps: number;
  /** Maximize the objective instead of minimizing it. */
  maximize: boolean;
  /**
   * torch's choice of the multi-tensor kernel; accepted for porting, no effect on the result
   * (Loom records every parameter's update into one plan already).
   */
  foreach?: boolean | null;
}

/**
 * Adagrad. For each parameter with gradient g, at step t (λ = weight_decay):
 *   g ← -g if maximize;  g ← g + λ p
 *   clr = lr / (1 + (t - 1) · lr_decay)
 *   s ← s + g²;  p ← p - clr · g / (√s + eps)
 * State per parameter (torch's keys), made for every parameter at construction as torch does:
 * `step` (a number; torch 1.13 keeps a 0-d tensor) and `sum`, filled with the constructor's
 * initial_accumulator_value (torch reads the argument, not the group's value).
 * Sparse gradients (torch's other path) do not exist in Loom.
 * Source: Duchi, Hazan & Singer 2011, "Adaptive Subgradient Methods"; torch/optim/adagrad.py
 * `_single_tensor_adagrad`.
 */
export class Adagrad extends Optimizer<AdagradHyperparams> {
  /**
   * @param params - tensors or param groups
   * @param opts - hyperparameters (see AdagradHyperparams)
   * @throws LoomValueError for a negative lr, lr_decay, weight_decay, initial_accumulator_value or
   *   eps (torch's messages)
   */
  constructor(params: ParamsInput<AdagradHyperparams>, opts: Partial<AdagradHyperparams> = {}) {
    const d: AdagradHyperparams = {
      lr: opts.lr ?? 1e-2, lr_decay: opts.lr_decay ?? 0, weight_decay: opts.weight_decay ?? 0,
      initial_accumulator_value: opts.initial_accumulator_value ?? 0, eps: opts.eps ?? 1e-10, maximize: opts.maximize ?? false,
      ...(opts.foreach !== undefined ? { foreach: opts.foreach } : {}),
    };
    if (!(d.lr >= 0)) throw new LoomValueError(`[Adagrad] Invalid learning rate: ${d.lr}`);
    if (!(d.lr_decay >= 0)) throw new LoomValueError(`[Adagrad] Invalid lr_decay value: ${d.lr_decay}`);
    if (!(d.weight_decay >= 0)) throw new LoomValueError(`[Adagrad] Invalid weight_decay value: ${d.weight_decay}`);
    if (!(d.initial_accumulator_value >= 0)) throw new LoomValueError(`[Adagrad] Invalid initial_accumulator_value value: ${d.initial_accumulator_value}`);
    if (!(d.eps >= 0)) throw new LoomValueError(`[Adagrad] Invalid epsilon value: ${d.eps}`);
    super(params, d);
    for (const group of this.param_groups) for (const p of group.params) this._init_state(p);
  }

  /** step 0 and the accumulator filled with the constructor's initial_accumulator_value. */
  private _init_state(p: Tensor): void {
    const state = this._state(p);
    state.step = 0;
    state.sum = full_like(p, this.defaults.initial_accumulator_value);
  }

  protected _update_group(group: ParamGroup<AdagradHyperparams>): void {
    const { lr, lr_decay, weight_decay, eps, maximize } = group;
    for (const p of group.params) {
      const g0 = this._grad(p);
      if (!g0) continue;
      // a group added after construction has no state yet (torch would fail on a missing key)
      if (!this.state.get(p)?.sum) this._init_state(p);
      const state = this._state(p);
      const step = (state.step as number) + 1;
      state.step = step;
      // Recorded on pending values in PyTorch's op order and written back (as Adam): one plan.
      const g = g0.deferred(true);
      const param = p.deferred(true);
      let grad: Tensor = maximize ? g.neg() : g;
      if (weight_decay !== 0) grad = grad.add(param, { alpha: weight_decay });
      const clr = lr / (1 + (step - 1) * lr_decay);
      const sum = state.sum as Tensor;
      const s = sum.deferred(true).add(grad.mul(grad)); // addcmul_(g, g, value=1)
      const std = s.sqrt().add(eps);
      sum._write_private(s);
      p._write_private(param.add(grad.div(std), { alpha: -clr })); // addcdiv_(g, std, value=-clr)
    }
  }
}
