/**
 * Learning-rate schedulers (torch.optim.lr_scheduler, PyTorch 1.13 semantics): each `step()`
 * advances `last_epoch` and writes new `lr`s into the optimizer's param groups, using torch's
 * chainable (recursive) formulas so the values match torch's to the last bit of float64 where
 * the arithmetic is the same. Call `optimizer.step()` before `scheduler.step()`.
 *
 * Subclasses set their fields, then call `this._initial_step()` at the end of their constructor
 * (torch sets fields before `super().__init__`, which TypeScript does not allow).
 */
import { LoomValueError } from "../tensor/errors.ts";
import type { Optimizer, ParamGroup } from "./optimizer.ts";

/** A scheduler's state: its own fields except the optimizer and functions (torch: __dict__). */
export type SchedulerStateDict = Record<string, unknown>;

function copyValue(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(copyValue);
  if (v !== null && typeof v === "object" && Object.getPrototypeOf(v) === Object.prototype) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, copyValue(x)]));
  }
  return v;
}

/**
 * What every scheduler has (LRScheduler and ReduceLROnPlateau): the lrs of its last step, and a
 * state dict of its own fields.
 */
export abstract class SchedulerBase {
  abstract readonly optimizer: Optimizer<any>;
  _last_lr: number[] = [];

  /** The lrs set by the last step, one per group. */
  get_last_lr(): number[] {
    return [...this._last_lr];
  }

  /** Every field except the optimizer and functions, deep-copied (torch: __dict__). */
  state_dict(): SchedulerStateDict {
    const out: SchedulerStateDict = {};
    for (const [k, v] of Object.entries(this)) {
      if (k === "optimizer" || typeof v === "function") continue;
      out[k] = copyValue(v);
    }
    return out;
  }

  /** Restore fields saved by state_dict (torch: __dict__.update). */
  load_state_dict(state_dict: SchedulerStateDict): void {
    for (const [k, v] of Object.entries(state_dict)) {
      if (k === "optimizer") continue;
      (this as unknown as Record<string, unknown>)[k] = copyValue(v);
    }
  }
}

export abstract class LRScheduler extends SchedulerBase {
  readonly optimizer: Optimizer<any>;
  /** The groups' `initial_lr`s. */
  base_lrs: number[];
  /** Index of the last step taken (-1 before the first). */
  last_epoch: number;
  _step_count = 0;

  /**
   * @param last_epoch - -1 to start fresh (records each group's lr as `initial_lr`); otherwise
   *   resume, which needs `initial_lr` in every group
   * @throws LoomValueError when resuming without initial_lr
   */
  constructor(optimizer: Optimizer<any>, last_epoch = -1) {
    super();
    this.optimizer = optimizer;
    const groups = optimizer.param_groups as ParamGroup[];
    if (last_epoch === -1) {
      for (const g of groups) if (g.initial_lr === undefined) g.initial_lr = g.lr;
    } else {
      groups.forEach((g, i) => {
        if (g.initial_lr === undefined) throw new LoomValueError(`[${new.target.name}] param 'initial_lr' is not specified in param_groups[${i}] when resuming an optimizer`);
      });
    }
    this.base_lrs = groups.map((g) => g.initial_lr!);
    this.last_epoch = last_epoch;
  }

  /** Reset the step count and take the first step (lr for epoch 0). */
  _initial_step(): void {
    this._step_count = 0;
    this.step();
  }

  protected get _groups(): ParamGroup[] {
    return this.optimizer.param_groups as ParamGroup[];
  }

  /** The lrs for `last_epoch`, chainable form (may read the groups' current lrs). */
  abstract get_lr(): number[];
  /** The lrs for `last_epoch` from base_lrs alone, where a closed form exists (used by step(epoch)). */
  _get_closed_form_lr?(): number[];

  /**
   * Advance one epoch/step and set the groups' lrs. `step(epoch)` jumps to `epoch` using the
   * closed form when the scheduler has one (deprecated in torch, used by SequentialLR).
   */
  step(epoch?: number): void {
    this._step_count += 1;
    let values: number[];
    if (epoch === undefined) {
      this.last_epoch += 1;
      values = this.get_lr();
    } else {
      this.last_epoch = epoch;
      values = this._get_closed_form_lr ? this._get_closed_form_lr() : this.get_lr();
    }
    this._groups.forEach((g, i) => { g.lr = values[i]!; });
    this._last_lr = this._groups.map((g) => g.lr);
  }

}

