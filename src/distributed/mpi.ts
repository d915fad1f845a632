/**
 * Open MPI through the runtime's FFI (src/runtime/ffi.ts: bun:ffi under Bun, Deno.dlopen under
 * Deno): libmpi.so.40 is dlopen'ed (RTLD_GLOBAL first, through libc's dlopen, so Open MPI's own
 * plugins resolve its symbols), no C shim. Open MPI's handles are pointers to global objects
 * (`MPI_COMM_WORLD` is `&ompi_mpi_comm_world`, `MPI_FLOAT` is `&ompi_mpi_float`, ...), so
 * they are looked up in the symbol table with dlsym.
 *
 * Every collective is nonblocking (MPI_Iallreduce, MPI_Ibcast, ...) and completed by polling
 * MPI_Test from JavaScript with a deadline: MPI's blocking calls wait inside C and could never be
 * interrupted, while the polling loop can check, every 50 ms, that the peer processes on this
 * host are alive (their pids are exchanged at init) and give up at the timeout. The
 * communicator's error handler is MPI_ERRORS_RETURN, so a transport failure is an error code here
 * rather than an abort. mpirun itself ends the job when a rank dies, about a second later (it then
 * exits non-zero); the check finds the death within 50 ms, so the survivors report it first.
 * (`mpirun --enable-recovery` would keep them running, but then mpirun exits 0: not used.)
 *
 * Source: MPI 3.1 standard ch. 5.12 (nonblocking collectives); Open MPI 4.1 mpi.h (handle
 * layout, MPI_IN_PLACE = (void*)1, MPI_Status = 24 bytes).
 */
import { existsSync, readFileSync } from "node:fs";
import { hostname } from "node:os";
import { ffi, ffiUnavailableReason, type FfiFunctions } from "../runtime/ffi.ts";
import { sleepSync } from "../runtime/sync.ts";
import type { DType, TypedArray } from "../tensor/dtype.ts";
import { LoomDtypeError } from "../tensor/errors.ts";
import { LoomCollectiveTimeoutError, LoomDistributedError, LoomRankFailedError } from "./errors.ts";

/** An address (Open MPI's handles are pointers; the runtime's FFI passes them as numbers). */
type Pointer = number;

const LIBC = {
  dlopen: { args: ["ptr", "i32"], returns: "ptr" },
  dlsym: { args: ["ptr", "ptr"], returns: "ptr" },
  dlerror: { args: [], returns: "ptr" },
} as const;

const MPI_SYMBOLS = {
  MPI_Initialized: { args: ["ptr"], returns: "i32" },
  MPI_Finalized: { args: ["ptr"], returns: "i32" },
  MPI_Init_thread: { args: ["ptr", "ptr", "i32", "ptr"], returns: "i32" },
  MPI_Finalize: { args: [], returns: "i32" },
  MPI_Abort: { args: ["ptr", "i32"], returns: "i32" },
  MPI_Comm_rank: { args: ["ptr", "ptr"], returns: "i32" },
  MPI_Comm_size: { args: ["ptr", "ptr"], returns: "i32" },
  MPI_Comm_set_errhandler: { args: ["ptr", "ptr"], returns: "i32" },
  MPI_Error_string: { args: ["i32", "ptr", "ptr"], returns: "i32" },
  // (sendbuf, recvbuf, count, datatype, op, comm, request*)
  MPI_Iallreduce: { args: ["ptr", "ptr", "i32", "ptr", "ptr", "ptr", "ptr"], returns: "i32" },
  // (buf, count, datatype, root, comm, request*)
  MPI_Ibcast: { args: ["ptr", "i32", "ptr", "i32", "ptr", "ptr"], returns: "i32" },
  // (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request*)
  MPI_Iallgather: { args: ["ptr", "i32", "ptr", "ptr", "i32", "ptr", "ptr", "ptr"], returns: "i32" },
  // (sendbuf, recvbuf, recvcount, datatype, op, comm, request*)
  MPI_Ireduce_scatter_block: { args: ["ptr", "ptr", "i32", "ptr", "ptr", "ptr", "ptr"], returns: "i32" },
  MPI_Ibarrier: { args: ["ptr", "ptr"], returns: "i32" },
  MPI_Test: { args: ["ptr", "ptr", "ptr"], returns: "i32" },
} as const;

