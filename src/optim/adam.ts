/**
 * Adam and AdamW (torch.optim.Adam / torch.optim.AdamW, PyTorch 1.13's single-tensor update,
 * in PyTorch's exact operation order so results match to float32 rounding).
 */
import { zeros_like } from "../lazy/creation.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { LoomDtypeError, LoomValueError } from "../tensor/errors.ts";
import { Optimizer, type ParamGroup, type ParamsInput } from "./optimizer.ts";

export interface AdamHyperparams {
  /** Learning rate, per step (default 1e-3). */
  lr: number;
  /** Decay rates (β1, β2) of the first and second moment averages (default [0.9, 0.999]). */
  betas: [number, number];
  /** Added to the denominator, absolute (default 1e-8). */
  eps: number;
  /** Adam: L2 penalty added to the gradient (default 0). AdamW: decoupled decay rate (default 1e-2). */
  weight_decay: number;
  /** Use the running maximum of the second moment (Reddi et al. 2018). */
  amsgrad: boolean;
  /** Maximize the objective instead of minimizing it. */
  maximize: boolean;
  /**
   * torch's multi-tensor (`foreach`) and single-kernel (`fused`) implementations: accepted for
   * porting and kept in the groups when given, with no effect on the result. Loom records every
   * parameter's update into the step's one plan, where the compiler fuses it anyway. As torch,
   * `fused: true` needs floating-point parameters (torch also wants CUDA; Loom runs it anywhere).
   */
  foreach?: boolean | null;
  fused?: boolean | null;
}

function checkHyper(name: string, d: AdamHyperparams): void {
  if (!(d.lr >= 0)) throw new LoomValueError(`[${name}] Invalid learning rate: ${d.lr}`);
  if (!(d.eps >= 0)) throw new LoomValueError(`[${name}] Invalid epsilon value: ${d.eps}`);
  d.betas.forEach((b, i) => {
    if (!(b >= 0 && b < 1)) throw new LoomValueError(`[${name}] Invalid beta parameter at index ${i}: ${b}`);
  });
  if (!(d.weight_decay >= 0)) throw new LoomValueError(`[${name}] Invalid weight_decay value: ${d.weight_decay}`);
}

function withDefaults(opts: Partial<AdamHyperparams>, weight_decay: number): AdamHyperparams {
  return {
    lr: opts.lr ?? 1e-3, betas: [...(opts.betas ?? [0.9, 0.999])] as [number, number], eps: opts.eps ?? 1e-8,
    weight_decay: opts.weight_decay ?? weight_decay, amsgrad: opts.amsgrad ?? false, maximize: opts.maximize ?? false,
    ...(opts.foreach !== undefined ? { foreach: opts.foreach } : {}), ...(opts.fused !== undefined ? { fused: opts.fused } : {}),
  };
}

/**
 * Adam. For each parameter with gradient g, at step t (λ = weight_decay):
 *   g ← -g if maximize;  g ← g + λ p                       (coupled L2, Adam only)
 *   m ← β1 m + (1 - β1) g;  v ← β2 v + (1 - β2) g²
 *   bc1 = 1 - β1^t;  bc2 = 1 - β2^t
 *   denom = √v / √bc2 + eps   (√max(v_max, v) with amsgrad)
 *   p ← p - (lr / bc1) · m / denom
 * State per parameter: `step` (a number; torch 1.13 keeps a 0-d tensor), `exp_avg`,
 * `exp_avg_sq`, and `max_exp_avg_sq` with amsgrad.
 * Source: Kingma & Ba 2015, "Adam"; torch.optim.Adam.
 */
export class Adam extends Optimizer<AdamHyperparams> {
  /** True for AdamW: weight decay scales the parameter instead of entering the gradient. */
  protected readonly decoupled_weight_decay: boolean = false;

