/**
 * Shared command line and timing for the W1–W9 suites. Timing is tinybench: warm-up, then
 * iterations until both the minimum count and the minimum time are reached; the median (p50)
 * is reported, as ref_torch.py does. `sync` runs inside every timed iteration so a device's
 * queued work is included, never a submit alone.
 */
import { Bench } from "tinybench";

const args = process.argv.slice(2);
const opt = (k: string, d: string) => {
  const i = args.indexOf(k);
  return i >= 0 ? args[i + 1]! : d;
};

export const cli = {
  /** Workload id prefixes from --only W1,W8 (empty: all). */
  only: opt("--only", "").split(",").filter(Boolean),
  /** Minimum timed time per measurement, ms (--min-time seconds). */
  minTime: Number(opt("--min-time", "1.5")) * 1e3,
  minReps: (dflt: number) => Number(opt("--min-reps", String(dflt))),
  warmup: Number(opt("--warmup", "2")),
  flag: (name: string) => args.includes(name),
  /** The value after `name`, or `dflt`. */
  opt,
};

/** Whether --only selects `id`: a prefix of it not followed by a digit (W1 selects W1a–c, not W10a). */
export function selected(id: string): boolean {
  return !cli.only.length || cli.only.some((o) => id.startsWith(o) && !/[0-9]/.test(id.charAt(o.length)));
}

/** Median ms of `fn` (+ `sync`) and the number of timed iterations. */
export function measure(fn: () => unknown, minReps: number, sync: () => void = () => {}): { ms: number; reps: number } {
  const bench = new Bench({ time: cli.minTime, iterations: minReps, warmupIterations: cli.warmup, warmupTime: 0, throws: true });
  bench.add("w", () => {
    fn();
    sync();
  });
  bench.runSync();
  const r = bench.tasks[0]!.result as { latency: { p50: number; samplesCount: number } };
  return { ms: r.latency.p50, reps: r.latency.samplesCount };
}

/** The median of `xs` (the mean of the middle two for an even count). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[n >> 1]! : (s[n / 2 - 1]! + s[n / 2]!) / 2;
}
