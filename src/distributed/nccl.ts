/**
 * NCCL through the runtime's FFI (src/runtime/ffi.ts): libnccl.so.2 (and libcudart for device memory and streams) are dlopen'ed
 * where present; nothing is linked at build time, so machines without a GPU load Loom as usual and
 * `init_process_group({ backend: "nccl" })` says why it cannot run.
 *
 * Loom has no CUDA tensor backend yet, so NCCL collectives here take raw device pointers
 * (`NcclComm.all_reduce(sendbuff, recvbuff, count)`), which is what a CUDA backend's storage would
 * hand over; the smoke test (tests/distributed/nccl.test.ts) all-reduces a cudaMalloc'ed buffer on
 * one GPU. Not built yet: a world of several processes, where rank 0's ncclUniqueId is broadcast
 * over MPI (PyTorch uses its TCPStore) and each rank calls ncclCommInitRank, which takes the
 * 128-byte id by value; neither bun:ffi nor Deno.dlopen passes a struct by value, so that needs
 * a 3-line C wrapper (docs/DISTRIBUTED.md).
 *
 * Source: NCCL 2.x nccl.h (ncclUniqueId = 128 bytes, ncclFloat32 = 7, ncclSum = 0, ncclAvg = 4);
 * CUDA runtime API (cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2).
 */
import { ffi, ffiUnavailableReason, type Ffi, type FfiFunctions, type FfiSymbol } from "../runtime/ffi.ts";

/** A device or host address, as the runtime's FFI passes it. */
type Pointer = number;

const NCCL_SYMBOLS = {
  ncclGetVersion: { args: ["ptr"], returns: "i32" },
  ncclGetUniqueId: { args: ["ptr"], returns: "i32" },
  // (ncclComm_t* comm, int nranks, ncclUniqueId commId (128 bytes by value), int rank): the id is
  // passed by value, which the FFI cannot express; ncclCommInitAll covers one process below.
  ncclCommInitAll: { args: ["ptr", "i32", "ptr"], returns: "i32" },
  ncclCommDestroy: { args: ["ptr"], returns: "i32" },
  // (sendbuff, recvbuff, count, datatype, op, comm, stream)
  ncclAllReduce: { args: ["ptr", "ptr", "u64", "i32", "i32", "ptr", "ptr"], returns: "i32" },
  ncclGetErrorString: { args: ["i32"], returns: "ptr" },
} as const;

const CUDART_SYMBOLS = {
  cudaGetDeviceCount: { args: ["ptr"], returns: "i32" },
  cudaSetDevice: { args: ["i32"], returns: "i32" },
  cudaMalloc: { args: ["ptr", "u64"], returns: "i32" },
  cudaFree: { args: ["ptr"], returns: "i32" },
  cudaMemcpy: { args: ["ptr", "ptr", "u64", "i32"], returns: "i32" },
  cudaDeviceSynchronize: { args: [], returns: "i32" },
  cudaGetErrorString: { args: ["i32"], returns: "ptr" },
} as const;

export type NcclSymbols = FfiFunctions<typeof NCCL_SYMBOLS>;
export type CudartSymbols = FfiFunctions<typeof CUDART_SYMBOLS>;

export interface NcclLib {
  readonly nccl: NcclSymbols;
  readonly cudart: CudartSymbols;
  /** NCCL version as ncclGetVersion reports it (e.g. 21803 for 2.18.3). */
  readonly version: number;
  /** CUDA devices visible to this process. */
  readonly devices: number;
}

/** ncclDataType_t / ncclRedOp_t values (nccl.h). */
export const NCCL = { float32: 7, float64: 8, int32: 2, int64: 4, sum: 0, prod: 1, max: 2, min: 3, avg: 4 } as const;

function firstLoadable<T extends Record<string, FfiSymbol>>(f: Ffi, names: readonly string[], syms: T): { lib: { symbols: FfiFunctions<T> }; name: string } | string {
  for (const n of names) {
    try {
      return { lib: f.dlopen(n, syms), name: n };
    } catch {
      // not on the loader's path (or missing symbols): try the next name
    }
  }
  return `tried ${names.join(", ")}`;
}

let cached: NcclLib | { error: string } | undefined;

/**
 * libnccl and libcudart, loaded once, or why not (`LOOM_NCCL_LIB`, `LOOM_CUDART_LIB` override the
 * sonames). Needs a visible CUDA device.
 */
export function loadNccl(): NcclLib | { error: string } {
  if (cached) return cached;
  const f = ffi();
  if (f === null) return (cached = { error: `NCCL needs an FFI: ${ffiUnavailableReason()}` });
  cstringOf = f.cstring;
  const nccl = firstLoadable(f, [process.env.LOOM_NCCL_LIB ?? "libnccl.so.2", "libnccl.so"], NCCL_SYMBOLS);
  if (typeof nccl === "string") return (cached = { error: `libnccl not found (${nccl})` });
  const cudart = firstLoadable(f, [process.env.LOOM_CUDART_LIB ?? "libcudart.so", "libcudart.so.12", "libcudart.so.11.0"], CUDART_SYMBOLS);
  if (typeof cudart === "string") return (cached = { error: `libcudart not found (${cudart})` });
  const v = new Int32Array(1), n = new Int32Array(1);
  nccl.lib.symbols.ncclGetVersion(v);
  const rc = cudart.lib.symbols.cudaGetDeviceCount(n);
  if (rc !== 0 || n[0] === 0) return (cached = { error: `no CUDA device (cudaGetDeviceCount: ${rc === 0 ? "0 devices" : cstr(cudart.lib.symbols.cudaGetErrorString(rc))})` });
  return (cached = { nccl: nccl.lib.symbols, cudart: cudart.lib.symbols, version: v[0]!, devices: n[0]! });
}

let cstringOf: Ffi["cstring"] = () => "";
const cstr = (p: Pointer | null) => cstringOf(p);

/** An NCCL communicator over this process's GPUs (ncclCommInitAll: one rank per device). */
export class NcclComm {
  private readonly comms: BigUint64Array;
  constructor(readonly lib: NcclLib, readonly ndev = 1) {
    this.comms = new BigUint64Array(ndev);
    const devs = new Int32Array(Array.from({ length: ndev }, (_, i) => i));
    this.check(lib.nccl.ncclCommInitAll(this.comms, ndev, devs), "ncclCommInitAll");
  }

  private check(rc: number, what: string): void {
    if (rc !== 0) throw new Error(`[nccl] ${what}: ${cstr(this.lib.nccl.ncclGetErrorString(rc))} (${rc})`);
  }

  /**
   * In-place sum of `count` float32 values at device pointer `buf` over the communicator's ranks
   * (default stream), then a device synchronize.
   */
  all_reduce_f32(buf: Pointer, count: number, op: "sum" | "avg" = "sum", dev = 0): void {
    this.check(this.lib.nccl.ncclAllReduce(buf, buf, count, NCCL.float32, NCCL[op], Number(this.comms[dev]!), null), "ncclAllReduce");
    const rc = this.lib.cudart.cudaDeviceSynchronize();
    if (rc !== 0) throw new Error(`[nccl] cudaDeviceSynchronize: ${cstr(this.lib.cudart.cudaGetErrorString(rc))}`);
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
  const ck = (rc: number, what: string) => { if (rc !== 0) throw new Error(`[nccl_smoke] ${what}: ${cstr(cu.cudaGetErrorString(rc))}`); };
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
