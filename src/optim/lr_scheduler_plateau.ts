/**
 * ReduceLROnPlateau (torch.optim.lr_scheduler.ReduceLROnPlateau, PyTorch 1.13 semantics): cut the
 * lr by a factor when a metric (validation loss, accuracy) stops improving. Unlike the other
 * schedulers it is stepped with the metric, `scheduler.step(val_loss)`, and is not an LRScheduler
 * (as in torch 1.13): it has no base_lrs and never raises the lr. It shares get_last_lr and
 * state_dict with the others (SchedulerBase).
 */
import { LoomValueError } from "../tensor/errors.ts";
import type { Optimizer, ParamGroup } from "./optimizer.ts";
import { SchedulerBase, type SchedulerStateDict } from "./lr_scheduler.ts";

export interface ReduceLROnPlateauOptions {
  /** "min": the metric should decrease (a loss, default); "max": increase (an accuracy). */
  mode?: "min" | "max";
  /** new_lr = lr · factor (default 0.1); must be < 1. */
  factor?: number;
  /** Steps without improvement tolerated before the lr is cut (default 10). */
  patience?: number;
  /** How much better counts as an improvement (default 1e-4), relative or absolute per threshold_mode. */
  threshold?: number;
  /** "rel": better than best·(1 ∓ threshold) (default); "abs": better than best ∓ threshold. */
  threshold_mode?: "rel" | "abs";
  /** Steps after a cut during which bad steps are not counted (default 0). */
  cooldown?: number;
  /** Lower bound on the lr (default 0); one value or one per group. */
  min_lr?: number | number[];
  /** A cut smaller than eps (absolute lr) is skipped (default 1e-8). */
  eps?: number;
}

/**
 * Each `step(metric)`: if the metric is better than `best` by the threshold, it becomes `best` and
 * the bad-step count resets; otherwise the count grows. During cooldown the count is held at 0.
 * When the count exceeds `patience`, every group's lr becomes max(lr · factor, min_lr) (unless
 * that changes it by eps or less), cooldown starts and the count resets.
 * Source: torch.optim.lr_scheduler.ReduceLROnPlateau (PyTorch 1.13); Keras ReduceLROnPlateau.
 * @throws LoomValueError for factor >= 1, a min_lr list of the wrong length, an unknown mode or
 *   threshold_mode
 */
export class ReduceLROnPlateau extends SchedulerBase {
  readonly optimizer: Optimizer<any>;
  factor: number;
  min_lrs: number[];
  patience: number;
  cooldown: number;
  cooldown_counter = 0;
  mode: "min" | "max";
  threshold: number;
  threshold_mode: "rel" | "abs";
  /** The best metric seen (starts at the worst value for the mode: ±Infinity). */
  best = Infinity;
  num_bad_epochs = 0;
  mode_worse = Infinity;
  eps: number;
  /** Number of steps taken. */
  last_epoch = 0;

  constructor(optimizer: Optimizer<any>, opts: ReduceLROnPlateauOptions = {}) {
    super();
    this.factor = opts.factor ?? 0.1;
    if (!(this.factor < 1)) throw new LoomValueError(`[ReduceLROnPlateau] Factor should be < 1.0, but got ${this.factor}`);
    this.optimizer = optimizer;
    const n = optimizer.param_groups.length;
    const min_lr = opts.min_lr ?? 0;
    if (Array.isArray(min_lr)) {
      if (min_lr.length !== n) throw new LoomValueError(`[ReduceLROnPlateau] expected ${n} min_lrs, got ${min_lr.length}`);
      this.min_lrs = [...min_lr];
    } else {
      this.min_lrs = Array.from({ length: n }, () => min_lr);
    }
    this.patience = opts.patience ?? 10;
    this.cooldown = opts.cooldown ?? 0;
    this.mode = opts.mode ?? "min";
    this.threshold = opts.threshold ?? 1e-4;
    this.threshold_mode = opts.threshold_mode ?? "rel";
    this.eps = opts.eps ?? 1e-8;
    this._init_is_better();
    this._reset();
    this._last_lr = this._groups.map((g) => g.lr);
  }

  private get _groups(): ParamGroup[] {
    return this.optimizer.param_groups as ParamGroup[];
  }

  /** Forget the best value, the bad-step count and the cooldown. */
  _reset(): void {
    this.best = this.mode_worse;
    this.cooldown_counter = 0;
    this.num_bad_epochs = 0;
  }

  /**
   * Record one metric value and cut the lrs if it has not improved for more than `patience` steps.
   * @param metrics - a number, or a 0-d tensor (read with item())
   * @param epoch - (deprecated in torch) the step index to record instead of last_epoch + 1
   */
  step(metrics: number | { item(): number }, epoch?: number): void {
    const current = typeof metrics === "number" ? metrics : metrics.item();
    this.last_epoch = epoch ?? this.last_epoch + 1;
    if (this.is_better(current, this.best)) {
      this.best = current;
      this.num_bad_epochs = 0;
    } else {
      this.num_bad_epochs += 1;
    }
    if (this.in_cooldown) {
      this.cooldown_counter -= 1;
      this.num_bad_epochs = 0; // bad steps in cooldown are ignored
    }
    if (this.num_bad_epochs > this.patience) {
      this._reduce_lr();
      this.cooldown_counter = this.cooldown;
      this.num_bad_epochs = 0;
    }
    this._last_lr = this._groups.map((g) => g.lr);
  }

  private _reduce_lr(): void {
    this._groups.forEach((g, i) => {
      const old_lr = g.lr;
      const new_lr = Math.max(old_lr * this.factor, this.min_lrs[i]!);
      if (old_lr - new_lr > this.eps) g.lr = new_lr;
    });
  }

  get in_cooldown(): boolean {
    return this.cooldown_counter > 0;
  }

  /** Whether metric a improves on best by more than the threshold, for the mode. */
  is_better(a: number, best: number): boolean {
    if (this.mode === "min" && this.threshold_mode === "rel") return a < best * (1 - this.threshold);
    if (this.mode === "min") return a < best - this.threshold;
    if (this.threshold_mode === "rel") return a > best * (this.threshold + 1);
    return a > best + this.threshold;
  }

  private _init_is_better(): void {
    if (this.mode !== "min" && this.mode !== "max") throw new LoomValueError(`[ReduceLROnPlateau] mode ${this.mode} is unknown!`);
    if (this.threshold_mode !== "rel" && this.threshold_mode !== "abs") {
      throw new LoomValueError(`[ReduceLROnPlateau] threshold mode ${this.threshold_mode} is unknown!`);
    }
    this.mode_worse = this.mode === "min" ? Infinity : -Infinity;
  }

  /** Restore fields saved by state_dict (best may be ±Infinity); mode and threshold_mode are checked again. */
  override load_state_dict(state_dict: SchedulerStateDict): void {
    super.load_state_dict(state_dict);
    this._init_is_better();
  }
}
