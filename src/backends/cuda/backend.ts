/**
 * The CUDA backend (device "cuda"): registry ops and the graph compiler's fused programs run as
 * kernels of Loom's CUDA library (native/cuda/) on device buffers.
 *
 * Eager ops: one instruction, one submission (one FFI call that launches its kernel on the
 * library's stream and returns). Compiled plans: `prepare` returns kernels that append their
 * instruction to the open command buffer, and `flush` (the scheduler calls it once at the end of
 * a realize) submits it: one realize is one stream submission, launched by one FFI call.
 * Nothing waits for the GPU until a value is read (`.data`, `item()`, `await t.data()`).
 *
 * Applications `selectKernel` (encode.ts) sends to the CPU run there with a counter
 * (`stats.fallbacks`, `stats.fallbackByOp`; `LOOM_CUDA_STRICT=1` makes one an error): the
 * recorded instructions are submitted first, inputs are read back in their own layout, the CPU
 * backend (native, else js) computes the result, which is uploaded into the output.
 * Views are stride arithmetic over the same device buffer. Operands that are host data
 * (constants made by surface methods, cpu tensors mixed in) are uploaded on use.
 */
import type { OpDef } from "../../graph/op.ts";
import { OPS } from "../../graph/registry.ts";
import { gc } from "../../runtime/sync.ts";
import { itemsize, type DType, type TypedArray } from "../../tensor/dtype.ts";
import { LoomValueError } from "../../tensor/errors.ts";
import { contiguousStrides, numel } from "../../tensor/shape.ts";
import { toContiguous, type TensorData } from "../../tensor/storage.ts";
import type { Backend, DeviceMemory, InputLayout, PreparedKernel } from "../backend.ts";
import { jsBackend } from "../js/backend.ts";
import { nativeBackend } from "../native/backend.ts";
import { CommandWriter, MAX_INPUTS, selectKernel, type DeviceView, type Selection } from "./encode.ts";
import { COUNTER_HEAD, type CudaLib } from "./ffi.ts";
import { DevicePool, type DBuf } from "./memory.ts";
import { CudaData, CudaStorage, isCuda, type Readback } from "./storage.ts";

const NO_DATA = new Float32Array(0);

/** Counters for tests and benchmarks. */
export interface CudaStats {
  /** Instructions run on the device (eager and in plans). */
  ops: number;
  /** Command buffers submitted (one FFI call each). */
  submits: number;
  /** Applications run on the CPU instead (see `fallbackByOp`). */
  fallbacks: number;
  /** CPU runs by "op: reason". */
  readonly fallbackByOp: Map<string, number>;
  uploads: number;
  downloads: number;
}

export class CudaBackend implements Backend, Readback {
  readonly name = "cuda";
  readonly pool: DevicePool;
  readonly stats: CudaStats = { ops: 0, submits: 0, fallbacks: 0, fallbackByOp: new Map(), uploads: 0, downloads: 0 };
  private readonly writer = new CommandWriter(4096);
  private readonly eager = new CommandWriter(256);
  /** Fused ops with a device kernel: the graph compiler fuses for "cuda". */
  readonly fusedOps: readonly string[];
  /** Inputs one instruction may name (LC_MAXIN): the fuser keeps every group within it. */
  readonly maxKernelInputs = MAX_INPUTS;

  constructor(readonly lib: CudaLib) {
    this.pool = new DevicePool({
      malloc: (bytes) => lib.sym.loom_cuda_malloc(bytes),
      free: (addr) => { lib.sym.loom_cuda_free(addr); },
    }, gc);
    this.fusedOps = ["fused_elementwise", "fused_reduce"].filter((n) => lib.opcodes.has(n));
  }

  private fail(what: string): never {
    const msg = this.lib.lastError();
    // a device fault of an integer result: the CPU shim's error class (native/backend.ts nativeError)
    if (/ZeroDivisionError|cannot be stored in a/.test(msg)) throw new LoomValueError(msg);
    throw new Error(`[cuda] ${what}: ${msg}`);
  }

