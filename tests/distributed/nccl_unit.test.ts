/**
 * The NCCL backend's parts that run without a GPU:
 * - the CPU shim's ncclCommInitRank wrapper (native/kernels/nccl_init.c): exported, refuses NULL
 *   arguments with ncclInvalidArgument instead of crashing, and passes the 128-byte id BY VALUE
 *   (checked through a C stand-in for ncclCommInitRank that encodes what it received);
 * - the pure routing functions (transport per device, device per rank, dtype and op codes);
 * - NcclWorld over a fake libnccl/libcudart (JavaScript functions): init order, the unique id,
 *   NCCL and CUDA errors with their strings, and the wait loop's abort on a timeout, an
 *   asynchronous NCCL error or a dead peer.
 * Values: hand-derived from nccl.h's enums and the stand-in's formula.
 */
import { describe, expect, test } from "bun:test";
import { loadNative } from "../../src/backends/native/ffi.ts";
import { LoomCollectiveTimeoutError, LoomDistributedError, LoomRankFailedError } from "../../src/distributed/errors.ts";
import { NCCL_UNIQUE_ID_BYTES, ncclDeviceIndex, ncclDtype, NcclWorld, type NcclLib, type NcclWorldOptions } from "../../src/distributed/nccl.ts";
import { collectiveShape, collectiveTransport, ncclCollective, ncclOp } from "../../src/distributed/nccl_tensor.ts";
import { LoomDtypeError, LoomShapeError } from "../../src/tensor/errors.ts";
import { thrown } from "../thrown.ts";

const native = loadNative();
const NATIVE_SKIP = "error" in native ? native.error : "";
if (NATIVE_SKIP) console.warn(`[skip] native shim: ${NATIVE_SKIP}`);
const INVALID_ARGUMENT = 4; // ncclInvalidArgument

describe.skipIf(NATIVE_SKIP !== "")(`loom_nccl_comm_init_rank (CPU shim)${NATIVE_SKIP ? ` (skipped: ${NATIVE_SKIP})` : ""}`, () => {
  const sym = () => (native as Exclude<typeof native, { error: string }>).sym;
  const id = new Uint8Array(NCCL_UNIQUE_ID_BYTES);

  test("NULL function pointer, NULL comm, NULL id or a rank outside [0, nranks): ncclInvalidArgument, nothing called", () => {
    const comm = new BigUint64Array([123n]);
    const fake = sym().loom_nccl_fake_init_rank_fn();
    expect(sym().loom_nccl_comm_init_rank(null, comm, 2, id, 0)).toBe(INVALID_ARGUMENT);
    expect(sym().loom_nccl_comm_init_rank(fake, null, 2, id, 0)).toBe(INVALID_ARGUMENT);
    expect(sym().loom_nccl_comm_init_rank(fake, comm, 2, null, 0)).toBe(INVALID_ARGUMENT);
    expect(sym().loom_nccl_comm_init_rank(fake, comm, 2, id, 2)).toBe(INVALID_ARGUMENT);
    expect(sym().loom_nccl_comm_init_rank(fake, comm, 2, id, -1)).toBe(INVALID_ARGUMENT);
    expect(sym().loom_nccl_comm_init_rank(fake, comm, 0, id, 0)).toBe(INVALID_ARGUMENT);
    expect(comm[0]).toBe(123n); // untouched
  });

  test("the id reaches the callee by value: the stand-in sees its first and last byte, rank and nranks", () => {
    const idv = new Uint8Array(NCCL_UNIQUE_ID_BYTES);
    idv[0] = 7;
    idv[NCCL_UNIQUE_ID_BYTES - 1] = 3;
    const comm = new BigUint64Array(1);
    expect(sym().loom_nccl_comm_init_rank(sym().loom_nccl_fake_init_rank_fn(), comm, 4, idv, 1)).toBe(0);
    // id[0] + 256·id[127] + 65536·rank + 2^24·nranks
    expect(Number(comm[0])).toBe(7 + 256 * 3 + 65536 * 1 + 16777216 * 4);
  });
});

