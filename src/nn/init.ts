/**
 * Parameter initialization (torch.nn.init): each function fills a tensor in place under no_grad
 * and returns it. Random draws come from `opts.generator` or Loom's default generator
 * (`loom.manual_seed` makes them reproducible); the sequences are Loom's own (see
 * src/tensor/rng.ts), the distributions are torch's.
 * Inside `init_empty_weights()` every fill here is skipped (see there).
 * Source: torch/nn/init.py (PyTorch 1.13); He et al. 2015 (kaiming); Glorot & Bengio 2010 (xavier).
 */
import { no_grad } from "../autograd/grad_mode.ts";
import type { TensorOps } from "../lazy/surface.ts";
import { isFloating } from "../tensor/dtype.ts";
import { LoomValueError } from "../tensor/errors.ts";
import { default_generator, type Generator } from "../tensor/rng.ts";
import { fromValues } from "../tensor/storage.ts";

export interface InitOptions {
  /** Source of random draws; the default generator when omitted. */
  generator?: Generator;
}

type T = TensorOps<any>;
export type Nonlinearity =
  | "linear" | "conv1d" | "conv2d" | "conv3d" | "conv_transpose1d" | "conv_transpose2d" | "conv_transpose3d"
  | "sigmoid" | "tanh" | "relu" | "leaky_relu" | "selu";

// ---- empty init ------------------------------------------------------------------------------
let empty_depth = 0;

/** A scope for `using` in which init fills are skipped; ends when disposed. */
export class EmptyInitGuard implements Disposable {
  private done = false;
  constructor() {
    empty_depth++;
  }
  [Symbol.dispose](): void {
    if (this.done) return; // disposing twice must not end an enclosing scope
    this.done = true;
    empty_depth--;
  }
}

/**
 * Parameters made inside are allocated but never initialized: every fill of this module
 * (uniform_, normal_, kaiming_*, xavier_*, trunc_normal_, constant_, zeros_, ones_) returns its
 * tensor untouched, so the default generator is not advanced and no values are computed. The
 * weights hold zeros (fresh allocations) until they are loaded. Used by `from_pretrained`,
 * whose weights are overwritten by the checkpoint anyway (the random init of GPT-2 124M took
 * 14.6 s of a 15.1 s load). Argument checks (dtype, fan) still run. Scopes nest.
 * `init_empty_weights(fn)` runs `fn` so; `init_empty_weights()` returns a guard for `using`.
 * @example
 *   { using _ = nn.init_empty_weights(); model = new GPT2LMHeadModel(config); } // zeros, no draws
 * Source: accelerate.init_empty_weights (parameters on the "meta" device); torch.nn.utils.skip_init.
 */
export function init_empty_weights(): EmptyInitGuard;
export function init_empty_weights<R>(fn: () => R): R;
export function init_empty_weights<R>(fn?: () => R): R | EmptyInitGuard {
  const guard = new EmptyInitGuard();
  if (!fn) return guard;
  try {
    return fn();
  } finally {
    guard[Symbol.dispose]();
  }
}

/**
 * `new module_cls(...args)` with its parameters allocated but not initialized (torch.nn.utils.skip_init):
 * init_empty_weights around one constructor.
 */
export function skip_init<M, A extends unknown[]>(module_cls: new (...args: A) => M, ...args: A): M {
  return init_empty_weights(() => new module_cls(...args));
}

/** True inside `init_empty_weights` (init fills are skipped). */
export function is_init_empty(): boolean {
  return empty_depth > 0;
}

/** Write the values `make(vals)` puts in a float64 buffer of t's size into `t` (in place, no autograd); nothing under init_empty_weights. */
function fillWith<S extends T>(t: S, make: (vals: Float64Array) => void): S {
  if (empty_depth > 0) return t;
  const vals = new Float64Array(t.numel());
  make(vals);
  no_grad(() => t.copy_(t._constant(fromValues("float64", t.shape, vals))));
  return t;
}

/** Write `n` values made by `draw(i)` into `t` (fillWith). */
function fill<S extends T>(t: S, draw: (i: number) => number): S {
  return fillWith(t, (vals) => { for (let i = 0; i < vals.length; i++) vals[i] = draw(i); });
}

/** A uniform draw in [0, 1) at the tensor's precision (24 bits, or 53 for float64). */
function unit(t: T, g: Generator): () => number {
  return t.dtype === "float64" ? () => g.uniform53() : () => g.uniform();
}

function checkFloat(op: string, t: T): void {
  if (!isFloating(t.dtype)) throw new LoomValueError(`[${op}] expected a floating point tensor, got ${t.dtype}`);
}

