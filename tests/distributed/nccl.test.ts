/**
 * NCCL with a GPU (the device tool's lent machines): the 1-GPU ncclCommInitAll smoke test, and
 * init_process_group({ backend: "nccl" }) with every collective on "cuda" tensors (a world of one
 * through MPI's singleton init; two ranks under mpirun when two GPUs are visible). Expected
 * values are derived by hand from x_r = (r+1)·[1, 2, 3] on rank r of W.
 *
 * Without libnccl, a GPU, the CUDA backend or libmpi these are skipped with the reason printed
 * (LOOM_REQUIRE_NCCL=1 makes that a failure), and the error path of init_process_group runs.
 */
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { cudaStatus } from "../../src/backends/cuda/index.ts";
import * as dist from "../../src/distributed/index.ts";
import { loadNccl, nccl_smoke } from "../../src/distributed/nccl.ts";
import { thrown } from "../thrown.ts";
import { MPI_SKIP, runRanks } from "./helpers.ts";

const lib = loadNccl();
const why = "error" in lib ? lib.error : "";
const worldWhy = why || MPI_SKIP || (() => { const s = cudaStatus(); return s.available ? "" : `cuda device: ${s.reason}`; })();
if (why) console.warn(`[skip] NCCL smoke test: ${why}`);
if (worldWhy) {
  if (process.env.LOOM_REQUIRE_NCCL === "1") throw new Error(`LOOM_REQUIRE_NCCL=1 but the NCCL world cannot run: ${worldWhy}`);
  console.warn(`[skip] NCCL process group on cuda tensors: ${worldWhy}`);
}

test.skipIf(why !== "")(`NCCL all-reduce on one GPU returns its input${why ? ` (skipped: ${why})` : ""}`, () => {
  if ("error" in lib) return;
  const back = nccl_smoke(lib, 1024);
  expect(Array.from(back.subarray(0, 4))).toEqual([1, 2, 3, 4]);
  expect(back[1023]).toBe(1024);
  expect(lib.version).toBeGreaterThan(20000);
});

test.skipIf(why === "")("without NCCL or a GPU, init_process_group({ backend: 'nccl' }) throws LoomDistributedError with the reason", () => {
  const err = thrown(() => dist.init_process_group({ backend: "nccl" }));
  expect(err).toBeInstanceOf(dist.LoomDistributedError);
  expect(err.message).toBe(`[init_process_group] backend nccl: ${why}`);
  expect(err.message).toMatch(/libnccl not found|no CUDA device|libcudart not found|needs an FFI/);
  expect(dist.is_initialized()).toBe(false);
});

/** What rank `rank` of `world` must report (hand-derived). */
function expected(rank: number, world: number) {
  const S = (world * (world + 1)) / 2; // Σ (r+1)
  return {
    backend: "nccl",
    sum: [S, 2 * S, 3 * S],
    sum_on_device: true,
    avg: [S / world, (2 * S) / world, (3 * S) / world],
    max: [world, 2 * world, 3 * world],
    int_sum: [(world * (world - 1)) / 2, 10 * world],
    bcast: [world, 2 * world, 3 * world],
    gather: Array.from({ length: world }, (_, k) => [k, -k + 0]), // -0 + 0: JSON has no -0
    // Σ_r ([2·rank, 2·rank + 1] + r) = W·[2·rank, 2·rank + 1] + W(W−1)/2
    rs_tensor: [world * 2 * rank + (world * (world - 1)) / 2, world * (2 * rank + 1) + (world * (world - 1)) / 2],
    strided: [[S, 2 * S], [3 * S, 4 * S]],
    functional: [S, 2 * S, 3 * S],
    lazy: [2 * S, 4 * S, 6 * S],
    grad: [world, world, 2 * world],
  };
}

function check(results: any[], world: number): void {
  expect(results.length).toBe(world);
  results.forEach((res, rank) => {
    const { rank: _r, world: w, device: _d, ...got } = res;
    expect(w).toBe(world);
    expect(got).toEqual(expected(rank, world));
  });
}

test.skipIf(worldWhy !== "")(`init_process_group('nccl'): collectives on cuda tensors, a world of one${worldWhy ? ` (skipped: ${worldWhy})` : ""}`, () => {
  const r = spawnSync(process.execPath, [join(import.meta.dir, "workers", "nccl_cuda.ts")], { encoding: "utf8", timeout: 120_000 });
  const line = (r.stdout ?? "").split("\n").find((l) => l.startsWith("RESULT "));
  if (!line) throw new Error(`worker failed (status ${r.status}): ${r.stderr}`);
  check([JSON.parse(line.slice(7))], 1);
}, 120_000);

const twoWhy = worldWhy || ("error" in lib || lib.devices < 2 ? "fewer than 2 GPUs visible" : "");
test.skipIf(twoWhy !== "")(`init_process_group('nccl') on 2 ranks, one GPU each (mpirun)${twoWhy ? ` (skipped: ${twoWhy})` : ""}`, () => {
  const run = runRanks(2, "nccl_cuda.ts", [], { timeout_ms: 120_000 });
  expect(run.status).toBe(0);
  check(run.results, 2);
  expect(run.results.map((x) => x.device)).toEqual([0, 1]); // OMPI_COMM_WORLD_LOCAL_RANK % devices
}, 150_000);
