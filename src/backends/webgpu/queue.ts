/// <reference types="@webgpu/types" />
/**
 * The command queue: dispatches are recorded into one GPUCommandEncoder (a "batch") and
 * submitted together by `flush()`, which the scheduler calls once at the end of a realize (so one
 * realize = one queue submit), and which readbacks call before mapping. Eager ops record into the
 * same open batch; it is submitted when JavaScript yields (a microtask), at a readback, or every
 * `maxDispatches` dispatches.
 *
 * Kernel parameters (shapes, strides, offsets, scalars) go into a uniform arena: 256 bytes per
 * dispatch, written with one `writeBuffer` per 64 KiB chunk just before the submit.
 * Pipelines are compiled once per WGSL source.
 */
import { LoomValueError } from "../../tensor/errors.ts";
import { waitSync, type GpuContext } from "./gpu.ts";
import { BufferPool, bucket, type PBuf } from "./memory.ts";

/** A compute kernel: WGSL source with binding 0 = `P` (params uniform) and 1.. storage buffers. */
export interface Kernel {
  readonly source: string;
  /** Access of bindings 1..n: "r" read-only storage, "rw" read-write storage. */
  readonly access: readonly ("r" | "rw")[];
}

/** u32 words of parameters per dispatch (`P: array<vec4<u32>, 16>` in WGSL). */
export const PARAM_WORDS = 64;
const PARAM_BYTES = PARAM_WORDS * 4;
const SLOTS_PER_CHUNK = 256;

/** WGSL declaring binding 0 and `p(i)`, the i-th parameter word. */
export const PARAMS_WGSL = /* wgsl */ `
@group(0) @binding(0) var<uniform> P: array<vec4<u32>, 16>;
fn p(i: u32) -> u32 { return P[i / 4u][i % 4u]; }
fn pf(i: u32) -> f32 { return bitcast<f32>(p(i)); }
fn pi(i: u32) -> i32 { return bitcast<i32>(p(i)); }
`;

/** Counters for tests and benchmarks. */
export interface QueueStats {
  /** queue.submit calls. */
  submits: number;
  /** Compute dispatches recorded. */
  dispatches: number;
  /** Pipelines compiled (cache misses). */
  pipelines: number;
  /** Readbacks (buffer maps). */
  readbacks: number;
  /** Host-to-GPU uploads. */
  uploads: number;
}

/**
 * One way a kernel can fail (its "site"): builds the error from the 32-bit value the kernel
 * recorded (an index, or the bits of a float). Sites are numbered from 1 in the kernel's cell.
 */
export type ErrSite = (v: number) => Error;

/** Error cells in the ring (16 bytes each); a full ring is resolved in one readback and reused. */
const ERR_CELLS = 16384;

/**
 * WGSL declaring the error ring at `binding` and `report(site, v)`, which records the first fault
 * of the dispatch in its cell (whose first word is parameter `word`): cell words are site
 * (1-based), value, unused, claimed flag. The flag makes one thread the writer of both words, so
 * the site and the value always belong together (with several sites, which fault wins is up to
 * the GPU's scheduling; every read raises one of them).
 */
export const ERR_WGSL = (binding: number, word: number) => `
@group(0) @binding(${binding}) var<storage, read_write> err: array<atomic<u32>>;
fn report(site: u32, v: i32) {
  let e = p(${word}u);
  if (atomicMax(&err[e + 3u], 1u) == 0u) { atomicStore(&err[e], site); atomicStore(&err[e + 1u], bitcast<u32>(v)); }
}`;

/**
 * The error slot of one dispatch that can fault (an index kernel, an integer division...): 4
 * words in the error ring, zero unless the kernel reported a fault. Storages written by the
 * dispatch, and by anything computed from them, hold the cell; their readbacks resolve it.
 */
export class ErrCell {
  /** undefined: not read back yet; null: no error; else the error (raised on every read). */
  state: Error | null | undefined = undefined;
  constructor(readonly index: number, readonly sites: readonly ErrSite[]) {}
  /** First word of the cell in the ring (the kernel's parameter). */
  get word(): number { return this.index * 4; }
}

interface Chunk { gpu: GPUBuffer; words: Uint32Array }

export class CommandQueue {
  readonly stats: QueueStats = { submits: 0, dispatches: 0, pipelines: 0, readbacks: 0, uploads: 0 };
  readonly pool: BufferPool;
  private readonly staging: BufferPool;
  private readonly device: GPUDevice;
  private readonly pipelines = new Map<string, { pipeline: GPUComputePipeline; layout: GPUBindGroupLayout; layoutKey: string }>();
  private readonly layouts = new Map<string, GPUBindGroupLayout>();
  private readonly chunks: Chunk[] = [];
  /** Id of the open batch; buffers it touches carry it in `lastBatch`. */
  batch = 0;
  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private slots = 0;
  private flushScheduled = false;
  /** Buffers kept alive until the batch is submitted (temporaries released at submit). */
  private deferred: PBuf[] = [];
  /** Evicted bind groups: released once the batch that may use them is submitted. */
  private bindGroups: GPUBindGroup[] = [];
  private readonly bindCache = new Map<string, GPUBindGroup>();

