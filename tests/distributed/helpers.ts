/**
 * Multi-rank tests: each spawns `mpirun -np N bun <worker>` (src/distributed/launch.ts) and reads
 * the workers' `RESULT <json>` lines. Without Open MPI (mpirun, libmpi) the suites are skipped
 * with the reason printed, and CI (LOOM_REQUIRE_MPI=1, set by .ci/run, which installs Open MPI)
 * makes that a failure.
 */
import { join } from "node:path";
import { is_mpi_available } from "../../src/distributed/process_group.ts";
import { has_mpirun, launch, type LaunchOptions } from "../../src/distributed/launch.ts";

function mpiReason(): string {
  if (!has_mpirun()) return "mpirun not found (apt-get install openmpi-bin libopenmpi-dev)";
  if (!is_mpi_available()) return "libmpi.so.40 cannot be loaded (apt-get install libopenmpi-dev)";
  return "";
}

/** Why multi-rank tests cannot run here ("" when they can). */
export const MPI_SKIP = mpiReason();
if (MPI_SKIP) {
  if (process.env.LOOM_REQUIRE_MPI === "1") throw new Error(`LOOM_REQUIRE_MPI=1 but Open MPI is unavailable: ${MPI_SKIP}`);
  console.warn(`[skip] distributed (MPI): ${MPI_SKIP}`);
}

export interface RankRun {
  status: number | null;
  /** Parsed `RESULT` lines per rank (index = rank). */
  results: any[];
  stdout: string;
  stderr: string;
  ms: number;
}

/** Run tests/distributed/workers/<worker> on np ranks; results[rank] is that rank's last RESULT. */
export function runRanks(np: number, worker: string, args: string[] = [], opts: LaunchOptions = {}): RankRun {
  const t0 = performance.now();
  const r = launch(np, join(import.meta.dir, "workers", worker), args, { timeout_ms: 60_000, ...opts });
  const results: any[] = [];
  for (const line of (r.stdout ?? "").split("\n")) {
    if (!line.startsWith("RESULT ")) continue;
    const v = JSON.parse(line.slice(7));
    results[v.rank] = v;
  }
  return { status: r.status, results, stdout: r.stdout ?? "", stderr: r.stderr ?? "", ms: performance.now() - t0 };
}

/** Print one rank's result (workers call it once per rank). */
export function report(rank: number, v: Record<string, unknown>): void {
  console.log(`RESULT ${JSON.stringify({ rank, ...v })}`);
}
