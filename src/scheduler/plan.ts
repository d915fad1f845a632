/**
 * CompiledPlan: a flat instruction list (kernel, input buffer slots with their views, output
 * slot, attrs) that `run` walks in one loop, without recursion or lookups.
 *
 * Buffers (slots) are of three kinds:
 * - leaf: an input bound when the plan runs (weights, optimizer state, constants: persistent);
 * - own: a value that escapes the plan (an output, or a value a live autograd record keeps):
 *   a fresh buffer per run, so results never alias memory a later plan reuses;
 * - ws: a transient, at a fixed offset in the device's workspace (reused by every plan);
 * - dest: a persistent buffer bound when the plan runs and written by it (an assign: a parameter,
 *   optimizer state or KV cache updated in place). The writes come last, after every read of the
 *   old values, so a plan reading a buffer it also writes sees the old value everywhere.
 * Backends without `prepare` (devices whose buffers are not host memory) run each instruction
 * with `Backend.run` instead, which allocates its own buffers.
 */
import type { Backend, InputLayout, PreparedKernel } from "../backends/backend.ts";
import type { OpDef } from "../graph/op.ts";
import { allocArray, itemsize, type DType } from "../tensor/dtype.ts";
import { fmtShape } from "../tensor/errors.ts";
import { contiguousStrides, numel } from "../tensor/shape.ts";
import { allocData, toContiguous, type TensorData } from "../tensor/storage.ts";
import { explain_html } from "./explain_html.ts";
import type { MemoryPlan, TransientBuffer } from "./memory.ts";
import { get_memory_limit, LoomOutOfMemoryError } from "./options.ts";

export interface ViewArg {
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  /** Element offset relative to the slot's buffer offset. */
  readonly offset: number;
}

/** An instruction operand: a buffer slot, read directly or through a view. */
export interface Arg {
  readonly slot: number;
  readonly view: ViewArg | null;
}

export interface Instruction {
  readonly op: OpDef;
  readonly attrs: unknown;
  readonly args: readonly Arg[];
  /** Each input's layout as the kernel reads it (what `prepare` was given). */
  readonly layouts: readonly InputLayout[];
  readonly out: number;
  readonly shape: readonly number[];
  readonly dtype: DType;
  /** Prepared kernel (null: run with Backend.run). */
  readonly kernel: PreparedKernel | null;
  /** Catalog implementation id behind `kernel` ("" = the backend's prepare, no catalog). */
  readonly impl: string;
  /** Written over an input buffer that dies here. */
  readonly inplace: boolean;
}

export interface Slot {
  readonly kind: "leaf" | "own" | "ws" | "dest";
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly bytes: number;
  /** ws: byte offset in the workspace. */
  readonly offset: number;
}

/** A device's workspace: one growing ArrayBuffer shared by every plan on that device. */
interface Workspace {
  buffer: ArrayBuffer;
  generation: number;
}
const workspaces = new Map<string, Workspace>();

function workspace(device: string, bytes: number): Workspace {
  let ws = workspaces.get(device);
  if (!ws) workspaces.set(device, (ws = { buffer: new ArrayBuffer(0), generation: 0 }));
  if (ws.buffer.byteLength < bytes) {
    ws.buffer = new ArrayBuffer(Math.max(bytes, Math.ceil(ws.buffer.byteLength * 1.25)));
    ws.generation++;
  }
  return ws;
}

/** Bytes of every device workspace (for tests and tools). */
export function workspaceBytes(device = "cpu"): number {
  return workspaces.get(device)?.buffer.byteLength ?? 0;
}

function fmtBytes(b: number): string {
  if (b < 1024) return `${b} B`;
  if (b < 1 << 20) return `${(b / 1024).toFixed(1)} KiB`;
  return `${(b / (1 << 20)).toFixed(2)} MiB`;
}

/** A short hex hash of a string (FNV-1a), to name a plan's key in explain output. */
export function shortHash(s: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(16).padStart(8, "0");
}

