/**
 * RMSprop (torch.optim.RMSprop, PyTorch 1.13's single-tensor update, in PyTorch's operation order
 * so results match to float32 rounding).
 */
import { zeros_like } from "../lazy/creation.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { LoomValueError } from "../tensor/errors.ts";
import { Optimizer, type ParamGroup, type ParamsInput } from "./optimizer.ts";

export interface RMSpropHyperparams {
  /** Learning rate, per step (default 1e-2). */
  lr: number;
  /** Smoothing constant α of the running average of g² (default 0.99). */
  alpha: number;
  /** Added to the denominator √v, absolute (default 1e-8). */
  eps: number;
  /** L2 penalty λ added to the gradient (default 0). */
  weight_decay: number;
  /** Momentum factor μ of the step buffer (default 0: no buffer). */
  momentum: number;
  /** Divide by an estimate of the variance (v - ḡ²) instead of the raw second moment v. */
  centered: boolean;
  /** Maximize the objective instead of minimizing it. */
  maximize: boolean;
  /**
   * torch's choice of the multi-tensor kernel; accepted for porting, no effect on the result
   * (Loom records every parameter's update into one plan already).
   */
  foreach?: boolean | null;
}

/**
 * RMSprop. For each parameter with gradient g (λ = weight_decay):
 *   g ← -g if maximize;  g ← g + λ p
 *   v ← α v + (1 - α) g²
 *   ḡ ← α ḡ + (1 - α) g;  avg = √(v - ḡ²) + eps        (centered)
 *   avg = √v + eps                                      (otherwise)
 *   b ← μ b + g / avg;  p ← p - lr · b                  (momentum > 0)
 *   p ← p - lr · g / avg                                (otherwise)
 * State per parameter (torch's keys): `step` (a number), `square_avg`, `momentum_buffer` when
 * momentum > 0, `grad_avg` when centered.
 * Source: Hinton, Lecture 6e of "Neural Networks for Machine Learning" (2012); Graves 2013
 * (centered variant); torch/optim/rmsprop.py `_single_tensor_rmsprop`.
 */
export class RMSprop extends Optimizer<RMSpropHyperparams> {
  /**
   * @param params - tensors or param groups
   * @param opts - hyperparameters (see RMSpropHyperparams)
   * @throws LoomValueError for a negative lr, eps, momentum, weight_decay or alpha (torch's messages)
   */
  constructor(params: ParamsInput<RMSpropHyperparams>, opts: Partial<RMSpropHyperparams> = {}) {
    const d: RMSpropHyperparams = {
      lr: opts.lr ?? 1e-2, alpha: opts.alpha ?? 0.99, eps: opts.eps ?? 1e-8, weight_decay: opts.weight_decay ?? 0,
      momentum: opts.momentum ?? 0, centered: opts.centered ?? false, maximize: opts.maximize ?? false,
      ...(opts.foreach !== undefined ? { foreach: opts.foreach } : {}),
    };
    if (!(d.lr >= 0)) throw new LoomValueError(`[RMSprop] Invalid learning rate: ${d.lr}`);
    if (!(d.eps >= 0)) throw new LoomValueError(`[RMSprop] Invalid epsilon value: ${d.eps}`);
    if (!(d.momentum >= 0)) throw new LoomValueError(`[RMSprop] Invalid momentum value: ${d.momentum}`);
    if (!(d.weight_decay >= 0)) throw new LoomValueError(`[RMSprop] Invalid weight_decay value: ${d.weight_decay}`);
    if (!(d.alpha >= 0)) throw new LoomValueError(`[RMSprop] Invalid alpha value: ${d.alpha}`);
    super(params, d);
  }

  protected _update_group(group: ParamGroup<RMSpropHyperparams>): void {
    const { lr, alpha, eps, weight_decay, momentum, centered, maximize } = group;
    for (const p of group.params) {
      const g0 = this._grad(p);
      if (!g0) continue;
      const state = this._state(p);
      state.step = ((state.step as number | undefined) ?? 0) + 1;
      state.square_avg ??= zeros_like(p);
      // made when first needed, so options switched on after the first step work (torch would
      // fail on a missing key)
      if (momentum > 0) state.momentum_buffer ??= zeros_like(p);
      if (centered) state.grad_avg ??= zeros_like(p);
      // Recorded on pending values in PyTorch's op order and written back (as Adam): one plan.
      const g = g0.deferred(true);
      const param = p.deferred(true);
      let grad: Tensor = maximize ? g.neg() : g;
      if (weight_decay !== 0) grad = grad.add(param, { alpha: weight_decay });
      const square_avg = state.square_avg as Tensor;
      const v = square_avg.deferred(true).mul(alpha).add(grad.mul(grad), { alpha: 1 - alpha }); // addcmul_(g, g, value=1-α)
      let avg: Tensor;
      if (centered) {
        const grad_avg = state.grad_avg as Tensor;
        const gbar = grad_avg.deferred(true).mul(alpha).add(grad, { alpha: 1 - alpha });
        avg = v.sub(gbar.mul(gbar)).sqrt(); // square_avg.addcmul(ḡ, ḡ, value=-1).sqrt_()
        grad_avg._write_private(gbar);
      } else {
        avg = v.sqrt();
      }
      avg = avg.add(eps);
      if (momentum > 0) {
        const buf = state.momentum_buffer as Tensor;
        const b = buf.deferred(true).mul(momentum).add(grad.div(avg)); // addcdiv_(g, avg)
        buf._write_private(b);
        p._write_private(param.add(b, { alpha: -lr }));
      } else {
        p._write_private(param.add(grad.div(avg), { alpha: -lr })); // addcdiv_(g, avg, value=-lr)
      }
      square_avg._write_private(v);
    }
  }
}
