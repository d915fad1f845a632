/**
 * Data-parallel W7u (the char-GPT LoRA step as users write it, bench/lib/workloads.ts) on Open MPI:
 *
 *   bun bench/ddp.ts [--steps 4] [--skip-c]
 *
 * Runs, each in fresh processes started by mpirun (src/distributed/launch.ts):
 *   1 rank  × batch 16, native pool of 2 threads (the whole machine, one process)
 *   1 rank  × batch 16, 1 thread
 *   1 rank  × batch 8,  1 thread   (a rank's compute in the 2-rank run, without communication)
 *   2 ranks × batch 8,  1 thread each, DistributedDataParallel (lazy: the bucket all-reduce is an
 *     instruction of the step's plan)
 *   2 ranks × batch 8,  eager, 0.05 MiB buckets: whether the bucket all-reduces overlap backward
 * All with `mpirun --bind-to none`: on a machine shared with other jobs, mpirun's default binding
 * (one core per rank for np <= 2) pins each rank to a core it cannot leave when another process
 * takes it (measured here: 2583 against 1403 ms per 2-rank step at load average 7).
 * and reports the step times, the scaling efficiency, the communication time per step (time rank 0
 * spent inside MPI waits: transfer plus waiting for the slower rank), and the all-reduce bandwidth
 * of Loom's binding (MPI_Iallreduce + MPI_Test polling through bun:ffi) next to a plain C
 * MPI_Allreduce loop (bench/mpi_allreduce.c, compiled with mpicc).
 *
 * Worker mode (`--worker`, started by mpirun): prints one `RESULT {json}` line on rank 0.
 */
import { spawnSync } from "node:child_process";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import * as dist from "../src/distributed/index.ts";
import { launch } from "../src/distributed/launch.ts";
import { default_group } from "../src/distributed/process_group.ts";
import * as loom from "../src/index.ts";
import { with_execution_mode } from "../src/nn/execution.ts";
import { w7Lora, w7Model } from "./lib/workloads.ts";

const argv = process.argv.slice(2);
const opt = (name: string, d: string) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1]! : d;
};
const STEPS = Number(opt("--steps", "4"));
const SIZES = [4096, 442_368, 4_194_304, 67_108_864]; // bytes; 442368 = W7u's LoRA gradients (110592 floats)

/** One rank of a run: W7u steps under DDP on this rank's slice of a fixed batch. */
function worker(): void {
  dist.init_process_group({ timeout: 600_000 });
  const rank = dist.get_rank(), world = dist.get_world_size();
  const batch = Number(opt("--batch", "16"));
  const model = w7Model();
  const params = w7Lora(model);
  const eager = argv.includes("--eager");
  const ddp = new dist.DistributedDataParallel(model, { bucket_cap_mb: Number(opt("--bucket-cap-mb", "25")) });
  const opt_ = new loom.optim.AdamW(params, { lr: 1e-3 });
  loom.manual_seed(1);
  const X = loom.randint(0, 96, [batch * world, 128]), Y = loom.randint(0, 96, [batch * world, 128]);
  const x = X.narrow(0, rank * batch, batch).contiguous(), y = Y.narrow(0, rank * batch, batch).contiguous();
  model.train();
  const step = () => with_execution_mode(eager ? "eager" : "lazy", () => {
    const { loss } = ddp.call(x, { targets: y });
    opt_.zero_grad();
    loss!.backward();
    opt_.step();
    return loss!.item();
  });
  step(); // compile
  dist.barrier();
  const comm = default_group("bench/ddp").mpi;
  const w0 = comm.wait_ms;
  const times: number[] = [];
  const overlap: dist.DDPStepStats[] = [];
  for (let s = 0; s < STEPS; s++) {
    const t0 = performance.now();
    step();
    times.push(performance.now() - t0);
    if (ddp.last_stats) overlap.push(ddp.last_stats);
  }
  const comm_ms = (comm.wait_ms - w0) / STEPS;
  // all-reduce bandwidth of the binding itself, same sizes as bench/mpi_allreduce.c
  const bw: { bytes: number; us: number; algbw: number; busbw: number }[] = [];
  if (world > 1 && argv.includes("--allreduce")) {
    const g = comm;
    for (const bytes of SIZES) {
      const buf = new Float32Array(bytes / 4).fill(rank + 1);
      const iters = bytes <= 65536 ? 2000 : bytes <= 4194304 ? 100 : 10;
      for (let w = 0; w < 3; w++) g.wait(g.iallreduce(buf, "float32", "sum"));
      dist.barrier();
      const t0 = performance.now();
      for (let i = 0; i < iters; i++) g.wait(g.iallreduce(buf, "float32", "sum"));
      dist.barrier();
      const us = ((performance.now() - t0) / iters) * 1e3;
      const algbw = bytes / us / 1e3;
      bw.push({ bytes, us, algbw, busbw: (algbw * 2 * (world - 1)) / world });
    }
  }
  const sorted = [...times].sort((a, b) => a - b);
  if (rank === 0) {
    console.log(`RESULT ${JSON.stringify({ world, batch, threads: process.env.LOOM_NATIVE_THREADS ?? "all", median_ms: sorted[sorted.length >> 1], min_ms: sorted[0], times, comm_ms, buckets: ddp.bucket_names.length, bw, overlap })}`);
  }
}

