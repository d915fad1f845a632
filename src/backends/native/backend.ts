/**
 * The native backend: registry ops and the graph compiler's fused ops run as C kernels (native/)
 * through the runtime's FFI (bun:ffi or Deno.dlopen: src/runtime/ffi.ts).
 *
 * Eager ops: one synchronous FFI call each, with a one-instruction command buffer.
 * Compiled plans: `prepare` returns kernels that append their instruction to the open batch, and
 * `flush` (the scheduler calls it once at the end of a realize) submits the batch as ONE command
 * buffer: the shim runs it on its executor thread while JavaScript goes on. The plan's outputs
 * (`alloc`) are pending until then: reading their `data` waits (a synchronous wait for
 * item()/tolist()), `read()` returns the completion promise for `await t.data()`, and the shim
 * runs everything in submission order, so later eager ops and plans may use them at once.
 * A small plan (CompiledPlan.work up to SYNC_MAX_WORK) with nothing queued runs at flush on the
 * calling thread instead (`loom_exec`, as eager ops do): its outputs are plain buffers, and its
 * error is thrown by the realize; a hand-off to the executor and back would cost more.
 * Buffers are JS typed arrays, large ones over pooled native memory (memory.ts); the plan's
 * transients live in the scheduler's one reused workspace per device.
 * Views stay stride arithmetic in TypeScript. Ops the shim lacks, and corner cases it does not
 * take (more than 16 dims, empty tensors), run on the js backend.
 */
import { FUSED_OPS, OPS } from "../../graph/registry.ts";
import type { OpDef } from "../../graph/op.ts";
import type { DType } from "../../tensor/dtype.ts";
import { LoomIndexError, LoomValueError } from "../../tensor/errors.ts";
import { numel } from "../../tensor/shape.ts";
import { toContiguous, type TensorData } from "../../tensor/storage.ts";
import type { BatchBackend, BatchStep, InputLayout, PreparedKernel, Submission } from "../backend.ts";
import { jsBackend } from "../js/backend.ts";
import type { Implementation } from "../catalog.ts";
import { nativeCatalog } from "./catalog.ts";
import { cstr, loadNative, type NativeLib } from "./ffi.ts";
import { HostMemory, pendingData, pendingOf, type PendingState } from "./memory.ts";
import {
  chainProgram, encodeAttrs, encodeProgram, MAX_DIMS, MAX_INPUTS, ProgramWriter, rawData,
} from "./program.ts";

/** Counters for tests and benchmarks. */
export interface NativeStats {
  /** Ops run natively (eager calls, instructions in submitted batches, and views). */
  ops: number;
  /** Eager (synchronous, one-instruction) FFI calls. */
  execs: number;
  /** Batched command buffers run (one FFI call each: queued, or small ones run at once, see `syncs`). */
  submits: number;
  /** Of `submits`: small command buffers run on the calling thread (`loom_exec`) instead of queued. */
  syncs: number;
  /** Ops that ran on the js backend instead. */
  fallbacks: number;
  /** Ops run per name (a fresh Map on each read). */
  readonly byOp: Map<string, number>;
}

/** Command buffers that may be queued at once; the next flush waits for the oldest. */
const MAX_IN_FLIGHT = 8;
/**
 * A plan whose estimated work (CompiledPlan.work) is at most this runs on the calling thread when
 * nothing is queued: handing it to the executor thread and waiting for it costs tens of µs (a
 * thread wake-up each way), more than the work (about 30 µs of elementwise work at this size).
 */
export const SYNC_MAX_WORK = 1 << 16;
const NO_ATTRS: readonly number[] = [];

function nativeError(msg: string): Error {
  if (msg.startsWith("[one_hot] class values")) return new LoomValueError(msg); // as the reference's indexError
  if (/out of bounds|non-zero size/.test(msg)) return new LoomIndexError(msg);
  // integer results (elementwise.ts intResultCheck): the same messages as the js reference
  if (/ZeroDivisionError|negative integer powers|cannot convert|cannot be stored in a/.test(msg)) return new LoomValueError(msg);
  return new Error(`[native] ${msg}`);
}

/** A submitted command buffer. `done` resolves when it has run; `wait()` blocks until then. */
class NativeSubmission implements Submission {
  private finished = false;
  private error: Error | null = null;
  private promise: Promise<void> | null = null;

