/**
 * NCCL through the runtime's FFI (src/runtime/ffi.ts): libnccl.so.2 (and libcudart for the
 * current device and the default stream) are dlopen'ed where present; nothing is linked at build
 * time, so machines without a GPU load Loom as usual and `init_process_group({ backend: "nccl" })`
 * says why it cannot run.
 *
 * - `NcclWorld`: one communicator per process over the MPI world (torch's ProcessGroupNCCL). Rank 0
 *   makes the ncclUniqueId, the 128 bytes go to every rank over MPI (torch uses its TCPStore),
 *   and each rank calls ncclCommInitRank, which takes the id *by value*: neither bun:ffi nor
 *   Deno.dlopen can pass a struct by value, so the call goes through a C wrapper in the CPU shim
 *   (native/kernels/nccl_init.c, `loom_nccl_comm_init_rank`), handed NCCL's function pointer.
 *   Collectives take device addresses (the tensors' CUDA buffers, nccl_tensor.ts), run on the
 *   legacy default stream, and are waited for by polling (cudaStreamQuery, ncclCommGetAsyncError)
 *   with the group's deadline: a dead peer gives LoomRankFailedError or LoomCollectiveTimeoutError
 *   after ncclCommAbort, never a hang (torch's NCCL_ASYNC_ERROR_HANDLING).
 * - `NcclComm` / `nccl_smoke`: ncclCommInitAll over this process's GPUs (the 1-GPU smoke test).
 *
 * Device memory: Loom's CUDA library (native/cuda/, cudart linked statically) and libnccl both
 * use the device's primary context, so a tensor's buffer address is valid for NCCL. The library's
 * stream is non-blocking (it does not order with the default stream), so callers synchronize the
 * CUDA backend before a collective (nccl_tensor.ts) and the collective completes before it returns.
 *
 * Source: NCCL 2.x nccl.h (ncclUniqueId = 128 bytes; ncclInt8 0, ncclUint8 1, ncclInt32 2,
 * ncclInt64 4, ncclFloat16 6, ncclFloat32 7, ncclFloat64 8, ncclBfloat16 9; ncclSum 0, ncclProd
 * 1, ncclMax 2, ncclMin 3, ncclAvg 4 (NCCL ≥ 2.10); ncclInProgress 7); CUDA runtime API
 * (cudaErrorNotReady = 600, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2).
 */
import { ffi, ffiUnavailableReason, type Ffi, type FfiFunctions, type FfiLibrary, type FfiSymbol } from "../runtime/ffi.ts";
import { sleepSync } from "../runtime/sync.ts";
import type { DType } from "../tensor/dtype.ts";
import { LoomDtypeError } from "../tensor/errors.ts";
import { LoomCollectiveTimeoutError, LoomDistributedError } from "./errors.ts";

/** A device or host address, as the runtime's FFI passes it. */
type Pointer = number;

const NCCL_SYMBOLS = {
  ncclGetVersion: { args: ["ptr"], returns: "i32" },
  ncclGetUniqueId: { args: ["ptr"], returns: "i32" },
  // (ncclComm_t* comm, int nranks, ncclUniqueId commId (128 bytes BY VALUE), int rank): never
  // called through the FFI (the id is by value); bound for its address, which
  // loom_nccl_comm_init_rank (native/kernels/nccl_init.c) calls.
  ncclCommInitRank: { args: ["ptr", "i32", "ptr", "i32"], returns: "i32" },
  ncclCommInitAll: { args: ["ptr", "i32", "ptr"], returns: "i32" },
  ncclCommDestroy: { args: ["ptr"], returns: "i32" },
  ncclCommAbort: { args: ["ptr"], returns: "i32" },
  ncclCommGetAsyncError: { args: ["ptr", "ptr"], returns: "i32" },
  // (sendbuff, recvbuff, count, datatype, op, comm, stream)
  ncclAllReduce: { args: ["ptr", "ptr", "u64", "i32", "i32", "ptr", "ptr"], returns: "i32" },
  // (sendbuff, recvbuff, count, datatype, root, comm, stream)
  ncclBroadcast: { args: ["ptr", "ptr", "u64", "i32", "i32", "ptr", "ptr"], returns: "i32" },
  // (sendbuff, recvbuff, sendcount, datatype, comm, stream)
  ncclAllGather: { args: ["ptr", "ptr", "u64", "i32", "ptr", "ptr"], returns: "i32" },
  // (sendbuff, recvbuff, recvcount, datatype, op, comm, stream)
  ncclReduceScatter: { args: ["ptr", "ptr", "u64", "i32", "i32", "ptr", "ptr"], returns: "i32" },
  ncclGetErrorString: { args: ["i32"], returns: "ptr" },
} as const;

