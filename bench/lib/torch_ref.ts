/**
 * The PyTorch reference for one workload, measured in the same session: runs
 * shared/bench/ref_torch.py with Debian's /usr/bin/python3 and the configuration its README
 * prescribes (OpenBLAS AVX-512 core type, glibc malloc thresholds), and returns the median ms.
 * Returns null when torch or the script is not available.
 */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";

export function torchRef(id: string, minTimeMs: number): number | null {
  const script = resolve(import.meta.dir, "../../../shared/bench/ref_torch.py");
  if (!existsSync(script) || !existsSync("/usr/bin/python3")) return null;
  const out = join("/tmp", `loom-ref-${process.pid}.jsonl`);
  const r = Bun.spawnSync(["/usr/bin/python3", script, "--only", id, "--min-time", String(minTimeMs / 1e3), "--json-out", out], {
    env: { ...process.env, OPENBLAS_CORETYPE: "SkylakeX", ATEN_CPU_CAPABILITY: "avx512", MALLOC_MMAP_THRESHOLD_: "4294967296", MALLOC_TRIM_THRESHOLD_: "68719476736" },
    stdout: "pipe", stderr: "pipe",
  });
  const line = r.stdout.toString().split("\n").find((l) => l.startsWith(`{"id": "${id}"`));
  return line ? (JSON.parse(line).ms as number) : null;
}