  constructor(private readonly lib: NativeLib, private handle: ReturnType<NativeLib["sym"]["loom_submit"]> | null,
    private prog: ProgramWriter | null, private readonly onFinish: (w: ProgramWriter) => void = () => {}) {
    if (!handle) this.finish(-1, "");
  }


  /** Settles when the shim has finished (polled on the event loop once someone asks). */
  get done(): Promise<void> {
    if (!this.promise) {
      this.promise = new Promise<void>((res, rej) => {
        const poll = (delay: number) => {
          if (!this.finished && this.lib.sym.loom_done(this.handle!) === 1) this.collect();
          if (this.finished) {
            if (this.error) rej(this.error);
            else res();
            return;
          }
          setTimeout(() => poll(Math.min(4, delay + 0.25)), delay);
        };
        poll(0);
      });
      this.promise.catch(() => {}); // a sync wait() reports the error; an unawaited promise must not crash
    }
    return this.promise;
  }

  /** Whether the shim has finished (a cheap load of its completion word). */
  get isDone(): boolean {
    return this.finished || (this.handle !== null && this.lib.sym.loom_done(this.handle) === 1);
  }

  private collect(): void {
    const h = this.handle!;
    const failed = this.lib.sym.loom_wait(h);
    const msg = failed >= 0 ? cstr(this.lib.sym.loom_cmd_error(h)) : "";
    this.lib.sym.loom_release(h);
    this.handle = null;
    this.finish(failed, msg);
  }

  private finish(failed: number, msg: string): void {
    this.finished = true;
    if (this.prog) this.onFinish(this.prog);
    this.prog = null; // buffers may now be collected
    if (failed >= 0) this.error = nativeError(msg);
  }

  /** Block until the command buffer has run (for item()/tolist() and synchronous reads). */
  wait(): void {
    if (!this.finished) this.collect();
    if (this.error) throw this.error;
  }
}

/** The batch a compiled plan records into, and what its pending outputs wait for. */
class Batch implements PendingState {
  open = true;
  /**
   * The command buffers this plan's instructions went into: one, unless a kernel had to run on
   * the js backend in the middle (the instructions before it are submitted then, see `drain`).
   * The plan's outputs wait for all of them.
   */
  subs: NativeSubmission[] = [];
  /** @param sync - runs on the calling thread at flush (its outputs are plain buffers, never pending) */
  constructor(public writer: ProgramWriter, private readonly backend: NativeBackend, readonly sync: boolean) {}
  wait(): void {
    if (this.open) this.backend.flush();
    for (const s of this.subs) s.wait();
  }
  done(): Promise<void> {
    if (this.open) this.backend.flush();
    return Promise.all(this.subs.map((s) => s.done)).then(() => {});
  }
}

export class NativeBackend implements BatchBackend {
  readonly name = "native";
  readonly memory: HostMemory;
  /** Instructions run per opcode (eager and batched), for `stats.byOp`. */
  private readonly counts: Float64Array;
  private readonly other = new Map<string, number>();
  readonly stats: NativeStats;
  private readonly eager = new ProgramWriter(256);
  private batch: Batch | null = null;
  private inflight: NativeSubmission[] = [];
  private readonly writers: ProgramWriter[] = [];
  /** Fused ops with a native kernel: the graph compiler fuses for native. */
  readonly fusedOps: readonly string[];

  constructor(readonly lib: NativeLib) {
    this.memory = new HostMemory(lib);
    this.counts = new Float64Array(lib.opEnd);
    const names: string[] = [];
    for (const [n, c] of lib.opcodes) names[c] = n;
    const counts = this.counts, other = this.other;
    this.stats = {
      ops: 0, execs: 0, submits: 0, syncs: 0, fallbacks: 0,
      get byOp() {
        const m = new Map(other);
        counts.forEach((c, i) => { if (c) m.set(names[i]!, (m.get(names[i]!) ?? 0) + c); });
        return m;
      },
    };
    this.fusedOps = Object.keys(FUSED_OPS).filter((n) => lib.opcodes.has(n));
  }

  private catalog: ReadonlyMap<string, readonly Implementation[]> | null = null;

