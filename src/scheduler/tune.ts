/**
 * Tuning: enumerate the execution paths of compiled plans, measure the ones the kernel database
 * lacks (time, and error against a float64 reference), and write the records (`loom tune`,
 * src/cli/loom.ts, is the command line over this).
 *
 * An execution path is one way to run one instruction of a plan:
 * - `impl`: a catalog implementation of the instruction's op on the plan's backend (every one
 *   that applies, whatever its contract: the database records the measured error, and selection
 *   later admits it only within the plan's tolerance);
 * - `cross-device`: for an instruction of a device-memory backend (webgpu), copying its inputs to
 *   the host, running the op with each host implementation (native), and copying the result
 *   back: measured as download + kernel + upload;
 * and, per plan, `plan`: the whole plan fused (patterns and fusion on) vs unfused, end to end.
 *
 * The float64 reference of an application is the op's js reference run with every floating
 * dtype in its inputs and attrs replaced by float64 (a fused program's intermediates included),
 * rounded once to the output dtype: the form of the catalog's contracts (catalog.ts).
 */
import { Bench } from "tinybench";
import type { Backend, InputLayout, PreparedKernel } from "../backends/backend.ts";
import type { Application, Contract, Implementation } from "../backends/catalog.ts";
import { jsBackend } from "../backends/js/backend.ts";
import { isFloating } from "../tensor/dtype.ts";
import { mulberry32 } from "../tensor/rng.ts";
import { contiguousStrides } from "../tensor/shape.ts";
import { allocData, toContiguous, toFloat64, type TensorData } from "../tensor/storage.ts";
import { readRecords, signatureOf, writeRecords, type KernelRecord } from "./kernel_db.ts";
import type { CompiledPlan } from "./plan.ts";
import { prepareKernel } from "./select.ts";

/** One way to run one application (see the file comment). */
export interface ExecutionPath {
  readonly kind: "impl" | "cross-device";
  /** The backend whose database records this path ("native", "webgpu", ...). */
  readonly device: string;
  /** The application the implementation runs (cross-device: the instruction's, on dense inputs). */
  readonly app: Application;
  readonly signature: string;
  /** Implementation id (cross-device: `<host impl id>@host`). */
  readonly impl: string;
  readonly implementation: Implementation;
  /** The backend the implementation runs on (the host backend for cross-device paths). */
  readonly runOn: Backend;
  /** The plan's backend (differs from runOn for cross-device paths). */
  readonly planBackend: Backend;
}

/**
 * Every execution path of the instructions of `plans` on `backend` (duplicates of one
 * signature and implementation yielded once). `host`: a host backend with a catalog, for the
 * cross-device paths of a device-memory backend.
 */
export function* executionPaths(plans: readonly CompiledPlan[], backend: Backend, host?: Backend | null): Generator<ExecutionPath> {
  const seen = new Set<string>();
  for (const plan of plans) {
    for (const I of plan.instructions) {
      const app: Application = { op: I.op, inputs: I.layouts, attrs: I.attrs, shape: I.shape, dtype: I.dtype };
      const signature = signatureOf(app);
      const emit = function* (runOn: Backend, a: Application, kind: ExecutionPath["kind"], suffix: string): Generator<ExecutionPath> {
        for (const impl of runOn.implementations?.(I.op.name) ?? []) {
          const id = impl.id + suffix;
          const k = `${backend.name}\0${signature}\0${id}`;
          if (seen.has(k) || !impl.applies(a)) continue;
          seen.add(k);
          yield { kind, device: backend.name, app: a, signature, impl: id, implementation: impl, runOn, planBackend: backend };
        }
      };
      yield* emit(backend, app, "impl", "");
      // a download gives dense host buffers: the host implementation runs on dense inputs
      const dense = { ...app, inputs: app.inputs.map((l) => ({ ...l, strides: contiguousStrides(l.shape) })) };
      if (backend.deviceMemory && host && host !== backend) yield* emit(host, dense, "cross-device", "@host");
    }
  }
}

// ---- inputs and the float64 reference --------------------------------------------------------------

/**
 * Host inputs with exactly the layouts of `a` (strides and all): floats uniform in [-2, 2),
 * integers and bools zero (a valid index for every indexing op).
 */
export function sampleInputs(a: Application, seed = 1): TensorData[] {
  const r = mulberry32(seed); // deterministic, so measurements are repeatable
  return a.inputs.map((l: InputLayout) => {
    const span = l.shape.some((s) => s === 0) ? 0 : 1 + l.shape.reduce((acc, s, d) => acc + (s - 1) * Math.abs(l.strides[d]!), 0);
    const base = allocData(l.dtype, [span]);
    if (isFloating(l.dtype)) {
      const v = base.data as unknown as { [i: number]: number };
      for (let i = 0; i < span; i++) v[i] = r() * 4 - 2;
    }
    const neg = l.strides.reduce((acc, st, d) => acc + (st < 0 ? -(l.shape[d]! - 1) * st : 0), 0);
    return { dtype: l.dtype, shape: l.shape, strides: l.strides, offset: neg, data: base.data };
  });
}

const FLOAT64_NAMES = new Set<string>(["float32", "float16", "bfloat16"]);

/** attrs with every floating dtype name replaced by float64 (op definitions kept as they are). */
function attrsTo64(v: unknown): unknown {
  if (typeof v === "string") return FLOAT64_NAMES.has(v) ? "float64" : v;
  if (Array.isArray(v)) return v.map(attrsTo64);
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    if (typeof o.kind === "string" && typeof o.name === "string" && (typeof o.ref === "function" || typeof o.shape === "function")) return v; // an OpDef
    if (ArrayBuffer.isView(v)) return v;
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(o)) out[k] = attrsTo64(o[k]);
    return out;
  }
  return v;
}