/** Global objects whose addresses are Open MPI's predefined handles. */
const HANDLES = [
  "ompi_mpi_comm_world", "ompi_mpi_errors_return", "ompi_mpi_op_sum", "ompi_mpi_op_max", "ompi_mpi_op_min",
  "ompi_mpi_float", "ompi_mpi_double", "ompi_mpi_int32_t", "ompi_mpi_int8_t", "ompi_mpi_uint8_t",
  "ompi_mpi_uint16_t",
] as const;
type HandleName = (typeof HANDLES)[number];

type MpiSymbols = FfiFunctions<typeof MPI_SYMBOLS>;

export interface MpiLib {
  readonly sym: MpiSymbols;
  readonly handles: Readonly<Record<HandleName, Pointer>>;
  readonly path: string;
}

/** Where libmpi is looked for: `LOOM_MPI_LIB`, then the soname (ld.so's search path). */
export const MPI_LIBRARY = process.env.LOOM_MPI_LIB ?? "libmpi.so.40";
const RTLD_NOW = 2, RTLD_GLOBAL = 0x100;
/** MPI_IN_PLACE in Open MPI's mpi.h: ((void *) 1). */
const MPI_IN_PLACE: Pointer = 1;
const MPI_THREAD_FUNNELED = 1;

const encoder = new TextEncoder();
const cbytes = (s: string) => encoder.encode(`${s}\0`);
let cached: MpiLib | { error: string } | undefined;

/** libmpi, loaded once; or the reason it is unavailable (not installed: `apt-get install openmpi-bin libopenmpi-dev`). */
export function loadMpi(): MpiLib | { error: string } {
  if (cached) return cached;
  const f = ffi();
  if (f === null) return (cached = { error: `MPI needs an FFI: ${ffiUnavailableReason()}` });
  try {
    const libc = f.dlopen("libc.so.6", LIBC).symbols;
    // RTLD_GLOBAL: Open MPI's MCA components (dlopen'ed by libmpi) need libmpi's symbols global
    const h = libc.dlopen(cbytes(MPI_LIBRARY), RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      const e = libc.dlerror();
      return (cached = { error: `cannot load ${MPI_LIBRARY}: ${e ? f.cstring(e) : "not found"} (install openmpi-bin and libopenmpi-dev)` });
    }
    const handles = {} as Record<HandleName, Pointer>;
    for (const n of HANDLES) {
      const p = libc.dlsym(h, cbytes(n));
      if (!p) return (cached = { error: `${MPI_LIBRARY} has no symbol ${n}: not Open MPI (MPICH's handles are integers)` });
      handles[n] = p;
    }
    const sym = f.dlopen(MPI_LIBRARY, MPI_SYMBOLS).symbols;
    return (cached = { sym, handles, path: MPI_LIBRARY });
  } catch (e) {
    return (cached = { error: `cannot load ${MPI_LIBRARY}: ${(e as Error).message}` });
  }
}

export type MpiReduce = "sum" | "max" | "min";

/** A started nonblocking collective: its MPI_Request, and the buffers MPI reads and writes until it completes. */
export class MpiRequest {
  readonly handle = new BigUint64Array(1);
  done = false;
  constructor(readonly what: string, readonly buffers: readonly TypedArray[]) {}
}

/** A process is gone when kill(pid, 0) fails or /proc says it is a zombie (killed, not reaped yet). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = `/proc/${pid}/stat`;
  if (!existsSync(stat)) return true;
  try {
    const s = readFileSync(stat, "utf8");
    const state = s.slice(s.lastIndexOf(")") + 2, s.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}

/**
 * MPI_COMM_WORLD of this process. One per process (MPI_Init runs once).
 */
export class MpiComm {
  readonly rank: number;
  readonly size: number;
  /** Every rank's pid and whether it runs on this host (liveness checks). */
  readonly peers: readonly { pid: number; local: boolean }[];
  /** Milliseconds a collective may take before LoomCollectiveTimeoutError. */
  timeout_ms: number;
  private readonly flag = new Int32Array(1);
  private readonly status = new Int32Array(8); // MPI_Status: 24 bytes in Open MPI 4.1; room to spare
  private failed: Error | null = null;
  /** Milliseconds spent waiting in `wait` (communication not hidden behind other work). */
  wait_ms = 0;

