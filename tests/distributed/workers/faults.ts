/**
 * Worker for faults.test.ts. argv[2]: "kill" (rank 1 dies by SIGKILL before the all_reduce),
 * "kill-lazy" (the same, rank 0's all_reduce being an instruction of a lazy plan) or "stall"
 * (rank 1 skips the all_reduce and sleeps; rank 0 must time out). Rank 0 reports the error it got
 * and how long it took.
 */
import * as dist from "../../../src/distributed/index.ts";
import { tensor } from "../../../src/lazy/creation.ts";
import { report } from "../helpers.ts";

const mode = process.argv[2];
dist.init_process_group({ timeout: 1500 });
const rank = dist.get_rank();
if (rank === 1) {
  if (mode!.startsWith("kill")) process.kill(process.pid, "SIGKILL");
  Bun.sleepSync(4000);
  process.exit(0);
}
const t0 = performance.now();
try {
  const x = tensor([1, 2, 3], { dtype: "float32" });
  if (mode === "kill-lazy") dist.functional.all_reduce(x.lazy().mul(2)).add(1).tolist();
  else dist.all_reduce(x);
  report(rank, { error: null });
} catch (e) {
  const err = e as Error & { failed_ranks?: number[] };
  report(rank, { name: err.name, message: err.message, failed_ranks: err.failed_ranks ?? null, ms: performance.now() - t0, distributed: e instanceof dist.LoomDistributedError });
  process.exit(3);
}
