/**
 * The process-group API without other ranks: errors before init, bad arguments, and the mpirun
 * command the launcher builds (root consent variables, --oversubscribe past the core count).
 */
import { expect, test } from "bun:test";
import { cpus } from "node:os";
import * as dist from "../../src/distributed/index.ts";
import { tensor } from "../../src/lazy/creation.ts";
import { thrown } from "../thrown.ts";

test("collectives before init_process_group: LoomDistributedError with torch's message", () => {
  expect(dist.is_initialized()).toBe(false);
  const e = thrown(() => dist.all_reduce(tensor([1, 2], { dtype: "float32" })));
  expect(e).toBeInstanceOf(dist.LoomDistributedError);
  expect(e.message).toBe("[all_reduce] Default process group has not been initialized, please make sure to call init_process_group.");
  expect(thrown(() => dist.get_rank()).message).toContain("[get_rank] Default process group has not been initialized");
  expect(thrown(() => dist.barrier()).name).toBe("LoomDistributedError");
});

test("init_process_group rejects an unknown backend and a bad timeout", () => {
  expect(thrown(() => dist.init_process_group({ backend: "gloo" as never })).message).toBe("[init_process_group] unknown backend 'gloo' (mpi or nccl)");
  expect(thrown(() => dist.init_process_group({ timeout: 0 })).message).toBe("[init_process_group] timeout must be positive milliseconds, got 0");
  expect(dist.is_initialized()).toBe(false);
});

test("the launcher's mpirun command: -np, --oversubscribe past the cores, root consent in the environment", () => {
  const cores = cpus().length; // what launch.ts compares -np with
  const { argv, env } = dist.mpirun_command(cores + 1, "train.ts", ["--ddp"]);
  expect(argv.slice(0, 4)).toEqual(["mpirun", "-np", String(cores + 1), "--oversubscribe"]);
  expect(argv.slice(-3)).toEqual([process.execPath, "train.ts", "--ddp"]);
  expect(dist.mpirun_command(1, "t.ts").argv).not.toContain("--oversubscribe");
  if (process.getuid?.() === 0) expect([env.OMPI_ALLOW_RUN_AS_ROOT, env.OMPI_ALLOW_RUN_AS_ROOT_CONFIRM]).toEqual(["1", "1"]);
  expect(thrown(() => dist.mpirun_command(0, "t.ts")).message).toBe("[launch] -np must be a positive integer, got 0");
});
