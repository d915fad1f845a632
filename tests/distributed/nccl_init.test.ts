/**
 * NcclWorld's initialization on 2 MPI ranks without a GPU: rank 0's unique id reaches rank 1
 * over MPI, and each rank's ncclCommInitRank (the shim's C stand-in, reached through
 * loom_nccl_comm_init_rank with the id by value) sees that id, its rank and the world size.
 * Expected handle, by hand: id[0] + 256·id[127] + 65536·rank + 2^24·2, with id[i] = (7i + 3) mod 256:
 * id[0] = 3, id[127] = 892 mod 256 = 124.
 */
import { describe, expect, test } from "bun:test";
import { MPI_SKIP, runRanks } from "./helpers.ts";

describe.skipIf(MPI_SKIP !== "")(`NCCL world init on 2 ranks (stand-in NCCL)${MPI_SKIP ? ` (skipped: ${MPI_SKIP})` : ""}`, () => {
  test("the unique id goes rank 0 → all over MPI and into ncclCommInitRank by value", () => {
    const run = runRanks(2, "nccl_init.ts");
    if (run.status !== 0) throw new Error(`mpirun failed (${run.status}): ${run.stderr}`);
    expect(run.results.map((r) => r.id_ok)).toEqual([true, true]);
    expect(run.results.map((r) => r.comm)).toEqual([0, 1].map((rank) => 3 + 256 * 124 + 65536 * rank + 16777216 * 2));
  }, 60_000);
});