  // ---- transfers (Readback) -----------------------------------------------------------------------
  readInto(dst: TypedArray, addr: number, bytes: number): void {
    this.flush();
    this.stats.downloads++;
    if (this.lib.sym.loom_cuda_download(dst, addr, bytes) !== 0) this.fail("readback");
  }

  async readIntoAsync(dst: TypedArray, addr: number, bytes: number): Promise<void> {
    this.flush();
    this.stats.downloads++;
    const h = this.lib.sym.loom_cuda_read_start(addr, bytes);
    if (!h) this.fail("readback");
    let delay = 0;
    while (this.lib.sym.loom_cuda_read_done(h) !== 1) {
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(4, delay + 0.25);
    }
    if (this.lib.sym.loom_cuda_read_finish(h, dst) !== 0) this.fail("readback");
  }

  /** Copy host bytes into device memory at `addr` (queued on the stream; the host array may be reused at once). */
  private uploadBytes(addr: number, src: TypedArray): void {
    if (src.byteLength === 0) return;
    this.stats.uploads++;
    if (this.lib.sym.loom_cuda_upload(addr, src, src.byteLength) !== 0) this.fail("upload");
  }

  // ---- buffers -----------------------------------------------------------------------------------
  /** A new dense device tensor (uninitialized). */
  alloc(dtype: DType, shape: readonly number[]): CudaData {
    const n = numel(shape);
    const st = new CudaStorage(this.pool.acquire(Math.max(n, 1) * itemsize[dtype]), dtype, n, this);
    return new CudaData(st, [...shape], contiguousStrides(shape), 0);
  }

  /** Host data -> a new contiguous device tensor. */
  upload(t: TensorData): TensorData {
    if (isCuda(t)) return t;
    const c = toContiguous(t);
    const n = numel(c.shape);
    const out = this.alloc(c.dtype, c.shape);
    this.uploadBytes(out.storage.buf.addr, c.data.subarray(c.offset, c.offset + n) as TypedArray);
    return out;
  }

  /** Device tensor -> a new contiguous host TensorData (waits for the device). */
  download(t: TensorData): TensorData {
    if (!isCuda(t)) return t;
    const host = t.storage.hostSync();
    return toContiguous({ dtype: t.dtype, shape: t.shape, strides: t.strides, offset: t.offset, data: host.slice() as TypedArray });
  }

  /** The operand as a device view (host data is uploaded: a dense copy). */
  private operand(t: TensorData): CudaData {
    return isCuda(t) ? t : (this.upload(t) as CudaData);
  }

  private static view(t: CudaData): DeviceView {
    return { addr: t.storage.buf.addr, dtype: t.dtype, shape: t.shape, strides: t.strides, offset: t.offset };
  }

  // ---- Backend -----------------------------------------------------------------------------------
  run(op: OpDef, inputs: readonly TensorData[], attrs: unknown, shape: readonly number[], dtype: DType): TensorData {
    if (op.kind === "view") return this.runView(op, inputs[0]!, attrs);
    const sel = selectKernel(op, inputs, attrs, shape, dtype, this.lib.opcodes);
    if (!sel.device) {
      const host = this.onCpu(op, inputs, attrs, shape, dtype, sel.reason);
      return this.upload(host);
    }
    this.flush(); // never interleave with a plan being recorded
    const out = this.alloc(dtype, shape);
    this.runNow(sel, out, inputs);
    return out;
  }

  /** Submit `sel`'s one instruction writing `out` at once (the caller flushed the plan being recorded). */
  private runNow(sel: Extract<Selection, { device: true }>, out: CudaData, inputs: readonly TensorData[]): void {
    const w = this.eager;
    w.reset();
    this.record(w, sel, out, inputs);
    this.submit(w);
  }

  /** Append `sel`'s instruction writing `out` to `w` (host operands uploaded now). */
  private record(w: CommandWriter, sel: Extract<Selection, { device: true }>, out: CudaData, inputs: readonly TensorData[]): void {
    const ins = inputs.map((t) => this.operand(t));
    w.instr(sel.code, sel.words, CudaBackend.view(out), ins.map(CudaBackend.view));
    for (const x of ins) w.keep.push(x.storage);
    w.keep.push(out.storage);
    out.storage.invalidate();
    this.stats.ops++;
  }

