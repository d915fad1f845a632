/// <reference types="@webgpu/types" />
/**
 * The WebGPU backend: runs every registry op as WGSL compute kernels on GPU buffers.
 * Elementwise ops are generated from the op table (elementwise.ts), reductions and lane ops from
 * their folds (reduce.ts), kernel ops have launchers (kernels.ts, matmul.ts); views are stride
 * arithmetic over the same buffer. Work is recorded into the open command batch and submitted
 * once per realize (queue.ts). Operands that are CPU data (constants a surface method made,
 * tensors of the cpu device mixed in) are uploaded on use; 0-d ones become kernel parameters.
 */
import type { OpDef } from "../../graph/op.ts";
import { OPS } from "../../graph/registry.ts";
import { decoder, type DType } from "../../tensor/dtype.ts";
import { broadcastStrides, numel } from "../../tensor/shape.ts";
import { toContiguous, type TensorData } from "../../tensor/storage.ts";
import type { Backend, DeviceMemory, InputLayout, PreparedKernel } from "../backend.ts";
import { contiguous, type Ctx, type View } from "./context.ts";
import { gpuType, toGpuArray } from "./dtype.ts";
import { EW_WGSL, launchElementwise, type Operand } from "./elementwise.ts";
import type { GpuContext } from "./gpu.ts";
import { FUSED_KERNELS } from "./fused.ts";
import { KERNELS, checkRank } from "./kernels.ts";
import type { PBuf } from "./memory.ts";
import { CommandQueue } from "./queue.ts";
import { launchReduce, REDUCE_WGSL } from "./reduce.ts";
import { GpuData, GpuStorage, isGpu } from "./storage.ts";

const NO_DATA = new Float32Array(0);
const OPS_CONTIGUOUS: OpDef = OPS.contiguous;

/** Extent [lo, hi) of storage that a strided view touches (strides are >= 0 in Loom). */
function span(t: TensorData): [number, number] {
  if (numel(t.shape) === 0) return [t.offset, t.offset];
  let hi = t.offset;
  t.shape.forEach((s, d) => { hi += (s - 1) * t.strides[d]!; });
  return [t.offset, hi + 1];
}

export class WebGpuBackend implements Backend, Ctx {
  readonly name = "webgpu";
  readonly q: CommandQueue;
  /** Operand uploads made by the current op, given back after its dispatches are recorded. */
  private temps: View[] = [];

  constructor(readonly gpu: GpuContext) {
    this.q = new CommandQueue(gpu);
  }

  // ---- Ctx ------------------------------------------------------------------------------------
  gpuView(t: TensorData, op: string): View {
    if (isGpu(t)) {
      return { buf: t.storage.buf, t: gpuType(t.dtype, op), dtype: t.dtype, shape: t.shape, strides: t.strides, offset: t.offset };
    }
    const [lo, hi] = span(t);
    const arr = toGpuArray(t.dtype, t.data, lo, hi, op);
    const buf = this.q.upload(arr);
    const v: View = { buf, t: gpuType(t.dtype, op), dtype: t.dtype, shape: t.shape, strides: t.strides, offset: t.offset - lo };
    this.temps.push(v);
    return v;
  }
  release(v: View): void {
    const i = this.temps.indexOf(v);
    if (i >= 0) {
      this.temps.splice(i, 1);
      this.q.pool.release(v.buf);
    }
  }
  alloc(dtype: DType, shape: readonly number[], op: string): GpuData {
    const n = numel(shape);
    gpuType(dtype, op);
    const st = new GpuStorage(this.q.pool.acquire(Math.max(n, 1) * 4), dtype, n, this.q);
    return new GpuData(st, [...shape], contiguous(shape), 0);
  }
  temp(dtype: DType, shape: readonly number[], op: string): View {
    const n = numel(shape);
    return { buf: this.q.pool.acquire(Math.max(n, 1) * 4), t: gpuType(dtype, op), dtype, shape: [...shape], strides: contiguous(shape), offset: 0 };
  }
  private outView(d: GpuData): View {
    return { buf: d.storage.buf, t: gpuType(d.dtype), dtype: d.dtype, shape: d.shape, strides: d.strides, offset: d.offset };
  }
  private endOp(): void {
    for (const v of this.temps) this.q.pool.release(v.buf);
    this.temps = [];
  }
  /**
   * After recording an op writing `out`: its error cells are those of its GPU inputs and of the
   * op's own checking dispatches (`replace`: the op wrote all of out's storage).
   */
  private passErrors(out: GpuData, inputs: readonly TensorData[], replace: boolean): void {
    const cells = this.q.takeCells();
    for (const t of inputs) if (isGpu(t) && t.storage !== out.storage) cells.push(...t.storage.errorCells());
    out.storage.setErrorCells(cells, replace);
  }