  /** The kernel catalog's entries for `op` (exact kernel first; see native/catalog.ts). */
  implementations(op: string): readonly Implementation[] {
    return (this.catalog ??= nativeCatalog(this)).get(op) ?? [];
  }

  /** Whether the shim has a kernel for this op (views are always handled, in TypeScript). */
  supports(op: OpDef): boolean {
    return op.kind === "view" || this.lib.opcodes.has(op.name);
  }

  /** Whether this application can run natively (else it goes to the js backend). */
  fits(op: OpDef, inputs: readonly InputLayout[] | readonly TensorData[], shape: readonly number[]): boolean {
    if (shape.length > MAX_DIMS || inputs.length > MAX_INPUTS || numel(shape) === 0) return false;
    const ew = op.kind === "elementwise";
    for (let k = 0; k < inputs.length; k++) {
      const s = inputs[k]!.shape;
      if (s.length > MAX_DIMS || (!ew && numel(s) === 0)) return false;
    }
    return true;
  }

  private countOther(name: string): void {
    this.stats.ops++;
    this.other.set(name, (this.other.get(name) ?? 0) + 1);
  }

  run(op: OpDef, inputs: readonly TensorData[], attrs: any, shape: readonly number[], dtype: DType): TensorData {
    if (op.kind === "view") {
      this.countOther(op.name);
      const v = op.ref(inputs[0]!, attrs) ?? op.ref(this.contiguous(inputs[0]!), attrs);
      if (!v) throw new Error(`[${op.name}] view failed on a contiguous input`);
      return v;
    }
    const code = this.lib.opcodes.get(op.name);
    if (code === undefined || !this.fits(op, inputs, shape)) {
      this.stats.fallbacks++;
      return jsBackend.run(op, inputs, attrs, shape, dtype);
    }
    if (this.batch !== null) this.flush(); // never interleave with a plan being recorded
    const out = this.memory.alloc(dtype, shape);
    const w = this.eager;
    w.n = 0;
    w.count = 0;
    w.instr(code, op.kind === "elementwise" ? NO_ATTRS : encodeAttrs(op, attrs, inputs, this.lib.opcodes), out, inputs);
    this.counts[code]!++;
    this.stats.ops++;
    this.stats.execs++;
    if (this.lib.sym.loom_exec(w.bufAddr, w.n) >= 0) throw nativeError(cstr(this.lib.sym.loom_error()));
    return out;
  }

  /**
   * A function running shim kernel `name` now with these attribute words on inputs of the
   * layouts the words were encoded for (eager dispatch of a catalog implementation:
   * Implementation.runner), as `run` does for an op's own kernel.
   */
  kernelRunner(name: string, words: readonly number[], shape: readonly number[], dtype: DType): (inputs: readonly TensorData[]) => TensorData {
    const code = this.lib.opcodes.get(name);
    if (code === undefined) throw new Error(`[native] the shim has no kernel ${name}`);
    return (inputs) => {
      if (this.batch !== null) this.flush(); // never interleave with a plan being recorded
      const out = this.memory.alloc(dtype, shape);
      const w = this.eager;
      w.n = 0;
      w.count = 0;
      w.instr(code, words, out, inputs);
      this.counts[code]!++;
      this.stats.ops++;
      this.stats.execs++;
      if (this.lib.sym.loom_exec(w.bufAddr, w.n) >= 0) throw nativeError(cstr(this.lib.sym.loom_error()));
      return out;
    };
  }

  private contiguous(x: TensorData): TensorData {
    if (numel(x.shape) === 0 || x.shape.length > MAX_DIMS) return toContiguous(x);
    return this.run(OPS.contiguous, [x], {}, x.shape, x.dtype);
  }

