/**
 * NCCL: libnccl and libcudart are loaded dynamically. With a GPU (the device tool's lent
 * machines), a 1-GPU all-reduce through NCCL returns its input; without one the smoke test is
 * skipped with the loader's reason, and init_process_group({ backend: "nccl" }) says why.
 */
import { expect, test } from "bun:test";
import * as dist from "../../src/distributed/index.ts";
import { loadNccl, nccl_smoke } from "../../src/distributed/nccl.ts";
import { thrown } from "../thrown.ts";

const lib = loadNccl();
const why = "error" in lib ? lib.error : "";
if (why) console.warn(`[skip] NCCL smoke test: ${why}`);

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
  expect(dist.is_initialized()).toBe(false);
});