/**
 * The float64 reference of `a` on `inputs`, as a dense Float64Array of the output (rounded once
 * to the output dtype for float32). Null when the op has no float64 form (e.g. integer results).
 */
export function reference64(a: Application, inputs: readonly TensorData[]): Float64Array | null {
  if (!isFloating(a.dtype)) return null;
  const ins = inputs.map((x) => (isFloating(x.dtype) ? toContiguous(x, "float64") : x));
  const y = jsBackend.run(a.op, ins, attrsTo64(a.attrs), a.shape, "float64");
  const d = toFloat64(toContiguous(y));
  if (a.dtype === "float32") for (let i = 0; i < d.length; i++) d[i] = Math.fround(d[i]!);
  return d;
}

/**
 * Largest absolute and relative (|err| / max(|ref|, tiny)) error of y against ref, and whether
 * every element satisfies contract `c` (|y − ref| ≤ atol + rtol·|ref|; an exact contract is
 * checked bit for bit elsewhere). NaN and infinities must match exactly (else errors are infinite).
 */
export function errorAgainst(y: ArrayLike<number>, ref: ArrayLike<number>, c: Contract = { kind: "exact" }): { abs: number; rel: number; within: boolean } {
  let abs = 0, rel = 0, within = true;
  for (let i = 0; i < ref.length; i++) {
    const r = ref[i]!, v = y[i]!;
    if (!Number.isFinite(r) || !Number.isFinite(v)) {
      if (!(Object.is(r, v) || (Number.isNaN(r) && Number.isNaN(v)))) return { abs: Infinity, rel: Infinity, within: c.kind === "exact" };
      continue;
    }
    const e = Math.abs(v - r);
    if (e > abs) abs = e;
    const q = e / Math.max(Math.abs(r), 1e-30);
    if (e > 0 && q > rel) rel = q;
    if (c.kind === "bound" && e > c.atol + c.rtol * Math.abs(r)) within = false;
  }
  return { abs, rel, within };
}

// ---- measuring one path ------------------------------------------------------------------------------
/** Run `kernel` once and wait for it (asynchronous backends flush and synchronize). */
function runOnce(b: Backend, kernel: PreparedKernel, ins: readonly TensorData[], out: TensorData): void {
  kernel(ins, out);
  b.flush?.();
  (b as { synchronize?: () => void }).synchronize?.();
}

/** A dense host output buffer for `a` on host backend `b`. */
function outputFor(b: Backend, a: Application): TensorData {
  return b.allocOutput ? b.allocOutput(a.dtype, a.shape) : allocData(a.dtype, a.shape);
}

export interface MeasureOptions {
  /** Minimum timed milliseconds per path (default 200) and iterations (default 10). */
  timeMs?: number;
  iterations?: number;
}

/** Measure one path: timings (tinybench: warm-up, then the median) and the error against float64. */
export function measurePath(p: ExecutionPath, opts: MeasureOptions = {}): KernelRecord {
  const { app } = p;
  const host = sampleInputs(app);
  const kernel = prepareKernel(p.runOn, app, "exact", p.implementation.id)?.kernel;
  if (!kernel) throw new Error(`[tune] ${p.impl} cannot prepare ${signatureOf(app)}`);
  const out = outputFor(p.runOn, app);
  let fn: () => void;
  if (p.kind === "cross-device") {
    // device inputs -> host, the host kernel, the result -> device: what this path would cost in a plan
    const dev = p.planBackend;
    const devIns = host.map((x) => dev.upload!(x));
    fn = () => {
      runOnce(p.runOn, kernel, devIns.map((x) => dev.download!(x)), out);
      dev.upload!(out);
    };
  } else fn = () => runOnce(p.runOn, kernel, host, out);
  fn();
  const ref = reference64(app, host);
  const y = toFloat64(toContiguous(out));
  const err = ref ? errorAgainst(y, ref, p.implementation.contract) : { abs: 0, rel: 0, within: true };
  const bench = new Bench({ time: opts.timeMs ?? 200, iterations: opts.iterations ?? 10, warmupIterations: 2, warmupTime: 0, throws: true });
  bench.add(p.impl, fn);
  bench.runSync();
  const r = bench.tasks[0]!.result as { latency: { p50: number; min: number; samplesCount: number } };
  return {
    device: p.device, signature: p.signature, impl: p.impl, n: r.latency.samplesCount,
    median_ms: r.latency.p50, min_ms: r.latency.min, max_abs_err: err.abs, max_rel_err: err.rel, within_contract: err.within ? 1 : 0, measured_at: Date.now(),
  };
}

export interface TuneRow extends KernelRecord {
  /** Whether the record was measured now (false: it was in the database already). */
  fresh: boolean;
  contract: Contract;
}

/**
 * Measure every path the database does not have yet (all of them with `force`), write the
 * records, and return one row per path.
 */
export function tune(paths: Iterable<ExecutionPath>, opts: MeasureOptions & { force?: boolean; write?: boolean; onPath?: (p: ExecutionPath, i: number) => void } = {}): TuneRow[] {
  const known = new Map<string, KernelRecord>();
  for (const r of readRecords()) known.set(`${r.device}\0${r.signature}\0${r.impl}`, r);
  const rows: TuneRow[] = [];
  const fresh: KernelRecord[] = [];
  let i = 0;
  for (const p of paths) {
    opts.onPath?.(p, i++);
    const old = opts.force ? undefined : known.get(`${p.device}\0${p.signature}\0${p.impl}`);
    const rec = old ?? measurePath(p, opts);
    if (!old) fresh.push(rec);
    rows.push({ ...rec, fresh: !old, contract: p.implementation.contract });
  }
  if (opts.write !== false) writeRecords(fresh);
  return rows;
}
