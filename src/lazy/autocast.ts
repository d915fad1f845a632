/**
 * Automatic mixed precision (torch.autocast): inside an autocast region, ops on the
 * lower-precision list run in float16/bfloat16 and numerically sensitive ops run in float32,
 * while parameters stay float32 ("master weights"). The casts are ordinary differentiable
 * `.to(dtype)` nodes, so a float32 parameter used by a bfloat16 matmul gets a float32 gradient.
 *
 * One hook in the op dispatch (`TensorOps._apply`, surface.ts) calls `autocast_inputs` for every
 * registry op while a region is active; composites (softmax, layer_norm, losses...) follow from
 * their primitives. Policy, per registry op (torch's `CastPolicy`):
 * - lower_precision_fp (`LOWER_PRECISION_OPS`): matmul (so mm, bmm, linear, and convolutions
 *   lowered to a GEMM) and lora_linear cast every float32/float16/bfloat16 input to the region's
 *   dtype. `F.linear` casts its bias too (`autocast_args("linear", ...)`), so linear's output is
 *   the region's dtype as in torch.
 * - fp32 (`FP32_OPS`): exp, log, log1p, rsqrt, reciprocal, pow, sum, cumsum cast float16/bfloat16
 *   inputs to float32. These are the primitives of torch's CUDA fp32 list (exp, log, pow, sum,
 *   softmax, log_softmax, layer_norm, norms, cross_entropy, nll_loss, mse_loss...): Loom's
 *   softmax, log_softmax, layer_norm, rms_norm and losses are composites of them, so they compute
 *   and return float32, where a half-precision composite would round after every primitive.
 *   torch 1.13's CPU autocast keeps softmax/log_softmax/layer_norm outputs in bfloat16 (computed
 *   in float32 inside one fused kernel) and returns float32 for cross_entropy and mse_loss; Loom
 *   returns float32 for all of them (torch's CUDA policy). Reductions built on sum (mean, var,
 *   std, norm, logsumexp) also return float32 for half inputs inside a region.
 * - everything else follows its inputs (mixed bfloat16 + float32 promotes to float32, as torch).
 * float64 and integer tensors are never cast (torch's `is_eligible`).
 *
 * Gradient rules run without autocast (torch: "backward ops run in the same type that autocast
 * used for the corresponding forward ops"). Unlike torch, one region applies to every device of
 * its `device_type`'s family: Loom's "cpu" (js and native backends) or "webgpu".
 * Source: torch/csrc/autograd/autocast_mode.cpp (PyTorch 1.13); torch.amp docs "Autocast Op Reference".
 */
import { LoomValueError } from "../tensor/errors.ts";
import type { DType } from "../tensor/dtype.ts";

export type AutocastDtype = "bfloat16" | "float16";
export type AutocastDevice = "cpu" | "webgpu";

export interface AutocastOptions {
  /** Which device family the region applies to: "cpu" (js and native) or "webgpu". */
  device_type: AutocastDevice;
  /** Lower-precision dtype (default: bfloat16 on cpu, float16 on webgpu, as torch's cpu/cuda). */
  dtype?: AutocastDtype;
  /** false makes a region that turns autocast off inside an enclosing one (default true). */
  enabled?: boolean;
  /** Accepted for porting; Loom does not cache casts of parameters (a lazy plan shares them). */
  cache_enabled?: boolean;
}

/**
 * Ops whose floating inputs are cast to the region's dtype: registry ops, and names that
 * composites pass to `autocast_args` for their own operands (F.linear its bias; a convolution
 * lowered to a GEMM should pass its input, weight and bias as "conv2d").
 */
export const LOWER_PRECISION_OPS: ReadonlySet<string> = new Set([
  "matmul", "lora_linear", "linear", "conv1d", "conv2d", "conv3d", "bmm", "baddbmm", "addmm", "addbmm",
]);
/** Ops whose float16/bfloat16 inputs are cast to float32 (quantized_linear: its kernels take float32 x). */
export const FP32_OPS: ReadonlySet<string> = new Set(["exp", "log", "log1p", "rsqrt", "reciprocal", "pow", "sum", "cumsum", "quantized_linear"]);

/**
 * The active regions: the dtype per device family, null where autocast is off. `active` is the
 * dispatch's fast path (one property read per recorded op when no region is open).
 */
export const autocast_state: { active: boolean; cpu: AutocastDtype | null; webgpu: AutocastDtype | null } = {
  active: false, cpu: null, webgpu: null,
};

