/**
 * What a backend is to the layers above: something that runs a registry op over buffers.
 * Backends see TensorData (buffers with strides) and op definitions, never Tensors or graph nodes.
 */
import type { OpDef } from "../graph/op.ts";
import type { Implementation } from "./catalog.ts";
import type { DType } from "../tensor/dtype.ts";
import type { TensorData } from "../tensor/storage.ts";

/** What a compiled plan tells a backend about an input when preparing a kernel. */
export interface InputLayout {
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  readonly dtype: DType;
}

/**
 * A kernel prepared for a compiled plan: writes the op's result into the dense `out`, which is
 * preallocated (possibly reused workspace memory: not zeroed). Inputs have the layouts given to
 * `prepare` (fused ops read their inputs' storage with strides baked into their programs).
 */
export type PreparedKernel = (inputs: readonly TensorData[], out: TensorData) => void;

export interface Backend {
  readonly name: string;
  /**
   * Run `op` on `inputs`; `shape`/`dtype` are the output's, already inferred by the op's rules.
   * Views return a TensorData sharing the input's storage; other ops return a new buffer.
   */
  run(op: OpDef, inputs: readonly TensorData[], attrs: unknown, shape: readonly number[], dtype: DType): TensorData;

  // ---- optional: backends whose buffers are not host memory (webgpu) ------------------------
  /** Host data -> a new buffer of this backend (`Tensor.to(device)`). */
  upload?(t: TensorData): TensorData;
  /** This backend's data -> a new contiguous host TensorData, waiting for the device. */
  download?(t: TensorData): TensorData;
  /** Make `t.data` readable without blocking JavaScript (`await tensor.data()`). */
  read?(t: TensorData): Promise<void>;
  /**
   * Write `src` (already of dst's dtype and shape) into the view `dst` in place (in-place ops).
   * Returns false when `dst` is host data the caller should write itself.
   */
  write?(dst: TensorData, src: TensorData): boolean;
  /**
   * Whether prepared kernels write an output that is a dense view at any offset of a larger
   * buffer (native). Absent: they write a whole dense buffer from its start, so a compiled plan
   * writing into such a view (an assign's destination) uses a temporary and copies it in.
   */
  readonly writesViews?: boolean;
  /**
   * The object identifying `t`'s storage (views of one buffer share it). Absent: `t.data` (host
   * arrays); device buffers must give one, since reading their `data` copies them to the host.
   */
  storageOf?(t: TensorData): object;
  /** Submit work recorded so far; the scheduler calls it once at the end of each realize. */
  flush?(): void;
  /**
   * Wait until every submitted command buffer has run (torch.cuda.synchronize): host buffers a
   * plan wrote in place (assigns) are then readable from JavaScript.
   */
  synchronize?(): void;
  /**
   * A compiled plan is about to run (allocate its outputs, then call its kernels) with about
   * `work` element operations (CompiledPlan.work): a backend may pick how to run it (native: a
   * small plan on the calling thread, its outputs plain buffers). `now`: the caller waits for
   * the results at once (a read), so nothing is gained by running the plan asynchronously
   * (native: it runs on the calling thread when nothing is queued before it).
   */
  begin?(work: number, now?: boolean): void;
  /**
   * A view (shape, strides, element offset) of `t`'s buffer. Device buffers need this: building
   * a TensorData literal from `t.data` would copy a device buffer to the host.
   */
  view?(t: TensorData, shape: readonly number[], strides: readonly number[], offset: number): TensorData;
  /**
   * Backends whose buffers live in device memory (webgpu): where a compiled plan's buffers come
   * from. Absent: host memory (allocData, one ArrayBuffer workspace per device).
   */
  readonly deviceMemory?: DeviceMemory;

  // ---- optional: the graph compiler (src/scheduler) -----------------------------------------
  /**
   * Fused ops (registry FUSED_OPS names) this backend has kernels for; the graph compiler only
   * creates these. Absent: none (plans then run the unfused ops).
   */
  readonly fusedOps?: readonly string[];
  /**
   * Most distinct input buffers one kernel may read (webgpu: the adapter's storage buffers per
   * shader stage less the output); the fuser keeps every group within it. Absent: unbounded.
   */
  readonly maxKernelInputs?: number;
  /**
   * Prepare a non-view op for a compiled plan, writing into a buffer the plan owns. Absent: the
   * plan calls `run` and copies the result into its buffer.
   */
  prepare?(op: OpDef, inputs: readonly InputLayout[], attrs: unknown, shape: readonly number[], dtype: DType): PreparedKernel;
  /**
   * A dense, uninitialized host buffer for a compiled plan's outputs (native: pooled memory that
   * the plan's asynchronous command buffer writes; reading its `data` waits for the plan).
   * Absent: a fresh zeroed buffer.
   */
  allocOutput?(dtype: DType, shape: readonly number[]): TensorData;
  /**
   * The kernel catalog's entries for registry op `op` on this backend (catalog.ts), the exact
   * one (what `prepare` gives) included. The scheduler picks among those that apply within the
   * plan's tolerance. Absent: `prepare` is the only implementation.
   */
  implementations?(op: string): readonly Implementation[];
}

/**
 * One step of a batch: a registry op (or a fused elementwise chain) writing its preallocated
 * dense `out`. Steps run in order; a step may read earlier steps' outputs.
 */
export type BatchStep =
  | { readonly op: OpDef; readonly attrs: unknown; readonly inputs: readonly TensorData[]; readonly out: TensorData; readonly chain?: undefined }
  | { readonly op: null; readonly attrs?: undefined; readonly inputs: readonly TensorData[]; readonly out: TensorData; readonly chain: readonly FusedStep[] };

/**
 * One op of a fused elementwise chain over registers: registers 0..nin-1 are the step's inputs
 * (broadcast to `out`), op k writes register nin+k rounded to `dtype` (so the chain equals the
 * unfused ops), the last register is the output.
 */
export interface FusedStep {
  readonly op: OpDef;
  readonly dtype: DType;
  /** Register numbers of the op's operands. */
  readonly args: readonly number[];
}

/** A submitted batch: `done` settles when it has run; `wait()` blocks until then (and throws its error). */
export interface Submission {
  readonly done: Promise<void>;
  readonly isDone: boolean;
  wait(): void;
}

/** A backend that runs a whole batch as one asynchronous command buffer (the native backend). */
export interface BatchBackend extends Backend {
  submit(steps: readonly BatchStep[]): Submission;
}

/** How a compiled plan allocates on a device-memory backend (see Backend.deviceMemory). */
export interface DeviceMemory {
  /** Bytes per element of `dtype` in device buffers: the memory planner's unit. */
  elementBytes(dtype: DType): number;
  /** A new dense buffer (a plan's outputs and kept values). */
  alloc(dtype: DType, shape: readonly number[]): TensorData;
  /** A dense buffer for the workspace region [byteOffset, byteOffset + bytes) (transients). */
  workspace(byteOffset: number, bytes: number, dtype: DType, shape: readonly number[]): TensorData;
}