/**
 * The recommended gain for a nonlinearity (torch.nn.init.calculate_gain): linear/conv/sigmoid 1,
 * tanh 5/3, relu √2, leaky_relu √(2 / (1 + slope²)) (slope `param`, default 0.01), selu 3/4.
 * @throws LoomValueError for an unknown nonlinearity or a non-numeric slope
 */
export function calculate_gain(nonlinearity: Nonlinearity, param?: number | null): number {
  const linear = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"];
  if (linear.includes(nonlinearity) || nonlinearity === "sigmoid") return 1;
  if (nonlinearity === "tanh") return 5 / 3;
  if (nonlinearity === "relu") return Math.SQRT2;
  if (nonlinearity === "leaky_relu") {
    const slope = param ?? 0.01;
    if (typeof slope !== "number" || Number.isNaN(slope)) throw new LoomValueError(`[calculate_gain] negative_slope ${String(slope)} not a valid number`);
    return Math.sqrt(2 / (1 + slope * slope));
  }
  if (nonlinearity === "selu") return 3 / 4;
  throw new LoomValueError(`[calculate_gain] Unsupported nonlinearity ${String(nonlinearity)}`);
}

/**
 * fan_in = size(1)·receptive field, fan_out = size(0)·receptive field, where the receptive field
 * is the product of dims 2.. (torch _calculate_fan_in_and_fan_out). A Linear weight [out, in]
 * has fan_in = in.
 * @throws LoomValueError for tensors with fewer than 2 dims
 */
export function calculate_fan_in_and_fan_out(t: { shape: readonly number[] }): { fan_in: number; fan_out: number } {
  if (t.shape.length < 2) {
    throw new LoomValueError("[init] Fan in and fan out can not be computed for tensor with fewer than 2 dimensions");
  }
  const receptive = t.shape.slice(2).reduce((p, s) => p * s, 1);
  return { fan_in: t.shape[1]! * receptive, fan_out: t.shape[0]! * receptive };
}

function correctFan(t: T, mode: "fan_in" | "fan_out"): number {
  if (mode !== "fan_in" && mode !== "fan_out") throw new LoomValueError(`[init] Mode ${String(mode)} not supported, please use one of fan_in, fan_out`);
  return calculate_fan_in_and_fan_out(t)[mode];
}

/** Fill with U(a, b): a + (b - a)·u (torch.nn.init.uniform_). */
export function uniform_<S extends T>(t: S, a = 0, b = 1, opts: InitOptions = {}): S {
  checkFloat("uniform_", t);
  const u = unit(t, opts.generator ?? default_generator);
  return fill(t, () => a + (b - a) * u());
}

/** Fill with N(mean, std²) (torch.nn.init.normal_). */
export function normal_<S extends T>(t: S, mean = 0, std = 1, opts: InitOptions = {}): S {
  checkFloat("normal_", t);
  const g = opts.generator ?? default_generator;
  return fillWith(t, (vals) => g.fill_normal(vals, mean, std)); // the values of n normal() calls, without a call each
}

/** Fill with `val` (torch.nn.init.constant_). */
export function constant_<S extends T>(t: S, val: number): S {
  if (empty_depth > 0) return t;
  no_grad(() => t.fill_(val));
  return t;
}
export function zeros_<S extends T>(t: S): S { return constant_(t, 0); }
export function ones_<S extends T>(t: S): S { return constant_(t, 1); }

/**
 * He (kaiming) uniform: U(-bound, bound), bound = gain·√(3 / fan), gain = calculate_gain(nonlinearity, a).
 * Linear's default, kaiming_uniform_(w, √5), gives bound = 1/√fan_in.
 * @param a - negative slope of the leaky_relu that follows (used by leaky_relu only)
 * @param mode - "fan_in" keeps forward variance, "fan_out" backward variance
 * Source: He et al. 2015, "Delving deep into rectifiers"; torch.nn.init.kaiming_uniform_
 */
export function kaiming_uniform_<S extends T>(
  t: S, a = 0, mode: "fan_in" | "fan_out" = "fan_in", nonlinearity: Nonlinearity = "leaky_relu", opts: InitOptions = {},
): S {
  if (t.numel() === 0) return t; // torch warns and does nothing
  const std = calculate_gain(nonlinearity, a) / Math.sqrt(correctFan(t, mode));
  const bound = Math.sqrt(3) * std;
  return uniform_(t, -bound, bound, opts);
}

