/**
 * Compiler settings: which passes run, the memory limit, and debug printing (LOOM_EXPLAIN=1
 * prints every newly compiled plan to stderr).
 */
import { DEFAULT_TOLERANCE, type Bound, type Tolerance } from "../backends/catalog.ts";
import { DTYPES } from "../tensor/dtype.ts";
import { LoomError, LoomValueError } from "../tensor/errors.ts";

/** A plan needs more memory than the limit allows; thrown before any of its kernels runs. */
export class LoomOutOfMemoryError extends LoomError {}

export interface CompilerOptions {
  /** View folding, identity elimination, constant folding, CSE, dead nodes. */
  simplify: boolean;
  /** Named patterns (softmax, layer_norm, rms_norm, LoRA linear, attention). */
  patterns: boolean;
  /** Generic fusion of elementwise trees, reductions and matmul epilogues. */
  fuse: boolean;
  /** Let elementwise kernels write over an input that dies at that kernel. */
  inplace: boolean;
  /** Reuse compiled plans for graphs with the same structure. */
  cache: boolean;
  /**
   * Graphs over a symbolic dimension (mark_dynamic) share one plan template across its values
   * (symbolic.ts); off: each size compiles on its own (the range check stays). Needs `cache`.
   */
  symbolic: boolean;
  /**
   * Which kernel implementations a plan may use (backends/catalog.ts): `"exact"` only those that
   * give the eager kernels' bits (eager == lazy bit for bit), or an error bound {atol, rtol}
   * against a float64 reference (`by_dtype` overriding it per output dtype); the fastest
   * admitted implementation runs. Default: DEFAULT_TOLERANCE, torch.testing.assert_close's
   * defaults (float32 rtol 1.3e-6, atol 1e-5; float16 rtol 1e-3; bfloat16 rtol 1.6e-2).
   */
  tolerance: Tolerance;
}

const DEFAULTS: CompilerOptions = { simplify: true, patterns: true, fuse: true, inplace: true, cache: true, symbolic: true, tolerance: DEFAULT_TOLERANCE };
let current: CompilerOptions = { ...DEFAULTS };

/** The current compiler options (a copy). */
export function get_compiler_options(): CompilerOptions {
  return { ...current };
}

/** The current compiler options themselves, read-only (the scheduler reads them on every realize: no copy). */
export function compilerOptions(): Readonly<CompilerOptions> {
  return current;
}

/** Change compiler options (unnamed ones keep their value); `reset` restores the defaults first. */
export function set_compiler_options(opts: Partial<CompilerOptions>, reset = false): void {
  for (const k of Object.keys(opts)) {
    if (!(k in DEFAULTS)) throw new LoomValueError(`[set_compiler_options] unknown option '${k}'; expected one of ${Object.keys(DEFAULTS).join(", ")}`);
  }
  const t = opts.tolerance;
  const isBound = (b: unknown): b is Bound => typeof b === "object" && b !== null && (b as Bound).atol >= 0 && (b as Bound).rtol >= 0;
  if (t !== undefined && t !== "exact" && !(isBound(t) && (t.by_dtype === undefined || Object.entries(t.by_dtype).every(([d, b]) => (DTYPES as readonly string[]).includes(d) && isBound(b))))) {
    throw new LoomValueError(`[set_compiler_options] tolerance must be "exact" or {atol, rtol} with both >= 0 (and by_dtype: {dtype: {atol, rtol}}), got ${JSON.stringify(t)}`);
  }
  // a copy of the tolerance: the cached options key must not go stale if the caller mutates theirs
  const copy = (b: Bound): Bound => ({ atol: b.atol, rtol: b.rtol });
  const own = t !== undefined && t !== "exact"
    ? { ...opts, tolerance: { ...copy(t), ...(t.by_dtype ? { by_dtype: Object.fromEntries(Object.entries(t.by_dtype).map(([d, b]) => [d, copy(b!)])) } : {}) } }
    : opts;
  current = { ...(reset ? DEFAULTS : current), ...own };
}

/** Run `fn` with some options changed, restoring them afterwards. */
export function with_compiler_options<R>(opts: Partial<CompilerOptions>, fn: () => R): R {
  const prev = current;
  set_compiler_options(opts);
  try {
    return fn();
  } finally {
    current = prev;
  }
}

let keyOf: CompilerOptions | null = null;
let keyText = "";

/** Text of the options for the plan cache key (remade only when the options change: `current` is replaced then). */
export function optionsKey(): string {
  const o = current;
  if (keyOf === o) return keyText;
  const t = o.tolerance;
  keyText = `${+o.simplify}${+o.patterns}${+o.fuse}${+o.inplace}${t === "exact" ? "x" : `${t.atol},${t.rtol}${t.by_dtype ? JSON.stringify(t.by_dtype) : ""}`}`;
  keyOf = o;
  return keyText;
}

const limits = new Map<string, number>();

/**
 * Limit the bytes a plan may allocate on `device` (its workspace plus its output buffers);
 * null removes the limit. A plan over the limit throws LoomOutOfMemoryError before running.
 */
export function set_memory_limit(bytes: number | null, device = "cpu"): void {
  if (bytes === null) limits.delete(device);
  else {
    if (!(bytes >= 0)) throw new LoomValueError(`[set_memory_limit] expected a non-negative number of bytes, got ${bytes}`);
    limits.set(device, bytes);
  }
}

export function get_memory_limit(device = "cpu"): number | null {
  return limits.get(device) ?? null;
}

/** LOOM_EXPLAIN=1 in the environment: print each newly compiled plan. */
export function explainEnabled(): boolean {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  return env?.LOOM_EXPLAIN === "1";
}