const CUDART_SYMBOLS = {
  cudaGetDeviceCount: { args: ["ptr"], returns: "i32" },
  cudaSetDevice: { args: ["i32"], returns: "i32" },
  cudaMalloc: { args: ["ptr", "u64"], returns: "i32" },
  cudaFree: { args: ["ptr"], returns: "i32" },
  cudaMemcpy: { args: ["ptr", "ptr", "u64", "i32"], returns: "i32" },
  cudaDeviceSynchronize: { args: [], returns: "i32" },
  cudaStreamQuery: { args: ["ptr"], returns: "i32" },
  // (cudaPointerAttributes* attr, const void* ptr): { int type; int device; void* devicePointer; void* hostPointer; }
  cudaPointerGetAttributes: { args: ["ptr", "ptr"], returns: "i32" },
  cudaGetErrorString: { args: ["i32"], returns: "ptr" },
} as const;

export type NcclSymbols = FfiFunctions<typeof NCCL_SYMBOLS>;
export type CudartSymbols = FfiFunctions<typeof CUDART_SYMBOLS>;

export interface NcclLib {
  readonly nccl: NcclSymbols;
  readonly cudart: CudartSymbols;
  /** Address of ncclCommInitRank (for the shim's by-value wrapper). */
  readonly initRankAddress: Pointer;
  /** NCCL version as ncclGetVersion reports it (e.g. 21803 for 2.18.3). */
  readonly version: number;
  /** CUDA devices visible to this process. */
  readonly devices: number;
  /** A C string at an address (the FFI's). */
  cstring(p: Pointer | null): string;
}

/** ncclDataType_t / ncclRedOp_t values (nccl.h). */
export const NCCL = {
  int8: 0, uint8: 1, int32: 2, int64: 4, float16: 6, float32: 7, float64: 8, bfloat16: 9,
  sum: 0, prod: 1, max: 2, min: 3, avg: 4,
} as const;

/** NCCL_UNIQUE_ID_BYTES (nccl.h). */
export const NCCL_UNIQUE_ID_BYTES = 128;
const CUDA_ERROR_NOT_READY = 600;
const NCCL_IN_PROGRESS = 7;

/**
 * The ncclDataType_t that moves a Loom dtype's device bytes (src/tensor/dtype.ts layouts): int64
 * is stored as exact float64 words, so it is ncclFloat64 (as the MPI path uses MPI_DOUBLE); bool
 * is bytes; float16/bfloat16 are NCCL's own half types (reduced in half precision, as torch does).
 * @throws LoomDtypeError for bool in a reduction
 */
export function ncclDtype(dtype: DType, what: string, reducing: boolean): number {
  switch (dtype) {
    case "float32": return NCCL.float32;
    case "float64": case "int64": return NCCL.float64;
    case "int32": return NCCL.int32;
    case "int8": return NCCL.int8;
    case "float16": return NCCL.float16;
    case "bfloat16": return NCCL.bfloat16;
    case "uint8": return NCCL.uint8;
    case "bool": if (!reducing) return NCCL.uint8;
  }
  throw new LoomDtypeError(`[${what}] dtype ${dtype} cannot be reduced by NCCL (float32, float64, float16, bfloat16, int32, int64, int8, uint8)`);
}

type Loaded<S extends Record<string, FfiSymbol>> = { lib: FfiLibrary<S>; name: string };

function firstLoadable<T extends Record<string, FfiSymbol>>(f: Ffi, names: readonly string[], syms: T): Loaded<T> | string {
  for (const n of names) {
    try {
      return { lib: f.dlopen(n, syms), name: n };
    } catch {
      // not on the loader's path (or missing symbols, e.g. an NCCL before 2.10): try the next name
    }
  }
  return `tried ${names.join(", ")}`;
}

let cached: NcclLib | { error: string } | undefined;

/**
 * libnccl (≥ 2.10: ncclAvg, ncclCommGetAsyncError) and libcudart, loaded once, or why not
 * (`LOOM_NCCL_LIB`, `LOOM_CUDART_LIB` override the sonames). Needs a visible CUDA device.
 */
