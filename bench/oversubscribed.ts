/**
 * Slowdown under oversubscription: one training workload timed on a quiet machine, then next to
 * ONE competing CPU-bound process that this script starts and kills, for Loom (native lazy, in
 * fresh processes with the default thread count and with LOOM_NATIVE_THREADS=1) and for PyTorch
 * (shared/bench/ref_torch.py, 2 threads, the configuration of bench/lib/torch_ref.ts).
 * Reports slowdown = loaded ms / quiet ms per row: a pool whose threads spin or wait on a
 * descheduled worker shows a large factor (the issue: 108–136 s against 25 s with one thread).
 *
 *   bun bench/oversubscribed.ts                        # W7 char-GPT LoRA step (quiet machine!)
 *   bun bench/oversubscribed.ts --only W5 --min-reps 20 --min-time 0.5 --no-torch   # a quick check
 *   bun bench/oversubscribed.ts --no-write             # print only, leave the results file alone
 *
 * Options: --only ID (one workload of bench/lib/workloads.ts, default W7), --min-reps N
 * (default 5), --min-time s (default 1.5), --no-torch. The table goes to stdout and to
 * bench/oversubscribed_results.md with the CPU, core count and load average seen at the start.
 * Run it on a quiet machine (1-minute load average below 0.5): the "quiet" column assumes it.
 */
import { cpus, loadavg } from "node:os";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import * as loom from "../src/index.ts";
import { nativeBackend } from "../src/backends/native/backend.ts";
import { set_default_backend } from "../src/lazy/device.ts";
import { cli, measure } from "./lib/harness.ts";
import { torchRef } from "./lib/torch_ref.ts";
import { workloads, type T } from "./lib/workloads.ts";

const ID = cli.only[0] ?? "W7";
const MIN_REPS = cli.minReps(5);

/** The realized result after every queued command buffer has finished. */
const done = (y: T) => {
  const t = y.isLazy ? (y as loom.LazyTensor).eval() : y;
  nativeBackend()?.synchronize();
  return t;
};

// ---- child: time the workload in this (fresh) process, print {"ms", "reps", "threads"} --------------
if (cli.flag("--child")) {
  const nb = nativeBackend();
  if (!nb) throw new Error("the native backend is unavailable");
  set_default_backend("native");
  const w = workloads({ place: (t) => t, done, onePlanStep: true }).find(([id]) => id === ID);
  if (!w) throw new Error(`unknown workload ${ID}`);
  const r = measure(w[2](true), MIN_REPS);
  console.log(JSON.stringify({ ms: r.ms, reps: r.reps, threads: nb.lib.threads, preemptions: nb.shimCounters().preemptions }));
  process.exit(0);
}

// ---- parent --------------------------------------------------------------------------------------------
/** One CPU-bound competitor: a busy loop in its own process. */
function competitor(): { stop: () => void } {
  const p = Bun.spawn([process.execPath, "-e", "for(;;){}"], { stdout: "ignore", stderr: "ignore" });
  Bun.sleepSync(300); // let it start spinning
  return { stop: () => { p.kill(9); p.exited; } };
}

/** Loom's median ms in a fresh process (`threads`: LOOM_NATIVE_THREADS, "" = default). */
function loomMs(threads: string): { ms: number; threads: number; preemptions: number } {
  const args = [process.execPath, join(import.meta.dir, "oversubscribed.ts"), "--child", "--only", ID,
    "--min-reps", String(MIN_REPS), "--min-time", String(cli.minTime / 1e3), "--warmup", String(cli.warmup)];
  const env = { ...process.env };
  if (threads) env.LOOM_NATIVE_THREADS = threads;
  else delete env.LOOM_NATIVE_THREADS;
  const r = Bun.spawnSync(args, { env, stdout: "pipe", stderr: "pipe" });
  const line = r.stdout.toString().trim().split("\n").pop() ?? "";
  if (!line.startsWith("{")) throw new Error(`child failed: ${r.stderr.toString().slice(-1500)}`);
  return JSON.parse(line);
}

/** Run `f` quiet, then next to one competitor. */
function quietAndLoaded<R>(f: () => R): [R, R] {
  const quiet = f();
  const c = competitor();
  try {
    return [quiet, f()];
  } finally {
    c.stop();
  }
}

const load0 = loadavg()[0]!;
const header = `# oversubscribed: ${ID}, ${cpus().length} CPUs (${cpus()[0]?.model ?? "?"}), 1-min load average at start ${load0.toFixed(2)}`;
console.log(header);
if (load0 > 0.5) console.log(`# warning: the machine is not quiet (load ${load0.toFixed(2)}); the quiet column is not quiet`);

/** `preempted`: descheduled spins the pool saw, quiet / loaded (it stops spinning after one). */
const rows: { side: string; threads: string; quiet: number; loaded: number; preempted?: string }[] = [];
for (const threads of ["", "1"]) {
  const [q, l] = quietAndLoaded(() => loomMs(threads));
  rows.push({ side: "Loom native lazy", threads: `${q.threads}${threads ? " (LOOM_NATIVE_THREADS=1)" : " (default)"}`, quiet: q.ms, loaded: l.ms, preempted: `${q.preemptions} / ${l.preemptions}` });
  console.log(JSON.stringify(rows[rows.length - 1]));
}
if (!cli.flag("--no-torch")) {
  const [q, l] = quietAndLoaded(() => torchRef(ID, cli.minTime));
  if (q !== null && l !== null) rows.push({ side: "PyTorch", threads: "2 (ref_torch.py)", quiet: q, loaded: l });
  else console.log("# PyTorch reference unavailable (no /usr/bin/python3 with torch, or no shared/bench/ref_torch.py)");
}

const table = [
  "| side | threads | quiet ms | loaded ms | slowdown (loaded / quiet) | pool preemptions seen (quiet / loaded) |",
  "|---|---|---:|---:|---:|---:|",
  ...rows.map((r) => `| ${r.side} | ${r.threads} | ${r.quiet.toFixed(1)} | ${r.loaded.toFixed(1)} | ${(r.loaded / r.quiet).toFixed(2)}× | ${r.preempted ?? "—"} |`),
].join("\n");
console.log("\n" + table);
if (!cli.flag("--no-write")) {
  const md = [
    "# Slowdown next to one busy process (bench/oversubscribed.ts)",
    "",
    "Each row times the workload quiet, then with one CPU-bound competitor (`bun -e 'for(;;){}'`,",
    "started and killed by the bench). Loom rows run in fresh processes; PyTorch is",
    "shared/bench/ref_torch.py with 2 threads. Median ms per step.",
    "",
    header.replace(/^# /, ""),
    `(run: \`bun bench/oversubscribed.ts ${process.argv.slice(2).join(" ")}\`, ${new Date().toISOString()})`,
    "",
    table,
    "",
  ].join("\n");
  writeFileSync(join(import.meta.dir, "oversubscribed_results.md"), md);
}
