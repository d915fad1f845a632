/**
 * Worker for nccl_init.test.ts (2 ranks, no GPU): NcclWorld's initialization over the real MPI
 * world and the real CPU-shim wrapper, with libnccl replaced by stand-ins: ncclGetUniqueId writes
 * id[i] = (7i + 3) mod 256 on rank 0, the id travels over MPI (shareOverMpi), and
 * ncclCommInitRank is the shim's C stand-in (loom_nccl_fake_init_rank), which encodes the id it
 * received by value with the rank and world size into the communicator handle.
 */
import { loadNative } from "../../../src/backends/native/ffi.ts";
import * as dist from "../../../src/distributed/index.ts";
import { NCCL_UNIQUE_ID_BYTES, NcclWorld, type NcclLib } from "../../../src/distributed/nccl.ts";
import { default_group, shareOverMpi } from "../../../src/distributed/process_group.ts";
import { report } from "../helpers.ts";

dist.init_process_group({ backend: "mpi" });
const g = default_group("nccl_init worker");
const native = loadNative();
if ("error" in native) throw new Error(native.error);
let seen: number[] = [];
const lib = {
  nccl: {
    ncclGetUniqueId: (id: Uint8Array) => {
      for (let i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) id[i] = (7 * i + 3) & 255;
      return 0;
    },
    ncclGetErrorString: () => null,
  },
  cudart: { cudaSetDevice: () => 0, cudaGetErrorString: () => null },
  initRankAddress: native.sym.loom_nccl_fake_init_rank_fn(),
  version: 21803, devices: 1, cstring: () => "",
} as unknown as NcclLib;
const share = shareOverMpi(g.mpi);
const w = new NcclWorld(lib, {
  rank: g.rank, size: g.size, device: 0,
  shareId: (id) => { share(id); seen = Array.from(id); },
  initRank: (fn, comm, nranks, id, rank) => native.sym.loom_nccl_comm_init_rank(fn, comm, nranks, id, rank),
  timeout_ms: () => g.mpi.timeout_ms,
  checkPeers: (what) => g.mpi.checkPeers(what),
});
report(g.rank, { comm: w.comm, id_ok: seen.every((v, i) => v === ((7 * i + 3) & 255)) });
