/**
 * Collectives as ops: each is one `defineOp` kernel (shape, dtype, reference, gradient), so an
 * eager Tensor runs it now and a LazyTensor records it as one more node of its graph; the
 * compiler schedules it as one instruction of the plan, between the kernels that produce its
 * input and those that read its output (a training step with its gradient all-reduce stays one
 * plan, one realize).
 *
 * How a plan runs the instruction: no backend has a kernel for these names, so the js backend's
 * reference runs them (`ref` below); on the native backend that means the plan's command buffer
 * is submitted up to the collective, waited for, the collective runs on the calling thread
 * (MPI_I* + MPI_Test polling, mpi.ts), and the rest of the plan goes into the next command buffer
 * (native/backend.ts `drain`). The collective cannot run inside the native command buffer itself:
 * the shim's executor is a C thread with no deadline or peer checks (a blocking MPI call there
 * hangs forever when a rank dies), and MPI would need MPI_THREAD_MULTIPLE to be called from it.
 *
 * They are not in the registry's OPS table: that table is the backends' kernel table (the native
 * opcode list is generated from it) and collectives are host instructions with process state;
 * the compiler interns ops by identity, so it needs no entry.
 *
 * Before moving data each collective all-gathers a 16-word header (op, dtype, shape, root) and
 * compares it across ranks: mismatched shapes are a LoomShapeError naming every rank's shape
 * instead of MPI reading past a buffer or deadlocking (`check: false` skips it, as DDP's fixed
 * buckets do).
 *
 * Tensors on device "cuda" (backend "nccl", nccl_tensor.ts): the CUDA backend has no kernel for
 * these ops either, so it runs their reference on read-back inputs and uploads the result; the
 * reference sees `attrs.device === "cuda"` and runs the collective on NCCL (uploaded, NCCL,
 * read back). The eager in-place collectives on cuda tensors skip that staging
 * (collectives.ts: NCCL on the tensor's own buffer). Under backend "mpi" a "cuda" tensor is a
 * LoomDistributedError (collectiveTransport).
 *
 * Gradients follow torch.distributed.nn.functional: all_reduce's is all_reduce of the gradient,
 * all_gather's is reduce_scatter, reduce_scatter's is all_gather, broadcast's is the sum of the
 * gradients on the source rank (zero elsewhere). Megatron-LM's region functions
 * (copy_to_parallel_region, reduce_from_parallel_region) have identity on one side.
 */