export interface PlanParts {
  key: string;
  device: string;
  backend: Backend;
  instructions: Instruction[];
  slots: Slot[];
  /** Slot of each leaf of the simplified graph, in its order (-1: unused). */
  leafSlots: number[];
  outputs: Arg[];
  /** Slot of each destination buffer (assigns), in the order `run` takes them. */
  destSlots: number[];
  /** Own buffers that keep a graph node's value: (slot, index of the node in the simplified graph). */
  keep: { slot: number; node: number }[];
  memory: MemoryPlan;
  /** The workspace buffers (ws slots in order) the memory plan placed. */
  transients: TransientBuffer[];
  /** Kernels the same graph would launch without patterns and fusion. */
  unfusedKernels: number;
  /** An instance of a plan template (plan_template.ts): the symbol, its value here and the template's range. */
  symbolic?: SymbolicBinding;
}

/** A symbolic dimension's value in a plan instance, and the range its template covers. */
export interface SymbolicBinding {
  readonly name: string;
  readonly value: number;
  readonly lo: number;
  readonly hi: number;
}

/** Ops whose work grows with an inner dimension as well as the output (see instructionWork). */
const PRODUCTS = new Set(["matmul", "fused_matmul", "lora_linear", "fused_lora_linear"]);

/**
 * Estimated work of one instruction in element operations: elements read and written, plus
 * output × inner dimension for products (the last dim of the first input) and attention (the key
 * length times the head dim).
 */
export function instructionWork(I: Pick<Instruction, "op" | "shape" | "layouts">): number {
  const n = numel(I.shape);
  let w = n;
  for (const l of I.layouts) w += numel(l.shape);
  const x = I.layouts[0]?.shape;
  if (PRODUCTS.has(I.op.name) && x && x.length) w += n * x[x.length - 1]!;
  else if (I.op.name === "fused_attention" && x && x.length >= 2) w += 2 * n * (I.layouts[1]?.shape.at(-2) ?? 1);
  return w;
}

export class CompiledPlan {
  readonly key: string;
  readonly device: string;
  readonly instructions: readonly Instruction[];
  readonly slots: readonly Slot[];
  readonly leafSlots: readonly number[];
  readonly outputs: readonly Arg[];
  readonly destSlots: readonly number[];
  readonly keep: readonly { slot: number; node: number }[];
  readonly memory: MemoryPlan;
  readonly transients: readonly TransientBuffer[];
  readonly unfusedKernels: number;
  /** Set on instances of a plan template: the symbol's value (null: a plan for fixed shapes). */
  readonly symbolic: SymbolicBinding | null;
  /** Estimated work per run in element operations (instructionWork summed). */
  readonly work: number;
  /** Whether instructions run through prepared kernels over a planned workspace. */
  readonly planned: boolean;
  /** Whether any slot lives in the workspace. */
  private readonly hasWorkspace: boolean;
  private readonly backend: Backend;
  private readonly bufs: (TensorData | null)[];
  private wsGeneration = -1;
  private wsViews: (TensorData | null)[] = [];

  constructor(p: PlanParts) {
    this.key = p.key;
    this.device = p.device;
    this.backend = p.backend;
    this.instructions = p.instructions;
    this.slots = p.slots;
    this.leafSlots = p.leafSlots;
    this.outputs = p.outputs;
    this.destSlots = p.destSlots;
    this.keep = p.keep;
    this.memory = p.memory;
    this.transients = p.transients;
    this.unfusedKernels = p.unfusedKernels;
    this.symbolic = p.symbolic ?? null;
    this.bufs = new Array(p.slots.length).fill(null);
    this.work = p.instructions.reduce((w, I) => w + instructionWork(I), 0);
    this.planned = p.instructions.every((i) => i.kernel !== null);
    this.hasWorkspace = p.slots.some((sl) => sl.kind === "ws");
  }

  /** Kernels launched per run (views cost none). */
  get kernelCount(): number {
    return this.instructions.length;
  }

  /** Bytes of the fresh output (and kept) buffers each run allocates. */
  get outputBytes(): number {
    return this.slots.reduce((p, s) => p + (s.kind === "own" ? s.bytes : 0), 0);
  }

  /** Workspace bytes this plan needs (transients, reused across lifetimes and in place). */
  get workspaceBytes(): number {
    return this.planned ? this.memory.peak : 0;
  }

  /**
   * Bytes this plan allocates per device when it runs: its workspace plus its output buffers
   * (inputs already exist and are not counted). Without prepared kernels every transient is
   * allocated separately, so they all count.
   */
  estimate_memory(): Record<string, number> {
    const transient = this.planned ? this.memory.peak : this.memory.naive;
    return { [this.device]: transient + this.outputBytes };
  }

