/**
 * W1–W10 and W7u of shared/bench/README.md on Loom (native lazy, native eager, js eager) next to
 * PyTorch measured in the same run by shared/bench/ref_torch.py (W10: bench/ref_torch_small.py),
 * alternating per workload.
 *
 *   bun bench/native.ts                  # all workloads, with PyTorch
 *   bun bench/native.ts --only W1,W8     # subset (prefix match)
 *   bun bench/native.ts --no-torch       # Loom only
 *   bun bench/native.ts --js-all         # also run js on W1c/W6/W7/W9 (minutes)
 *   bun bench/native.ts --no-js          # native only
 *   bun bench/native.ts --only W7u --no-torch --modes lazy --json   # JSON lines only (bench/unimodal.ts)
 *
 * Timing (bench/lib/harness.ts, tinybench) follows ref_torch.py: warm-up, then reps until both
 * --min-reps and --min-time are met, median reported. Every timed call returns a realized result (eager ops have
 * run; lazy graphs are eval()'d), so no iteration times a submit alone. Each JSON line also gives,
 * per timed call (after the warm-up), the process CPU time (every thread: spinning shows here, and
 * unlike wall time it hardly moves with other load on the machine), the plans realized (plan-cache
 * hits + misses), native command buffers submitted and eager native calls, and the process's peak
 * RSS so far (MiB; meaningful for the first workload of a process, e.g. `--only W7u`).
 */
import * as loom from "../src/index.ts";
import { set_default_backend } from "../src/lazy/device.ts";
import { planCacheStats } from "../src/scheduler/compile.ts";
import { nativeBackend } from "../src/backends/native/backend.ts";
import { cli, measure, selected } from "./lib/harness.ts";
import { torchRef } from "./lib/torch_ref.ts";
import { workloads, type T } from "./lib/workloads.ts";

const MIN_REPS = cli.minReps(10);
const TORCH = !cli.flag("--no-torch");
const JS_ALL = cli.flag("--js-all");
const NO_JS = cli.flag("--no-js");
/** Only the JSON lines (no header, no table). */
const JSON_ONLY = cli.flag("--json");
const log = (s: string) => { if (!JSON_ONLY) console.log(s); };

/** The realized result, after every queued command buffer has finished (lazy plans run asynchronously). */
const done = (y: T) => {
  const t = y.isLazy ? (y as loom.LazyTensor).eval() : y;
  nativeBackend()?.synchronize();
  return t;
};
const WORKLOADS = workloads({ place: (t) => t, done, onePlanStep: true });

const MODES = [
  { name: "native lazy", key: "lazy", backend: "native" as const, lazy: true },
  { name: "native eager", key: "eager", backend: "native" as const, lazy: false },
  { name: "js eager", key: "js", backend: "js" as const, lazy: false },
];
/** --modes lazy,eager,js: which of MODES run (default all; --no-js drops js). */
const ONLY_MODES = cli.opt("--modes", "lazy,eager,js").split(",");
const modeOn = (key: string) => ONLY_MODES.includes(key);
const JS_SLOW = new Set(["W1c", "W6", "W7", "W7u", "W9"]);

/**
 * Per-call counters around a measurement, from the first call after the warm-up (calls counted by
 * wrapping the timed function; the first call, e.g. a plan compile, is often far heavier).
 */
function counted(fn: () => unknown) {
  let calls = 0;
  const snap = () => ({
    plans: planCacheStats.hits + planCacheStats.misses, submits: nb?.stats.submits ?? 0, execs: nb?.stats.execs ?? 0, cpu: process.cpuUsage(),
  });
  let s0 = snap(), n = 0;
  return {
    fn: () => {
      if (calls++ === cli.warmup) { s0 = snap(); n = 0; }
      n++;
      return fn();
    },
    per: () => {
      const per = (x: number) => +(x / Math.max(n, 1)).toFixed(2);
      const s = snap(), cpu = process.cpuUsage(s0.cpu);
      return {
        cpu_ms: per((cpu.user + cpu.system) / 1e3),
        plans: per(s.plans - s0.plans),
        submits: per(s.submits - s0.submits),
        execs: per(s.execs - s0.execs),
        peak_rss_mib: +(process.resourceUsage().maxRSS / 1024).toFixed(0),
      };
    },
  };
}

const nb = nativeBackend();
log(`# Loom bench: native ${nb ? `${nb.lib.threads} threads, BLAS ${nb.blas() || "built-in GEMM"}` : "unavailable"}`);
const rows: string[] = ["| id | workload | PyTorch ms | " + MODES.map((m) => `${m.name} ms (speedup)`).join(" | ") + " | derived (native lazy) |", "|---|---|---:|" + MODES.map(() => "---:").join("|") + "|---|"];
for (const [id, name, make, derive] of WORKLOADS) {
  if (!selected(id)) continue;
  const ref = TORCH ? torchRef(id, cli.minTime) : null;
  const cells: string[] = [];
  let lazyMs = 0;
  for (const m of MODES) {
    if (!modeOn(m.key)) { cells.push("(skipped)"); continue; }
    if (m.backend === "native" && !nb) { cells.push("n/a"); continue; }
    if (m.backend === "js" && ((JS_SLOW.has(id) && !JS_ALL) || NO_JS)) { cells.push("(skipped)"); continue; }
    set_default_backend(m.backend);
    try {
      const c = counted(make(m.lazy));
      const r = measure(c.fn, MIN_REPS);
      if (m.lazy && m.backend === "native") lazyMs = r.ms;
      cells.push(`${r.ms.toFixed(r.ms < 0.1 ? 4 : 3)}${ref ? ` (${(ref / r.ms).toFixed(2)}×)` : ""}`);
      console.log(JSON.stringify({ id, mode: m.name, ms: +r.ms.toFixed(4), reps: r.reps, torch_ms: ref, speedup: ref ? +(ref / r.ms).toFixed(3) : null, ...c.per() }));
    } catch (e) {
      cells.push(`error: ${(e as Error).message.slice(0, 60)}`);
    }
  }
  set_default_backend(nb ? "native" : "js");
  rows.push(`| ${id} | ${name} | ${ref?.toFixed(3) ?? "—"} | ${cells.join(" | ")} | ${lazyMs ? derive(lazyMs) : ""} |`);
}
log("\n" + rows.join("\n"));

// W8 split: recording 10k lazy ops (no realize) and the one realize, native
if (nb && selected("W8") && !JSON_ONLY) {
  set_default_backend("native");
  const x = loom.randn([16]), y0 = loom.zeros(16);
  const record = () => { let y: any = y0.lazy(); const xx = x.lazy(); for (let i = 0; i < 10000; i++) y = y.add(xx); return y as loom.LazyTensor; };
  for (let i = 0; i < 3; i++) done(record());
  const rec: number[] = [], real: number[] = [];
  for (let i = 0; i < 15; i++) {
    const t0 = performance.now();
    const y = record();
    const t1 = performance.now();
    done(y);
    rec.push(t1 - t0);
    real.push(performance.now() - t1);
  }
  const med = (a: number[]) => a.sort((p, q) => p - q)[a.length >> 1]!;
  console.log(`W8 native lazy: recording ${(med(rec) * 1e3 / 10000).toFixed(3)} µs/op, realize ${med(real).toFixed(2)} ms (${(med(real) * 1e3 / 10000).toFixed(3)} µs/op)`);
}