  /** Drop cached bind groups (bun-webgpu never frees them itself): released after the next submit. */
  private evictBindGroups(): void {
    for (const g of this.bindCache.values()) this.bindGroups.push(g);
    this.bindCache.clear();
  }
  /** ERR_CELLS cells of 4 words: site (1-based), value, unused, claimed flag (see ERR_WGSL). */
  readonly errBuf: GPUBuffer;
  /** Cells handed out from the ring since it was last cleared (unresolved ones are resolved before reuse). */
  private cells: ErrCell[] = [];
  /** Cells handed out since the last `takeCells()` (the backend gives them to the op's output). */
  private opCells: ErrCell[] = [];
  maxDispatches = 2048;
  /** The adapter's maxStorageBuffersPerShaderStage (the fuser keeps kernels within it). */
  readonly maxBuffers: number;

  constructor(readonly ctx: GpuContext) {
    this.device = ctx.device;
    this.maxBuffers = this.device.limits.maxStorageBuffersPerShaderStage;
    this.pool = new BufferPool(this.device, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST);
    this.staging = new BufferPool(this.device, GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST);
    this.errBuf = this.device.createBuffer({ size: ERR_CELLS * 16, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  }

  // ---- recording ------------------------------------------------------------------------------
  private open(): GPUCommandEncoder {
    if (!this.encoder) {
      this.encoder = this.device.createCommandEncoder();
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        queueMicrotask(() => { this.flushScheduled = false; this.flush(); });
      }
    }
    return this.encoder;
  }
  private computePass(): GPUComputePassEncoder {
    if (!this.pass) this.pass = this.open().beginComputePass();
    return this.pass;
  }
  private endPass(): GPUCommandEncoder {
    const enc = this.open();
    if (this.pass) {
      this.pass.end();
      this.pass = null;
    }
    return enc;
  }

  private pipelineFor(k: Kernel): { pipeline: GPUComputePipeline; layout: GPUBindGroupLayout; layoutKey: string } {
    let hit = this.pipelines.get(k.source);
    if (hit) return hit;
    const key = k.access.join(",");
    let layout = this.layouts.get(key);
    if (!layout) {
      const entries: GPUBindGroupLayoutEntry[] = [
        { binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: "uniform", hasDynamicOffset: true } },
        ...k.access.map((a, i): GPUBindGroupLayoutEntry => ({
          binding: i + 1, visibility: GPUShaderStage.COMPUTE, buffer: { type: a === "r" ? "read-only-storage" : "storage" },
        })),
      ];
      layout = this.device.createBindGroupLayout({ entries });
      this.layouts.set(key, layout);
    }
    const module = this.device.createShaderModule({ code: k.source });
    const pipeline = this.device.createComputePipeline({
      layout: this.device.createPipelineLayout({ bindGroupLayouts: [layout] }),
      compute: { module, entryPoint: "main" },
    });
    this.stats.pipelines++;
    hit = { pipeline, layout, layoutKey: key };
    this.pipelines.set(k.source, hit);
    return hit;
  }

