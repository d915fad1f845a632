/**
 * The default process group (torch.distributed's init_process_group / get_rank / get_world_size /
 * is_initialized / destroy_process_group). Backends: "mpi" (Open MPI through bun:ffi, mpi.ts; CPU
 * tensors) and "nccl" (libnccl through bun:ffi, nccl.ts; device memory). Started by mpirun
 * (`bun src/distributed/launch.ts -np 2 script.ts`) or alone (a world of one: MPI's singleton init).
 */
import { LoomValueError } from "../tensor/errors.ts";
import { LoomDistributedError } from "./errors.ts";
import { loadMpi, MpiComm } from "./mpi.ts";
import { loadNccl, type NcclLib } from "./nccl.ts";

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
 * The default group: the MPI world. With backend "nccl" libnccl is loaded too (for device
 * memory, nccl.ts); Loom has no CUDA tensors yet, so tensor collectives still run over MPI.
 */
export interface ProcessGroup {
  readonly backend: DistBackend;
  readonly rank: number;
  readonly size: number;
  readonly mpi: MpiComm;
  /** libnccl, for backend "nccl". */
  readonly nccl: NcclLib | null;
}

let group: ProcessGroup | null = null;
/** MPI can be initialized once per process: a destroyed group's communicator is kept for a re-init. */
let world: MpiComm | null = null;

/**
 * Initialize the default process group (torch.distributed.init_process_group).
 * @throws LoomDistributedError when libmpi (or libnccl for "nccl") cannot be loaded, or MPI was finalized
 * @throws LoomValueError for an unknown backend, or a second init without destroy_process_group
 */
export function init_process_group(opts: InitOptions = {}): ProcessGroup {
  const backend = opts.backend ?? "mpi";
  if (backend !== "mpi" && backend !== "nccl") throw new LoomValueError(`[init_process_group] unknown backend '${backend}' (mpi or nccl)`);
  if (group) throw new LoomValueError("[init_process_group] trying to initialize the default process group twice!");
  const timeout = opts.timeout ?? Number(process.env.LOOM_DIST_TIMEOUT_MS ?? 300_000);
  if (!(timeout > 0)) throw new LoomValueError(`[init_process_group] timeout must be positive milliseconds, got ${timeout}`);
  let nccl: NcclLib | null = null;
  if (backend === "nccl") {
    const n = loadNccl();
    if ("error" in n) throw new LoomDistributedError(`[init_process_group] backend nccl: ${n.error}`);
    nccl = n;
  }
  if (!world) {
    const lib = loadMpi();
    if ("error" in lib) throw new LoomDistributedError(`[init_process_group] backend ${backend}: ${lib.error}`);
    world = new MpiComm(lib, timeout);
  }
  world.timeout_ms = timeout;
  group = { backend, rank: world.rank, size: world.size, mpi: world, nccl };
  return group;
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
 * Destroy the default group (MPI_Finalize at process exit: MPI cannot be initialized twice, so a
 * later init_process_group in the same process reuses the communicator).
 */
export function destroy_process_group(): void {
  group = null;
}

/** MPI_Finalize when the process exits normally (skipped after a failed collective: it would wait for the dead rank). */
process.on("exit", () => {
  world?.finalize();
});
