/**
 * Faults: a dead rank makes the others fail with a typed error (never a hang), and a rank that
 * skips a collective makes the others time out with LoomCollectiveTimeoutError.
 */
import { describe, expect, test } from "bun:test";
import { MPI_SKIP, runRanks } from "./helpers.ts";

describe.skipIf(MPI_SKIP !== "")(`faults on 2 ranks${MPI_SKIP ? ` (skipped: ${MPI_SKIP})` : ""}`, () => {
  test("rank 1 killed (SIGKILL): rank 0's all_reduce throws LoomRankFailedError naming it, well within the timeout", () => {
    const run = runRanks(2, "faults.ts", ["kill"]);
    expect(run.status).not.toBe(0); // mpirun reports the failed job
    const r = run.results[0];
    expect(r.name).toBe("LoomRankFailedError");
    expect(r.distributed).toBe(true);
    expect(r.failed_ranks).toEqual([1]);
    expect(r.message).toMatch(/^\[all_reduce( \(shape check\))?\] rank 0: rank 1 \(pid \d+\) died; the process group cannot continue$/);
    expect(r.ms).toBeLessThan(1500); // found by the liveness check (every 50 ms), before the 1.5 s timeout
  }, 30_000);

  test("the same inside a lazy plan: the plan's all_reduce instruction throws it from the realize", () => {
    const run = runRanks(2, "faults.ts", ["kill-lazy"]);
    expect(run.status).not.toBe(0);
    const r = run.results[0];
    expect(r.name).toBe("LoomRankFailedError");
    expect(r.failed_ranks).toEqual([1]);
    expect(r.ms).toBeLessThan(1500);
  }, 30_000);

  test("rank 1 alive but never joins: LoomCollectiveTimeoutError after the group's timeout (1.5 s)", () => {
    const run = runRanks(2, "faults.ts", ["stall"]);
    expect(run.status).not.toBe(0);
    const r = run.results[0];
    expect(r.name).toBe("LoomCollectiveTimeoutError");
    expect(r.message).toMatch(/^\[all_reduce \(shape check\)\] rank 0: no completion after 1\.\d s \(timeout 1\.5 s\)/);
    expect(r.ms).toBeGreaterThanOrEqual(1500);
    expect(r.ms).toBeLessThan(3000);
  }, 30_000);
});