  // ---- compiled plans -------------------------------------------------------------------------------
  /**
   * A kernel for a compiled plan: appends its instruction to the open batch (submitted by
   * `flush`). Ops the shim cannot take get a kernel that waits for the batch so far and runs the
   * js backend's kernel.
   */
  prepare(op: OpDef, inputs: readonly InputLayout[], attrs: unknown, shape: readonly number[], dtype: DType): PreparedKernel {
    if (op.kind === "view") throw new Error(`[${op.name}] views are resolved by the plan, not run`);
    const code = this.lib.opcodes.get(op.name);
    let words: number[] | null = null;
    if (code !== undefined && this.fits(op, inputs, shape)) {
      try {
        words = encodeAttrs(op, attrs, inputs, this.lib.opcodes);
      } catch {
        words = null; // an op inside a program without a native kernel
      }
    }
    if (code === undefined || words === null) {
      const js = jsBackend.prepare(op, inputs, attrs, shape, dtype);
      // after drain() everything before has run: read and write the raw buffers (their pending
      // getters would close the plan's batch, whose later instructions its outputs also wait for)
      const raw = (t: TensorData): TensorData => ({ dtype: t.dtype, shape: t.shape, strides: t.strides, offset: t.offset, data: rawData(t) });
      return (ins, out) => {
        this.drain();
        this.stats.fallbacks++;
        js(ins.map(raw), raw(out));
      };
    }
    const w = words;
    return (ins, out) => {
      this.open().writer.instr(code, w, out, ins);
      this.counts[code]!++;
      this.stats.ops++;
    };
  }

  /**
   * A plan kernel appending one instruction of shim kernel `name` with these attribute words to
   * the open batch, as `prepare`'s kernels do (catalog implementations: rows.ts).
   */
  instruction(name: string, words: readonly number[]): PreparedKernel {
    const code = this.lib.opcodes.get(name);
    if (code === undefined) throw new Error(`[native] the shim has no kernel ${name}`);
    return (ins, out) => {
      this.open().writer.instr(code, words, out, ins);
      this.counts[code]!++;
      this.stats.ops++;
    };
  }

  /** Whether the plan being recorded runs on the calling thread (see begin). */
  private syncPlan = false;

  /**
   * A plan is about to run: a small one (SYNC_MAX_WORK), or one whose results the caller reads at
   * once (`now`: a read such as item(), tolist(), dataSync() or an eager op needing a pending
   * value), with nothing queued before it runs on the calling thread at flush: no thread hand-off
   * (W11 lazy decoding, one read per token: 256 -> 321 and 262 -> 348 tokens/s, A/B in one
   * session); its outputs are then plain buffers. Other plans (`eval()`) are queued and JavaScript
   * goes on meanwhile.
   */
  begin(work: number, now = false): void {
    this.flush();
    this.reap();
    this.syncPlan = (work <= SYNC_MAX_WORK || now) && this.inflight.length === 0;
  }

  /** The open batch (a new one when none is). */
  private open(): Batch {
    if (this.batch) return this.batch;
    const w = this.writers.pop() ?? new ProgramWriter(4096, true);
    w.reset();
    return (this.batch = new Batch(w, this, this.syncPlan));
  }

  /** A dense output buffer of the plan being recorded: pending until its batch has run (plain when it runs at flush). */
  allocOutput(dtype: DType, shape: readonly number[]): TensorData {
    const d = this.memory.alloc(dtype, shape);
    const b = this.open();
    return b.sync ? d : pendingData(dtype, d.shape, d.strides, 0, d.data, b);
  }

  /** A view of t's storage; pending storage stays pending (no wait). */
  view(t: TensorData, shape: readonly number[], strides: readonly number[], offset: number): TensorData {
    const s = pendingOf(t);
    if (s) return pendingData(t.dtype, shape, strides, offset, rawData(t), s);
    return { dtype: t.dtype, shape, strides, offset, data: t.data };
  }

  /**
   * Submit the open batch as one command buffer (returns at once; an error is reported to whoever
   * reads the outputs). A small plan's batch (see begin) runs now on this thread instead, and
   * throws its error here.
   */
  flush(): void {
    const b = this.batch;
    if (!b) return;
    this.batch = null;
    b.open = false;
    this.submitBatch(b);
  }

  /** Submit (or, for a small plan, run now) the instructions recorded in `b.writer`. */
  private submitBatch(b: Batch): void {
    const w = b.writer;
    if (w.count === 0) {
      this.writers.push(w);
      return;
    }
    this.stats.submits++;
    if (b.sync) {
      this.stats.syncs++;
      const failed = this.lib.sym.loom_exec(w.bufAddr, w.n);
      w.reset();
      if (this.writers.length < 4) this.writers.push(w);
      if (failed >= 0) throw nativeError(cstr(this.lib.sym.loom_error()));
      return;
    }
    this.reap();
    while (this.inflight.length >= MAX_IN_FLIGHT) this.inflight.shift()!.wait();
    const h = this.lib.sym.loom_submit(w.bufAddr, w.n, null, 0);
    const sub = new NativeSubmission(this.lib, h, w, (x) => { x.reset(); if (this.writers.length < 4) this.writers.push(x); });
    b.subs.push(sub);
    this.inflight.push(sub);
  }