  /** An operand: 1-element host data becomes an immediate (no upload), else a buffer view. */
  operand(t: TensorData, op: string): Operand {
    if (!isGpu(t) && numel(t.shape) === 1) {
      const dec = decoder(t.dtype);
      const value = dec ? dec(t.data, t.offset) : t.data[t.offset]!;
      return { kind: "imm", t: t.dtype === "float64" ? "f32" : gpuType(t.dtype, op), dtype: t.dtype, value };
    }
    return { kind: "buf", view: this.gpuView(t, op) };
  }
  /** An elementwise operand broadcast to `shape`. */
  private broadcastOperand(t: TensorData, shape: readonly number[], op: string): Operand {
    const o = this.operand(t, op);
    if (o.kind === "imm") return o;
    const v = o.view;
    return { kind: "buf", view: { ...v, shape, strides: broadcastStrides(v.shape, v.strides, shape) } };
  }

  // ---- Backend --------------------------------------------------------------------------------
  run(op: OpDef, inputs: readonly TensorData[], attrs: any, shape: readonly number[], dtype: DType): TensorData {
    if (op.kind === "view") return this.runView(op, inputs[0]!, attrs);
    checkRank(op.name, shape);
    const out = this.alloc(dtype, shape, op.name);
    this.runInto(op, inputs, attrs, out);
    return out;
  }

  /** Record `op` writing the dense GPU tensor `out` (a fresh buffer or a plan's workspace). */
  private runInto(op: OpDef, inputs: readonly TensorData[], attrs: any, out: GpuData): void {
    if (numel(out.shape) === 0) return;
    this.q.takeCells();
    try {
      const o = this.outView(out);
      switch (op.kind) {
        case "elementwise": {
          const operands = inputs.map((t) => this.broadcastOperand(t, out.shape, op.name));
          launchElementwise(this, op.name as keyof typeof EW_WGSL, operands, out.shape, { view: o, dense: true });
          break;
        }
        case "reduce":
          launchReduce(this, op.name as keyof typeof REDUCE_WGSL, this.gpuView(inputs[0]!, op.name), attrs.dim, o);
          break;
        case "kernel": {
          const fused = FUSED_KERNELS[op.name as keyof typeof FUSED_KERNELS];
          if (fused) {
            fused(this, inputs, attrs, o);
            break;
          }
          const launch = KERNELS[op.name as keyof typeof KERNELS];
          if (!launch) throw new Error(`[${op.name}] has no webgpu kernel`);
          launch(this, inputs.map((t) => this.gpuView(t, op.name)), attrs, o);
          break;
        }
        case "view": throw new Error(`[${op.name}] views have no kernel`);
      }
    } finally {
      this.endOp();
    }
    // an in-place plan step reads the storage it writes: keep what it read
    this.passErrors(out, inputs, !inputs.some((t) => isGpu(t) && t.storage === out.storage));
    out.storage.invalidate(); // workspace regions are rewritten by every plan run
  }

  // ---- graph compiler -------------------------------------------------------------------------
  /** Every fused op of the registry has a WGSL kernel (fused.ts). */
  readonly fusedOps: readonly string[] = Object.keys(FUSED_KERNELS);
  /**
   * Storage bindings per kernel less three: the output, the partials buffer that the last pass
   * of a long fused reduction binds beside the inputs its epilogue may read (reduce.ts), and the
   * error ring that a kernel whose program can fault binds (integer division by 0...: program.ts
   * ErrSink).
   */
  get maxKernelInputs(): number {
    return this.q.maxBuffers - 3;
  }

  /** A kernel for a compiled plan: records the op into the plan's (GPU) output buffer. */
  prepare(op: OpDef, _inputs: readonly InputLayout[], attrs: unknown, _shape: readonly number[], _dtype: DType): PreparedKernel {
    return (inputs, out) => this.runInto(op, inputs, attrs, out as GpuData);
  }

  /**
   * Plans allocate here: outputs are fresh pooled buffers; each workspace region (byte offset,
   * size) maps to one persistent pooled buffer shared by every plan (a WebGPU dispatch cannot
   * bind one buffer as both input and output, so the workspace is not one big buffer; regions
   * that the planner reuses across lifetimes reuse the buffer).
   */
  readonly deviceMemory: DeviceMemory = {
    elementBytes: () => 4,
    alloc: (dtype, shape) => this.alloc(dtype, shape, "plan"),
    workspace: (byteOffset, bytes, dtype, shape) => {
      const key = `${byteOffset}:${bytes}`;
      let buf = this.regions.get(key);
      if (!buf) {
        buf = this.q.pool.acquire(Math.max(bytes, 4));
        this.regions.set(key, buf);
      }
      let st = this.regionStorage.get(`${key}:${dtype}`);
      if (!st) {
        st = new GpuStorage(buf, dtype, numel(shape), this.q, false);
        this.regionStorage.set(`${key}:${dtype}`, st);
      }
      return new GpuData(st, [...shape], contiguous(shape), 0);
    },
  };
  private readonly regions = new Map<string, PBuf>();
  private readonly regionStorage = new Map<string, GpuStorage>();

