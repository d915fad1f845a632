/**
 * The default process group (torch.distributed's init_process_group / get_rank / get_world_size /
 * is_initialized / destroy_process_group). Backends: "mpi" (Open MPI through bun:ffi, mpi.ts; host
 * tensors) and "nccl" (libnccl through bun:ffi, nccl.ts: tensors on device "cuda"; host tensors
 * still go over MPI, which also carries NCCL's unique id and the cross-rank shape checks). Started
 * by mpirun (`bun src/distributed/launch.ts -np 2 script.ts`) or alone (a world of one: MPI's
 * singleton init).
 */
import { LoomValueError } from "../tensor/errors.ts";
import { LoomDistributedError } from "./errors.ts";
import { loadMpi, MpiComm } from "./mpi.ts";
import { loadNative } from "../backends/native/ffi.ts";
import { loadNccl, ncclDeviceIndex, NcclWorld } from "./nccl.ts";

export type DistBackend = "mpi" | "nccl";

/** torch.distributed.ReduceOp. AVG is SUM then division by the world size (as Gloo does it). */
export const ReduceOp = { SUM: "sum", AVG: "avg", MAX: "max", MIN: "min" } as const;
export type ReduceOpName = (typeof ReduceOp)[keyof typeof ReduceOp];

export interface InitOptions {
  /** "mpi" (default) or "nccl". */
  backend?: DistBackend;
  /** Milliseconds a collective may wait before LoomCollectiveTimeoutError (default `LOOM_DIST_TIMEOUT_MS` or 300000). */
  timeout?: number;
}

/**
 * The default group: the MPI world, and with backend "nccl" an NCCL communicator over the same
 * ranks, one CUDA device per rank (nccl_tensor.ts picks the transport per tensor device).
 */
export interface ProcessGroup {
  readonly backend: DistBackend;
  readonly rank: number;
  readonly size: number;
  readonly mpi: MpiComm;
  /** The NCCL communicator, for backend "nccl" (its `device`: this rank's CUDA device). */
  readonly nccl: NcclWorld | null;
}

let group: ProcessGroup | null = null;
/** MPI can be initialized once per process: a destroyed group's communicator is kept for a re-init. */
let world: MpiComm | null = null;

/**
 * Initialize the default process group (torch.distributed.init_process_group).
 *
 * Backend "nccl": this rank's CUDA device is `LOOM_CUDA_DEVICE` when set, else the local rank
 * (`LOCAL_RANK`, else Open MPI's `OMPI_COMM_WORLD_LOCAL_RANK`) modulo the visible devices, as
 * torch scripts call `torch.cuda.set_device(LOCAL_RANK)`. `LOOM_CUDA_DEVICE` is then set to it,
 * so the "cuda" device (src/backends/cuda, which opens `LOOM_CUDA_DEVICE` on first use) is the
 * same GPU: call init_process_group before making the first cuda tensor. Rank 0's ncclUniqueId
 * is broadcast over MPI and every rank calls ncclCommInitRank (blocking until all ranks join).
 * @throws LoomDistributedError when libmpi (or, for "nccl", libnccl, libcudart, a CUDA device or
 *   the CPU shim that wraps ncclCommInitRank) cannot be loaded, when NCCL fails (with
 *   ncclGetErrorString), or MPI was finalized
 * @throws LoomValueError for an unknown backend, or a second init without destroy_process_group
 */
export function init_process_group(opts: InitOptions = {}): ProcessGroup {
  const backend = opts.backend ?? "mpi";
  if (backend !== "mpi" && backend !== "nccl") throw new LoomValueError(`[init_process_group] unknown backend '${backend}' (mpi or nccl)`);
  if (group) throw new LoomValueError("[init_process_group] trying to initialize the default process group twice!");
  const timeout = opts.timeout ?? Number(process.env.LOOM_DIST_TIMEOUT_MS ?? 300_000);
  if (!(timeout > 0)) throw new LoomValueError(`[init_process_group] timeout must be positive milliseconds, got ${timeout}`);
  const ncclLib = backend === "nccl" ? loadNccl() : null;
  if (ncclLib && "error" in ncclLib) throw new LoomDistributedError(`[init_process_group] backend nccl: ${ncclLib.error}`);
  const native = backend === "nccl" ? loadNative() : null;
  if (native && "error" in native) throw new LoomDistributedError(`[init_process_group] backend nccl needs the native shim (loom_nccl_comm_init_rank): ${native.error}`);
  if (!world) {
    const lib = loadMpi();
    if ("error" in lib) throw new LoomDistributedError(`[init_process_group] backend ${backend}: ${lib.error}`);
    world = new MpiComm(lib, timeout);
  }
  world.timeout_ms = timeout;
  let nccl: NcclWorld | null = null;
  if (ncclLib && native && !("error" in ncclLib) && !("error" in native)) {
    const w = world;
    const device = ncclDeviceIndex(process.env, ncclLib.devices);
    process.env.LOOM_CUDA_DEVICE = String(device);
    nccl = new NcclWorld(ncclLib, {
      rank: w.rank, size: w.size, device,
      shareId: shareOverMpi(w),
      initRank: (fn, comm, nranks, id, rank) => native.sym.loom_nccl_comm_init_rank(fn, comm, nranks, id, rank),
      timeout_ms: () => w.timeout_ms,
      checkPeers: (what) => w.checkPeers(what),
    });
  }
  group = { backend, rank: world.rank, size: world.size, mpi: world, nccl };
  return group;
}

/** Rank 0's ncclUniqueId (128 bytes) to every rank of `w`, in place (MPI_Ibcast of uint8, waited with w's deadline). */
export function shareOverMpi(w: MpiComm): (id: Uint8Array) => void {
  return (id) => {
    if (w.size > 1) w.wait(w.ibcast(id, "uint8", 0, "init_process_group (ncclUniqueId)"));
  };
}

/** Whether init_process_group has run (and destroy_process_group not since). */
export function is_initialized(): boolean {
  return group !== null;
}

/** Whether the MPI backend can be used here (libmpi loads; loadMpi() gives the reason when not). */
export function is_mpi_available(): boolean {
  return !("error" in loadMpi());
}

/** The default group. @throws LoomDistributedError before init_process_group */
export function default_group(what: string): ProcessGroup {
  if (!group) throw new LoomDistributedError(`[${what}] Default process group has not been initialized, please make sure to call init_process_group.`);
  return group;
}

/** This process's rank in the default group. */
export function get_rank(): number {
  return default_group("get_rank").rank;
}

/** Number of processes in the default group. */
export function get_world_size(): number {
  return default_group("get_world_size").size;
}

export function get_backend(): DistBackend {
  return default_group("get_backend").backend;
}

/**
 * Destroy the default group: ncclCommDestroy for "nccl"; MPI_Finalize waits for process exit (MPI
 * cannot be initialized twice, so a later init_process_group in the same process reuses the
 * MPI communicator).
 */
export function destroy_process_group(): void {
  group?.nccl?.destroy();
  group = null;
}

/** MPI_Finalize when the process exits normally (skipped after a failed collective: it would wait for the dead rank). */
process.on("exit", () => {
  world?.finalize();
});