/** lr = base_lr · lr_lambda(epoch), one function for all groups or one per group (torch LambdaLR). */
export class LambdaLR extends LRScheduler {
  readonly lr_lambdas: ((epoch: number) => number)[];

  /** @throws LoomValueError when a list of functions does not have one per group */
  constructor(optimizer: Optimizer<any>, lr_lambda: ((epoch: number) => number) | ((epoch: number) => number)[], last_epoch = -1) {
    super(optimizer, last_epoch);
    const n = optimizer.param_groups.length;
    if (Array.isArray(lr_lambda)) {
      if (lr_lambda.length !== n) throw new LoomValueError(`[LambdaLR] Expected ${n} lr_lambdas, but got ${lr_lambda.length}`);
      this.lr_lambdas = [...lr_lambda];
    } else {
      this.lr_lambdas = Array.from({ length: n }, () => lr_lambda);
    }
    this._initial_step();
  }
  get_lr(): number[] {
    return this.base_lrs.map((b, i) => b * this.lr_lambdas[i]!(this.last_epoch));
  }
  /** As torch: the functions are not saved (lr_lambdas: null per group). */
  override state_dict(): SchedulerStateDict {
    return { ...super.state_dict(), lr_lambdas: this.lr_lambdas.map(() => null) };
  }
  override load_state_dict(state_dict: SchedulerStateDict): void {
    const { lr_lambdas: _ignored, ...rest } = state_dict;
    super.load_state_dict(rest);
  }
}

/** lr = base_lr · gamma^⌊epoch / step_size⌋ (torch StepLR). */
export class StepLR extends LRScheduler {
  readonly step_size: number;
  readonly gamma: number;
  /** @throws LoomValueError unless step_size is a positive integer and gamma a number */
  constructor(optimizer: Optimizer<any>, step_size: number, gamma = 0.1, last_epoch = -1) {
    // an options object here would make every step a no-op (x % {} is NaN): refuse it
    if (!Number.isInteger(step_size) || step_size <= 0) throw new LoomValueError(`[StepLR] step_size must be a positive integer, got ${typeof step_size === "number" ? step_size : typeof step_size}`);
    if (typeof gamma !== "number") throw new LoomValueError(`[StepLR] gamma must be a number, got ${typeof gamma}`);
    super(optimizer, last_epoch);
    this.step_size = step_size;
    this.gamma = gamma;
    this._initial_step();
  }
  get_lr(): number[] {
    if (this.last_epoch === 0 || this.last_epoch % this.step_size !== 0) return this._groups.map((g) => g.lr);
    return this._groups.map((g) => g.lr * this.gamma);
  }
  override _get_closed_form_lr(): number[] {
    return this.base_lrs.map((b) => b * this.gamma ** Math.floor(this.last_epoch / this.step_size));
  }
}

/**
 * lr = base_lr · gamma^(number of milestones ≤ epoch): decay by gamma at each milestone epoch, a
 * milestone given twice decays twice (torch MultiStepLR; torch keeps a Counter, Loom the sorted
 * list with repeats).
 * @throws LoomValueError when a milestone is not a non-negative integer (it would never be reached)
 */
export class MultiStepLR extends LRScheduler {
  readonly milestones: number[];
  readonly gamma: number;
  constructor(optimizer: Optimizer<any>, milestones: Iterable<number>, gamma = 0.1, last_epoch = -1) {
    super(optimizer, last_epoch);
    this.milestones = [...milestones].sort((a, b) => a - b);
    for (const m of this.milestones) {
      if (!Number.isInteger(m) || m < 0) throw new LoomValueError(`[MultiStepLR] milestones must be non-negative integer epochs, but got ${m}`);
    }
    this.gamma = gamma;
    this._initial_step();
  }
  get_lr(): number[] {
    const hits = this.milestones.filter((m) => m === this.last_epoch).length;
    if (hits === 0) return this._groups.map((g) => g.lr);
    return this._groups.map((g) => g.lr * this.gamma ** hits);
  }
  override _get_closed_form_lr(): number[] {
    const passed = this.milestones.filter((m) => m <= this.last_epoch).length; // bisect_right
    return this.base_lrs.map((b) => b * this.gamma ** passed);
  }
}