  private runView(op: Extract<OpDef, { kind: "view" }>, x: TensorData, attrs: unknown): TensorData {
    if (!isGpu(x)) {
      const v = op.ref(x, attrs) ?? op.ref(toContiguous(x), attrs);
      if (!v) throw new Error(`[${op.name}] view failed on a contiguous input`);
      return v;
    }
    const meta = (d: GpuData): TensorData => ({ dtype: d.dtype, shape: d.shape, strides: d.strides, offset: d.offset, data: NO_DATA });
    let src = x;
    let v = op.ref(meta(src), attrs);
    if (!v) {
      // not expressible as a view of these strides (torch.reshape copies too)
      src = this.run(OPS_CONTIGUOUS, [x], {}, x.shape, x.dtype) as GpuData;
      v = op.ref(meta(src), attrs);
      if (!v) throw new Error(`[${op.name}] view failed on a contiguous input`);
    }
    return new GpuData(src.storage, v.shape, v.strides, v.offset);
  }

  /** The GpuStorage behind a GPU view (host data: its array). */
  storageOf(t: TensorData): object {
    return isGpu(t) ? t.storage : t.data;
  }

  /**
   * Write `src` (already of dst's dtype and shape) into the GPU view `dst` in place.
   * @returns false when dst is not GPU data (the caller writes the CPU array)
   */
  write(dst: TensorData, src: TensorData): boolean {
    if (!isGpu(dst)) return false;
    try {
      let s = src;
      if (isGpu(src) && src.storage === dst.storage) {
        s = this.run(OPS_CONTIGUOUS, [src], {}, src.shape, src.dtype); // read fully before writing: they may overlap
      }
      this.q.takeCells();
      launchElementwise(this, "contiguous", [this.broadcastOperand(s, dst.shape, "copy_")], dst.shape, { view: this.outView(dst), dense: false });
      this.passErrors(dst, [src], false);
    } finally {
      this.endOp();
    }
    dst.storage.invalidate();
    return true;
  }

  /** Host data -> a new contiguous GPU tensor. */
  upload(t: TensorData): TensorData {
    if (isGpu(t)) return t;
    const c = toContiguous(t);
    const n = numel(c.shape);
    const arr = toGpuArray(c.dtype, c.data, c.offset, c.offset + n, "to");
    const st = new GpuStorage(this.q.upload(arr.length ? arr : new Float32Array(1)), c.dtype, n, this.q);
    return new GpuData(st, [...c.shape], contiguous(c.shape), 0);
  }

  /** GPU tensor -> a new contiguous host TensorData (waits for the GPU). */
  download(t: TensorData): TensorData {
    if (!isGpu(t)) return t;
    const host = t.storage.hostSync();
    return toContiguous({ dtype: t.dtype, shape: t.shape, strides: t.strides, offset: t.offset, data: host.slice() });
  }

  /** Make `t.data` available without blocking JavaScript (an async readback). */
  async read(t: TensorData): Promise<void> {
    if (isGpu(t)) await t.storage.hostAsync();
  }

  /** A view of a GPU tensor's buffer (used by compiled plans; never reads the data). */
  view(t: TensorData, shape: readonly number[], strides: readonly number[], offset: number): TensorData {
    if (!isGpu(t)) return { dtype: t.dtype, shape, strides, offset, data: t.data };
    return new GpuData(t.storage, shape, strides, offset);
  }

  /** Submit the recorded work (the scheduler calls this once at the end of a realize). */
  flush(): void {
    this.q.flush();
  }

  /** Resolves when all work submitted so far has finished on the GPU. */
  async synchronize(): Promise<void> {
    await this.q.done();
  }
  synchronizeSync(): void {
    this.q.doneSync();
  }

  /** Counters: submits, dispatches, pipelines, readbacks, uploads; pool memory. */
  stats() {
    let wsBytes = 0;
    for (const b of this.regions.values()) wsBytes += b.size;
    return { ...this.q.stats, memory: { ...this.q.pool.stats, workspaceBuffers: this.regions.size, workspaceBytes: wsBytes } };
  }
}