test("collectiveTransport: cuda tensors on NCCL under 'nccl', refused under 'mpi'; host tensors on MPI under both", () => {
  expect(collectiveTransport("mpi", "cpu", "all_reduce")).toBe("mpi");
  expect(collectiveTransport("nccl", "cpu", "all_reduce")).toBe("mpi");
  expect(collectiveTransport("nccl", undefined, "all_reduce")).toBe("mpi");
  expect(collectiveTransport("nccl", "webgpu", "all_reduce")).toBe("mpi");
  expect(collectiveTransport("nccl", "cuda", "all_reduce")).toBe("nccl");
  const e = thrown(() => collectiveTransport("mpi", "cuda", "broadcast"));
  expect(e).toBeInstanceOf(LoomDistributedError);
  expect(e.message).toStartWith(`[broadcast] a tensor on device 'cuda' needs init_process_group({ backend: "nccl" })`);
});

test("ncclDeviceIndex: LOOM_CUDA_DEVICE, else LOCAL_RANK, else OMPI_COMM_WORLD_LOCAL_RANK, modulo the devices", () => {
  expect(ncclDeviceIndex({}, 8)).toBe(0);
  expect(ncclDeviceIndex({ LOCAL_RANK: "3" }, 2)).toBe(1);
  expect(ncclDeviceIndex({ OMPI_COMM_WORLD_LOCAL_RANK: "5" }, 4)).toBe(1);
  expect(ncclDeviceIndex({ LOCAL_RANK: "2", OMPI_COMM_WORLD_LOCAL_RANK: "5" }, 8)).toBe(2);
  expect(ncclDeviceIndex({ LOOM_CUDA_DEVICE: "1", LOCAL_RANK: "0" }, 2)).toBe(1);
  const e = thrown(() => ncclDeviceIndex({ LOOM_CUDA_DEVICE: "7" }, 2));
  expect(e).toBeInstanceOf(LoomDistributedError);
  expect(e.message).toBe("[init_process_group] LOOM_CUDA_DEVICE=7 is not a device index (2 CUDA devices visible)");
});

test("ncclDtype / ncclOp / collectiveShape: nccl.h's codes; int64 moves as float64 words; bool is not reduced", () => {
  expect(ncclDtype("float32", "x", true)).toBe(7);
  expect(ncclDtype("float64", "x", true)).toBe(8);
  expect(ncclDtype("int64", "x", true)).toBe(8); // Loom stores int64 as exact doubles
  expect(ncclDtype("int32", "x", true)).toBe(2);
  expect(ncclDtype("bfloat16", "x", true)).toBe(9);
  expect(ncclDtype("float16", "x", false)).toBe(6);
  expect(ncclDtype("bool", "x", false)).toBe(1);
  expect(thrown(() => ncclDtype("bool", "all_reduce", true))).toBeInstanceOf(LoomDtypeError);
  expect(ncclOp("sum", 21803, "x")).toBe(0);
  expect(ncclOp("max", 21803, "x")).toBe(2);
  expect(ncclOp("min", 21803, "x")).toBe(3);
  expect(ncclOp("avg", 21803, "x")).toBe(4);
  expect(thrown(() => ncclOp("avg", 20903, "all_reduce")).message).toBe("[all_reduce] ReduceOp.AVG needs NCCL 2.10 or newer (this is 20903)");
  expect(collectiveShape("all_gather", [2, 3], 4)).toEqual([4, 2, 3]);
  expect(collectiveShape("reduce_scatter", [4, 3], 4)).toEqual([3]);
  expect(collectiveShape("all_reduce", [2, 3], 4)).toEqual([2, 3]);
  expect(thrown(() => collectiveShape("reduce_scatter", [3, 3], 4))).toBeInstanceOf(LoomShapeError);
});

test("ncclCollective: AVG of an integer tensor is a LoomDtypeError before any device work (as on MPI)", () => {
  const x = { dtype: "int32", shape: [2], strides: [1], offset: 0, data: new Int32Array([1, 2]) } as const;
  const e = thrown(() => ncclCollective({ size: 2 } as NcclWorld, "all_reduce", x, { op: "avg", src: 0 }));
  expect(e).toBeInstanceOf(LoomDtypeError);
  expect(e.message).toBe("[all_reduce] ReduceOp.AVG needs float32 or float64, got int32");
});