  /** Throws LoomOutOfMemoryError when the plan does not fit the device's memory limit. */
  checkMemory(): void {
    const limit = get_memory_limit(this.device);
    if (limit === null) return;
    const need = this.estimate_memory()[this.device]!;
    if (need > limit) {
      throw new LoomOutOfMemoryError(
        `[plan] needs ${need} bytes on ${this.device} (workspace ${this.workspaceBytes}, outputs ${this.outputBytes}) but the memory limit is ${limit} bytes; nothing was run`,
      );
    }
  }

  private bindWorkspace(): void {
    if (!this.hasWorkspace) return;
    const dm = this.backend.deviceMemory;
    if (dm) {
      // device workspace regions are stable buffers of the backend: bind them once
      if (this.wsGeneration !== -2) this.wsViews = this.slots.map((s) => (s.kind === "ws" ? dm.workspace(s.offset, s.bytes, s.dtype, s.shape) : null));
      this.wsGeneration = -2;
      return;
    }
    const ws = workspace(this.device, this.memory.peak);
    if (ws.generation === this.wsGeneration) return;
    this.wsViews = this.slots.map((s) => {
      if (s.kind !== "ws") return null;
      const n = numel(s.shape);
      const C = allocArray(s.dtype, 0).constructor as new (b: ArrayBuffer, o: number, n: number) => TensorData["data"];
      return { dtype: s.dtype, shape: s.shape, strides: contiguousStrides(s.shape), offset: 0, data: new C(ws.buffer, s.offset, n) };
    });
    this.wsGeneration = ws.generation;
  }

  /**
   * Run the plan on `leaves` (the simplified graph's leaf buffers, in order), writing the assigned
   * values into `dests` (dense buffers of the assigned shapes and dtypes, parallel to
   * `destSlots`). Returns the outputs and the kept buffers (parallel to `keep`).
   * @throws LoomOutOfMemoryError before any kernel runs when the plan exceeds the memory limit
   */
  run(leaves: readonly TensorData[], dests: readonly TensorData[] = [], now = false): { outputs: TensorData[]; kept: TensorData[] } {
    this.checkMemory();
    const B = this.bufs;
    const planned = this.planned;
    for (let k = 0; k < this.leafSlots.length; k++) {
      const s = this.leafSlots[k]!;
      if (s >= 0) B[s] = leaves[k]!;
    }
    // a destination inside a larger buffer (a row slice, a tensor loaded as a view of a file):
    // kernels of backends that write only whole dense outputs get a temporary, copied in after
    let late: [TensorData, TensorData][] | null = null;
    for (let k = 0; k < this.destSlots.length; k++) {
      const d = dests[k]!, sl = this.destSlots[k]!;
      if (this.backend.writesViews || (d.offset === 0 && (this.backend.deviceMemory !== undefined || d.data.length === numel(d.shape)))) B[sl] = d;
      else {
        const tmp = this.backend.deviceMemory?.alloc(d.dtype, d.shape) ?? allocData(d.dtype, d.shape);
        (late ??= []).push([d, tmp]);
        B[sl] = tmp;
      }
    }
    this.backend.begin?.(this.work, now);
    if (planned) {
      this.bindWorkspace();
      for (let s = 0; s < this.slots.length; s++) {
        const sl = this.slots[s]!;
        if (sl.kind === "own") B[s] = this.backend.deviceMemory?.alloc(sl.dtype, sl.shape) ?? this.backend.allocOutput?.(sl.dtype, sl.shape) ?? allocData(sl.dtype, sl.shape);
        else if (sl.kind === "ws") B[s] = this.wsViews[s]!;
      }
    }
    const ins = this.instructions;
    for (let i = 0; i < ins.length; i++) {
      const I = ins[i]!;
      const args = I.args;
      const xs = new Array<TensorData>(args.length);
      for (let k = 0; k < args.length; k++) xs[k] = resolve(B, args[k]!, this.backend);
      if (I.kernel) I.kernel(xs, B[I.out]!);
      else if (this.slots[I.out]!.kind === "dest") writeInto(this.backend, B[I.out]!, this.backend.run(I.op, xs, I.attrs, I.shape, I.dtype));
      else B[I.out] = this.backend.run(I.op, xs, I.attrs, I.shape, I.dtype);
    }
    if (late) for (const [d, tmp] of late) writeInto(this.backend, d, tmp);
    const outputs = this.outputs.map((a) => resolve(B, a, this.backend));
    const kept = this.keep.map((k) => B[k.slot]!);
    // drop references so buffers and inputs can be collected between runs
    for (let s = 0; s < B.length; s++) if (!planned || this.slots[s]!.kind !== "ws") B[s] = null;
    return { outputs, kept };
  }

