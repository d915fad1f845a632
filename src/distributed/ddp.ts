/**
 * DistributedDataParallel (torch.nn.parallel.DistributedDataParallel): every rank runs the whole
 * model on its own slice of the batch; gradients are averaged over ranks during backward, so each
 * rank's optimizer makes the same update (the update of the combined batch, for a loss that is a
 * mean over the batch).
 *
 * - Construction broadcasts parameters and buffers from rank 0 and checks that every rank has the
 *   same parameter list (count, sizes).
 * - Gradients go into buckets of about `bucket_cap_mb` MB, parameters in reverse registration order
 *   (roughly the order backward produces their gradients, as torch's reducer assumes). A gradient
 *   hook (Tensor.register_hook) on each parameter files its gradient; a full bucket starts its
 *   all-reduce while backward goes on. Buckets start in index order on every rank, so the
 *   collectives match.
 *   - Eager gradients: the bucket is one flat array; MPI_Iallreduce starts at once, later hooks
 *     poll it (MPI progresses only inside MPI calls), and the last hook waits for every bucket and
 *     divides by the world size. `last_stats` says how many buckets finished before that wait
 *     (overlapped) and how long the wait blocked.
 *   - Lazy gradients (execution mode "lazy": the one-plan training step): the bucket is
 *     cat(grads) → all_reduce(avg) → views back, recorded in the step's graph; its plan runs the
 *     collective as one instruction (ops.ts). No overlap inside the plan: the instruction blocks.
 *   - Parameters on device "cuda" (backend "nccl"; "mpi" refuses them at construction): eager
 *     gradients are copied into slices of one flat device buffer when the bucket is full, which is
 *     averaged by NCCL in place on the device (collectives.ts onDevice) and copied back into each
 *     gradient; lazy gradients take the lazy path above (the plan's collective instruction is
 *     staged through the host: ops.ts). No overlap across buckets: each NCCL call completes
 *     before the next hook runs.
 * - `no_sync()` (a `using` guard): forwards inside it skip the reduction and gradients accumulate
 *   locally in `.grad`; the next synchronized backward reduces the accumulated sum.
 * Source: Li et al. 2020, "PyTorch Distributed: Experiences on Accelerating Data Parallel Training"
 * (bucketing, overlap, no_sync); torch/nn/parallel/distributed.py.
 */
import { no_grad } from "../autograd/grad_mode.ts";
import { cudaBackend } from "../backends/cuda/index.ts";
import { cat } from "../lazy/functional.ts";
import type { TensorOps } from "../lazy/surface.ts";
import { Tensor } from "../lazy/tensor.ts";
import { Module } from "../nn/module.ts";
import type { Parameter } from "../nn/parameter.ts";
import { allocArray, type DType, type TypedArray } from "../tensor/dtype.ts";
import { LoomValueError } from "../tensor/errors.ts";
import { contiguousStrides, numel } from "../tensor/shape.ts";
import { toContiguous } from "../tensor/storage.ts";
import { broadcast, onDevice } from "./collectives.ts";
import type { MpiRequest } from "./mpi.ts";
import { collectiveTransport } from "./nccl_tensor.ts";
import * as ops from "./ops.ts";
import { default_group, type ProcessGroup } from "./process_group.ts";

export interface DDPOptions {
  /** Bucket size in MiB (torch default 25). */
  bucket_cap_mb?: number;
  /** Broadcast buffers (BatchNorm running stats) from rank 0 at construction (default true). */
  broadcast_buffers?: boolean;
}

/** What the last synchronized backward did (eager gradients). */
export interface DDPStepStats {
  buckets: number;
  bytes: number;
  /** Buckets whose all-reduce had completed (polled) before the final wait: hidden behind backward. */
  overlapped: number;
  /** Milliseconds the last hook waited for outstanding all-reduces. */
  wait_ms: number;
  /** Milliseconds from the first bucket's start to the end of the final wait. */
  comm_span_ms: number;
}

type AnyGrad = TensorOps<any> & { isLazy: boolean };

class Bucket {
  readonly offsets: number[] = [];
  numel = 0;
  /** This step: gradients filed so far (eager: written into `flat`; lazy: the tensors). */
  arrived = 0;
  lazy: (AnyGrad | null)[] = [];
  /** Which parameters' gradients arrived this step. */
  got: boolean[] = [];
  flat: TypedArray | null = null;
  request: MpiRequest | null = null;
  started = 0;
  constructor(readonly index: number, readonly dtype: DType, readonly params: Parameter[]) {
    this.clear();
  }

  /** Forget this step's gradients (none arrived). */
  clear(): void {
    this.arrived = 0;
    this.lazy = this.params.map(() => null);
    this.got = this.params.map(() => false);
  }
}

