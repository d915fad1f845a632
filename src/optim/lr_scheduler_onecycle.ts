/**
 * OneCycleLR (torch.optim.lr_scheduler.OneCycleLR, PyTorch 1.13 semantics): the 1cycle policy,
 * stepped once per batch. The lr rises from max_lr / div_factor to max_lr over the first pct_start
 * of the steps, then anneals to initial_lr / final_div_factor; momentum (or Adam's β1) moves the
 * opposite way between max_momentum and base_momentum.
 */
import { LoomValueError } from "../tensor/errors.ts";
import type { Optimizer, ParamGroup } from "./optimizer.ts";
import { LRScheduler } from "./lr_scheduler.ts";

/** Group keys a phase anneals between (torch stores these names in the groups). */
type LrKey = "initial_lr" | "max_lr" | "min_lr";
type MomentumKey = "max_momentum" | "base_momentum";

/** One phase: annealing from start to end until step `end_step` (a float, as torch's). */
export interface OneCyclePhase {
  end_step: number;
  start_lr: LrKey;
  end_lr: LrKey;
  start_momentum: MomentumKey;
  end_momentum: MomentumKey;
}

export interface OneCycleLROptions {
  /** Number of steps in the cycle; or give epochs and steps_per_epoch. */
  total_steps?: number;
  epochs?: number;
  steps_per_epoch?: number;
  /** Fraction of the cycle spent increasing the lr (default 0.3). */
  pct_start?: number;
  /** "cos" (default) or "linear". */
  anneal_strategy?: "cos" | "linear";
  /** Cycle momentum (SGD/RMSprop `momentum`, Adam-family `betas[0]`) inversely to the lr (default true). */
  cycle_momentum?: boolean;
  /** Lowest momentum, reached at max_lr (default 0.85); one value or one per group. */
  base_momentum?: number | number[];
  /** Highest momentum, at the start and end of the cycle (default 0.95); one value or one per group. */
  max_momentum?: number | number[];
  /** initial_lr = max_lr / div_factor (default 25). */
  div_factor?: number;
  /** min_lr = initial_lr / final_div_factor (default 1e4). */
  final_div_factor?: number;
  /** Third phase: back to initial_lr at 2·pct_start, then down to min_lr (fast.ai's form). */
  three_phase?: boolean;
  /** Index of the last step taken, to resume (default -1: start fresh). */
  last_epoch?: number;
}

/** One value per param group: a list of the right length or one value repeated (torch _format_param). */
function perGroup(name: string, groups: number, v: number | number[]): number[] {
  if (!Array.isArray(v)) return Array.from({ length: groups }, () => v);
  if (v.length !== groups) throw new LoomValueError(`[OneCycleLR] expected ${groups} values for ${name}, got ${v.length}`);
  return [...v];
}

function positiveInt(name: string, v: number | undefined): number {
  if (v === undefined || !Number.isInteger(v) || v <= 0) throw new LoomValueError(`[OneCycleLR] Expected positive integer ${name}, but got ${v}`);
  return v;
}

function phases(total: number, pct_start: number, three_phase: boolean): OneCyclePhase[] {
  const up: OneCyclePhase = { end_step: pct_start * total - 1, start_lr: "initial_lr", end_lr: "max_lr", start_momentum: "max_momentum", end_momentum: "base_momentum" };
  if (!three_phase) {
    return [up, { end_step: total - 1, start_lr: "max_lr", end_lr: "min_lr", start_momentum: "base_momentum", end_momentum: "max_momentum" }];
  }
  return [
    up,
    { end_step: 2 * pct_start * total - 2, start_lr: "max_lr", end_lr: "initial_lr", start_momentum: "base_momentum", end_momentum: "max_momentum" },
    { end_step: total - 1, start_lr: "initial_lr", end_lr: "min_lr", start_momentum: "max_momentum", end_momentum: "max_momentum" },
  ];
}

type CycleGroup = ParamGroup & Record<string, unknown> & { betas?: number[]; momentum?: number };

/**
 * The 1cycle learning-rate policy. At step t, in the phase [s, e] holding t (the last phase also
 * past its end), with pct = (t - s) / (e - s):
 *   lr = anneal(start_lr, end_lr, pct),  momentum = anneal(start_momentum, end_momentum, pct)
 *   cos: end + (start - end)/2 · (1 + cos(π·pct));  linear: start + (end - start)·pct
 * Two phases: initial_lr → max_lr until pct_start·N - 1, then → min_lr at N - 1. Three phases:
 * initial_lr → max_lr → initial_lr (at 2·pct_start·N - 2) → min_lr. Each group gets `initial_lr`,
 * `max_lr`, `min_lr` (and `max_momentum`, `base_momentum`) keys, as in torch. Stepping more than
 * total_steps times raises.
 * Source: Smith & Topin 2018, "Super-Convergence"; torch.optim.lr_scheduler.OneCycleLR.
 * @throws LoomValueError for no total_steps nor epochs·steps_per_epoch, a non-positive or
 *   non-integer count, pct_start outside [0, 1], an unknown anneal_strategy, a per-group list of
 *   the wrong length, cycle_momentum with an optimizer that has neither momentum nor betas,
 *   resuming (last_epoch ≥ 0) without the group keys a first OneCycleLR wrote, or a step past
 *   total_steps
 */
