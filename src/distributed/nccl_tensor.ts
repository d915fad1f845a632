/**
 * Which transport moves a tensor (`collectiveTransport`: NCCL for device "cuda" under the "nccl"
 * backend, MPI for host memory), and the NCCL collectives on a tensor's CUDA buffer
 * (`ncclCollective`).
 *
 * A tensor on "cuda" is a `CudaData` (src/backends/cuda/storage.ts): a strided view on a device
 * buffer; the address of element `offset` is `storage.addrOf(offset)`. NCCL needs a dense send
 * buffer, so a strided view is first copied by the CUDA backend's `contiguous` kernel, and host
 * data (what a lazy plan hands the op's reference, below) is uploaded. The CUDA backend queues
 * kernels on its own non-blocking stream, which does not order with the default stream NCCL runs
 * on, so `CudaBackend.synchronize()` (submit the recorded plan, cudaStreamSynchronize) runs before
 * the NCCL call, and NcclWorld waits for the collective before returning: the backend's next
 * kernel, queued afterwards, sees the result.
 */
import { cudaBackend } from "../backends/cuda/index.ts";
import type { CudaBackend } from "../backends/cuda/backend.ts";
import { isCuda, type CudaData } from "../backends/cuda/storage.ts";
import { OPS } from "../graph/registry.ts";
import { LoomDtypeError, LoomShapeError, fmtShape } from "../tensor/errors.ts";
import { isContiguous, numel } from "../tensor/shape.ts";
import type { TensorData } from "../tensor/storage.ts";
import { LoomDistributedError } from "./errors.ts";
import { NCCL, ncclDtype, type NcclWorld } from "./nccl.ts";
import type { DistBackend, ReduceOpName } from "./process_group.ts";

/** The four collectives NCCL runs (the Megatron region ops are built from them). */
export type NcclCollective = "all_reduce" | "broadcast" | "all_gather" | "reduce_scatter";

/**
 * How a collective moves a tensor on `device` in a group of `backend` (torch: ProcessGroupNCCL
 * takes CUDA tensors, and the MPI backend takes them only when MPI is CUDA-aware; Open MPI here is
 * not, and staging through the host silently would hide a wrong setup).
 * @returns "nccl" for device "cuda" with backend "nccl"; "mpi" for host tensors (cpu, and webgpu,
 *   whose collectives read back through the backend's host fallback), under either backend
 * @throws LoomDistributedError for a "cuda" tensor with backend "mpi"
 */
export function collectiveTransport(backend: DistBackend, device: string | undefined, what: string): "mpi" | "nccl" {
  if (device !== "cuda") return "mpi";
  if (backend === "nccl") return "nccl";
  throw new LoomDistributedError(
    `[${what}] a tensor on device 'cuda' needs init_process_group({ backend: "nccl" }): the "mpi" backend moves host memory (Open MPI is not CUDA-aware here); or move the tensor to "cpu" first`,
  );
}

/** ncclRedOp_t of a ReduceOp (ncclAvg needs NCCL ≥ 2.10). */
export function ncclOp(op: ReduceOpName, version: number, what: string): number {
  if (op === "avg" && version < 21000) throw new LoomDistributedError(`[${what}] ReduceOp.AVG needs NCCL 2.10 or newer (this is ${version})`);
  return NCCL[op];
}

/** Output shape of a collective over `size` ranks for input shape `s` (ops.ts's stacked forms). */
export function collectiveShape(kind: NcclCollective, s: readonly number[], size: number): number[] {
  if (kind === "all_gather") return [size, ...s];
  if (kind === "reduce_scatter") {
    if (s[0] !== size) throw new LoomShapeError(`[reduce_scatter] input ${fmtShape(s)}: the leading dim must be the world size ${size}`);
    return s.slice(1);
  }
  return [...s];
}

/** x as a dense view of a device buffer: host data uploaded, a strided device view copied on the device. */
function denseOnDevice(be: CudaBackend, x: TensorData): CudaData {
  if (!isCuda(x)) return be.upload(x) as CudaData;
  if (isContiguous(x.shape, x.strides)) return x;
  return be.run(OPS.contiguous, [x], {}, x.shape, x.dtype) as CudaData;
}

/**
 * Run one collective on NCCL: x (device or host data) → a new dense device tensor.
 * @param kind - all_reduce (out x.shape), broadcast (x.shape), all_gather (out [size, ...x.shape]),
 *   reduce_scatter (x [size, ...] → out [...])
 * @throws LoomDistributedError from NCCL (with ncclGetErrorString), LoomDtypeError for a dtype
 *   NCCL cannot reduce, LoomValueError when the cuda device cannot be opened
 */
export function ncclCollective(world: NcclWorld, kind: NcclCollective, x: TensorData, a: { op: ReduceOpName; src: number }, what: string = kind): CudaData {
  if (a.op === "avg" && (kind === "all_reduce" || kind === "reduce_scatter") && x.dtype !== "float32" && x.dtype !== "float64") {
    throw new LoomDtypeError(`[${what}] ReduceOp.AVG needs float32 or float64, got ${x.dtype}`); // as the MPI path (ops.ts)
  }
  const be = cudaBackend();
  const outShape = collectiveShape(kind, x.shape, world.size);
  const src = denseOnDevice(be, x);
  const out = be.alloc(x.dtype, outShape);
  const n = numel(x.shape);
  if (n === 0) return out;
  be.synchronize(); // the producers of x (on the backend's stream) are done before NCCL reads it
  const send = src.storage.addrOf(src.offset), recv = out.storage.addrOf(0);
  world.checkDevice(send, what);
  switch (kind) {
    case "all_reduce":
      world.all_reduce(send, recv, n, ncclDtype(x.dtype, what, true), ncclOp(a.op, world.lib.version, what), what);
      break;
    case "broadcast":
      world.broadcast(send, recv, n, ncclDtype(x.dtype, what, false), a.src, what);
      break;
    case "all_gather":
      world.all_gather(send, recv, n, ncclDtype(x.dtype, what, false), what);
      break;
    case "reduce_scatter":
      world.reduce_scatter(send, recv, n / world.size, ncclDtype(x.dtype, what, true), ncclOp(a.op, world.lib.version, what), what);
      break;
  }
  out.storage.invalidate();
  return out;
}

/**
 * The same for host tensors' data, written into the dense host output `out`: how a collective on
 * a "cuda" tensor inside a lazy plan arrives (the CUDA backend has no kernel for the collective
 * ops, so it runs their reference on read-back inputs and uploads the result): uploaded, run on
 * NCCL, read back.
 */
export function ncclCollectiveInto(world: NcclWorld, kind: NcclCollective, x: TensorData, a: { op: ReduceOpName; src: number }, out: TensorData, what: string = kind): void {
  const r = ncclCollective(world, kind, x, a, what);
  const h = cudaBackend().download(r);
  const n = numel(out.shape);
  out.data.set(h.data.subarray(h.offset, h.offset + n) as never, out.offset);
}