  private submit(w: CommandWriter): void {
    if (w.count === 0) return;
    this.stats.submits++;
    const failed = this.lib.sym.loom_cuda_submit(w.buf, w.n);
    w.reset();
    if (failed !== -1) this.fail(failed >= 0 ? `instruction ${failed} failed` : "submission failed");
  }

  /** Run an application on the CPU backend: inputs read back in their own layout (fused programs bake strides). */
  private onCpu(op: OpDef, inputs: readonly TensorData[], attrs: unknown, shape: readonly number[], dtype: DType, reason: string): TensorData {
    this.stats.fallbacks++;
    const key = `${op.name}: ${reason}`;
    this.stats.fallbackByOp.set(key, (this.stats.fallbackByOp.get(key) ?? 0) + 1);
    if (process.env.LOOM_CUDA_STRICT === "1") throw new LoomValueError(`[cuda] ${op.name} would run on the CPU (${reason}) and LOOM_CUDA_STRICT=1`);
    this.flush();
    const host = inputs.map((t): TensorData => (isCuda(t) ? { dtype: t.dtype, shape: t.shape, strides: t.strides, offset: t.offset, data: t.storage.hostSync() } : t));
    const cpu = nativeBackend() ?? jsBackend;
    const r = cpu.run(op, host, attrs, shape, dtype);
    // a native result is a plain buffer (eager runs are synchronous); copy it out of any view
    return toContiguous({ dtype: r.dtype, shape: r.shape, strides: r.strides, offset: r.offset, data: r.data });
  }

  private runView(op: Extract<OpDef, { kind: "view" }>, x: TensorData, attrs: unknown): TensorData {
    if (!isCuda(x)) {
      const v = op.ref(x, attrs) ?? op.ref(toContiguous(x), attrs);
      if (!v) throw new Error(`[${op.name}] view failed on a contiguous input`);
      return v;
    }
    const meta = (d: CudaData): TensorData => ({ dtype: d.dtype, shape: d.shape, strides: d.strides, offset: d.offset, data: NO_DATA });
    let src: CudaData = x;
    let v = op.ref(meta(src), attrs);
    if (!v) {
      // not expressible as a view of these strides (torch.reshape copies too)
      src = this.run(OPS.contiguous, [x], {}, x.shape, x.dtype) as CudaData;
      v = op.ref(meta(src), attrs);
      if (!v) throw new Error(`[${op.name}] view failed on a contiguous input`);
    }
    return new CudaData(src.storage, v.shape, v.strides, v.offset);
  }

  // ---- compiled plans -------------------------------------------------------------------------------
  /** A kernel for a compiled plan: records the op into the open command buffer (or runs it on the CPU). */
  prepare(op: OpDef, inputs: readonly InputLayout[], attrs: unknown, shape: readonly number[], dtype: DType): PreparedKernel {
    const sel = selectKernel(op, inputs, attrs, shape, dtype, this.lib.opcodes);
    if (!sel.device) {
      return (ins, out) => {
        const host = this.onCpu(op, ins, attrs, shape, dtype, sel.reason);
        this.writeHost(out as CudaData, host);
      };
    }
    return (ins, out) => this.record(this.writer, sel, out as CudaData, ins);
  }

  /** Upload dense host values into the dense device view `out`. */
  private writeHost(out: CudaData, host: TensorData): void {
    const n = numel(out.shape);
    const c = toContiguous(host);
    out.storage.invalidate();
    this.uploadBytes(out.storage.addrOf(out.offset), c.data.subarray(c.offset, c.offset + n) as TypedArray);
  }