/** A fake libnccl + libcudart recording calls; `rc` and `query` script the results. */
function fakeLib(script: { rc?: Record<string, number>; query?: () => number; asyncError?: number; ptrDevice?: number } = {}) {
  const calls: [string, ...unknown[]][] = [];
  const rc = (name: string, ...args: unknown[]) => {
    calls.push([name, ...args]);
    return script.rc?.[name] ?? 0;
  };
  const lib = {
    nccl: {
      ncclGetVersion: () => 0,
      ncclGetUniqueId: (id: Uint8Array) => { id.fill(9); return rc("ncclGetUniqueId"); },
      ncclCommInitRank: () => 0,
      ncclCommInitAll: () => 0,
      ncclCommDestroy: (c: number) => rc("ncclCommDestroy", c),
      ncclCommAbort: (c: number) => rc("ncclCommAbort", c),
      ncclCommGetAsyncError: (_c: number, e: Int32Array) => { e[0] = script.asyncError ?? 0; return 0; },
      ncclAllReduce: (...a: unknown[]) => rc("ncclAllReduce", ...a),
      ncclBroadcast: (...a: unknown[]) => rc("ncclBroadcast", ...a),
      ncclAllGather: (...a: unknown[]) => rc("ncclAllGather", ...a),
      ncclReduceScatter: (...a: unknown[]) => rc("ncclReduceScatter", ...a),
      ncclGetErrorString: (code: number) => 1000 + code,
    },
    cudart: {
      cudaGetDeviceCount: () => 0, cudaSetDevice: (d: number) => rc("cudaSetDevice", d), cudaMalloc: () => 0, cudaFree: () => 0, cudaMemcpy: () => 0,
      cudaDeviceSynchronize: () => 0, cudaStreamQuery: () => script.query?.() ?? 0,
      cudaPointerGetAttributes: (a: Int32Array, _p: number) => { a[0] = 2; a[1] = script.ptrDevice ?? 1; return 0; }, cudaGetErrorString: (code: number) => 2000 + code,
    },
    initRankAddress: 4242, version: 21803, devices: 2,
    cstring: (p: number | null) => (p !== null && p >= 2000 ? `cuda-err-${p - 2000}` : `nccl-err-${(p ?? 0) - 1000}`),
  } as unknown as NcclLib;
  return { lib, calls };
}

function worldOpts(over: Partial<NcclWorldOptions> = {}): NcclWorldOptions & { shared: Uint8Array[] } {
  const shared: Uint8Array[] = [];
  return {
    rank: 0, size: 2, device: 1, shared,
    shareId: (id) => { shared.push(id.slice()); },
    initRank: (fn, comm, nranks, id, rank) => { comm[0] = BigInt(fn + nranks * 10 + rank + id[0]! * 1000); return 0; },
    timeout_ms: () => 30,
    checkPeers: () => {},
    ...over,
  };
}

