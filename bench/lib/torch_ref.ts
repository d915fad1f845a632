/**
 * The PyTorch reference for one workload, measured in the same session: runs
 * shared/bench/ref_torch.py (W10's small ops: bench/ref_torch_small.py, beside this folder) with
 * Debian's /usr/bin/python3 and the configuration shared/bench/README.md prescribes (OpenBLAS's
 * fastest core type for this CPU, glibc malloc thresholds, 2 threads), and returns the median ms. W7u's
 * reference is ref_torch.py's W7 (the same model and step). Returns null when torch or the
 * script is not available.
 */
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";

/** The script and its workload id for a Loom workload id. */
function reference(id: string): { script: string; refId: string } {
  if (id.startsWith("W10")) return { script: resolve(import.meta.dir, "../ref_torch_small.py"), refId: id };
  return { script: resolve(import.meta.dir, "../../../shared/bench/ref_torch.py"), refId: id === "W7u" ? "W7" : id };
}

/** Whether this CPU has AVX-512 (the flags of /proc/cpuinfo; false where it cannot be read). */
function hasAvx512(): boolean {
  try {
    return /^flags\s*:.*\bavx512f\b/m.test(readFileSync("/proc/cpuinfo", "utf8"));
  } catch {
    return false;
  }
}

/**
 * The environment both reference scripts run in (shared/bench/README.md): PyTorch's fastest
 * configuration on this CPU. With AVX-512, OpenBLAS's SkylakeX kernels and ATen's avx512 ones; on
 * a CPU without it (Zen 3, for one) SkylakeX's kernels would not run, and Haswell's (AVX2) are the
 * ones OpenBLAS itself picks there, as Loom does (native/kernels/blas.c).
 */
export const TORCH_ENV = {
  ...(hasAvx512() ? { OPENBLAS_CORETYPE: "SkylakeX", ATEN_CPU_CAPABILITY: "avx512" } : { OPENBLAS_CORETYPE: "Haswell", ATEN_CPU_CAPABILITY: "avx2" }),
  MALLOC_MMAP_THRESHOLD_: "4294967296", MALLOC_TRIM_THRESHOLD_: "68719476736",
};

/** Median ms of PyTorch on `id` (at least `minReps` calls when given: the scripts' default is 20). */
export function torchRef(id: string, minTimeMs: number, minReps?: number): number | null {
  const { script, refId } = reference(id);
  if (!existsSync(script) || !existsSync("/usr/bin/python3")) return null;
  const out = join("/tmp", `loom-ref-${process.pid}.jsonl`);
  const r = Bun.spawnSync(["/usr/bin/python3", script, "--only", refId, "--min-time", String(minTimeMs / 1e3), "--json-out", out, ...(minReps ? ["--min-reps", String(minReps)] : [])], {
    env: { ...process.env, ...TORCH_ENV },
    stdout: "pipe", stderr: "pipe",
  });
  const line = r.stdout.toString().split("\n").find((l) => l.startsWith(`{"id": "${refId}"`));
  return line ? (JSON.parse(line).ms as number) : null;
}