export function loadNccl(): NcclLib | { error: string } {
  if (cached) return cached;
  const f = ffi();
  if (f === null) return (cached = { error: `NCCL needs an FFI: ${ffiUnavailableReason()}` });
  const nccl = firstLoadable(f, [process.env.LOOM_NCCL_LIB ?? "libnccl.so.2", "libnccl.so"], NCCL_SYMBOLS);
  if (typeof nccl === "string") return (cached = { error: `libnccl not found (${nccl})` });
  const cudart = firstLoadable(f, [process.env.LOOM_CUDART_LIB ?? "libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"], CUDART_SYMBOLS);
  if (typeof cudart === "string") return (cached = { error: `libcudart not found (${cudart})` });
  const v = new Int32Array(1), n = new Int32Array(1);
  nccl.lib.symbols.ncclGetVersion(v);
  const cu = cudart.lib.symbols;
  const rc = cu.cudaGetDeviceCount(n);
  if (rc !== 0 || n[0] === 0) return (cached = { error: `no CUDA device (cudaGetDeviceCount: ${rc === 0 ? "0 devices" : f.cstring(cu.cudaGetErrorString(rc))})` });
  return (cached = {
    nccl: nccl.lib.symbols, cudart: cu, initRankAddress: nccl.lib.address("ncclCommInitRank"),
    version: v[0]!, devices: n[0]!, cstring: (p) => f.cstring(p),
  });
}

/**
 * The CUDA device of a rank (torch's convention: `torch.cuda.set_device(LOCAL_RANK)`):
 * `LOOM_CUDA_DEVICE` when set, else the local rank (`LOCAL_RANK`, else Open MPI's
 * `OMPI_COMM_WORLD_LOCAL_RANK`, else 0) modulo the device count.
 * @throws LoomDistributedError when LOOM_CUDA_DEVICE is not a device index here
 */
export function ncclDeviceIndex(env: Readonly<Record<string, string | undefined>>, devices: number): number {
  const set = env.LOOM_CUDA_DEVICE;
  if (set !== undefined && set !== "") {
    const d = Number(set);
    if (!(Number.isInteger(d) && d >= 0 && d < devices)) throw new LoomDistributedError(`[init_process_group] LOOM_CUDA_DEVICE=${set} is not a device index (${devices} CUDA devices visible)`);
    return d;
  }
  const local = Number(env.LOCAL_RANK ?? env.OMPI_COMM_WORLD_LOCAL_RANK ?? 0);
  return (Number.isInteger(local) && local >= 0 ? local : 0) % devices;
}

/** What an NcclWorld needs from the rest of the group (the MPI world, the CPU shim). */
export interface NcclWorldOptions {
  rank: number;
  size: number;
  /** CUDA device of this rank (ncclDeviceIndex). */
  device: number;
  /** Rank 0's 128 bytes to every rank (MPI_Bcast). */
  shareId(id: Uint8Array): void;
  /** loom_nccl_comm_init_rank of the CPU shim (native/kernels/nccl_init.c). */
  initRank(fn: Pointer, comm: BigUint64Array, nranks: number, id: Uint8Array, rank: number): number;
  /** Milliseconds a collective may take. */
  timeout_ms(): number;
  /** Throws when a peer process died (MpiComm.checkPeers); called while waiting. */
  checkPeers(what: string): void;
}

/** One NCCL communicator over the process group's ranks (ncclCommInitRank), one device per rank. */
export class NcclWorld {
  readonly comm: Pointer;
  readonly rank: number;
  readonly size: number;
  readonly device: number;
  private aborted = false;
  private destroyed = false;

  /**
   * cudaSetDevice(device), then rank 0's ncclGetUniqueId, shared, and ncclCommInitRank on every rank.
   * @throws LoomDistributedError naming the CUDA or NCCL call and its error string
   */
  constructor(readonly lib: NcclLib, private readonly opts: NcclWorldOptions) {
    this.rank = opts.rank;
    this.size = opts.size;
    this.device = opts.device;
    const cu = lib.cudart;
    const rc = cu.cudaSetDevice(opts.device);
    if (rc !== 0) throw new LoomDistributedError(`[init_process_group] rank ${opts.rank}: cudaSetDevice(${opts.device}): ${lib.cstring(cu.cudaGetErrorString(rc))} (${rc})`);
    const id = new Uint8Array(NCCL_UNIQUE_ID_BYTES);
    if (opts.rank === 0) this.check(lib.nccl.ncclGetUniqueId(id), "ncclGetUniqueId");
    opts.shareId(id);
    const out = new BigUint64Array(1);
    this.check(opts.initRank(lib.initRankAddress, out, opts.size, id, opts.rank), "ncclCommInitRank");
    this.comm = Number(out[0]!);
  }