/** lr = base_lr · gamma^epoch, computed as lr ← lr · gamma each step (torch ExponentialLR). */
export class ExponentialLR extends LRScheduler {
  readonly gamma: number;
  constructor(optimizer: Optimizer<any>, gamma: number, last_epoch = -1) {
    super(optimizer, last_epoch);
    this.gamma = gamma;
    this._initial_step();
  }
  get_lr(): number[] {
    if (this.last_epoch === 0) return this._groups.map((g) => g.lr);
    return this._groups.map((g) => g.lr * this.gamma);
  }
  override _get_closed_form_lr(): number[] {
    return this.base_lrs.map((b) => b * this.gamma ** this.last_epoch);
  }
}

/**
 * Cosine annealing from base_lr to eta_min over T_max epochs (SGDR without restarts):
 * lr_t = eta_min + (base_lr - eta_min)(1 + cos(π t / T_max)) / 2, computed recursively as torch.
 * Source: Loshchilov & Hutter 2017, "SGDR"; torch CosineAnnealingLR.
 */
export class CosineAnnealingLR extends LRScheduler {
  readonly T_max: number;
  readonly eta_min: number;
  constructor(optimizer: Optimizer<any>, T_max: number, eta_min = 0, last_epoch = -1) {
    super(optimizer, last_epoch);
    this.T_max = T_max;
    this.eta_min = eta_min;
    this._initial_step();
  }
  get_lr(): number[] {
    const { T_max, eta_min, last_epoch: t } = this;
    const groups = this._groups;
    if (t === 0) return groups.map((g) => g.lr);
    if (this._step_count === 1 && t > 0) {
      return this.base_lrs.map((b) => eta_min + (b - eta_min) * (1 + Math.cos((t * Math.PI) / T_max)) / 2);
    }
    const m = 2 * T_max;
    if ((((t - 1 - T_max) % m) + m) % m === 0) { // Python's non-negative modulo
      return groups.map((g, i) => g.lr + (this.base_lrs[i]! - eta_min) * (1 - Math.cos(Math.PI / T_max)) / 2);
    }
    return groups.map((g) =>
      (1 + Math.cos((Math.PI * t) / T_max)) / (1 + Math.cos((Math.PI * (t - 1)) / T_max)) * (g.lr - eta_min) + eta_min);
  }
  override _get_closed_form_lr(): number[] {
    return this.base_lrs.map((b) => this.eta_min + (b - this.eta_min) * (1 + Math.cos((Math.PI * this.last_epoch) / this.T_max)) / 2);
  }
}

/**
 * Multiply the lr by a factor going linearly from start_factor to end_factor over total_iters
 * steps, constant afterwards (torch LinearLR; a common warmup).
 */
export class LinearLR extends LRScheduler {
  readonly start_factor: number;
  readonly end_factor: number;
  readonly total_iters: number;
  /** @throws LoomValueError unless both factors are in [0, 1] */
  constructor(optimizer: Optimizer<any>, opts: { start_factor?: number; end_factor?: number; total_iters?: number; last_epoch?: number } = {}) {
    super(optimizer, opts.last_epoch ?? -1);
    this.start_factor = opts.start_factor ?? 1 / 3;
    this.end_factor = opts.end_factor ?? 1;
    this.total_iters = opts.total_iters ?? 5;
    if (this.start_factor > 1 || this.start_factor < 0) throw new LoomValueError("[LinearLR] Starting multiplicative factor expected to be between 0 and 1.");
    if (this.end_factor > 1 || this.end_factor < 0) throw new LoomValueError("[LinearLR] Ending multiplicative factor expected to be between 0 and 1.");
    this._initial_step();
  }
  get_lr(): number[] {
    const { start_factor: s, end_factor: e, total_iters: n, last_epoch: t } = this;
    if (t === 0) return this._groups.map((g) => g.lr * s);
    if (t > n) return this._groups.map((g) => g.lr);
    return this._groups.map((g) => g.lr * (1 + (e - s) / (n * s + (t - 1) * (e - s))));
  }
  override _get_closed_form_lr(): number[] {
    const { start_factor: s, end_factor: e, total_iters: n, last_epoch: t } = this;
    return this.base_lrs.map((b) => b * (s + ((e - s) * Math.min(n, t)) / n));
  }
}

