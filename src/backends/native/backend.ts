/**
 * The native backend: registry ops run as C kernels (native/) through bun:ffi.
 *
 * Buffers are the same JS typed arrays the js backend uses (GC-managed: nothing to free), passed
 * by address. An eager op is one synchronous FFI call with a one-instruction command buffer; a
 * batch of steps (a realize) is serialized into one command buffer and submitted with ONE FFI
 * call: the shim runs it on its own threads while JavaScript goes on, and the returned
 * submission resolves a promise (or is waited for synchronously) when it has finished.
 * Views stay stride arithmetic in TypeScript. Ops the shim lacks, and corner cases it does not
 * take (more than 16 dims, empty tensors), run on the js backend.
 */
import type { OpDef } from "../../graph/op.ts";
import type { DType } from "../../tensor/dtype.ts";
import { LoomIndexError } from "../../tensor/errors.ts";
import { numel } from "../../tensor/shape.ts";
import { allocData, toContiguous, type TensorData } from "../../tensor/storage.ts";
import type { BatchBackend, BatchStep, FusedStep, Submission } from "../backend.ts";
import { jsBackend } from "../js/backend.ts";
import { cstr, loadNative, type NativeLib } from "./ffi.ts";
import { attrEncoder, DTYPE_CODE, MAX_DIMS, MAX_EW_INPUTS, MAX_INPUTS, ProgramWriter } from "./program.ts";

/** Counters for tests and benchmarks. */
export interface NativeStats {
  /** Ops run natively (eager calls, instructions in submitted batches, and views). */
  ops: number;
  /** Eager (synchronous, one-instruction) FFI calls. */
  execs: number;
  /** Batched command buffers submitted (one FFI call each). */
  submits: number;
  /** Ops that ran on the js backend instead. */
  fallbacks: number;
  byOp: Map<string, number>;
}

function nativeError(msg: string): Error {
  return /out of bounds|non-zero size/.test(msg) ? new LoomIndexError(msg) : new Error(`[native] ${msg}`);
}

/** A submitted command buffer. `done` resolves when it has run; `wait()` blocks until then. */
class NativeSubmission implements Submission {
  readonly done: Promise<void>;
  private finished = false;
  private resolve!: () => void;
  private reject!: (e: Error) => void;

  constructor(private readonly lib: NativeLib, private handle: ReturnType<NativeLib["sym"]["loom_submit"]> | null,
    private prog: ProgramWriter | null) {
    this.done = new Promise<void>((res, rej) => { this.resolve = res; this.reject = rej; });
    this.done.catch(() => {}); // a sync wait() reports the error; an unawaited promise must not crash
    if (handle) this.poll();
    else this.finish(-1, "");
  }

  /** Whether the shim has finished (a cheap load of its completion word). */
  get isDone(): boolean {
    return this.finished || (this.handle !== null && this.lib.sym.loom_done(this.handle) === 1);
  }

  /** Check the completion word on the event loop: returns at once, resolves `done` when it is set. */
  private poll(delay = 0): void {
    setTimeout(() => {
      if (this.finished) return;
      if (this.lib.sym.loom_done(this.handle!) === 1) this.collect();
      else this.poll(Math.min(4, delay + 0.25));
    }, delay);
  }

  private collect(): void {
    const h = this.handle!;
    const failed = this.lib.sym.loom_wait(h);
    const msg = failed >= 0 ? cstr(this.lib.sym.loom_cmd_error(h)) : "";
    this.lib.sym.loom_release(h);
    this.handle = null;
    this.finish(failed, msg);
  }

  private error: Error | null = null;

  private finish(failed: number, msg: string): void {
    this.finished = true;
    this.prog = null; // buffers may now be collected
    if (failed >= 0) {
      this.error = nativeError(msg);
      this.reject(this.error);
    } else this.resolve();
  }

  /** Block until the command buffer has run (for item()/tolist() and synchronous realize). */
  wait(): void {
    if (!this.finished) this.collect();
    if (this.error) throw this.error;
  }
}

export class NativeBackend implements BatchBackend {
  readonly name = "native";
  readonly stats: NativeStats = { ops: 0, execs: 0, submits: 0, fallbacks: 0, byOp: new Map() };
  private readonly eager = new ProgramWriter(256);

  constructor(readonly lib: NativeLib) {}

  /** Whether the shim has a kernel for this op (views are always handled, in TypeScript). */
  supports(op: OpDef): boolean {
    return op.kind === "view" || this.lib.opcodes.has(op.name);
  }

  /** Whether this application can run natively (else it goes to the js backend). */
  private native(op: OpDef, inputs: readonly TensorData[], shape: readonly number[]): boolean {
    const opcode = this.lib.opcodes.get(op.name);
    if (opcode === undefined || numel(shape) === 0) return false;
    const maxIn = op.kind === "elementwise" ? MAX_EW_INPUTS : MAX_INPUTS;
    if (inputs.length > maxIn || shape.length > MAX_DIMS) return false;
    for (const x of inputs) if (x.shape.length > MAX_DIMS || numel(x.shape) === 0) return false;
    return true;
  }

