/**
 * Gradient scaling for float16 training (torch.cuda.amp.GradScaler / torch.amp.GradScaler).
 *
 * Under float16 autocast, activation gradients below 2^-24 (the smallest float16 subnormal) round
 * to zero. Multiplying the loss by a large `scale` before backward keeps them representable; the
 * float32 gradients of the master weights are divided by it again before the optimizer step. A
 * scale too large makes some gradient inf/NaN: that step is skipped and the scale shrinks
 * (`backoff_factor`); after `growth_interval` steps without inf/NaN it grows (`growth_factor`).
 *
 * ```ts
 * const scaler = new loom.amp.GradScaler();
 * for (...) {
 *   opt.zero_grad();
 *   const loss = loom.autocast({ device_type: "cpu", dtype: "float16" }, () => F.cross_entropy(model.call(x), y));
 *   scaler.scale(loss).backward();
 *   scaler.step(opt);   // unscales, skips the step if a gradient is inf/NaN
 *   scaler.update();    // adjusts the scale
 * }
 * ```
 *
 * The inf/NaN check is one scalar per optimizer: each gradient's sum(g · 0) (0 when every element
 * is finite, NaN otherwise: 0·inf = NaN) added together, computed with the unscaling (fused into
 * the same plan in lazy execution) and read on the host once, in `step` (torch reads it there too,
 * `found_inf.item()`). That read realizes the forward, the backward and the scaled loss; the
 * optimizer's update then runs as a second plan (lazy execution: 2 plans per step, not 1). The scale itself is a host number (torch keeps a device tensor so that
 * `update` does not sync; here `step` has already synced).
 * Source: torch/cuda/amp/grad_scaler.py and aten/src/ATen/native/cuda/AmpKernels.cu (PyTorch 1.13);
 * Micikevicius et al. 2018, "Mixed Precision Training".
 */
import { no_grad } from "../autograd/grad_mode.ts";
import type { LazyTensor } from "../lazy/lazy_tensor.ts";
import { TensorOps } from "../lazy/surface.ts";
import { retainValue } from "../lazy/deferred.ts";
import { Tensor } from "../lazy/tensor.ts";
import { LoomDtypeError, LoomValueError } from "../tensor/errors.ts";
import type { Optimizer } from "./optimizer.ts";

export interface GradScalerOptions {
  /** Initial scale factor (default 2^16). */
  init_scale?: number;
  /** Factor the scale is multiplied by after `growth_interval` steps without inf/NaN (default 2). */
  growth_factor?: number;
  /** Factor the scale is multiplied by after a step with inf/NaN gradients (default 0.5). */
  backoff_factor?: number;
  /** Consecutive steps without inf/NaN before the scale grows (default 2000). */
  growth_interval?: number;
  /** false makes every method a pass-through (scale 1, step = optimizer.step()). */
  enabled?: boolean;
}

/** torch's GradScaler.state_dict(): empty for a disabled scaler. */
export interface GradScalerStateDict {
  scale?: number;
  growth_factor?: number;
  backoff_factor?: number;
  growth_interval?: number;
  _growth_tracker?: number;
}

type Stage = "ready" | "unscaled" | "stepped";

/** Per-optimizer progress within one iteration (torch's `_per_optimizer_states`). */
interface OptState {
  stage: Stage;
  /** NaN-valued 0-d float32 tensor iff some gradient was inf/NaN after unscaling. */
  check: Tensor | LazyTensor | null;
  /** The check read on the host (in step), else null. */
  found_inf: boolean | null;
}

type Scaled<T> = T | T[];

export class GradScaler {
  private _scale: number;
  private _growth_factor: number;
  private _backoff_factor: number;
  private _growth_interval: number;
  private _growth_tracker = 0;
  private readonly _enabled: boolean;
  private _per_optimizer = new Map<Optimizer<any>, OptState>();

  /**
   * @throws LoomValueError for a growth_factor <= 1, a backoff_factor outside (0, 1), a
   *   growth_interval that is not a positive integer, or a scale that is not positive and finite
   */
  constructor(opts: GradScalerOptions = {}) {
    const { init_scale = 2 ** 16, growth_factor = 2, backoff_factor = 0.5, growth_interval = 2000, enabled = true } = opts;
    if (!(init_scale > 0 && Number.isFinite(init_scale))) throw new LoomValueError(`[GradScaler] init_scale must be positive and finite, got ${init_scale}`);
    this._enabled = enabled;
    this._scale = Math.fround(init_scale);
    this._growth_factor = growth_factor;
    this._backoff_factor = backoff_factor;
    this._growth_interval = growth_interval;
    this._check_hyper();
  }