  /**
   * Plans allocate here: outputs are fresh pooled buffers; each workspace region (byte offset,
   * size) maps to one persistent buffer shared by every plan (regions the planner reuses across
   * lifetimes reuse the buffer), as on webgpu.
   */
  readonly deviceMemory: DeviceMemory = {
    elementBytes: (dtype) => itemsize[dtype],
    alloc: (dtype, shape) => this.alloc(dtype, shape),
    workspace: (byteOffset, bytes, dtype, shape) => {
      const key = `${byteOffset}:${bytes}`;
      let buf = this.regions.get(key);
      if (!buf) this.regions.set(key, (buf = this.pool.acquire(Math.max(bytes, 16))));
      let st = this.regionStorage.get(`${key}:${dtype}`);
      if (!st) this.regionStorage.set(`${key}:${dtype}`, (st = new CudaStorage(buf, dtype, numel(shape), this, false)));
      return new CudaData(st, [...shape], contiguousStrides(shape), 0);
    },
  };
  private readonly regions = new Map<string, DBuf>();
  private readonly regionStorage = new Map<string, CudaStorage>();

  /** The storage behind a device view (host data: its array). */
  storageOf(t: TensorData): object {
    return isCuda(t) ? t.storage : t.data;
  }

  /**
   * Write `src` (already of dst's dtype and shape) into the device view `dst` in place.
   * @returns false when dst is not device data (the caller writes the host array)
   */
  write(dst: TensorData, src: TensorData): boolean {
    if (!isCuda(dst)) return false;
    let s = src;
    if (isCuda(src) && src.storage === dst.storage) s = this.run(OPS.contiguous, [src], {}, src.shape, src.dtype); // they may overlap
    if (numel(dst.shape) === 0) return true;
    let sel = selectKernel(OPS.contiguous, [s], {}, dst.shape, dst.dtype, this.lib.opcodes);
    if (!sel.device) {
      // a conversion that may fault (float into an integer view): done on the CPU, which raises
      // the fault; the converted values are then copied on the device
      s = this.upload(this.onCpu(OPS.contiguous, [s], {}, dst.shape, dst.dtype, sel.reason));
      sel = selectKernel(OPS.contiguous, [s], {}, dst.shape, dst.dtype, this.lib.opcodes);
      if (!sel.device) throw new LoomValueError(`[cuda] cannot write into a ${dst.dtype} view of shape [${dst.shape.join(", ")}] on the device: ${sel.reason}`);
    }
    this.flush();
    this.runNow(sel, dst, [s]);
    return true;
  }

  /** Make `t.data` available without blocking JavaScript (an asynchronous readback). */
  async read(t: TensorData): Promise<void> {
    if (isCuda(t)) await t.storage.hostAsync();
  }

  /** A view of a device tensor's buffer (compiled plans; never reads the data). */
  view(t: TensorData, shape: readonly number[], strides: readonly number[], offset: number): TensorData {
    if (!isCuda(t)) return { dtype: t.dtype, shape, strides, offset, data: t.data };
    return new CudaData(t.storage, shape, strides, offset);
  }

  /** Submit the recorded plan (the scheduler calls this once at the end of a realize). */
  flush(): void {
    this.submit(this.writer);
  }

  /** Wait until all submitted work has finished on the device (throws a device fault). */
  synchronize(): void {
    this.flush();
    if (this.lib.sym.loom_cuda_sync() !== 0) this.fail("synchronize");
  }

  /** The library's counters: submissions, launches, transfers, matmul paths, instructions per op. */
  deviceCounters(): { submits: number; launches: number; uploads: number; uploadBytes: number; downloads: number; downloadBytes: number;
    mallocs: number; frees: number; cublasCalls: number; tiledMatmuls: number; byOp: Map<string, number> } {
    const c = new Float64Array(COUNTER_HEAD + this.lib.opEnd);
    this.lib.sym.loom_cuda_counters(c);
    const byOp = new Map<string, number>();
    for (const [name, code] of this.lib.opcodes) if (c[COUNTER_HEAD + code]) byOp.set(name, c[COUNTER_HEAD + code]!);
    return {
      submits: c[0]!, launches: c[1]!, uploads: c[2]!, uploadBytes: c[3]!, downloads: c[4]!, downloadBytes: c[5]!,
      mallocs: c[6]!, frees: c[7]!, cublasCalls: c[8]!, tiledMatmuls: c[9]!, byOp,
    };
  }
}