  /**
   * Before a js kernel inside a plan: run everything recorded so far and wait for it, but keep
   * the plan's batch open (its outputs, allocated when the plan started, must also wait for the
   * instructions recorded after the js kernel: they go into the same batch's next command buffer).
   */
  private drain(): void {
    const b = this.batch;
    if (b && b.writer.count > 0) {
      this.submitBatch(b);
      const w = this.writers.pop() ?? new ProgramWriter(4096, true);
      w.reset();
      b.writer = w;
    }
    const subs = this.inflight;
    this.inflight = [];
    for (const s of subs) {
      try { s.wait(); } catch { /* reported by the outputs' reads */ }
    }
  }

  /** Drop finished submissions (collecting them frees their records and buffers). */
  private reap(): void {
    if (this.inflight.length === 0) return;
    const keep: NativeSubmission[] = [];
    for (const s of this.inflight) {
      if (s.isDone) {
        try { s.wait(); } catch { /* reported to whoever reads the outputs */ }
      } else keep.push(s);
    }
    this.inflight = keep;
  }

  /**
   * Submit the open batch and wait for every queued command buffer (torch.cuda.synchronize).
   * A command buffer's error is reported to whoever reads its outputs, not here.
   */
  synchronize(): void {
    this.flush();
    const subs = this.inflight;
    this.inflight = [];
    for (const s of subs) {
      try { s.wait(); } catch { /* reported by the outputs' reads */ }
    }
  }

  /** Plan kernels write dense outputs at the offset they are given (instruction tensors carry it). */
  readonly writesViews = true;

  /** The array behind `t`, without waiting for a command buffer still writing it. */
  storageOf(t: TensorData): object {
    return rawData(t);
  }

  /** `await t.data()`: settles when the command buffer writing t has run. */
  read(t: TensorData): Promise<void> {
    return pendingOf(t)?.done() ?? Promise.resolve();
  }

  /** In-place writes from JavaScript: queued plans may read dst, so they run first. */
  write(_dst: TensorData, _src: TensorData): boolean {
    if (this.batch || this.inflight.length) this.synchronize();
    return false;
  }

  // ---- batches of steps (BatchBackend) ---------------------------------------------------------
  /**
   * Run a list of steps as ONE command buffer on the shim's threads. Every step's output is
   * preallocated by the caller (dense) and may be read by later steps; the call returns at once.
   * Steps the shim cannot take make this run them in order on the calling thread instead.
   */
  submit(steps: readonly BatchStep[]): Submission {
    this.flush();
    const w = new ProgramWriter(1024, true);
    const fusedCode = this.lib.opcodes.get("fused_elementwise")!;
    for (const s of steps) {
      if (s.chain) {
        let words: number[];
        try {
          words = encodeProgram(chainProgram(s.chain, s.inputs, s.out), this.lib.opcodes);
        } catch {
          return this.runInline(steps);
        }
        if (s.inputs.length > MAX_INPUTS || s.out.shape.length > MAX_DIMS) return this.runInline(steps);
        if (numel(s.out.shape) > 0) w.instr(fusedCode, words, s.out, s.inputs);
        continue;
      }
      const code = this.lib.opcodes.get(s.op.name);
      if (code === undefined || !this.fits(s.op, s.inputs, s.out.shape)) return this.runInline(steps);
      w.instr(code, encodeAttrs(s.op, s.attrs, s.inputs, this.lib.opcodes), s.out, s.inputs);
    }
    for (const s of steps) if (s.op) this.countOther(s.op.name);
    if (w.count === 0) return new NativeSubmission(this.lib, null, null);
    this.stats.submits++;
    const sub = new NativeSubmission(this.lib, this.lib.sym.loom_submit(w.bufAddr, w.n, null, 0), w);
    this.inflight.push(sub);
    return sub;
  }