  private _check_hyper(): void {
    // torch asserts growth_factor > 1 and backoff_factor < 1
    if (!(this._growth_factor > 1)) throw new LoomValueError(`[GradScaler] growth_factor should be > 1, got ${this._growth_factor}`);
    if (!(this._backoff_factor > 0 && this._backoff_factor < 1)) throw new LoomValueError(`[GradScaler] backoff_factor should be in (0, 1), got ${this._backoff_factor}`);
    if (!(Number.isInteger(this._growth_interval) && this._growth_interval > 0)) throw new LoomValueError(`[GradScaler] growth_interval should be a positive integer, got ${this._growth_interval}`);
  }

  private _state(opt: Optimizer<any>): OptState {
    let s = this._per_optimizer.get(opt);
    if (!s) {
      s = { stage: "ready", check: null, found_inf: null };
      this._per_optimizer.set(opt, s);
    }
    return s;
  }

  /**
   * outputs · scale (a list: each element). float16/bfloat16 outputs are multiplied in float32
   * (torch multiplies by a float32 tensor, which promotes them), so 2^16 · loss cannot overflow.
   * @returns the same structure, float32 (unchanged when disabled)
   */
  scale<T extends TensorOps<T>>(outputs: T): T;
  scale<T extends TensorOps<T>>(outputs: T[]): T[];
  scale<T extends TensorOps<T>>(outputs: Scaled<T>): Scaled<T> {
    if (!this._enabled) return outputs;
    const one = (t: T): T => {
      if (!(t instanceof TensorOps)) throw new LoomValueError(`[GradScaler.scale] outputs must be a Tensor or a list of Tensors, got ${typeof t}`);
      // a pending loss (lazy execution) is computed by the plan that step()'s inf check runs, so
      // reading it afterwards runs nothing more
      if (t instanceof Tensor && t.is_pending) retainValue(t, true);
      const f = t.dtype === "float16" || t.dtype === "bfloat16" ? t.float() : t;
      return f.mul(this._scale);
    };
    return Array.isArray(outputs) ? outputs.map(one) : one(outputs);
  }

  /**
   * Divide the optimizer's gradients by the scale, in place (e.g. before clip_grad_norm_), and
   * record whether any is inf/NaN afterwards. At most once per optimizer between `update`s.
   * @throws LoomValueError if called twice since the last update, or after step
   * @throws LoomDtypeError for a float16 gradient (torch: "Attempting to unscale FP16 gradients";
   *   keep float32 master weights and autocast)
   */
  unscale_(optimizer: Optimizer<any>): void {
    if (!this._enabled) return;
    const s = this._state(optimizer);
    if (s.stage === "unscaled") throw new LoomValueError("[GradScaler.unscale_] unscale_() has already been called on this optimizer since the last update().");
    if (s.stage === "stepped") throw new LoomValueError("[GradScaler.unscale_] unscale_() is being called after step().");
    // torch: inv_scale = scale.double().reciprocal().float()
    const inv = Math.fround(1 / this._scale);
    let check: Tensor | LazyTensor | null = null;
    no_grad(() => {
      optimizer.param_groups.forEach((g, gi) => (g.params as Tensor[]).forEach((p: Tensor, pi: number) => {
        const grad = p.grad as Tensor | LazyTensor | null;
        if (!grad) return;
        if (grad.dtype === "float16") {
          throw new LoomDtypeError(`[GradScaler.unscale_] Attempting to unscale FP16 gradients (param ${pi} of group ${gi}, shape [${p.shape.join(", ")}]): keep float32 parameters and run the forward under autocast`);
        }
        const u = grad.mul_(inv); // in place (a LazyTensor grad is rebound to the product)
        // 0 for finite values, NaN from any inf or NaN (0 · inf = NaN); float32 so that a
        // bfloat16 gradient's check does not round
        const c = u.mul(0).sum(undefined, false).float() as Tensor | LazyTensor;
        check = check === null ? c : (check as Tensor).add(c as Tensor);
      }));
    });
    s.check = check;
    s.found_inf = null;
    s.stage = "unscaled";
  }

  /** Read the check of `s` on the host (once). */
  private _found_inf(s: OptState): boolean {
    if (s.found_inf === null) s.found_inf = s.check !== null && Number.isNaN(s.check.item());
    return s.found_inf;
  }

