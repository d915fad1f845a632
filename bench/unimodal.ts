/**
 * Are W7u's timings unimodal across fresh processes? Runs W7u (the char-GPT LoRA step as users
 * write it, bench/lib/workloads.ts) in N fresh processes (`bench/native.ts --only W7u --json`),
 * prints each process's median ms/step with its plans, submits and peak RSS, and whether every
 * median is within ±15% of the median of medians (issue 10's target: 10 processes).
 *
 * With --busy it then runs the same processes next to ONE spinning child process, and PyTorch's
 * W7 (shared/bench/ref_torch.py, same model and step, bench/lib/torch_ref.ts) quiet and next to
 * the same busy child, and prints both slowdowns (busy / quiet): Loom should slow no more than
 * PyTorch under the same load.
 *
 *   bun bench/unimodal.ts                      # 10 fresh lazy processes
 *   bun bench/unimodal.ts --n 3 --mode eager   # 3 eager processes
 *   bun bench/unimodal.ts --busy --busy-n 3    # also 3 processes (and PyTorch) next to a busy one
 *
 * Options: --n N (default 10), --mode lazy|eager (default lazy), --min-reps R (default 5 steps per
 * process after one warm-up step), --busy, --busy-n N (default 3), --no-torch. The 1-minute load
 * average is printed beside every process (measure on a quiet machine: below 0.5).
 */
import { loadavg } from "node:os";
import { join } from "node:path";
import { cli, median } from "./lib/harness.ts";
import { torchRef } from "./lib/torch_ref.ts";

const N = Number(cli.opt("--n", "10"));
const MODE = cli.opt("--mode", "lazy");
const MIN_REPS = cli.opt("--min-reps", "5");
const BUSY = cli.flag("--busy");
const BUSY_N = Number(cli.opt("--busy-n", "3"));
const TORCH = !cli.flag("--no-torch");
if (MODE !== "lazy" && MODE !== "eager") throw new Error(`--mode lazy or eager, not ${MODE}`);

interface ProcessResult { ms: number; cpu_ms: number; plans: number; submits: number; execs: number; peak_rss_mib: number; load: number }

/** W7u in one fresh process: bench/native.ts's JSON line for the chosen mode. */
function freshProcess(): ProcessResult {
  const load = loadavg()[0]!;
  const r = Bun.spawnSync([process.execPath, join(import.meta.dir, "native.ts"), "--only", "W7u", "--no-torch", "--modes", MODE, "--json",
    "--min-reps", MIN_REPS, "--min-time", "0", "--warmup", "1"], { stdout: "pipe", stderr: "pipe", env: process.env });
  const line = r.stdout.toString().split("\n").find((l) => l.startsWith("{") && l.includes('"W7u"'));
  if (!line) throw new Error(`bench/native.ts failed: ${r.stderr.toString().slice(-2000)}`);
  const j = JSON.parse(line);
  if (j.ms === undefined) throw new Error(`W7u failed: ${line}`);
  return { ms: j.ms, cpu_ms: j.cpu_ms, plans: j.plans, submits: j.submits, execs: j.execs, peak_rss_mib: j.peak_rss_mib, load };
}


/** Run `n` fresh processes, print each and the ±15% verdict; returns the median of medians. */
function series(label: string, n: number): number {
  const rs: ProcessResult[] = [];
  for (let i = 0; i < n; i++) {
    const r = freshProcess();
    rs.push(r);
    console.log(`${label} process ${i + 1}/${n}: ${r.ms.toFixed(1)} ms/step (CPU ${r.cpu_ms.toFixed(0)} ms/step), ${r.plans} plans, ${r.submits} submits, ${r.execs} eager calls per step, peak RSS ${r.peak_rss_mib} MiB (load ${r.load.toFixed(2)})`);
  }
  const med = median(rs.map((r) => r.ms));
  const dev = rs.map((r) => r.ms / med - 1);
  const worst = Math.max(...dev.map(Math.abs));
  console.log(`${label}: median of ${n} process medians ${med.toFixed(1)} ms/step; min ${Math.min(...rs.map((r) => r.ms)).toFixed(1)}, max ${Math.max(...rs.map((r) => r.ms)).toFixed(1)}; ` +
    `worst deviation ${(worst * 100).toFixed(1)}% -> ${worst <= 0.15 ? "UNIMODAL (all within ±15%)" : "NOT within ±15%"}`);
  return med;
}

/** One CPU-bound competitor: a busy loop in its own process, started and killed here. */
function busyChild(): { stop: () => void } {
  const p = Bun.spawn([process.execPath, "-e", "for(;;){}"], { stdout: "ignore", stderr: "ignore" });
  Bun.sleepSync(300); // let it start spinning
  return { stop: () => { p.kill(9); } };
}

console.log(`# W7u ${MODE} in fresh processes (${cli.opt("--min-reps", "5")} steps each after 1 warm-up), load at start ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
const quiet = series("quiet", N);
if (BUSY) {
  const tQuiet = TORCH ? torchRef("W7", 0, Number(MIN_REPS)) : null;
  const child = busyChild();
  let loaded: number, tBusy: number | null;
  try {
    loaded = series("busy", BUSY_N);
    tBusy = TORCH ? torchRef("W7", 0, Number(MIN_REPS)) : null;
  } finally {
    child.stop();
  }
  console.log(`slowdown next to one busy process: Loom W7u ${MODE} ${(loaded / quiet).toFixed(2)}× (${quiet.toFixed(0)} -> ${loaded.toFixed(0)} ms)` +
    (tQuiet && tBusy ? `, PyTorch W7 ${(tBusy / tQuiet).toFixed(2)}× (${tQuiet.toFixed(0)} -> ${tBusy.toFixed(0)} ms)` : ", PyTorch not measured"));
}