  constructor(readonly lib: MpiLib, timeout_ms: number) {
    this.timeout_ms = timeout_ms;
    const s = lib.sym, one = new Int32Array(1);
    this.check(s.MPI_Initialized(one), "MPI_Initialized");
    if (!one[0]) {
      const provided = new Int32Array(1);
      this.check(s.MPI_Init_thread(null, null, MPI_THREAD_FUNNELED, provided), "MPI_Init_thread");
    }
    const world = lib.handles.ompi_mpi_comm_world;
    this.check(s.MPI_Comm_set_errhandler(world, lib.handles.ompi_mpi_errors_return), "MPI_Comm_set_errhandler");
    this.check(s.MPI_Comm_rank(world, one), "MPI_Comm_rank");
    this.rank = one[0]!;
    this.check(s.MPI_Comm_size(world, one), "MPI_Comm_size");
    this.size = one[0]!;
    // pid and a hash of the host name of every rank, for the liveness checks while waiting
    const mine = new Int32Array([process.pid, hostHash()]);
    const all = new Int32Array(2 * this.size);
    this.wait(this.start("init", (r) => s.MPI_Iallgather(mine, 2, lib.handles.ompi_mpi_int32_t, all, 2, lib.handles.ompi_mpi_int32_t, world, r), [mine, all]));
    this.peers = Array.from({ length: this.size }, (_, i) => ({ pid: all[2 * i]!, local: all[2 * i + 1] === mine[1] }));
  }

  /** The MPI datatype handle of a dtype; `reducing`: sum/max need arithmetic types. */
  datatype(dtype: DType, what: string, reducing: boolean): Pointer {
    const h = this.lib.handles;
    switch (dtype) {
      case "float32": return h.ompi_mpi_float;
      case "float64": case "int64": return h.ompi_mpi_double; // Loom stores int64 as exact doubles (dtype.ts)
      case "int32": return h.ompi_mpi_int32_t;
      case "int8": return h.ompi_mpi_int8_t;
      case "uint8": case "bool":
        if (reducing && dtype === "bool") break;
        return h.ompi_mpi_uint8_t;
      case "float16": case "bfloat16":
        if (reducing) break;
        return h.ompi_mpi_uint16_t; // moved as bits
    }
    throw new LoomDtypeError(`[${what}] dtype ${dtype} cannot be reduced by MPI (float32, float64, int32, int64, int8, uint8)`);
  }

  op(op: MpiReduce): Pointer {
    const h = this.lib.handles;
    return op === "sum" ? h.ompi_mpi_op_sum : op === "max" ? h.ompi_mpi_op_max : h.ompi_mpi_op_min;
  }

  /** Start `buf` ← op over ranks of `buf` (in place). */
  iallreduce(buf: TypedArray, dtype: DType, op: MpiReduce, what = "all_reduce"): MpiRequest {
    const dt = this.datatype(dtype, what, true), o = this.op(op), w = this.lib.handles.ompi_mpi_comm_world;
    return this.start(what, (r) => this.lib.sym.MPI_Iallreduce(MPI_IN_PLACE, buf, buf.length, dt, o, w, r), [buf]);
  }

  /** Start `buf` ← rank `root`'s `buf`. */
  ibcast(buf: TypedArray, dtype: DType, root: number, what = "broadcast"): MpiRequest {
    const dt = this.datatype(dtype, what, false), w = this.lib.handles.ompi_mpi_comm_world;
    return this.start(what, (r) => this.lib.sym.MPI_Ibcast(buf, buf.length, dt, root, w, r), [buf]);
  }

  /** Start `recv` (size × send.length) ← every rank's `send`, in rank order. */
  iallgather(send: TypedArray, recv: TypedArray, dtype: DType, what = "all_gather"): MpiRequest {
    const dt = this.datatype(dtype, what, false), w = this.lib.handles.ompi_mpi_comm_world;
    return this.start(what, (r) => this.lib.sym.MPI_Iallgather(send, send.length, dt, recv, send.length, dt, w, r), [send, recv]);
  }