  /** explain() as a self-contained HTML page with a memory timeline (src/scheduler/explain_html.ts). */
  explain_html(title?: string): string { return explain_html(this, title); }

  /** A readable listing: kernels, fused groups, buffer sizes and the workspace. */
  explain(): string {
    const name = (s: number) => {
      const sl = this.slots[s]!;
      if (sl.kind === "dest") return `dest${this.destSlots.indexOf(s)}`;
      return sl.kind === "leaf" ? `in${this.leafSlots.indexOf(s)}` : sl.kind === "own" ? `out${s}` : `ws${s}`;
    };
    const argText = (a: Arg) => `${name(a.slot)}${a.view ? `${fmtShape(a.view.shape)}` : ""}`;
    const m = this.memory;
    const lines = [
      `CompiledPlan ${shortHash(this.key)} on ${this.device}: ${this.kernelCount} kernels (${this.unfusedKernels} unfused), ` +
      `workspace ${fmtBytes(this.workspaceBytes)} (naive ${fmtBytes(m.naive)}, live bound ${fmtBytes(m.liveBound)}), outputs ${fmtBytes(this.outputBytes)}`,
    ];
    const sy = this.symbolic;
    if (sy) lines.push(`  symbolic: ${sy.name} = ${sy.value}, one template for ${sy.name} in [${sy.lo}, ${sy.hi}] (kernels prepared for this value, workspace planned at ${sy.hi})`);
    this.instructions.forEach((I, i) => {
      const d = I.op.describe?.(I.attrs as never);
      const s = this.slots[I.out]!;
      const where = s.kind === "ws" ? `@${s.offset}` : "";
      lines.push(`  #${i} ${I.op.name}${d ? ` [${d}]` : ""} (${I.args.map(argText).join(", ")}) -> ${name(I.out)}${where} ${fmtShape(I.shape)} ${I.dtype} ${fmtBytes(s.bytes)}${I.inplace ? " in-place" : ""}${I.impl ? ` {${I.impl}}` : ""}`);
    });
    const leaves = this.leafSlots.filter((sl) => sl >= 0);
    const leafBytes = leaves.reduce((b, sl) => b + denseBytes(this.slots[sl]!.shape, this.slots[sl]!.dtype), 0);
    // weights, optimizer state and caches are never copied into a plan: each run binds their
    // buffers by reference (one pointer per leaf), and assigns write them in place
    if (leaves.length) lines.push(`  inputs: ${leaves.length} persistent leaves in0..in${leaves.length - 1} (${fmtBytes(leafBytes)}), bound by reference per run, no copy`);
    lines.push(`  outputs: ${this.outputs.map(argText).join(", ")}${this.destSlots.length ? `; assigns: ${this.destSlots.length} (dest<k>: a persistent buffer written in place, after every read of its old value)` : ""}`);
    return lines.join("\n");
  }
}

/** Backends without prepared kernels: copy a computed value into a destination buffer. */
function writeInto(backend: Backend, dst: TensorData, src: TensorData): void {
  if (backend.write?.(dst, src)) return;
  const v = toContiguous(src, dst.dtype).data;
  dst.data.set(v.subarray(0, numel(dst.shape)), dst.offset);
}

function resolve(B: readonly (TensorData | null)[], a: Arg, backend: Backend): TensorData {
  const b = B[a.slot]!;
  const v = a.view;
  if (!v) return b;
  // device buffers (webgpu) make their own views: reading b.data would copy them to the host
  if (backend.view) return backend.view(b, v.shape, v.strides, b.offset + v.offset);
  return { dtype: b.dtype, shape: v.shape, strides: v.strides, offset: b.offset + v.offset, data: b.data };
}

/** Storage bytes of a dense buffer. */
export function denseBytes(shape: readonly number[], dtype: DType): number {
  return numel(shape) * itemsize[dtype];
}