const DEFAULT_DTYPE: Record<AutocastDevice, AutocastDtype> = { cpu: "bfloat16", webgpu: "float16" };

/** torch.is_autocast_enabled / is_autocast_cpu_enabled for a device family (default "cpu"). */
export function is_autocast_enabled(device_type: AutocastDevice = "cpu"): boolean {
  return autocast_state[device_type] !== null;
}

/** The region's dtype for a device family, or null outside any region (torch.get_autocast_*_dtype). */
export function get_autocast_dtype(device_type: AutocastDevice = "cpu"): AutocastDtype | null {
  return autocast_state[device_type];
}

function familyOf(device: string): AutocastDevice {
  return device === "webgpu" ? "webgpu" : "cpu";
}

interface Castable<T> { readonly dtype: DType; readonly device: string; to(d: DType): T }

function eligible(dtype: DType): boolean {
  return dtype === "float32" || dtype === "float16" || dtype === "bfloat16";
}

/**
 * The inputs of `op` cast by the active region's policy, or null when nothing changes (the
 * dispatch then proceeds with the inputs as they are). Null entries (an absent bias) pass through.
 */
export function autocast_args<T extends Castable<T>>(op: string, args: readonly (T | null | undefined)[]): (T | null | undefined)[] | null {
  if (!autocast_state.active || args.length === 0) return null;
  const first = args.find((a) => a) as T | undefined;
  if (!first) return null;
  const region = autocast_state[familyOf(first.device)];
  if (region === null) return null;
  const target: DType | null = LOWER_PRECISION_OPS.has(op) ? region : FP32_OPS.has(op) ? "float32" : null;
  if (target === null) return null;
  let changed = false;
  const out = args.map((a) => {
    if (!a || a.dtype === target || !eligible(a.dtype)) return a;
    changed = true;
    return a.to(target);
  });
  return changed ? out : null;
}

/**
 * A region for TypeScript's `using` declaration: set when made, the previous state restored
 * when the block exits (also by a throw).
 */
export class AutocastGuard implements Disposable {
  private readonly device: AutocastDevice;
  private readonly prev: AutocastDtype | null;
  private disposed = false;
  constructor(opts: AutocastOptions) {
    const { device_type, enabled = true } = opts;
    if (device_type !== "cpu" && device_type !== "webgpu") {
      throw new LoomValueError(`[autocast] device_type must be "cpu" or "webgpu", got ${JSON.stringify(device_type)} (Loom's "cpu" covers the js and native backends)`);
    }
    const dtype = opts.dtype ?? DEFAULT_DTYPE[device_type];
    if (dtype !== "bfloat16" && dtype !== "float16") {
      throw new LoomValueError(`[autocast] dtype must be "bfloat16" or "float16", got ${JSON.stringify(dtype)}`);
    }
    this.device = device_type;
    this.prev = autocast_state[device_type];
    set(device_type, enabled ? dtype : null);
  }
  [Symbol.dispose](): void {
    if (this.disposed) return;
    this.disposed = true;
    set(this.device, this.prev);
  }
}

function set(device: AutocastDevice, dtype: AutocastDtype | null): void {
  autocast_state[device] = dtype;
  autocast_state.active = autocast_state.cpu !== null || autocast_state.webgpu !== null;
}

/**
 * torch.autocast: `autocast(opts)` returns a guard for `using`, `autocast(opts, fn)` runs `fn`
 * inside the region (an async `fn` keeps it until its promise settles; as with any global mode,
 * other code running meanwhile sees it too).
 * @example
 *   { using _ = loom.autocast({ device_type: "cpu", dtype: "bfloat16" });
 *     const loss = F.cross_entropy(model.call(x), y); } // matmuls in bf16, the loss in float32
 *   loss.backward(); // outside the region, as torch recommends
 * @throws LoomValueError for a device_type other than "cpu"/"webgpu" or a dtype other than
 *   "bfloat16"/"float16"
 */
export function autocast(opts: AutocastOptions): AutocastGuard;
export function autocast<R>(opts: AutocastOptions, fn: () => R): R;
export function autocast<R>(opts: AutocastOptions, fn?: () => R): R | AutocastGuard {
  const guard = new AutocastGuard(opts);
  if (!fn) return guard;
  let r: R;
  try {
    r = fn();
  } catch (e) {
    guard[Symbol.dispose]();
    throw e;
  }
  if (r instanceof Promise) return r.finally(() => guard[Symbol.dispose]()) as R;
  guard[Symbol.dispose]();
  return r;
}