  private count(op: OpDef): void {
    this.stats.ops++;
    this.stats.byOp.set(op.name, (this.stats.byOp.get(op.name) ?? 0) + 1);
  }

  run(op: OpDef, inputs: readonly TensorData[], attrs: any, shape: readonly number[], dtype: DType): TensorData {
    if (op.kind === "view") {
      this.count(op);
      const v = op.ref(inputs[0]!, attrs) ?? op.ref(this.contiguous(inputs[0]!), attrs);
      if (!v) throw new Error(`[${op.name}] view failed on a contiguous input`);
      return v;
    }
    if (!this.native(op, inputs, shape)) {
      this.stats.fallbacks++;
      return jsBackend.run(op, inputs, attrs, shape, dtype);
    }
    const out = allocData(dtype, shape);
    this.count(op);
    this.stats.execs++;
    const w = this.eager;
    w.reset();
    w.instr(this.lib.opcodes.get(op.name)!, attrEncoder(op).call(null, attrs, inputs), out, inputs);
    const failed = this.lib.sym.loom_exec(w.buf, w.n);
    if (failed >= 0) throw nativeError(cstr(this.lib.sym.loom_error()));
    return out;
  }

  private contiguous(x: TensorData): TensorData {
    const out = allocData(x.dtype, x.shape);
    if (numel(x.shape) === 0) return out;
    if (x.shape.length > MAX_DIMS) return toContiguous(x);
    const w = new ProgramWriter(64);
    w.instr(this.lib.opcodes.get("contiguous")!, [], out, [x]);
    if (this.lib.sym.loom_exec(w.buf, w.n) >= 0) throw nativeError(cstr(this.lib.sym.loom_error()));
    return out;
  }

  /**
   * Run a list of steps as ONE command buffer on the shim's threads. Every step's output is
   * preallocated by the caller (dense) and may be read by later steps; the call returns at once.
   * Steps the shim cannot take make this run them in order on the calling thread instead.
   */
  submit(steps: readonly BatchStep[]): Submission {
    const w = new ProgramWriter(1024, true);
    for (const s of steps) {
      if (s.chain) {
        const prog = this.chainProgram(s.chain);
        if (!prog || s.inputs.length > MAX_EW_INPUTS || s.out.shape.length > MAX_DIMS) return this.runInline(steps);
        if (numel(s.out.shape) > 0) w.instr(this.lib.opcodes.get("fused")!, prog, s.out, s.inputs);
        continue;
      }
      if (!this.native(s.op, s.inputs, s.out.shape)) return this.runInline(steps);
      w.instr(this.lib.opcodes.get(s.op.name)!, attrEncoder(s.op).call(null, s.attrs, s.inputs), s.out, s.inputs);
    }
    for (const s of steps) if (s.op) this.count(s.op);
    if (w.count === 0) return new NativeSubmission(this.lib, null, null);
    this.stats.submits++;
    const handle = this.lib.sym.loom_submit(w.buf, w.n, null, 0);
    return new NativeSubmission(this.lib, handle, w);
  }

  /** attrs of the shim's `fused` instruction: [nsteps, (opcode, dtype, a, b, c) × nsteps]. */
  private chainProgram(chain: readonly FusedStep[]): number[] | null {
    const prog = [chain.length];
    for (const f of chain) {
      const code = this.lib.opcodes.get(f.op.name);
      if (code === undefined || f.op.kind !== "elementwise") return null;
      const [a = 0, b = a, c = a] = f.args;
      prog.push(code, DTYPE_CODE[f.dtype], a, b, c);
    }
    return prog;
  }

  /** Steps run one by one (a batch containing an op the shim lacks): already finished. */
  private runInline(steps: readonly BatchStep[]): Submission {
    for (const s of steps) {
      const r = s.chain ? this.runChain(s.chain, s.inputs, s.out) : this.run(s.op, s.inputs, s.attrs, s.out.shape, s.out.dtype);
      const dense = toContiguous(r, s.out.dtype);
      (s.out.data as { set(a: ArrayLike<number>): void }).set(dense.data);
    }
    return new NativeSubmission(this.lib, null, null);
  }

  /** A fused chain applied op by op (the reference semantics of `fused`). */
  private runChain(chain: readonly FusedStep[], inputs: readonly TensorData[], out: TensorData): TensorData {
    const regs: TensorData[] = [...inputs];
    for (const f of chain) {
      const args = f.args.map((i) => regs[i]!);
      regs.push(this.run(f.op, args, {}, out.shape, f.dtype));
    }
    return regs[regs.length - 1]!;
  }

  /** Counters kept by the shim: submits, and instructions run per opcode name. */
  shimCounters(): { submits: number; byOp: Map<string, number> } {
    const c = new Float64Array(1 + this.lib.opcodes.size + 1);
    this.lib.sym.loom_counters(c);
    const byOp = new Map<string, number>();
    for (const [name, code] of this.lib.opcodes) if (c[1 + code]) byOp.set(name, c[1 + code]!);
    return { submits: c[0]!, byOp };
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
