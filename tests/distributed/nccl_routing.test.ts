/**
 * Transport per tensor device under backend "mpi" (a world of one through MPI's singleton init:
 * the worker runs without mpirun): host tensors reduce over MPI; a tensor on "cuda" is a
 * LoomDistributedError naming backend "nccl" at every entry point, never a silent host copy.
 */
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { MPI_SKIP } from "./helpers.ts";

test.skipIf(MPI_SKIP !== "")(`backend "mpi": cuda tensors are refused with a typed error, cpu tensors reduce${MPI_SKIP ? ` (skipped: ${MPI_SKIP})` : ""}`, () => {
  const r = spawnSync(process.execPath, [join(import.meta.dir, "workers", "nccl_routing.ts")], { encoding: "utf8", timeout: 60_000 });
  const line = (r.stdout ?? "").split("\n").find((l) => l.startsWith("RESULT "));
  if (!line) throw new Error(`worker failed (status ${r.status}): ${r.stderr}`);
  const res = JSON.parse(line.slice(7));
  expect(res.host_sum).toEqual([1, 2, 3]);
  const want = `a tensor on device 'cuda' needs init_process_group({ backend: "nccl" })`;
  for (const [k, what] of [["all_reduce", "all_reduce"], ["broadcast", "broadcast"], ["all_gather", "all_gather"], ["reduce_scatter_tensor", "reduce_scatter_tensor"], ["functional", "all_reduce"], ["reduce_scatter", "reduce_scatter"], ["ddp", "DistributedDataParallel"]] as const) {
    expect(res[k]?.name).toBe("LoomDistributedError");
    expect(res[k].message).toStartWith(`[${what}] ${want}`);
  }
}, 60_000);