/** He (kaiming) normal: N(0, std²), std = gain / √fan (torch.nn.init.kaiming_normal_). */
export function kaiming_normal_<S extends T>(
  t: S, a = 0, mode: "fan_in" | "fan_out" = "fan_in", nonlinearity: Nonlinearity = "leaky_relu", opts: InitOptions = {},
): S {
  if (t.numel() === 0) return t;
  const std = calculate_gain(nonlinearity, a) / Math.sqrt(correctFan(t, mode));
  return normal_(t, 0, std, opts);
}

/**
 * Glorot (xavier) uniform: U(-a, a), a = gain·√(6 / (fan_in + fan_out)).
 * Source: Glorot & Bengio 2010; torch.nn.init.xavier_uniform_
 */
export function xavier_uniform_<S extends T>(t: S, gain = 1, opts: InitOptions = {}): S {
  const { fan_in, fan_out } = calculate_fan_in_and_fan_out(t);
  const a = Math.sqrt(3) * gain * Math.sqrt(2 / (fan_in + fan_out));
  return uniform_(t, -a, a, opts);
}

/** Glorot (xavier) normal: N(0, std²), std = gain·√(2 / (fan_in + fan_out)) (torch.nn.init.xavier_normal_). */
export function xavier_normal_<S extends T>(t: S, gain = 1, opts: InitOptions = {}): S {
  const { fan_in, fan_out } = calculate_fan_in_and_fan_out(t);
  return normal_(t, 0, gain * Math.sqrt(2 / (fan_in + fan_out)), opts);
}

/**
 * N(mean, std²) truncated to [a, b] (absolute bounds, not in units of std), by torch's inverse-CDF
 * method: u ~ U(2Φ(α)-1, 2Φ(β)-1), x = mean + std·√2·erfinv(u), clamped to [a, b].
 * Source: torch.nn.init.trunc_normal_; Burkardt, "The Truncated Normal Distribution".
 */
export function trunc_normal_<S extends T>(t: S, mean = 0, std = 1, a = -2, b = 2, opts: InitOptions = {}): S {
  checkFloat("trunc_normal_", t);
  if (!(a <= b)) throw new LoomValueError(`[trunc_normal_] expected a <= b, got a=${a}, b=${b}`);
  const cdf = (x: number) => (1 + erf(x / Math.SQRT2)) / 2;
  const lo = 2 * cdf((a - mean) / std) - 1;
  const hi = 2 * cdf((b - mean) / std) - 1;
  const u = unit(t, opts.generator ?? default_generator);
  return fill(t, () => {
    const x = mean + std * Math.SQRT2 * erfinv(lo + (hi - lo) * u());
    return Math.min(b, Math.max(a, x));
  });
}

// ---- special functions (float64) ------------------------------------------------------------
const TWO_OVER_SQRT_PI = 1.1283791670955126;

/** erf(x) to ~1e-14: Maclaurin series for |x| < 2.5, else 1 - erfc by continued fraction. */
export function erf(x: number): number {
  const ax = Math.abs(x);
  if (ax < 2.5) {
    // erf(x) = 2/√π Σ (-1)^n x^(2n+1) / (n! (2n+1))
    let term = x, sum = x;
    const x2 = x * x;
    for (let n = 1; n < 80; n++) {
      term *= -x2 / n;
      const d = term / (2 * n + 1);
      sum += d;
      if (Math.abs(d) < 1e-17 * Math.abs(sum)) break;
    }
    return TWO_OVER_SQRT_PI * sum;
  }
  if (ax > 6) return Math.sign(x);
  // erfc(x) = e^{-x²}/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))
  let f = ax;
  for (let k = 120; k >= 1; k--) f = ax + k / 2 / f;
  const erfc = Math.exp(-ax * ax) / Math.sqrt(Math.PI) / f;
  return Math.sign(x) * (1 - erfc);
}

/**
 * Inverse error function on (-1, 1) (±Infinity at ±1): Giles' single-precision approximation
 * ("Approximating the erfinv function", 2010) refined by two Newton steps on erf.
 */
export function erfinv(y: number): number {
  if (y <= -1) return y === -1 ? -Infinity : NaN;
  if (y >= 1) return y === 1 ? Infinity : NaN;
  let w = -Math.log((1 - y) * (1 + y));
  let p: number;
  if (w < 5) {
    w -= 2.5;
    p = 2.81022636e-8;
    for (const c of [3.43273939e-7, -3.5233877e-6, -4.39150654e-6, 0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941]) p = c + p * w;
  } else {
    w = Math.sqrt(w) - 3;
    p = -0.000200214257;
    for (const c of [0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682]) p = c + p * w;
  }
  let x = p * y;
  for (let i = 0; i < 2; i++) x -= (erf(x) - y) / (TWO_OVER_SQRT_PI * Math.exp(-x * x));
  return x;
}
