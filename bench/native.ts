/**
 * W1–W9 of shared/bench/README.md on Loom (native lazy, native eager, js eager) next to PyTorch
 * measured in the same run by shared/bench/ref_torch.py, alternating per workload.
 *
 *   bun bench/native.ts                  # all workloads, with PyTorch
 *   bun bench/native.ts --only W1,W8     # subset (prefix match)
 *   bun bench/native.ts --no-torch       # Loom only
 *   bun bench/native.ts --js-all         # also run js on W1c/W6/W7/W9 (minutes)
 *   bun bench/native.ts --no-js          # native only
 *
 * Timing (bench/lib/harness.ts, tinybench) follows ref_torch.py: warm-up, then reps until both
 * --min-reps and --min-time are met, median reported. Every timed call returns a realized result (eager ops have
 * run; lazy graphs are eval()'d), so no iteration times a submit alone.
 */
import * as loom from "../src/index.ts";
import { set_default_backend } from "../src/lazy/device.ts";
import { nativeBackend } from "../src/backends/native/backend.ts";
import { cli, measure, selected } from "./lib/harness.ts";
import { torchRef } from "./lib/torch_ref.ts";
import { workloads, type T } from "./lib/workloads.ts";

const MIN_REPS = cli.minReps(10);
const TORCH = !cli.flag("--no-torch");
const JS_ALL = cli.flag("--js-all");
const NO_JS = cli.flag("--no-js");

/** The realized result, after every queued command buffer has finished (lazy plans run asynchronously). */
const done = (y: T) => {
  const t = y.isLazy ? (y as loom.LazyTensor).eval() : y;
  nativeBackend()?.synchronize();
  return t;
};
const WORKLOADS = workloads({ place: (t) => t, done, onePlanStep: true });

const MODES = [
  { name: "native lazy", backend: "native" as const, lazy: true },
  { name: "native eager", backend: "native" as const, lazy: false },
  { name: "js eager", backend: "js" as const, lazy: false },
];
const JS_SLOW = new Set(["W1c", "W6", "W7", "W9"]);

const nb = nativeBackend();
console.log(`# Loom bench: native ${nb ? `${nb.lib.threads} threads, BLAS ${nb.blas() || "built-in GEMM"}` : "unavailable"}`);
const rows: string[] = ["| id | workload | PyTorch ms | " + MODES.map((m) => `${m.name} ms (speedup)`).join(" | ") + " | derived (native lazy) |", "|---|---|---:|" + MODES.map(() => "---:").join("|") + "|---|"];
for (const [id, name, make, derive] of WORKLOADS) {
  if (!selected(id)) continue;
  const ref = TORCH ? torchRef(id, cli.minTime) : null;
  const cells: string[] = [];
  let lazyMs = 0;
  for (const m of MODES) {
    if (m.backend === "native" && !nb) { cells.push("n/a"); continue; }
    if (m.backend === "js" && ((JS_SLOW.has(id) && !JS_ALL) || NO_JS)) { cells.push("(skipped)"); continue; }
    set_default_backend(m.backend);
    try {
      const r = measure(make(m.lazy), MIN_REPS);
      if (m.lazy && m.backend === "native") lazyMs = r.ms;
      cells.push(`${r.ms.toFixed(3)}${ref ? ` (${(ref / r.ms).toFixed(2)}×)` : ""}`);
      console.log(JSON.stringify({ id, mode: m.name, ms: +r.ms.toFixed(4), reps: r.reps, torch_ms: ref, speedup: ref ? +(ref / r.ms).toFixed(3) : null }));
    } catch (e) {
      cells.push(`error: ${(e as Error).message.slice(0, 60)}`);
    }
  }
  set_default_backend(nb ? "native" : "js");
  rows.push(`| ${id} | ${name} | ${ref?.toFixed(3) ?? "—"} | ${cells.join(" | ")} | ${lazyMs ? derive(lazyMs) : ""} |`);
}
console.log("\n" + rows.join("\n"));

// W8 split: recording 10k lazy ops (no realize) and the one realize, native
if (nb && selected("W8")) {
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