import { defineOp, type KernelOp, type Meta } from "../graph/op.ts";
import type { DType, TypedArray } from "../tensor/dtype.ts";
import { DTYPES } from "../tensor/dtype.ts";
import { LoomDtypeError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { numel } from "../tensor/shape.ts";
import { toContiguous, type TensorData } from "../tensor/storage.ts";
import type { MpiComm, MpiReduce } from "./mpi.ts";
import { collectiveTransport, ncclCollectiveInto, type NcclCollective } from "./nccl_tensor.ts";
import { default_group, type ProcessGroup, type ReduceOpName } from "./process_group.ts";

export interface CollectiveAttrs {
  /** all_reduce / reduce_scatter: the reduction. */
  readonly op: ReduceOpName;
  /** broadcast: the source rank. */
  readonly src: number;
  /** Compare shapes and dtypes across ranks first (a 16-word all-gather). */
  readonly check: boolean;
  /** Megatron region ops: which side communicates ("forward": reduce in forward; "backward": in backward). */
  readonly side?: "forward" | "backward";
  /** The tensor's device ("cuda": NCCL under backend "nccl"; absent: a host tensor, MPI). */
  readonly device?: string;
}

const KINDS = ["all_reduce", "broadcast", "all_gather", "reduce_scatter", "copy_to_parallel_region", "reduce_from_parallel_region", "gather_from_parallel_region"] as const;
const HEADER = 16;
const OPS_CODE: Record<ReduceOpName, number> = { sum: 0, avg: 1, max: 2, min: 3 };

const dense = (out: TensorData): TypedArray => out.data.subarray(out.offset, out.offset + numel(out.shape)) as TypedArray;
const contiguousArray = (x: TensorData): TypedArray => {
  const c = toContiguous(x);
  return c.data.subarray(c.offset, c.offset + numel(c.shape)) as TypedArray;
};

function mpiOp(what: string, op: ReduceOpName, dtype: DType): MpiReduce {
  if (op === "avg") {
    if (dtype !== "float32" && dtype !== "float64") throw new LoomDtypeError(`[${what}] ReduceOp.AVG needs float32 or float64, got ${dtype}`);
    return "sum";
  }
  return op;
}

/**
 * All-gather a header of this call and compare: every rank must call the same collective on the
 * same shape and dtype (and root / reduction).
 * @throws LoomShapeError naming every rank's shape and dtype
 */
export function checkAcrossRanks(comm: MpiComm, what: string, meta: Meta, extra: number): void {
  const mine = new Int32Array(HEADER);
  const s = meta.shape;
  mine[0] = KINDS.indexOf(what as (typeof KINDS)[number]);
  mine[1] = DTYPES.indexOf(meta.dtype);
  mine[2] = extra;
  mine[3] = s.length;
  for (let i = 0; i < s.length; i++) {
    if (4 + i < HEADER - 1) mine[4 + i] = s[i]!;
    else mine[HEADER - 1] = (Math.imul(mine[HEADER - 1]!, 31) + s[i]!) | 0; // dims past 11: hashed
  }
  const all = new Int32Array(HEADER * comm.size);
  comm.wait(comm.iallgather(mine, all, "int32", `${what} (shape check)`));
  let same = true;
  for (let r = 1; r < comm.size && same; r++) for (let k = 0; k < HEADER; k++) if (all[r * HEADER + k] !== all[k]) same = false;
  if (same) return;
  const desc = (r: number) => {
    const h = all.subarray(r * HEADER, (r + 1) * HEADER);
    const dims = Array.from(h.subarray(4, 4 + Math.min(h[3]!, HEADER - 5)));
    return `rank ${r}: ${KINDS[h[0]!] ?? what} ${fmtShape(dims)}${h[3]! > HEADER - 5 ? "..." : ""} ${DTYPES[h[1]!] ?? "?"}${h[2] ? ` (${what === "broadcast" ? "src" : "op"} ${h[2]})` : ""}`;
  };
  throw new LoomShapeError(`[${what}] tensors differ across ranks: ${Array.from({ length: comm.size }, (_, r) => desc(r)).join("; ")}`);
}

/**
 * The cross-rank check of one collective call (when `a.check`): the reduction's code, or the
 * broadcast root, is compared with the shape and dtype.
 */
export function checkCall(g: ProcessGroup, what: string, x: Meta, a: CollectiveAttrs): void {
  if (a.check) checkAcrossRanks(g.mpi, what, x, what === "broadcast" ? a.src : what === "all_gather" ? 0 : OPS_CODE[a.op]);
}

/**
 * Run the collective on NCCL when x's device asks for it (writing `out`); false for MPI.
 * @throws LoomDistributedError for a "cuda" tensor under backend "mpi"
 */
function onNccl(g: ProcessGroup, kind: NcclCollective, what: string, x: TensorData, a: CollectiveAttrs, out: TensorData): boolean {
  if (collectiveTransport(g.backend, a.device, what) !== "nccl") return false;
  ncclCollectiveInto(g.nccl!, kind, x, a, out, what);
  return true;
}

function runAllReduce(what: string, x: TensorData, a: CollectiveAttrs, out: TensorData): void {
  const g = default_group(what);
  checkCall(g, what, x, a);
  if (onNccl(g, "all_reduce", what, x, a, out)) return;
  const buf = dense(out);
  buf.set(contiguousArray(x));
  const op = mpiOp(what, a.op, x.dtype);
  if (g.size > 1) g.mpi.wait(g.mpi.iallreduce(buf, x.dtype, op, what));
  if (a.op === "avg") for (let i = 0; i < buf.length; i++) buf[i] = buf[i]! / g.size;
}

/** Shape and dtype rules of the ops whose output is like their input. */
const SAME = {
  shape: ([x]: readonly Meta[]) => [...x!.shape],
  dtype: ([x]: readonly Meta[]) => x!.dtype,
};

/**
 * out = op over ranks of x (every rank gets the result).
 * @param x - any shape; float32/float64/int32/int64/int8/uint8 (AVG: float only)
 * @returns x's shape and dtype
 * @throws LoomShapeError when ranks pass different shapes (check on)
 */
export const all_reduce: KernelOp<CollectiveAttrs> = defineOp<CollectiveAttrs, KernelOp<CollectiveAttrs>>({
  kind: "kernel", arity: 1, name: "all_reduce", shape: SAME.shape,
  dtype: ([x], a) => (mpiOp("all_reduce", a.op, x!.dtype), x!.dtype),
  describe: (a) => `op=${a.op}${a.check ? "" : " unchecked"}`,
  ref: ([x], a, out) => runAllReduce("all_reduce", x!, a, out),
  grad: (g, _ins, _out, a) => [g._apply(all_reduce, [], { ...a, op: a.op === "avg" ? "avg" : "sum" })],
});

/**
 * out = x of rank `src` on every rank.
 * @param x - any shape and dtype
 */
export const broadcast: KernelOp<CollectiveAttrs> = defineOp<CollectiveAttrs, KernelOp<CollectiveAttrs>>({
  kind: "kernel", arity: 1, name: "broadcast", ...SAME,
  describe: (a) => `src=${a.src}${a.check ? "" : " unchecked"}`,
  ref: ([x], a, out) => {
    const g = default_group("broadcast");
    if (!(Number.isInteger(a.src) && a.src >= 0 && a.src < g.size)) throw new LoomValueError(`[broadcast] src ${a.src} is not a rank of a world of ${g.size}`);
    checkCall(g, "broadcast", x!, a);
    if (onNccl(g, "broadcast", "broadcast", x!, a, out)) return;
    const buf = dense(out);
    buf.set(contiguousArray(x!));
    if (g.size > 1) g.mpi.wait(g.mpi.ibcast(buf, x!.dtype, a.src, "broadcast"));
  },
  grad: (g, _ins, _out, a) => {
    const s = g._apply(all_reduce, [], { op: "sum", src: 0, check: a.check, device: a.device });
    return [s.mul(default_group("broadcast").rank === a.src ? 1 : 0)];
  },
});

/**
 * out[r] = x of rank r (torch's all_gather_into_tensor, stacked on a new leading dim).
 * @param x - [...]
 * @returns [world_size, ...], dtype of x
 */
export const all_gather: KernelOp<CollectiveAttrs> = defineOp<CollectiveAttrs, KernelOp<CollectiveAttrs>>({
  kind: "kernel", arity: 1, name: "all_gather",
  shape: ([x]) => [default_group("all_gather").size, ...x!.shape],
  dtype: ([x]) => x!.dtype,
  describe: (a) => (a.check ? "" : "unchecked"),
  ref: ([x], a, out) => {
    const g = default_group("all_gather");
    checkCall(g, "all_gather", x!, a);
    if (onNccl(g, "all_gather", "all_gather", x!, a, out)) return;
    const send = contiguousArray(x!).slice(); // its own array: MPI must not read the output it writes
    const buf = dense(out);
    if (g.size > 1) g.mpi.wait(g.mpi.iallgather(send, buf, x!.dtype, "all_gather"));
    else buf.set(send);
  },
  grad: (g, _ins, _out, a) => [g._apply(reduce_scatter, [], { ...a, op: "sum" })],
});

/**
 * out = op over ranks of x[rank] (torch's reduce_scatter_tensor with the blocks on a leading dim).
 * @param x - [world_size, ...]
 * @returns [...], dtype of x
 * @throws LoomShapeError when x's leading dim is not the world size
 */
export const reduce_scatter: KernelOp<CollectiveAttrs> = defineOp<CollectiveAttrs, KernelOp<CollectiveAttrs>>({
  kind: "kernel", arity: 1, name: "reduce_scatter",
  shape: ([x]) => {
    const n = default_group("reduce_scatter").size;
    if (x!.shape[0] !== n) throw new LoomShapeError(`[reduce_scatter] input ${fmtShape(x!.shape)}: the leading dim must be the world size ${n}`);
    return x!.shape.slice(1);
  },
  dtype: ([x], a) => (mpiOp("reduce_scatter", a.op, x!.dtype), x!.dtype),
  describe: (a) => `op=${a.op}${a.check ? "" : " unchecked"}`,
  ref: ([x], a, out) => {
    const g = default_group("reduce_scatter");
    checkCall(g, "reduce_scatter", x!, a);
    if (onNccl(g, "reduce_scatter", "reduce_scatter", x!, a, out)) return;
    const send = contiguousArray(x!);
    const buf = dense(out);
    const op = mpiOp("reduce_scatter", a.op, x!.dtype);
    if (g.size > 1) g.mpi.wait(g.mpi.ireduce_scatter(send, buf, x!.dtype, op, "reduce_scatter"));
    else buf.set(send);
    if (a.op === "avg") for (let i = 0; i < buf.length; i++) buf[i] = buf[i]! / g.size;
  },
  grad: (g, _ins, _out, a) => [g._apply(all_gather, [], a)],
});

/**
 * Megatron-LM's `copy_to_tensor_model_parallel_region`: identity forward, all-reduce (sum) of the
 * gradient in backward (the input of a column-parallel layer feeds every rank's shard).
 */
export const copy_to_parallel_region: KernelOp<CollectiveAttrs> = defineOp<CollectiveAttrs, KernelOp<CollectiveAttrs>>({
  kind: "kernel", arity: 1, name: "copy_to_parallel_region", ...SAME,
  ref: ([x], _a, out) => { dense(out).set(contiguousArray(x!)); },
  grad: (g, _ins, _out, a) => [g._apply(reduce_from_parallel_region, [], a)],
});

/**
 * Megatron-LM's `reduce_from_tensor_model_parallel_region`: all-reduce (sum) forward, identity
 * backward (the partial sums of a row-parallel layer; the loss after it is replicated).
 */
export const reduce_from_parallel_region: KernelOp<CollectiveAttrs> = defineOp<CollectiveAttrs, KernelOp<CollectiveAttrs>>({
  kind: "kernel", arity: 1, name: "reduce_from_parallel_region", ...SAME,
  ref: ([x], a, out) => runAllReduce("reduce_from_parallel_region", x!, { ...a, op: "sum" }, out),
  grad: (g) => [g],
});

/**
 * Megatron-LM's `gather_from_tensor_model_parallel_region` with the ranks' pieces stacked on a
 * new leading dim: all-gather forward ([world, ...]), and in backward this rank's slice of the
 * gradient (the loss is replicated over the tensor-parallel ranks, so no sum).
 */
export const gather_from_parallel_region: KernelOp<CollectiveAttrs> = defineOp<CollectiveAttrs, KernelOp<CollectiveAttrs>>({
  kind: "kernel", arity: 1, name: "gather_from_parallel_region",
  shape: ([x]) => [default_group("gather_from_parallel_region").size, ...x!.shape],
  dtype: ([x]) => x!.dtype,
  ref: (ins, a, out) => all_gather.ref(ins, a, out),
  grad: (g) => [g.narrow(0, default_group("gather_from_parallel_region").rank, 1).reshape(g.shape.slice(1))],
});
