/**
 * W1 (a, b, c), W6, W7u and W11 of shared/bench/README.md on device "cuda" (lazy and eager),
 * next to PyTorch on the same GPU measured in the same run (bench/ref_torch_cuda.py for W1, W6
 * and W7, which is W7u's reference; bench/ref_torch_w11.py --device cuda for W11). For a machine
 * with an NVIDIA GPU (docs/CUDA.md gives the exact `run` command); it exits with the reason
 * where no CUDA device can be opened.
 *
 *   bun bench/cuda.ts                        # everything, with PyTorch
 *   bun bench/cuda.ts --only W1,W7u --no-torch
 *   bun bench/cuda.ts --python python3       # the Python that has torch with CUDA (default: python3)
 *
 * Every timed call ends with the result realized and the device synchronized (cudaStreamSynchronize),
 * as PyTorch's calls end with torch.cuda.synchronize(). Reported: median ms per call, the
 * speedup t_torch / t_loom, and per call the command buffers submitted, CPU runs (ops without a
 * CUDA kernel) and cuBLAS calls, so a slow figure says where its time went.
 */
import * as loom from "../src/index.ts";
import { cudaBackend, cudaStatus } from "../src/backends/cuda/index.ts";
import { with_execution_mode } from "../src/nn/execution.ts";
import { cli, measure, median, selected } from "./lib/harness.ts";
import { w7Model, workloads, type T } from "./lib/workloads.ts";
import { resolve } from "node:path";

const TORCH = !cli.flag("--no-torch");
const PYTHON = cli.opt("--python", "python3");
const MIN_REPS = cli.minReps(10);

const status = cudaStatus();
if (!status.available) {
  console.error(`[bench/cuda] no CUDA device: ${status.reason}`);
  process.exit(2);
}
const b = cudaBackend();
console.log(`# device: ${status.device}; matmul: ${status.cublas}`);

const done = (y: T): T => {
  const t = y.isLazy ? (y as loom.LazyTensor).eval() : y;
  b.synchronize();
  return t;
};
const W = workloads({ place: (t) => t.to("cuda"), done, onePlanStep: false }).filter(([id]) => ["W1a", "W1b", "W1c", "W6", "W7u"].includes(id) && selected(id));

interface Row { id: string; mode: string; ms: number; derived: string; submits: number; cpuRuns: number; cublas: number }
const rows: Row[] = [];

for (const [id, name, make, derive] of W) {
  for (const lazy of [true, false]) {
    const fn = make(lazy);
    const s0 = b.stats.submits, f0 = b.stats.fallbacks, c0 = b.deviceCounters().cublasCalls;
    let calls = 0;
    const { ms } = measure(() => { calls++; return fn(); }, MIN_REPS);
    const per = (x: number) => +(x / Math.max(calls, 1)).toFixed(2);
    const r: Row = {
      id, mode: lazy ? "lazy" : "eager", ms, derived: derive(ms),
      submits: per(b.stats.submits - s0), cpuRuns: per(b.stats.fallbacks - f0), cublas: per(b.deviceCounters().cublasCalls - c0),
    };
    rows.push(r);
    console.log(JSON.stringify({ ...r, name, impl: "loom cuda" }));
  }
}

// W11: greedy decoding with the W7 model, batch 1, prompt 16, 112 new tokens, KV cache
const W11 = selected("W11");
const w11: Record<string, number> = {};
if (W11) {
  const NEW = 112, PROMPT = 16;
  const m = w7Model().eval().to("cuda");
  loom.manual_seed(1);
  const prompt = loom.randint(0, 96, [1, PROMPT]).to("cuda");
  for (const mode of ["lazy", "eager"] as const) {
    const totals: number[] = [];
    with_execution_mode(mode, () => {
      for (let r = 0; r < 4; r++) { // the first is warm-up (plan compiles)
        const t0 = performance.now();
        m.generate(prompt, NEW, { temperature: 0, use_cache: true });
        b.synchronize();
        if (r) totals.push(performance.now() - t0);
      }
    });
    w11[mode] = NEW / median(totals) * 1e3;
    console.log(JSON.stringify({ id: "W11", mode, tokens_per_s: w11[mode], impl: "loom cuda" }));
  }
}

// ---- PyTorch on the same GPU ----------------------------------------------------------------------
const torch = new Map<string, number>();
if (TORCH) {
  const ids = W.map(([id]) => (id === "W7u" ? "W7" : id));
  if (ids.length) {
    const r = Bun.spawnSync([PYTHON, resolve(import.meta.dir, "ref_torch_cuda.py"), "--device", "cuda", "--only", ids.join(",")], { stdout: "pipe", stderr: "pipe" });
    if (r.exitCode !== 0) console.error(`[bench/cuda] ref_torch_cuda.py failed: ${r.stderr.toString().slice(-800)}`);
    for (const l of r.stdout.toString().split("\n").filter((x) => x.startsWith("{"))) {
      const j = JSON.parse(l);
      torch.set(j.id === "W7" ? "W7u" : j.id, j.ms);
      console.log(l);
    }
  }
  if (W11) {
    const r = Bun.spawnSync([PYTHON, resolve(import.meta.dir, "ref_torch_w11.py"), "--device", "cuda", "--modes", "kv", "--reps", "3"], { stdout: "pipe", stderr: "pipe" });
    if (r.exitCode !== 0) console.error(`[bench/cuda] ref_torch_w11.py failed: ${r.stderr.toString().slice(-800)}`);
    for (const l of r.stdout.toString().split("\n").filter((x) => x.startsWith("{"))) {
      const j = JSON.parse(l);
      if (j.mode === "kv") torch.set("W11", j.tokens_per_s);
      console.log(l);
    }
  }
}

console.log(`\n| workload | mode | Loom ms | PyTorch ms | speedup | derived | submits/call | CPU runs/call | cuBLAS/call |`);
console.log(`|---|---|---:|---:|---:|---|---:|---:|---:|`);
for (const r of rows) {
  const t = torch.get(r.id);
  console.log(`| ${r.id} | ${r.mode} | ${r.ms.toFixed(3)} | ${t?.toFixed(3) ?? "-"} | ${t ? (t / r.ms).toFixed(2) : "-"} | ${r.derived} | ${r.submits} | ${r.cpuRuns} | ${r.cublas} |`);
}
if (W11) {
  const t = torch.get("W11");
  for (const mode of ["lazy", "eager"]) console.log(`| W11 | ${mode} | tokens/s ${w11[mode]!.toFixed(1)} | tokens/s ${t?.toFixed(1) ?? "-"} | ${t ? (w11[mode]! / t).toFixed(2) : "-"} | greedy, KV cache | | | |`);
}