  /** Steps run one by one (a batch containing an op the shim lacks): already finished. */
  private runInline(steps: readonly BatchStep[]): Submission {
    for (const s of steps) {
      const r = s.chain ? this.runChain(s) : this.run(s.op, s.inputs, s.attrs, s.out.shape, s.out.dtype);
      const dense = toContiguous(r, s.out.dtype);
      (s.out.data as { set(a: ArrayLike<number>): void }).set(dense.data);
    }
    return new NativeSubmission(this.lib, null, null);
  }

  /** A fused chain applied op by op (the reference semantics of a chain). */
  private runChain(s: BatchStep & { chain: NonNullable<BatchStep["chain"]> }): TensorData {
    const regs: TensorData[] = [...s.inputs];
    for (const f of s.chain) regs.push(this.run(f.op, f.args.map((i) => regs[i]!), {}, s.out.shape, f.dtype));
    return regs[regs.length - 1]!;
  }

  // ---- introspection ---------------------------------------------------------------------------
  /**
   * Counters kept by the shim: submits, instructions run per opcode name, and `preemptions`:
   * how often a spinning pool thread found it had been descheduled (the machine was
   * oversubscribed, so the pool's waits slept instead of spinning for a while); `nsByOp`: wall
   * nanoseconds spent in each opcode's kernels (the profile of a plan); `inlineRuns`: queued
   * command buffers that had not started when JavaScript waited for them, run by the waiting
   * thread itself instead of handed to the executor (no thread hand-off; native/shim.c loom_wait).
   */
  shimCounters(): { submits: number; byOp: Map<string, number>; preemptions: number; nsByOp: Map<string, number>; inlineRuns: number } {
    const E = this.lib.opEnd;
    const c = new Float64Array(3 + 2 * E);
    this.lib.sym.loom_counters(c);
    const byOp = new Map<string, number>(), nsByOp = new Map<string, number>();
    for (const [name, code] of this.lib.opcodes) {
      if (c[1 + code]) byOp.set(name, c[1 + code]!);
      if (c[2 + E + code]) nsByOp.set(name, c[2 + E + code]!);
    }
    return { submits: c[0]!, byOp, preemptions: c[1 + E]!, nsByOp, inlineRuns: c[2 + 2 * E]! };
  }

  /**
   * Profile `fn`'s command buffers per instruction: for each instruction index (in command
   * buffer order; a plan instruction may encode more than one), the summed wall time in ms, the
   * opcode name and the output's element count, slowest first. Waits for the device at the end.
   * @param cap - instructions per command buffer to record
   */
  profile(fn: () => void, cap = 4096): { index: number; ms: number; op: string; elements: number }[] {
    const buf = new Float64Array(3 * cap);
    this.synchronize();
    this.lib.sym.loom_profile_buffer(buf, cap);
    try {
      fn();
      this.synchronize();
    } finally {
      this.lib.sym.loom_profile_buffer(null, 0);
    }
    const names = new Map([...this.lib.opcodes].map(([n, c]) => [c, n]));
    const rows: { index: number; ms: number; op: string; elements: number }[] = [];
    for (let k = 0; k < cap; k++) if (buf[3 * k]! > 0) rows.push({ index: k, ms: buf[3 * k]! / 1e6, op: names.get(buf[3 * k + 1]!) ?? "?", elements: buf[3 * k + 2]! });
    return rows.sort((a, b) => b.ms - a.ms);
  }

  /** Command buffers submitted and not yet collected. */
  get inFlight(): number {
    return this.inflight.filter((s) => !s.isDone).length + (this.batch?.writer.count ? 1 : 0);
  }

  /** The BLAS library in use ("" = Loom's built-in GEMM). */
  blas(): string {
    return cstr(this.lib.sym.loom_blas_name());
  }
}

let instance: NativeBackend | null | undefined;
let why = "";

/** The native backend, or null when it cannot be built or loaded (`nativeUnavailableReason()` says why). */
export function nativeBackend(): NativeBackend | null {
  if (instance !== undefined) return instance;
  const lib = loadNative();
  if ("error" in lib) {
    why = lib.error;
    instance = null;
  } else instance = new NativeBackend(lib);
  return instance;
}

export function nativeUnavailableReason(): string {
  nativeBackend();
  return why;
}