export class DistributedDataParallel<M extends Module> extends Module {
  readonly module: M;
  /** torch's `require_backward_grad_sync` (no_sync() clears it). */
  require_backward_grad_sync = true;
  readonly bucket_cap_mb: number;
  /** Parameter names per bucket, for tests and docs. */
  readonly bucket_names: string[][];
  last_stats: DDPStepStats | null = null;
  private readonly group: ProcessGroup;
  private readonly buckets: Bucket[];
  private readonly where = new Map<Parameter, [Bucket, number]>();
  /** "cuda" when the parameters are CUDA tensors (buckets reduced on the device over NCCL), else undefined. */
  private readonly device: string | undefined;
  private syncThisStep = true;
  private launched = 0;
  /** Buckets of this eager step whose all-reduce completed while backward still ran (reset by resetStep). */
  private overlapped = 0;

  /**
   * @param module - the model (the same architecture on every rank)
   * @throws LoomShapeError when ranks have different parameter lists
   * @throws LoomDistributedError before init_process_group
   */
  constructor(module: M, opts: DDPOptions = {}) {
    super();
    this.group = default_group("DistributedDataParallel");
    this.module = module;
    this.bucket_cap_mb = opts.bucket_cap_mb ?? 25;
    if (!(this.bucket_cap_mb > 0)) throw new LoomValueError(`[DistributedDataParallel] bucket_cap_mb must be positive, got ${this.bucket_cap_mb}`);
    const named = module.named_parameters().filter(([, p]) => p.requires_grad);
    // every rank must hold the same parameters: count, total size and a hash of the shapes
    let h = 0, total = 0;
    for (const [, p] of named) for (const s of [...p.shape, -1]) h = (Math.imul(h, 31) + s) | 0;
    for (const [, p] of named) total += p.numel();
    ops.checkAcrossRanks(this.group.mpi, "DistributedDataParallel", { shape: [named.length, total, h], dtype: "float32" }, 0);
    const devices = [...new Set(named.map(([, p]) => p.device))];
    if (devices.length > 1 && devices.includes("cuda")) throw new LoomValueError(`[DistributedDataParallel] parameters on several devices (${devices.join(", ")}): DDP needs every parameter on one device`);
    this.device = collectiveTransport(this.group.backend, devices[0], "DistributedDataParallel") === "nccl" ? "cuda" : undefined;
    no_grad(() => {
      for (const p of module.parameters()) broadcast(p, 0);
      if (opts.broadcast_buffers ?? true) for (const b of module.buffers()) broadcast(b, 0);
    });
    // buckets over the reversed parameter list, one dtype per bucket
    const cap = this.bucket_cap_mb * 2 ** 20;
    this.buckets = [];
    this.bucket_names = [];
    let cur: { dtype: DType; items: [string, Parameter][]; bytes: number } | null = null;
    const close = () => {
      if (!cur || !cur.items.length) return;
      const b = new Bucket(this.buckets.length, cur.dtype, cur.items.map(([, p]) => p));
      for (const p of b.params) {
        this.where.set(p, [b, b.offsets.length]);
        b.offsets.push(b.numel);
        b.numel += p.numel();
      }
      this.buckets.push(b);
      this.bucket_names.push(cur.items.map(([n]) => n));
    };
    for (const [n, p] of [...named].reverse()) {
      const bytes = p.numel() * (p.dtype === "float64" ? 8 : 4);
      if (!cur || cur.dtype !== p.dtype || (cur.bytes > 0 && cur.bytes + bytes > cap)) {
        close();
        cur = { dtype: p.dtype, items: [], bytes: 0 };
      }
      cur.items.push([n, p]);
      cur.bytes += bytes;
    }
    close();
    // in lazy mode the hook receives LazyTensors (the gradient of the parameter's lift), typed Tensor by register_hook
    this.forward = ((...args: unknown[]) => {
      this.prepareStep();
      return (this.module.call as (...a: unknown[]) => unknown)(...args);
    }) as M["forward"];
    for (const [, p] of named) p.register_hook((g) => this.onGrad(p, g as unknown as AnyGrad) as unknown as Tensor | void);
  }

  /**
   * Runs the wrapped module (its `call`, with its hooks), typed as the module's forward.
   * @throws LoomValueError when the previous backward left a bucket unreduced
   */
  declare forward: M["forward"];

  /**
   * Skip gradient synchronization for the forward/backward passes inside the guard (gradient
   * accumulation): `{ using _ = ddp.no_sync(); ddp.call(x).loss.backward(); }`.
   */
  no_sync(): Disposable {
    const prev = this.require_backward_grad_sync;
    this.require_backward_grad_sync = false;
    return { [Symbol.dispose]: () => { this.require_backward_grad_sync = prev; } };
  }

  private prepareStep(): void {
    const partial = this.buckets.filter((b) => b.arrived > 0);
    if (partial.length) {
      const missing = partial.flatMap((b) => b.got.flatMap((got, i) => (got ? [] : [this.bucket_names[b.index]![i]!])));
      this.resetStep();
      throw new LoomValueError(
        `[DistributedDataParallel] Expected to have finished reduction in the prior iteration before starting a new one: parameters that received no gradient: ${missing.slice(0, 8).join(", ")}${missing.length > 8 ? ", ..." : ""} (every parameter with requires_grad must take part in the loss)`,
      );
    }
    this.syncThisStep = this.require_backward_grad_sync;
  }