  /**
   * Record one dispatch. `buffers` bind in order to bindings 1..n (the error buffer is passed
   * as `null`). `groups` is the workgroup count (counts over 65535 are split into x·y; kernels
   * use linearIndex()) or an explicit [x, y, z] grid.
   */
  dispatch(k: Kernel, params: ArrayLike<number>, buffers: readonly (PBuf | null)[], groups: number | readonly [number, number, number]): void {
    const [gx, gy, gz] = typeof groups === "number" ? [Math.min(groups, 65535), Math.ceil(groups / 65535), 1] : groups;
    if (gx === 0 || gy === 0 || gz === 0) return;
    if (params.length > PARAM_WORDS) throw new LoomValueError(`[webgpu] kernel needs ${params.length} parameter words (max ${PARAM_WORDS})`);
    if (buffers.length > this.maxBuffers) throw new LoomValueError(`[webgpu] kernel binds ${buffers.length} storage buffers (the adapter allows ${this.maxBuffers} per shader stage)`);
    const { pipeline, layout, layoutKey } = this.pipelineFor(k);
    const slot = this.slots++;
    const ci = Math.floor(slot / SLOTS_PER_CHUNK);
    if (ci === this.chunks.length) {
      this.chunks.push({
        gpu: this.device.createBuffer({ size: SLOTS_PER_CHUNK * PARAM_BYTES, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST }),
        words: new Uint32Array(SLOTS_PER_CHUNK * PARAM_WORDS),
      });
    }
    const chunk = this.chunks[ci]!;
    const base = (slot % SLOTS_PER_CHUNK) * PARAM_WORDS;
    for (let i = 0; i < params.length; i++) chunk.words[base + i] = params[i]!;
    // Bind groups are cached by (layout, parameter chunk, buffers): the parameter slot is a
    // dynamic offset, so a loop over the same pooled buffers reuses them (creating one costs more
    // than the dispatch in bun-webgpu).
    let key = `${layoutKey}#${ci}`;
    for (const b of buffers) {
      key += b ? `,${b.id}` : ",0";
      if (b) b.lastBatch = this.batch;
    }
    let bind = this.bindCache.get(key);
    if (!bind) {
      if (this.bindCache.size >= 8192) this.evictBindGroups();
      const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: { buffer: chunk.gpu, offset: 0, size: PARAM_BYTES } }];
      buffers.forEach((b, i) => entries.push({ binding: i + 1, resource: { buffer: b ? b.gpu : this.errBuf } }));
      bind = this.device.createBindGroup({ layout, entries });
      this.bindCache.set(key, bind);
    }
    const pass = this.computePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bind, [base * 4]);
    pass.dispatchWorkgroups(gx, gy, gz);
    this.stats.dispatches++;
    if (this.slots >= this.maxDispatches) this.flush();
  }

  /**
   * A fresh (zero) error cell for the next dispatch, which binds the ring as its `null` buffer and
   * gets `cell.word` as a parameter; `sites` build its errors. A full ring is first read back, its
   * cells resolved, and cleared.
   */
  errorCell(sites: readonly ErrSite[]): ErrCell {
    if (this.cells.length === ERR_CELLS) {
      this.resolve(this.cells);
      this.cells = [];
      this.endPass().clearBuffer(this.errBuf, 0, ERR_CELLS * 16);
    }
    const c = new ErrCell(this.cells.length, sites);
    this.cells.push(c);
    this.opCells.push(c);
    return c;
  }
  /** The cells handed out since the last call. */
  takeCells(): ErrCell[] {
    const c = this.opCells;
    if (c.length) this.opCells = [];
    return c;
  }
  /** Read back the ring now (waits for the GPU) and resolve `cells`. */
  resolve(cells: readonly ErrCell[]): void {
    const pending = cells.filter((c) => c.state === undefined);
    if (pending.length === 0) return;
    const bytes = this.cells.length * 16;
    const st = this.staging.acquire(bytes);
    this.endPass().copyBufferToBuffer(this.errBuf, 0, st.gpu, 0, bytes);
    this.flush();
    waitSync(st.gpu.mapAsync(GPUMapMode.READ, 0, bytes), this.ctx.processEvents);
    const words = new Int32Array(st.gpu.getMappedRange(0, bytes).slice(0));
    st.gpu.unmap();
    this.staging.release(st);
    for (const c of pending) settle(c, words, c.word);
  }

  /** Record a buffer-to-buffer copy (bytes, multiples of 4). */
  copy(src: PBuf, srcOffset: number, dst: PBuf, dstOffset: number, bytes: number): void {
    if (bytes === 0) return;
    src.lastBatch = dst.lastBatch = this.batch;
    this.endPass().copyBufferToBuffer(src.gpu, srcOffset, dst.gpu, dstOffset, bytes);
  }

  /** Record zero-filling `bytes` of `dst` (multiple of 4). */
  clear(dst: PBuf, bytes: number): void {
    if (bytes === 0) return;
    dst.lastBatch = this.batch;
    this.endPass().clearBuffer(dst.gpu, 0, bytes);
  }

  /** Keep a temporary alive until this batch is submitted, then return it to the pool. */
  releaseAfterSubmit(b: PBuf): void {
    this.deferred.push(b);
  }

  /** Upload `data` into a fresh pooled buffer (one the open batch does not use). */
  upload(data: Float32Array | Int32Array): PBuf {
    const b = this.pool.acquire(data.byteLength, this.batch);
    if (data.byteLength > 0) this.device.queue.writeBuffer(b.gpu, 0, data.buffer, data.byteOffset, data.byteLength);
    this.stats.uploads++;
    return b;
  }

  /** Submit the open batch (no-op when nothing is recorded). */
  flush(): void {
    if (!this.encoder) return;
    const enc = this.endPass();
    for (let c = 0; c * SLOTS_PER_CHUNK < this.slots; c++) {
      const used = Math.min(this.slots - c * SLOTS_PER_CHUNK, SLOTS_PER_CHUNK) * PARAM_WORDS;
      const ch = this.chunks[c]!;
      this.device.queue.writeBuffer(ch.gpu, 0, ch.words.buffer, 0, used * 4);
    }
    this.device.queue.submit([enc.finish()]);
    this.stats.submits++;
    this.encoder = null;
    this.slots = 0;
    this.batch++;
    for (const b of this.deferred) this.pool.release(b);
    this.deferred = [];
    // the submitted command buffer holds its own references (Dawn refcounts)
    for (const g of this.bindGroups) (g as unknown as { destroy(): void }).destroy();
    this.bindGroups = [];
  }

  // ---- readback ---------------------------------------------------------------------------------
  /** Copy `bytes` of `src` and the unresolved `cells` (16 bytes each, after the data) to a staging buffer; submit. */
  private stage(src: PBuf, offset: number, bytes: number, cells: readonly ErrCell[]): { st: PBuf; size: number; cells: ErrCell[] } {
    const pending = cells.filter((c) => c.state === undefined);
    const size = Math.max(bytes + 16 * pending.length, 4);
    const st = this.staging.acquire(size);
    const enc = this.endPass();
    src.lastBatch = this.batch;
    if (bytes > 0) enc.copyBufferToBuffer(src.gpu, offset, st.gpu, 0, bytes);
    pending.forEach((c, k) => enc.copyBufferToBuffer(this.errBuf, c.word * 4, st.gpu, bytes + 16 * k, 16));
    this.flush();
    this.stats.readbacks++;
    return { st, size, cells: pending };
  }
  private finish(st: PBuf, bytes: number, size: number, cells: readonly ErrCell[]): ArrayBuffer {
    const mapped = st.gpu.getMappedRange(0, size);
    const out = mapped.slice(0, bytes);
    const words = new Int32Array(mapped.slice(bytes, bytes + 16 * cells.length));
    st.gpu.unmap();
    this.staging.release(st);
    this.throwDeviceErrors();
    cells.forEach((c, k) => settle(c, words, 4 * k));
    return out;
  }

  /**
   * Read `bytes` of `src` from `offset`, waiting (synchronously) for the GPU; the error `cells`
   * of the data are resolved by the same readback (the caller raises their errors).
   */
  readSync(src: PBuf, offset: number, bytes: number, cells: readonly ErrCell[] = []): ArrayBuffer {
    const { st, size, cells: pending } = this.stage(src, offset, bytes, cells);
    waitSync(st.gpu.mapAsync(GPUMapMode.READ, 0, size), this.ctx.processEvents);
    return this.finish(st, bytes, size, pending);
  }

  /** Read `bytes` of `src` from `offset` without blocking JavaScript (resolving `cells` too). */
  async read(src: PBuf, offset: number, bytes: number, cells: readonly ErrCell[] = []): Promise<ArrayBuffer> {
    const { st, size, cells: pending } = this.stage(src, offset, bytes, cells);
    await st.gpu.mapAsync(GPUMapMode.READ, 0, size);
    return this.finish(st, bytes, size, pending);
  }

  /** Give free pool buffers back to the driver (cached bind groups naming them go first). */
  trim(): void {
    this.evictBindGroups();
    this.flush();
    this.pool.trim();
  }

  /** Wait until all submitted work has finished (flushes first). */
  async done(): Promise<void> {
    this.flush();
    await this.device.queue.onSubmittedWorkDone();
    this.throwDeviceErrors();
  }
  /** Synchronous `done()`. */
  doneSync(): void {
    this.flush();
    waitSync(this.device.queue.onSubmittedWorkDone(), this.ctx.processEvents);
    this.throwDeviceErrors();
  }

  /** Dawn's uncaptured errors (WGSL compile errors, validation) surface here as exceptions. */
  throwDeviceErrors(): void {
    if (this.ctx.errors.length === 0) return;
    const msgs = this.ctx.errors.splice(0);
    throw new LoomValueError(`[webgpu] device error: ${msgs.join("\n")}`);
  }
}

/** Resolve cell `c` from its 4 words at `at` in `words`. */
function settle(c: ErrCell, words: Int32Array, at: number): void {
  if (c.state !== undefined) return;
  const site = words[at]!;
  if (site === 0) {
    c.state = null;
    return;
  }
  const make = c.sites[site - 1];
  const e = make ? make(words[at + 1]!) : new LoomValueError(`[webgpu] a kernel reported fault ${site}`);
  e.message += " (detected on the webgpu device)";
  c.state = e;
}

/** Raise the first error among `cells` (all resolved), a new error of its type on every read. */
export function raiseCells(cells: readonly ErrCell[]): void {
  for (const c of cells) {
    if (!c.state) continue;
    const E = c.state.constructor as new (m: string) => Error;
    throw new E(c.state.message);
  }
}

export { bucket };