  private fail(what: string, rc: number): never {
    throw new LoomDistributedError(`[${what}] rank ${this.rank}: NCCL error ${rc}: ${this.lib.cstring(this.lib.nccl.ncclGetErrorString(rc))}`);
  }

  private check(rc: number, what: string): void {
    if (rc !== 0) this.fail(what, rc);
  }

  private usable(what: string): void {
    if (this.aborted || this.destroyed) throw new LoomDistributedError(`[${what}] rank ${this.rank}: the NCCL communicator was ${this.aborted ? "aborted after a failed collective" : "destroyed"}`);
  }

  /**
   * Check that device address `addr` lives on this rank's device (cudaPointerGetAttributes): a
   * cuda tensor made before init_process_group may sit on another GPU than the communicator's.
   * @throws LoomDistributedError naming both devices
   */
  checkDevice(addr: Pointer, what: string): void {
    const attr = new Int32Array(16); // cudaPointerAttributes: 24 bytes in CUDA 11+
    attr[1] = -1;
    if (this.lib.cudart.cudaPointerGetAttributes(attr, addr) !== 0) return; // not ours to judge (the collective reports it)
    if (attr[1]! >= 0 && attr[1] !== this.device) {
      throw new LoomDistributedError(
        `[${what}] rank ${this.rank}: the tensor is on CUDA device ${attr[1]} but this rank's NCCL communicator is on device ${this.device}: call init_process_group({ backend: "nccl" }) before making cuda tensors (it sets LOOM_CUDA_DEVICE), or set LOOM_CUDA_DEVICE for every rank`,
      );
    }
  }

  /** recv ← op over ranks of send (`count` elements; recv may equal send). */
  all_reduce(send: Pointer, recv: Pointer, count: number, dtype: number, op: number, what = "all_reduce"): void {
    this.usable(what);
    this.check(this.lib.nccl.ncclAllReduce(send, recv, count, dtype, op, this.comm, null), `${what}: ncclAllReduce`);
    this.wait(what);
  }

  /** recv ← rank `root`'s send (`count` elements). */
  broadcast(send: Pointer, recv: Pointer, count: number, dtype: number, root: number, what = "broadcast"): void {
    this.usable(what);
    this.check(this.lib.nccl.ncclBroadcast(send, recv, count, dtype, root, this.comm, null), `${what}: ncclBroadcast`);
    this.wait(what);
  }

  /** recv[r·count ..] ← rank r's send (`count` elements per rank). */
  all_gather(send: Pointer, recv: Pointer, count: number, dtype: number, what = "all_gather"): void {
    this.usable(what);
    this.check(this.lib.nccl.ncclAllGather(send, recv, count, dtype, this.comm, null), `${what}: ncclAllGather`);
    this.wait(what);
  }

  /** recv ← op over ranks of send[rank·count ..] (`count` elements received). */
  reduce_scatter(send: Pointer, recv: Pointer, count: number, dtype: number, op: number, what = "reduce_scatter"): void {
    this.usable(what);
    this.check(this.lib.nccl.ncclReduceScatter(send, recv, count, dtype, op, this.comm, null), `${what}: ncclReduceScatter`);
    this.wait(what);
  }