describe("NcclWorld over a fake NCCL", () => {
  test("init: cudaSetDevice, rank 0's unique id shared, ncclCommInitRank through the wrapper with NCCL's address", () => {
    const { lib, calls } = fakeLib();
    const o = worldOpts();
    const w = new NcclWorld(lib, o);
    expect(calls.slice(0, 2)).toEqual([["cudaSetDevice", 1], ["ncclGetUniqueId"]]);
    expect(o.shared[0]![0]).toBe(9); // the id ncclGetUniqueId wrote
    expect(w.comm).toBe(4242 + 20 + 0 + 9000);
    // rank 1 makes no id: it receives rank 0's
    const one = fakeLib();
    const o1 = worldOpts({ rank: 1, shareId: (id) => { id.fill(5); } });
    expect(new NcclWorld(one.lib, o1).comm).toBe(4242 + 20 + 1 + 5000);
    expect(one.calls.map((c) => c[0])).toEqual(["cudaSetDevice"]);
  });

  test("collectives pass device pointers, counts and nccl.h codes on the default stream", () => {
    const { lib, calls } = fakeLib();
    const w = new NcclWorld(lib, worldOpts());
    w.all_reduce(100, 200, 6, 7, 4);
    w.broadcast(100, 100, 6, 8, 1);
    w.all_gather(100, 300, 6, 2);
    w.reduce_scatter(300, 100, 3, 7, 0);
    const c = w.comm;
    expect(calls.slice(2)).toEqual([
      ["ncclAllReduce", 100, 200, 6, 7, 4, c, null],
      ["ncclBroadcast", 100, 100, 6, 8, 1, c, null],
      ["ncclAllGather", 100, 300, 6, 2, c, null],
      ["ncclReduceScatter", 300, 100, 3, 7, 0, c, null],
    ]);
    w.destroy();
    w.destroy(); // once
    expect(calls.filter((x) => x[0] === "ncclCommDestroy").length).toBe(1);
    expect(thrown(() => w.all_reduce(1, 1, 1, 7, 0)).message).toBe("[all_reduce] rank 0: the NCCL communicator was destroyed");
  });

  test("an NCCL or CUDA error code is a LoomDistributedError with ncclGetErrorString / cudaGetErrorString", () => {
    const bad = fakeLib({ rc: { ncclGetUniqueId: 2 } });
    const e0 = thrown(() => new NcclWorld(bad.lib, worldOpts()));
    expect(e0).toBeInstanceOf(LoomDistributedError);
    expect(e0.message).toBe("[ncclGetUniqueId] rank 0: NCCL error 2: nccl-err-2");
    const dev = fakeLib({ rc: { cudaSetDevice: 101 } });
    expect(thrown(() => new NcclWorld(dev.lib, worldOpts())).message).toBe("[init_process_group] rank 0: cudaSetDevice(1): cuda-err-101 (101)");
    const init = fakeLib();
    expect(thrown(() => new NcclWorld(init.lib, worldOpts({ initRank: () => 5 }))).message).toBe("[ncclCommInitRank] rank 0: NCCL error 5: nccl-err-5");
    const ar = fakeLib({ rc: { ncclAllReduce: 3 } });
    expect(thrown(() => new NcclWorld(ar.lib, worldOpts()).all_reduce(1, 1, 1, 7, 0)).message).toBe("[all_reduce: ncclAllReduce] rank 0: NCCL error 3: nccl-err-3");
    const q = fakeLib({ query: () => 700 });
    const w = new NcclWorld(q.lib, worldOpts());
    expect(thrown(() => w.broadcast(1, 1, 1, 7, 0)).message).toBe("[broadcast] rank 0: CUDA error 700 while waiting for NCCL: cuda-err-700");
    expect(q.calls.filter((x) => x[0] === "ncclCommAbort").length).toBe(1);
  });

  test("a collective that never completes: LoomCollectiveTimeoutError after ncclCommAbort; the communicator is then unusable", () => {
    const { lib, calls } = fakeLib({ query: () => 600 }); // cudaErrorNotReady forever
    const w = new NcclWorld(lib, worldOpts());
    const t0 = performance.now();
    const e = thrown(() => w.all_reduce(1, 1, 1, 7, 0, "DistributedDataParallel"));
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(e).toBeInstanceOf(LoomCollectiveTimeoutError);
    expect(e.message).toContain("[DistributedDataParallel] rank 0: NCCL collective not complete after");
    expect(calls.filter((x) => x[0] === "ncclCommAbort")).toEqual([["ncclCommAbort", w.comm]]);
    expect(thrown(() => w.all_reduce(1, 1, 1, 7, 0)).message).toBe("[all_reduce] rank 0: the NCCL communicator was aborted after a failed collective");
  });

  test("checkDevice: a buffer on another GPU than the communicator's is a LoomDistributedError naming both", () => {
    new NcclWorld(fakeLib({ ptrDevice: 1 }).lib, worldOpts()).checkDevice(64, "all_reduce"); // device 1 == world's
    const e = thrown(() => new NcclWorld(fakeLib({ ptrDevice: 0 }).lib, worldOpts()).checkDevice(64, "all_reduce"));
    expect(e).toBeInstanceOf(LoomDistributedError);
    expect(e.message).toStartWith("[all_reduce] rank 0: the tensor is on CUDA device 0 but this rank's NCCL communicator is on device 1");
  });

  test("an asynchronous NCCL error or a dead peer while waiting: abort, then the error", () => {
    const a = fakeLib({ query: () => 600, asyncError: 6 });
    const e = thrown(() => new NcclWorld(a.lib, worldOpts({ timeout_ms: () => 60_000 })).all_reduce(1, 1, 1, 7, 0));
    expect(e.message).toBe("[all_reduce] rank 0: NCCL error 6: nccl-err-6");
    expect(a.calls.filter((x) => x[0] === "ncclCommAbort").length).toBe(1);
    const p = fakeLib({ query: () => 600 });
    const dead = new LoomRankFailedError("[all_gather] rank 0: rank 1 (pid 77) died; the process group cannot continue", [1]);
    const e2 = thrown(() => new NcclWorld(p.lib, worldOpts({ timeout_ms: () => 60_000, checkPeers: () => { throw dead; } })).all_gather(1, 1, 1, 7));
    expect(e2).toBe(dead);
    expect(p.calls.filter((x) => x[0] === "ncclCommAbort").length).toBe(1);
  });
});