  /**
   * Unscale (unless `unscale_` was called) and run `optimizer.step()` unless a gradient is
   * inf/NaN, in which case the parameters and the optimizer's state are left untouched.
   * @returns optimizer.step()'s return, or undefined when skipped
   * @throws LoomValueError when called twice since the last update, or with a closure (torch)
   */
  step(optimizer: Optimizer<any>, closure?: unknown): ReturnType<Optimizer<any>["step"]> | undefined {
    if (!this._enabled) return optimizer.step(closure as never);
    if (closure !== undefined) throw new LoomValueError("[GradScaler.step] Closure use is not currently supported if GradScaler is enabled.");
    const s = this._state(optimizer);
    if (s.stage === "stepped") throw new LoomValueError("[GradScaler.step] step() has already been called since the last update().");
    if (s.stage === "ready") this.unscale_(optimizer);
    const skip = this._found_inf(s);
    s.stage = "stepped";
    return skip ? undefined : optimizer.step();
  }

  /**
   * Adjust the scale after this iteration's steps (torch `_amp_update_scale_`): any inf/NaN ->
   * scale · backoff_factor and the growth tracker resets; otherwise the tracker counts up and at
   * growth_interval the scale becomes scale · growth_factor (kept only if finite) and the tracker
   * resets. `new_scale` sets the scale instead.
   * @throws LoomValueError when no optimizer was unscaled or stepped since the last update
   */
  update(new_scale?: number | TensorOps<any>): void {
    if (!this._enabled) return;
    if (new_scale !== undefined) {
      const v = typeof new_scale === "number" ? new_scale : new_scale.item();
      if (!(v > 0 && Number.isFinite(v))) throw new LoomValueError(`[GradScaler.update] new_scale must be positive and finite, got ${v}`);
      this._scale = Math.fround(v);
    } else {
      const states = [...this._per_optimizer.values()].filter((s) => s.stage !== "ready");
      if (states.length === 0) throw new LoomValueError("[GradScaler.update] No inf checks were recorded prior to update.");
      const found = states.some((s) => this._found_inf(s));
      if (found) {
        this._scale = Math.fround(this._scale * this._backoff_factor);
        this._growth_tracker = 0;
      } else if (this._growth_tracker + 1 === this._growth_interval) {
        const grown = Math.fround(this._scale * this._growth_factor);
        if (Number.isFinite(grown)) this._scale = grown;
        this._growth_tracker = 0;
      } else {
        this._growth_tracker++;
      }
    }
    this._per_optimizer = new Map();
  }

  /** The current scale (1 when disabled). */
  get_scale(): number { return this._enabled ? this._scale : 1; }
  get_growth_factor(): number { return this._growth_factor; }
  set_growth_factor(v: number): void { this._growth_factor = v; this._check_hyper(); }
  get_backoff_factor(): number { return this._backoff_factor; }
  set_backoff_factor(v: number): void { this._backoff_factor = v; this._check_hyper(); }
  get_growth_interval(): number { return this._growth_interval; }
  set_growth_interval(v: number): void { this._growth_interval = v; this._check_hyper(); }
  is_enabled(): boolean { return this._enabled; }

  /** torch's layout: `{scale, growth_factor, backoff_factor, growth_interval, _growth_tracker}`; `{}` when disabled. */
  state_dict(): GradScalerStateDict {
    if (!this._enabled) return {};
    return {
      scale: this._scale, growth_factor: this._growth_factor, backoff_factor: this._backoff_factor,
      growth_interval: this._growth_interval, _growth_tracker: this._growth_tracker,
    };
  }

  /**
   * @throws LoomValueError for an empty dict on an enabled scaler (saved from a disabled one), or
   *   missing/invalid entries
   */
  load_state_dict(sd: GradScalerStateDict): void {
    if (!this._enabled) return;
    if (Object.keys(sd).length === 0) throw new LoomValueError("[GradScaler.load_state_dict] The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler.");
    for (const k of ["scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"] as const) {
      if (typeof sd[k] !== "number") throw new LoomValueError(`[GradScaler.load_state_dict] missing or non-numeric entry "${k}"`);
    }
    if (!(sd.scale! > 0 && Number.isFinite(sd.scale!))) throw new LoomValueError(`[GradScaler.load_state_dict] scale must be positive and finite, got ${sd.scale}`);
    this._scale = Math.fround(sd.scale!);
    this._growth_factor = sd.growth_factor!;
    this._backoff_factor = sd.backoff_factor!;
    this._growth_interval = sd.growth_interval!;
    this._growth_tracker = sd._growth_tracker!;
    this._check_hyper();
  }
}