export class OneCycleLR extends LRScheduler {
  readonly total_steps: number;
  readonly _schedule_phases: OneCyclePhase[];
  readonly anneal_strategy: "cos" | "linear";
  readonly cycle_momentum: boolean;
  /** True for Adam-family optimizers: momentum is betas[0]. */
  readonly use_beta1: boolean;

  constructor(optimizer: Optimizer<any>, max_lr: number | number[], opts: OneCycleLROptions = {}) {
    const { pct_start = 0.3, anneal_strategy = "cos", cycle_momentum = true, div_factor = 25, final_div_factor = 1e4 } = opts;
    const last_epoch = opts.last_epoch ?? -1;
    let total: number;
    if (opts.total_steps === undefined && opts.epochs === undefined && opts.steps_per_epoch === undefined) {
      throw new LoomValueError("[OneCycleLR] You must define either total_steps OR (epochs AND steps_per_epoch)");
    } else if (opts.total_steps !== undefined) {
      total = positiveInt("total_steps", opts.total_steps);
    } else {
      total = positiveInt("epochs", opts.epochs) * positiveInt("steps_per_epoch", opts.steps_per_epoch);
    }
    if (!(pct_start >= 0 && pct_start <= 1)) throw new LoomValueError(`[OneCycleLR] Expected float between 0 and 1 pct_start, but got ${pct_start}`);
    if (anneal_strategy !== "cos" && anneal_strategy !== "linear") {
      throw new LoomValueError(`[OneCycleLR] anneal_strategy must by one of 'cos' or 'linear', instead got ${anneal_strategy}`);
    }
    const groups = optimizer.param_groups as CycleGroup[];
    const max_lrs = perGroup("max_lr", groups.length, max_lr);
    if (last_epoch === -1) {
      groups.forEach((g, i) => {
        g.initial_lr = max_lrs[i]! / div_factor;
        g.max_lr = max_lrs[i]!;
        g.min_lr = g.initial_lr / final_div_factor;
      });
    }
    const use_beta1 = "betas" in optimizer.defaults;
    if (cycle_momentum) {
      if (!("momentum" in optimizer.defaults) && !use_beta1) {
        throw new LoomValueError(`[OneCycleLR] optimizer must support momentum with \`cycle_momentum\` option enabled (${optimizer.constructor.name} has neither momentum nor betas)`);
      }
      const max_m = perGroup("max_momentum", groups.length, opts.max_momentum ?? 0.95);
      const base_m = perGroup("base_momentum", groups.length, opts.base_momentum ?? 0.85);
      if (last_epoch === -1) {
        groups.forEach((g, i) => {
          if (use_beta1) g.betas = [max_m[i]!, ...g.betas!.slice(1)];
          else g.momentum = max_m[i]!;
          g.max_momentum = max_m[i]!;
          g.base_momentum = base_m[i]!;
        });
      }
    }
    if (last_epoch !== -1) {
      // resuming: the keys written by the first OneCycleLR must be there (torch: KeyError)
      const need = cycle_momentum ? ["max_lr", "min_lr", "max_momentum", "base_momentum"] : ["max_lr", "min_lr"];
      groups.forEach((g, i) => {
        const missing = need.filter((k) => typeof g[k] !== "number");
        if (missing.length) throw new LoomValueError(`[OneCycleLR] resuming (last_epoch ${last_epoch}) needs ${missing.join(", ")} in param_groups[${i}] (set by the OneCycleLR that started the cycle)`);
      });
    }
    super(optimizer, last_epoch);
    this.total_steps = total;
    this._schedule_phases = phases(total, pct_start, opts.three_phase ?? false);
    this.anneal_strategy = anneal_strategy;
    this.cycle_momentum = cycle_momentum;
    this.use_beta1 = use_beta1;
    this._initial_step();
  }

  /** Anneal from start (pct 0) to end (pct 1) by the chosen strategy (torch _annealing_cos/_linear). */
  anneal_func(start: number, end: number, pct: number): number {
    if (this.anneal_strategy === "cos") return end + (start - end) / 2.0 * (Math.cos(Math.PI * pct) + 1);
    return (end - start) * pct + start;
  }

  /** The lrs for last_epoch; also sets each group's momentum (or betas[0]) when cycling it. */
  get_lr(): number[] {
    const step_num = this.last_epoch;
    if (step_num > this.total_steps) {
      throw new LoomValueError(`[OneCycleLR] Tried to step ${step_num + 1} times. The specified number of total steps is ${this.total_steps}`);
    }
    const phs = this._schedule_phases;
    return (this._groups as CycleGroup[]).map((g) => {
      let start_step = 0;
      for (let i = 0; i < phs.length; i++) {
        const ph = phs[i]!;
        if (step_num <= ph.end_step || i === phs.length - 1) {
          const pct = (step_num - start_step) / (ph.end_step - start_step);
          const lr = this.anneal_func(g[ph.start_lr] as number, g[ph.end_lr] as number, pct);
          if (this.cycle_momentum) {
            const m = this.anneal_func(g[ph.start_momentum] as number, g[ph.end_momentum] as number, pct);
            if (this.use_beta1) g.betas = [m, ...g.betas!.slice(1)];
            else g.momentum = m;
          }
          return lr;
        }
        start_step = ph.end_step;
      }
      throw new Error("unreachable: the last phase always matches");
    });
  }
}