  private resetStep(): void {
    for (const b of this.buckets) {
      b.clear();
      b.request = null;
    }
    this.launched = 0;
    this.overlapped = 0;
  }

  /** The gradient hook: file g (plus an accumulated `.grad`) in its bucket; return the tensor that will hold the average. */
  private onGrad(p: Parameter, g: AnyGrad): AnyGrad | void {
    if (!this.syncThisStep || this.group.size === 1) return; // a world of one: nothing to average
    const [b, i] = this.where.get(p)!;
    const prev = p.grad;
    // cuda parameters take the tensor path too: their bucket is flattened on the device
    const lazy = g.isLazy || (g as unknown as Tensor).is_pending || this.device === "cuda";
    if (!lazy && !(prev !== null && (prev as Tensor).is_pending)) return this.fileEager(p, b, i, g as unknown as Tensor, prev);
    // lazy: a tensor we own, rebound to its averaged slice when the bucket is complete
    const total = (prev !== null ? (g as any).add(prev) : g) as AnyGrad;
    p.grad = null; // the averaged sum replaces the accumulated gradient
    const mine = total.clone() as AnyGrad;
    b.lazy[i] = mine;
    b.got[i] = true;
    b.arrived++;
    if (b.arrived === b.params.length) this.reduceLazy(b);
    return mine;
  }

  private fileEager(p: Parameter, b: Bucket, i: number, g: Tensor, prev: Tensor | null): Tensor {
    b.flat ??= allocArray(b.dtype, b.numel);
    const off = b.offsets[i]!, n = p.numel();
    const src = prev !== null ? g.add(prev) : g;
    const d = toContiguous(src._data(), b.dtype);
    b.flat.set(d.data.subarray(d.offset, d.offset + n) as never, off);
    p.grad = null;
    b.got[i] = true;
    b.arrived++;
    // start every complete bucket, in index order
    while (this.launched < this.buckets.length && this.buckets[this.launched]!.arrived === this.buckets[this.launched]!.params.length) {
      const c = this.buckets[this.launched++]!;
      c.started = performance.now();
      c.request = this.group.size > 1 ? this.group.mpi.iallreduce(c.flat!, c.dtype, "sum", "DistributedDataParallel") : null;
    }
    for (let k = 0; k < this.launched; k++) {
      const r = this.buckets[k]!.request;
      if (r && !r.done && this.group.mpi.test(r)) this.overlapped++;
    }
    if (this.launched === this.buckets.length) this.finishEager();
    const shape = [...p.shape];
    return new Tensor({ dtype: b.dtype, shape, strides: contiguousStrides(shape), offset: off, data: b.flat }, p.device);
  }

  private finishEager(): void {
    const t = performance.now();
    let bytes = 0;
    for (const b of this.buckets) {
      if (b.request) this.group.mpi.wait(b.request);
      const f = b.flat!, w = this.group.size;
      if (w > 1) for (let k = 0; k < f.length; k++) f[k] = f[k]! / w;
      bytes += f.byteLength;
    }
    const end = performance.now();
    this.last_stats = { buckets: this.buckets.length, bytes, overlapped: this.overlapped, wait_ms: end - t, comm_span_ms: end - (this.buckets[0]?.started ?? t) };
    this.resetStep();
  }

  /**
   * Eager cuda gradients flattened into one new device buffer by device copies into its slices
   * (the CUDA backend has no `cat` kernel: cat would read every gradient back to the host).
   */
  private flatOnDevice(b: Bucket, gs: Tensor[]): Tensor {
    const flat = new Tensor(cudaBackend().alloc(b.dtype, [b.numel]), "cuda"); // every element is written below
    no_grad(() => gs.forEach((g, i) => flat.narrow(0, b.offsets[i]!, numel(g.shape)).copy_(g.reshape([-1]))));
    return flat;
  }

  private reduceLazy(b: Bucket): void {
    const gs = b.lazy as AnyGrad[];
    const flat = this.device === "cuda" && gs.every((g) => g instanceof Tensor) ? this.flatOnDevice(b, gs as unknown as Tensor[]) : cat(gs.map((g) => g.reshape([-1])), 0);
    const a: ops.CollectiveAttrs = this.device ? { op: "avg", src: 0, check: false, device: this.device } : { op: "avg", src: 0, check: false };
    const avg = onDevice(flat, "all_reduce", a) ?? flat._apply(ops.all_reduce, [], a);
    no_grad(() => gs.forEach((g, i) => g.copy_(avg.narrow(0, b.offsets[i]!, numel(g.shape)).reshape([...g.shape]))));
    b.clear();
  }
}