  /**
   * Wait for the default stream: poll cudaStreamQuery; every 50 ms check NCCL's asynchronous
   * error, the local peers and the deadline. A failure aborts the communicator first
   * (ncclCommAbort), so no kernel is left waiting for a dead peer.
   * @throws LoomDistributedError, LoomRankFailedError (from checkPeers), LoomCollectiveTimeoutError
   */
  wait(what: string): void {
    const cu = this.lib.cudart;
    const t0 = performance.now();
    let next = t0 + 50, spins = 0;
    for (;;) {
      const q = cu.cudaStreamQuery(null);
      if (q === 0) return;
      if (q !== CUDA_ERROR_NOT_READY) {
        this.abort();
        throw new LoomDistributedError(`[${what}] rank ${this.rank}: CUDA error ${q} while waiting for NCCL: ${this.lib.cstring(cu.cudaGetErrorString(q))}`);
      }
      if (++spins < 2000) continue; // spin first: a small collective completes within microseconds
      const t = performance.now();
      if (t >= next) {
        next = t + 50;
        const err = new Int32Array(1);
        const rc = this.lib.nccl.ncclCommGetAsyncError(this.comm, err);
        if (rc !== 0 || (err[0] !== 0 && err[0] !== NCCL_IN_PROGRESS)) {
          this.abort();
          this.fail(what, rc !== 0 ? rc : err[0]!);
        }
        try {
          this.opts.checkPeers(what);
        } catch (e) {
          this.abort();
          throw e;
        }
        const limit = this.opts.timeout_ms();
        if (t - t0 > limit) {
          this.abort();
          throw new LoomCollectiveTimeoutError(
            `[${what}] rank ${this.rank}: NCCL collective not complete after ${((t - t0) / 1000).toFixed(1)} s (timeout ${limit / 1000} s): another rank is stuck or skipped this collective; the communicator was aborted`,
          );
        }
      }
      if (spins > 20000) sleepSync(1); // a long wait: leave the core to the other ranks
    }
  }

  /** ncclCommAbort: frees the communicator and stops its pending kernels. */
  private abort(): void {
    if (this.aborted || this.destroyed) return;
    this.aborted = true;
    this.lib.nccl.ncclCommAbort(this.comm);
  }

  /** ncclCommDestroy (destroy_process_group). */
  destroy(): void {
    if (this.aborted || this.destroyed) return;
    this.destroyed = true;
    this.lib.nccl.ncclCommDestroy(this.comm);
  }
}

/** An NCCL communicator over this process's GPUs (ncclCommInitAll: one rank per device). */
export class NcclComm {
  private readonly comms: BigUint64Array;
  constructor(readonly lib: NcclLib, readonly ndev = 1) {
    this.comms = new BigUint64Array(ndev);
    const devs = new Int32Array(Array.from({ length: ndev }, (_, i) => i));
    this.check(lib.nccl.ncclCommInitAll(this.comms, ndev, devs), "ncclCommInitAll");
  }

  private check(rc: number, what: string): void {
    if (rc !== 0) throw new LoomDistributedError(`[nccl] ${what}: ${this.lib.cstring(this.lib.nccl.ncclGetErrorString(rc))} (${rc})`);
  }

  /**
   * In-place sum of `count` float32 values at device pointer `buf` over the communicator's ranks
   * (default stream), then a device synchronize.
   */
  all_reduce_f32(buf: Pointer, count: number, op: "sum" | "avg" = "sum", dev = 0): void {
    this.check(this.lib.nccl.ncclAllReduce(buf, buf, count, NCCL.float32, NCCL[op], Number(this.comms[dev]!), null), "ncclAllReduce");
    const rc = this.lib.cudart.cudaDeviceSynchronize();
    if (rc !== 0) throw new LoomDistributedError(`[nccl] cudaDeviceSynchronize: ${this.lib.cstring(this.lib.cudart.cudaGetErrorString(rc))}`);
  }

  destroy(): void {
    for (const c of this.comms) this.lib.nccl.ncclCommDestroy(Number(c));
  }
}

/**
 * The smoke test's body: all-reduce [1, 2, ..., n] on one GPU through NCCL (a world of one: the
 * result equals the input; avg too) and copy it back. Returns the values read back.
 */
export function nccl_smoke(lib: NcclLib, n = 1024): Float32Array {
  const host = Float32Array.from({ length: n }, (_, i) => i + 1);
  const dptr = new BigUint64Array(1);
  const cu = lib.cudart;
  const ck = (rc: number, what: string) => { if (rc !== 0) throw new LoomDistributedError(`[nccl_smoke] ${what}: ${lib.cstring(cu.cudaGetErrorString(rc))}`); };
  ck(cu.cudaSetDevice(0), "cudaSetDevice");
  ck(cu.cudaMalloc(dptr, 4 * n), "cudaMalloc");
  const d: Pointer = Number(dptr[0]!);
  try {
    ck(cu.cudaMemcpy(d, host, 4 * n, 1), "cudaMemcpy H2D");
    const comm = new NcclComm(lib, 1);
    comm.all_reduce_f32(d, n, "sum");
    comm.destroy();
    const back = new Float32Array(n);
    ck(cu.cudaMemcpy(back, d, 4 * n, 2), "cudaMemcpy D2H");
    return back;
  } finally {
    cu.cudaFree(d);
  }
}
