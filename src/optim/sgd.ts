/**
 * Stochastic gradient descent with momentum, dampening, weight decay and Nesterov momentum
 * (torch.optim.SGD, PyTorch 1.13's single-tensor update).
 */
import type { Tensor } from "../lazy/tensor.ts";
import { LoomValueError } from "../tensor/errors.ts";
import { Optimizer, clone_tensor, type ParamGroup, type ParamsInput } from "./optimizer.ts";

export interface SGDHyperparams {
  /** Learning rate, per step (default 1e-3, as torch 2.x). */
  lr: number;
  /** Momentum factor μ (default 0: plain SGD). */
  momentum: number;
  /** Dampening τ of the gradient added to the momentum buffer (default 0). */
  dampening: number;
  /** L2 penalty λ added to the gradient (default 0). */
  weight_decay: number;
  /** Nesterov momentum (needs momentum > 0 and dampening 0). */
  nesterov: boolean;
  /** Maximize the objective instead of minimizing it. */
  maximize: boolean;
}

/**
 * For each parameter with a gradient g (PyTorch's formulation, which differs from Sutskever
 * et al. in where lr enters):
 *   g ← -g if maximize;  g ← g + λ p;
 *   b ← g (first step) | μ b + (1 - τ) g;  g ← g + μ b if nesterov else b   (when μ ≠ 0)
 *   p ← p - lr · g
 * State per parameter: `momentum_buffer` (a tensor, or null while momentum is 0).
 * Source: torch.optim.SGD; Sutskever et al. 2013 (momentum/Nesterov).
 */
export class SGD extends Optimizer<SGDHyperparams> {
  /**
   * @throws LoomValueError for a negative lr, momentum or weight_decay, or Nesterov without
   *   momentum / with dampening
   */
  constructor(params: ParamsInput<SGDHyperparams>, opts: Partial<SGDHyperparams> = {}) {
    const d: SGDHyperparams = {
      lr: opts.lr ?? 1e-3, momentum: opts.momentum ?? 0, dampening: opts.dampening ?? 0,
      weight_decay: opts.weight_decay ?? 0, nesterov: opts.nesterov ?? false, maximize: opts.maximize ?? false,
    };
    if (!(d.lr >= 0)) throw new LoomValueError(`[SGD] Invalid learning rate: ${d.lr}`);
    if (!(d.momentum >= 0)) throw new LoomValueError(`[SGD] Invalid momentum value: ${d.momentum}`);
    if (!(d.weight_decay >= 0)) throw new LoomValueError(`[SGD] Invalid weight_decay value: ${d.weight_decay}`);
    if (d.nesterov && (d.momentum <= 0 || d.dampening !== 0)) throw new LoomValueError("[SGD] Nesterov momentum requires a momentum and zero dampening");
    super(params, d);
  }

  protected _update_group(group: ParamGroup<SGDHyperparams>): void {
    const { lr, momentum, dampening, weight_decay, nesterov, maximize } = group;
    for (const p of group.params) {
      const grad = this._grad(p);
      if (!grad) continue;
      let d_p: Tensor = maximize ? grad.neg() : grad;
      if (weight_decay !== 0) d_p = d_p.add(p, { alpha: weight_decay });
      const state = this._state(p);
      if (momentum !== 0) {
        let buf = state.momentum_buffer as Tensor | null | undefined;
        if (!buf) {
          buf = clone_tensor(d_p);
          state.momentum_buffer = buf;
        } else {
          buf.mul_(momentum).add_(d_p, { alpha: 1 - dampening });
        }
        d_p = nesterov ? d_p.add(buf, { alpha: momentum }) : buf;
      } else if (!("momentum_buffer" in state)) {
        state.momentum_buffer = null;
      }
      p.add_(d_p, { alpha: -lr });
    }
  }
}