interface Result { world: number; batch: number; threads: string; median_ms: number; min_ms: number; times: number[]; comm_ms: number; buckets: number; bw: { bytes: number; us: number; algbw: number; busbw: number }[]; overlap: dist.DDPStepStats[] }

function run(np: number, batch: number, threads: number, extra: string[] = []): Result {
  const r = launch(np, import.meta.path, ["--worker", "--batch", String(batch), "--steps", String(STEPS), ...extra], { env: { LOOM_NATIVE_THREADS: String(threads) }, timeout_ms: 600_000, mpirun_args: ["--bind-to", "none"] });
  const line = (r.stdout ?? "").split("\n").find((l) => l.startsWith("RESULT "));
  if (!line) throw new Error(`run np=${np} batch=${batch} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return JSON.parse(line.slice(7));
}

function cLoop(): { bytes: number; us: number; algbw: number; busbw: number }[] {
  const exe = join(tmpdir(), "loom_mpi_allreduce");
  const cc = spawnSync("mpicc", ["-O2", "-o", exe, join(import.meta.dir, "mpi_allreduce.c")], { encoding: "utf8" });
  if (cc.status !== 0) throw new Error(`mpicc failed: ${cc.stderr}`);
  const env = { ...process.env, OMPI_ALLOW_RUN_AS_ROOT: "1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: "1" };
  const r = spawnSync("mpirun", ["-np", "2", "--bind-to", "none", exe, ...SIZES.map(String)], { encoding: "utf8", env });
  return r.stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
}

if (argv.includes("--worker")) {
  worker();
} else {
  const load0 = loadavg();
  console.log(`# W7u data-parallel (lazy, native backend), ${STEPS} timed steps after 1 compile step; load average at start ${load0.map((l) => l.toFixed(2)).join(" ")} (2 cores)`);
  const one16x2 = run(1, 16, 2), one16 = run(1, 16, 1), one8 = run(1, 8, 1), two8 = run(2, 8, 1, ["--allreduce"]);
  const eager = run(2, 8, 1, ["--eager", "--bucket-cap-mb", "0.05"]);
  const c = argv.includes("--skip-c") ? [] : cLoop();
  const row = (name: string, r: Result) => `| ${name} | ${r.median_ms.toFixed(0)} | ${r.min_ms.toFixed(0)} | ${(16 * 128 / r.median_ms * 1e3).toFixed(0)} | ${r.world > 1 ? r.comm_ms.toFixed(1) : "–"} |`;
  console.log("\n| run | median ms/step | min ms/step | tok/s (16×128 per step) | comm ms/step (rank 0 in MPI waits) |\n|---|---|---|---|---|");
  console.log(row("1 rank × batch 16, 2 threads", one16x2));
  console.log(row("1 rank × batch 16, 1 thread", one16));
  console.log(row("2 ranks × batch 8, 1 thread each (DDP)", two8));
  console.log(`\n1 rank × batch 8, 1 thread (a rank's compute alone): ${one8.median_ms.toFixed(0)} ms/step`);
  console.log(`scaling efficiency (T1 / (2 · T2)): ${(one16x2.median_ms / (2 * two8.median_ms) * 100).toFixed(0)}% against 1 process with 2 threads, ${(one16.median_ms / (2 * two8.median_ms) * 100).toFixed(0)}% against 1 process with 1 thread`);
  console.log(`cost model: T2 ≈ T(batch 8) + comm = ${one8.median_ms.toFixed(0)} + ${two8.comm_ms.toFixed(1)} = ${(one8.median_ms + two8.comm_ms).toFixed(0)} ms predicted, ${two8.median_ms.toFixed(0)} ms measured; gradient bytes per step ${442368} in ${two8.buckets} bucket(s)`);
  const ov = eager.overlap;
  const mean = (f: (x: dist.DDPStepStats) => number) => ov.reduce((a, x) => a + f(x), 0) / Math.max(1, ov.length);
  console.log(`\neager, 2 ranks, 0.05 MiB buckets: ${eager.median_ms.toFixed(0)} ms/step; per step ${mean((x) => x.buckets).toFixed(0)} buckets, ${mean((x) => x.overlapped).toFixed(1)} finished during backward (overlapped), final wait ${mean((x) => x.wait_ms).toFixed(2)} ms, first bucket start to end of wait ${mean((x) => x.comm_span_ms).toFixed(1)} ms`);
  console.log("\n| bytes | Loom binding µs | Loom algbw GB/s | C MPI_Allreduce µs | C algbw GB/s |\n|---|---|---|---|---|");
  for (const b of two8.bw) {
    const cb = c.find((x) => x.bytes === b.bytes);
    console.log(`| ${b.bytes} | ${b.us.toFixed(1)} | ${b.algbw.toFixed(3)} | ${cb ? cb.us.toFixed(1) : "–"} | ${cb ? cb.algbw.toFixed(3) : "–"} |`);
  }
  console.log(`\n(2 ranks: busbw = algbw · 2(n-1)/n = algbw.) Load average at end ${loadavg().map((l) => l.toFixed(2)).join(" ")}: not quiet-machine numbers.`);
}