  /**
   * @param params - tensors or param groups
   * @param opts - hyperparameters (see AdamHyperparams)
   * @param default_weight_decay - used when opts.weight_decay is unset (AdamW passes 1e-2)
   * @throws LoomValueError for a negative lr, eps or weight_decay, or a beta outside [0, 1)
   * @throws LoomDtypeError for `fused: true` with a parameter that is not floating point (torch)
   */
  constructor(params: ParamsInput<AdamHyperparams>, opts: Partial<AdamHyperparams> = {}, default_weight_decay = 0) {
    const d = withDefaults(opts, default_weight_decay);
    checkHyper(new.target.name, d);
    super(params, d);
    this.param_groups.forEach((g, gi) => g.params.forEach((p, i) => {
      if (g.fused && !p.is_floating_point()) {
        throw new LoomDtypeError(`[${new.target.name}] \`fused=True\` requires all the params to be floating point Tensors, but param ${i} of group ${gi} is ${p.dtype}`);
      }
    }));
  }

  protected _update_group(group: ParamGroup<AdamHyperparams>): void {
    const { lr, eps, weight_decay, amsgrad, maximize } = group;
    const [beta1, beta2] = group.betas;
    const decoupled = this.decoupled_weight_decay;
    for (const p of group.params) {
      const g0 = this._grad(p);
      if (!g0) continue;
      const state = this._state(p);
      if (state.step === undefined) {
        state.step = 0;
        state.exp_avg = zeros_like(p);
        state.exp_avg_sq = zeros_like(p);
        if (amsgrad) state.max_exp_avg_sq = zeros_like(p);
      }
      const exp_avg = state.exp_avg as Tensor;
      const exp_avg_sq = state.exp_avg_sq as Tensor;
      const step = (state.step as number) + 1;
      state.step = step;
      // The update is recorded on pending values (deferred(): nothing runs) in PyTorch's op order
      // and written back with copy_: one plan for every parameter, fused like any other graph.
      const g = g0.deferred(true);
      let param = p.deferred(true);
      let grad: Tensor = maximize ? g.neg() : g;
      if (decoupled) param = param.mul(1 - lr * weight_decay);
      else if (weight_decay !== 0) grad = grad.add(param, { alpha: weight_decay });
      const m = exp_avg.deferred(true).mul(beta1).add(grad, { alpha: 1 - beta1 });
      const v = exp_avg_sq.deferred(true).mul(beta2).add(grad.mul(grad), { alpha: 1 - beta2 }); // addcmul_(g, g, value=1-β2)
      const bias_correction1 = 1 - beta1 ** step;
      const bias_correction2 = 1 - beta2 ** step;
      const step_size = lr / bias_correction1;
      const bias_correction2_sqrt = Math.sqrt(bias_correction2);
      let second = v;
      if (amsgrad) {
        let mx = state.max_exp_avg_sq as Tensor | undefined;
        if (!mx) { // amsgrad switched on after the first step (e.g. by load_state_dict)
          mx = zeros_like(p);
          state.max_exp_avg_sq = mx;
        }
        second = mx.deferred(true).maximum(v);
        mx._write_private(second);
      }
      const denom = second.sqrt().div(bias_correction2_sqrt).add(eps);
      param = param.add(m.div(denom), { alpha: -step_size }); // addcdiv_(m, denom, value=-step_size)
      // private writes: the values written are the optimizer's own (no copy-on-write is kept)
      exp_avg._write_private(m);
      exp_avg_sq._write_private(v);
      p._write_private(param);
    }
  }
}

/**
 * AdamW: Adam with decoupled weight decay, p ← p · (1 - lr·λ) before the Adam step (the decay is
 * not part of the gradient, so it is not rescaled by the adaptive denominator). Default
 * weight_decay 1e-2. Same state as Adam.
 * Source: Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization"; torch.optim.AdamW.
 */
export class AdamW extends Adam {
  protected override readonly decoupled_weight_decay: boolean = true;

  /**
   * @throws LoomValueError for a negative lr, eps or weight_decay, or a beta outside [0, 1)
   * @throws LoomDtypeError for `fused: true` with a parameter that is not floating point
   */
  constructor(params: ParamsInput<AdamHyperparams>, opts: Partial<AdamHyperparams> = {}) {
    super(params, opts, 1e-2);
  }
}