/**
 * Run `schedulers` one after another, switching at each of `milestones` (epoch numbers); the
 * scheduler taking over starts from its epoch 0 (torch SequentialLR), e.g. LinearLR warmup then
 * CosineAnnealingLR.
 * @throws LoomValueError when a scheduler belongs to another optimizer or milestones.length is
 *   not schedulers.length - 1
 */
export class SequentialLR extends LRScheduler {
  readonly _schedulers: LRScheduler[];
  readonly _milestones: number[];

  constructor(optimizer: Optimizer<any>, schedulers: LRScheduler[], milestones: number[], last_epoch = -1) {
    super(optimizer, -1);
    schedulers.forEach((s, i) => {
      if (s.optimizer !== optimizer) {
        throw new LoomValueError(`[SequentialLR] Sequential Schedulers expects all schedulers to belong to the same optimizer, but got schedulers at index ${i} to be different than the optimizer passed in.`);
      }
    });
    if (milestones.length !== schedulers.length - 1) {
      throw new LoomValueError(`[SequentialLR] Sequential Schedulers expects number of schedulers provided to be one more than the number of milestone points, but got number of schedulers ${schedulers.length} and the number of milestones to be equal to ${milestones.length}`);
    }
    this._schedulers = schedulers;
    this._milestones = [...milestones];
    this.last_epoch = last_epoch + 1;
    // Reset lrs to their initial values and undo the first step the schedulers took on creation.
    for (const g of this._groups) g.lr = g.initial_lr!;
    for (const s of schedulers) s.last_epoch -= 1;
    schedulers[0]!._initial_step();
    this._last_lr = schedulers[0]!.get_last_lr();
  }

  get_lr(): number[] {
    return this._groups.map((g) => g.lr);
  }

  override step(): void {
    this.last_epoch += 1;
    let idx = 0; // bisect_right(milestones, last_epoch)
    while (idx < this._milestones.length && this._milestones[idx]! <= this.last_epoch) idx++;
    const s = this._schedulers[idx]!;
    if (idx > 0 && this._milestones[idx - 1] === this.last_epoch) s.step(0);
    else s.step();
    this._last_lr = s.get_last_lr();
  }

  /** Own fields plus each wrapped scheduler's state dict. */
  override state_dict(): SchedulerStateDict {
    const { _schedulers: _s, ...rest } = super.state_dict();
    return { ...rest, _schedulers: this._schedulers.map((s) => s.state_dict()) };
  }
  override load_state_dict(state_dict: SchedulerStateDict): void {
    const { _schedulers, ...rest } = state_dict;
    super.load_state_dict(rest);
    (_schedulers as SchedulerStateDict[]).forEach((sd, i) => this._schedulers[i]!.load_state_dict(sd));
  }
}

/**
 * Linear warmup from 0 to the base lr over num_warmup_steps, then cosine decay to 0 at
 * num_training_steps (num_cycles 0.5 = half a cosine):
 *   f(t) = t / max(1, W)                                   for t < W
 *   f(t) = max(0, (1 + cos(2π · num_cycles · p)) / 2),  p = (t - W) / max(1, N - W)
 * Source: Hugging Face transformers.get_cosine_schedule_with_warmup.
 */
export function get_cosine_schedule_with_warmup(
  optimizer: Optimizer<any>, num_warmup_steps: number, num_training_steps: number, num_cycles = 0.5, last_epoch = -1,
): LambdaLR {
  const lr_lambda = (step: number): number => {
    if (step < num_warmup_steps) return step / Math.max(1, num_warmup_steps);
    const progress = (step - num_warmup_steps) / Math.max(1, num_training_steps - num_warmup_steps);
    return Math.max(0, 0.5 * (1 + Math.cos(Math.PI * num_cycles * 2 * progress)));
  };
  return new LambdaLR(optimizer, lr_lambda, last_epoch);
}

/**
 * Linear warmup over num_warmup_steps, then linear decay to 0 at num_training_steps
 * (Hugging Face transformers.get_linear_schedule_with_warmup).
 */
export function get_linear_schedule_with_warmup(
  optimizer: Optimizer<any>, num_warmup_steps: number, num_training_steps: number, last_epoch = -1,
): LambdaLR {
  const lr_lambda = (step: number): number => {
    if (step < num_warmup_steps) return step / Math.max(1, num_warmup_steps);
    return Math.max(0, (num_training_steps - step) / Math.max(1, num_training_steps - num_warmup_steps));
  };
  return new LambdaLR(optimizer, lr_lambda, last_epoch);
}