  /** Start `recv` ← this rank's block of op over ranks of `send` (size × recv.length). */
  ireduce_scatter(send: TypedArray, recv: TypedArray, dtype: DType, op: MpiReduce, what = "reduce_scatter"): MpiRequest {
    const dt = this.datatype(dtype, what, true), o = this.op(op), w = this.lib.handles.ompi_mpi_comm_world;
    return this.start(what, (r) => this.lib.sym.MPI_Ireduce_scatter_block(send, recv, recv.length, dt, o, w, r), [send, recv]);
  }

  ibarrier(what = "barrier"): MpiRequest {
    return this.start(what, (r) => this.lib.sym.MPI_Ibarrier(this.lib.handles.ompi_mpi_comm_world, r), []);
  }

  private start(what: string, call: (req: BigUint64Array) => number, buffers: readonly TypedArray[]): MpiRequest {
    if (this.failed) throw this.failed;
    const r = new MpiRequest(what, buffers);
    this.check(call(r.handle), what);
    return r;
  }

  /** One MPI_Test (progresses MPI): whether `r` has completed. */
  test(r: MpiRequest): boolean {
    if (r.done) return true;
    const rc = this.lib.sym.MPI_Test(r.handle, this.flag, this.status);
    if (rc !== 0) this.fail(r.what, rc);
    if (this.flag[0]) r.done = true;
    return r.done;
  }

  /**
   * Complete `r`: poll MPI_Test; every 50 ms check that local peers are alive; give up at the timeout.
   * @throws LoomRankFailedError when a peer died, LoomCollectiveTimeoutError at the deadline,
   *   LoomDistributedError when MPI returned an error
   */
  wait(r: MpiRequest): void {
    if (this.test(r)) return;
    const t0 = performance.now();
    let next = t0 + 50, spins = 0;
    try {
      while (!this.test(r)) {
        if (++spins < 2000) continue; // spin first: a collective usually completes within microseconds
        const t = performance.now();
        if (t >= next) {
          this.checkPeers(r.what);
          if (t - t0 > this.timeout_ms) {
            throw (this.failed = new LoomCollectiveTimeoutError(
              `[${r.what}] rank ${this.rank}: no completion after ${((t - t0) / 1000).toFixed(1)} s (timeout ${this.timeout_ms / 1000} s): another rank is stuck or skipped this collective`,
            ));
          }
          next = t + 50;
        }
        if (spins > 20000) sleepSync(1); // a long wait: leave the core to the other ranks
      }
    } finally {
      this.wait_ms += performance.now() - t0;
    }
  }

  /** @throws LoomRankFailedError naming the ranks whose process on this host is gone */
  checkPeers(what: string): void {
    const dead = this.peers.flatMap((p, i) => (i !== this.rank && p.local && !alive(p.pid) ? [i] : []));
    if (dead.length) {
      throw (this.failed = new LoomRankFailedError(
        `[${what}] rank ${this.rank}: rank ${dead.join(", ")} (pid ${dead.map((i) => this.peers[i]!.pid).join(", ")}) died; the process group cannot continue`,
        dead,
      ));
    }
  }

  /** Whether a collective failed (the group is then unusable: MPI_Finalize would wait for the dead). */
  get broken(): boolean {
    return this.failed !== null;
  }

  private fail(what: string, rc: number): never {
    this.checkPeers(what); // a transport error after a peer died: name the rank
    throw (this.failed = new LoomDistributedError(`[${what}] rank ${this.rank}: MPI error ${rc}: ${this.errorString(rc)}`));
  }

  private check(rc: number, what: string): void {
    if (rc !== 0) this.fail(what, rc);
  }

  errorString(rc: number): string {
    const buf = new Uint8Array(512), len = new Int32Array(1);
    if (this.lib.sym.MPI_Error_string(rc, buf, len) !== 0) return "unknown";
    return new TextDecoder().decode(buf.subarray(0, len[0]));
  }

  /** MPI_Finalize (skipped after a failure: it would wait for the dead rank). */
  finalize(): void {
    if (this.failed) return;
    const one = new Int32Array(1);
    this.lib.sym.MPI_Finalized(one);
    if (!one[0]) this.lib.sym.MPI_Finalize();
  }

  /** MPI_Abort on the world (mpirun then ends every rank). */
  abort(code: number): void {
    this.lib.sym.MPI_Abort(this.lib.handles.ompi_mpi_comm_world, code);
  }
}

function hostHash(): number {
  let h = 0x811c9dc5;
  for (const c of hostname()) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193);
  return h | 0;
}
