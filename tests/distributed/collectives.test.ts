/**
 * Collectives on 2 ranks (mpirun), eager and lazy, on js and native: values derived by hand from
 * x_r = (r+1)·[1, 2, 3] on rank r.
 */
import { describe, expect, test } from "bun:test";
import { MPI_SKIP, runRanks, type RankRun } from "./helpers.ts";

let cached: RankRun | null = null;
/** One mpirun of the worker serves every test below. */
const collectivesRun = () => (cached ??= runRanks(2, "collectives.ts"));

describe.skipIf(MPI_SKIP !== "")(`collectives on 2 ranks${MPI_SKIP ? ` (skipped: ${MPI_SKIP})` : ""}`, () => {
  test("all_reduce / broadcast / all_gather / reduce_scatter / barrier, eager and lazy, js and native", () => {
    const run = collectivesRun();
    expect(run.status).toBe(0);
    expect(run.results.length).toBe(2);
    for (const res of run.results) {
      const bks = Object.keys(res).filter((k) => k === "js" || k === "native");
      expect(bks).toContain("js");
      for (const bk of bks) {
        const r = res[bk];
        expect(r.sum).toEqual([3, 6, 9]); // 1x + 2x
        expect(r.avg).toEqual([1.5, 3, 4.5]);
        expect(r.max).toEqual([2, 4, 6]);
        expect(r.int_sum).toEqual([1, 20]); // int64: [0+1, 10+10]
        expect(r.bcast).toEqual([2, 4, 6]); // rank 1's x
        expect(r.gather).toEqual([[0, 0], [1, -1]]);
        // reduce_scatter: rank r's input list [k + r, 10k + r]; block k summed over ranks = [2k + 1, 20k + 1]
        expect(r.rs).toEqual(res.rank === 0 ? [1, 1] : [3, 21]);
        expect(r.rs_tensor).toEqual(res.rank === 0 ? [0, 2] : [4, 6]); // 2·[0, 1, 2, 3], this rank's half
        expect(r.ag_tensor).toEqual([0, 0.5, 1, 1.5]);
        // the lazy collective is one instruction of the plan, between the kernels around it
        expect(r.lazy_instructions).toEqual(["fused_elementwise", "all_reduce", "fused_elementwise"]);
        expect(r.lazy).toEqual([4, 7, 10]); // avg(2x) + 1 = 3·[1, 2, 3] + 1
        expect(r.lazy_inplace).toEqual([3, 6, 9]);
        // d/dx_r Σ_r' c·allreduce(x) = Σ_r' c = 2c (torch.distributed.nn's rule: all_reduce of the gradient)
        expect(r.grad).toEqual([2, 4, 6]);
        // all_gather's gradient: reduce_scatter of (r'+1) over ranks = 1 + 2
        expect(r.gather_grad).toEqual([3, 3]);
        expect(r.mismatch.name).toBe("LoomShapeError");
        expect(r.mismatch.message).toBe("[all_reduce] tensors differ across ranks: rank 0: all_reduce [2] float32; rank 1: all_reduce [3] float32");
        expect(r.avg_int).toEqual({ name: "LoomDtypeError", message: "[all_reduce] ReduceOp.AVG needs float32 or float64, got int32" });
      }
    }
  }, 60_000);

  test("DistributedSampler under mpirun: world and rank from the environment; shares disjoint but for padding, covering the dataset", () => {
    const run = collectivesRun();
    expect(run.status).toBe(0);
    const [a, b] = run.results.map((r) => r.sampler);
    expect([a.num_replicas, a.rank, b.num_replicas, b.rank]).toEqual([2, 0, 2, 1]);
    expect([a.indices.length, b.indices.length]).toEqual([4, 4]); // 7 padded to 8
    expect(new Set([...a.indices, ...b.indices])).toEqual(new Set([0, 1, 2, 3, 4, 5, 6]));
  }, 60_000);
});
