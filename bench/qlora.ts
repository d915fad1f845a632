/**
 * QLoRA benchmarks of issue 12, on the W7 model (bench/lib/workloads.ts w7Model: GPT-2 vocab 96,
 * n_embd 384, 6 layers, 6 heads, context 128, exact-erf GELU, dropout 0):
 *
 * - train: the W7u step (LoRA r 8, alpha 16 on attn.c_attn / attn.c_proj, AdamW, batch 16, the
 *   loop body as users write it: forward with targets, zero_grad, `loss.backward()`,
 *   `opt.step()`, `loss.item()`) on the float32 base and on an NF4 base (`loom.compress(model,
 *   { method: "nf4" })` before get_peft_model: every Linear/Conv1D of the blocks; the tied
 *   wte/lm_head, wpe, layer norms and biases stay float32). Reported: median step ms, peak RSS,
 *   and the base weight bytes from loom.weights.memory_usage (quantized layers, float32 rest),
 *   whose ratio to the float32 base must be ≤ 0.3.
 * - decode: greedy `model.generate` with the KV cache, batch 1, prompt 16, 112 new tokens
 *   (W11's shape), float32 vs every linear in Q4_0; tokens/s = 112 / whole generation.
 *
 * Each case runs in its own process (peak RSS is per process), on the native backend.
 *
 *   bun bench/qlora.ts                         # all cases, lazy mode
 *   bun bench/qlora.ts --modes lazy,eager --reps 10
 *   bun bench/qlora.ts --case train-nf4 --mode lazy   # one case in this process (JSON line)
 */
import { loadavg } from "node:os";
import * as loom from "../src/index.ts";
import { nativeBackend } from "../src/backends/native/backend.ts";
import { set_default_backend } from "../src/lazy/device.ts";
import { with_execution_mode } from "../src/nn/execution.ts";
import { memory_usage } from "../src/weights/optimize.ts";
import { cli, median } from "./lib/harness.ts";
import { userGptStep, w7Model } from "./lib/workloads.ts";

type Case = "train-f32" | "train-nf4" | "decode-f32" | "decode-q4_0";
const CASES: Case[] = ["train-f32", "train-nf4", "decode-f32", "decode-q4_0"];
const REPS = Number(cli.opt("--reps", "8"));
const PROMPT = 16, NEW = 112;

interface Row {
  case: Case;
  mode: string;
  /** train: median ms per step; decode: ms per generation. */
  ms: number;
  /** train: tokens/s trained (16 × 128 / step); decode: generated tokens/s. */
  tokens_per_s: number;
  /** The process's high-water RSS (building the float32 model and compressing it included). */
  peak_rss_mib: number;
  /** RSS before the model was built (the runtime's own). */
  rss0_mib: number;
  /** RSS after setup (model built, compressed, LoRA injected; garbage collected). */
  rss_setup_mib: number;
  /** Largest RSS sampled right after a timed step or generation. */
  rss_run_mib: number;
  /** Base weight bytes (everything but LoRA parameters), its quantized part, and the float32 base's. */
  base_bytes: number;
  quantized_bytes: number;
  float32_base_bytes: number;
  quantized_layers: number;
  loss?: number;
  reps: number;
  load_avg_1m: number;
}

const mib = (kib: number) => +(kib / 1024).toFixed(1);

/** Base weight bytes of `model` (LoRA parameters excluded) as memory_usage counts them. */
function baseBytes(model: loom.nn.Module): { base: number; quantized: number; dense: number; layers: number } {
  const u = memory_usage(model);
  let base = 0, quantized = 0, dense = 0, layers = 0;
  for (const w of u.weights) {
    if (w.name.includes("lora_")) continue;
    base += w.nbytes;
    dense += w.dense_nbytes;
    if (w.kind !== "parameter") {
      quantized += w.nbytes;
      layers++;
    }
  }
  return { base, quantized, dense, layers };
}

function runCase(c: Case, mode: "lazy" | "eager"): Row {
  const rss0 = process.resourceUsage().maxRSS;
  if (c.startsWith("train")) {
    const quant = c === "train-nf4";
    // the W7u step with the linear layers compressed to NF4 before LoRA is injected (QLoRA order)
    const { model, step } = userGptStep((t) => t, mode === "lazy", quant ? (m) => loom.compress(m, { method: "nf4" }) : undefined);
    const bytes = baseBytes(model);
    Bun.gc(true); // the float32 weights compress replaced, and its temporaries, are garbage now
    const rssSetup = process.memoryUsage().rss;
    let rssRun = 0;
    let loss = 0;
    for (let i = 0; i < 2; i++) loss = step().value; // warm-up (plan compiles)
    const ts: number[] = [];
    for (let i = 0; i < REPS; i++) {
      const t0 = performance.now();
      loss = step().value;
      nativeBackend()?.synchronize();
      ts.push(performance.now() - t0);
      rssRun = Math.max(rssRun, process.memoryUsage().rss);
    }
    const ms = median(ts);
    return {
      rss_setup_mib: mib(rssSetup / 1024), rss_run_mib: mib(rssRun / 1024),
      case: c, mode, ms: +ms.toFixed(2), tokens_per_s: Math.round((16 * 128) / ms * 1e3), peak_rss_mib: mib(process.resourceUsage().maxRSS),
      rss0_mib: mib(rss0), base_bytes: bytes.base, quantized_bytes: bytes.quantized, float32_base_bytes: bytes.dense,
      quantized_layers: bytes.layers, loss: +loss.toFixed(4), reps: REPS, load_avg_1m: +loadavg()[0]!.toFixed(2),
    };
  }
  const model = w7Model().eval();
  if (c === "decode-q4_0") loom.compress(model, { method: "q4_0" });
  const bytes = baseBytes(model);
  Bun.gc(true);
  const rssSetup = process.memoryUsage().rss;
  let rssRun = 0;
  const prompt = loom.randint(0, 96, [1, PROMPT], { generator: new loom.Generator(1) });
  const gen = () => with_execution_mode(mode, () => model.generate(prompt, NEW, { temperature: 0, use_cache: true }).tolist());
  gen(); // warm-up
  const ts: number[] = [];
  for (let i = 0; i < Math.max(3, Math.ceil(REPS / 2)); i++) {
    const t0 = performance.now();
    gen();
    ts.push(performance.now() - t0);
    rssRun = Math.max(rssRun, process.memoryUsage().rss);
  }
  const ms = median(ts);
  return {
    rss_setup_mib: mib(rssSetup / 1024), rss_run_mib: mib(rssRun / 1024),
    case: c, mode, ms: +ms.toFixed(1), tokens_per_s: +(NEW / ms * 1e3).toFixed(1), peak_rss_mib: mib(process.resourceUsage().maxRSS),
    rss0_mib: mib(rss0), base_bytes: bytes.base, quantized_bytes: bytes.quantized, float32_base_bytes: bytes.dense,
    quantized_layers: bytes.layers, reps: ts.length, load_avg_1m: +loadavg()[0]!.toFixed(2),
  };
}

if (!nativeBackend()) throw new Error("bench/qlora.ts needs the native backend");
set_default_backend("native");
const one = cli.opt("--case", "");
if (one) {
  console.log(JSON.stringify(runCase(one as Case, cli.opt("--mode", "lazy") as "lazy" | "eager")));
} else {
  const modes = cli.opt("--modes", "lazy").split(",");
  const rows: Row[] = [];
  console.log(`# QLoRA bench (W7 model), native ${nativeBackend()!.lib.threads} threads; load average at start ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);
  for (const mode of modes) {
    for (const c of CASES) {
      const p = Bun.spawnSync([process.execPath, import.meta.path, "--case", c, "--mode", mode, "--reps", String(REPS)], { stderr: "inherit" });
      const line = p.stdout.toString().trim().split("\n").at(-1)!;
      const row = JSON.parse(line) as Row;
      rows.push(row);
      console.log(line);
    }
  }
  const fmt = (b: number) => `${(b / 2 ** 20).toFixed(2)} MiB`;
  console.log("\n| case | mode | ms | tokens/s | peak RSS MiB | RSS after setup / while running MiB (runtime alone) | base weights | of which quantized | float32 base | ratio | load 1m |");
  console.log("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    console.log(`| ${r.case} | ${r.mode} | ${r.ms} | ${r.tokens_per_s} | ${r.peak_rss_mib} | ${r.rss_setup_mib} / ${r.rss_run_mib} (${r.rss0_mib}) | ${fmt(r.base_bytes)} | ${fmt(r.quantized_bytes)} (${r.quantized_layers} layers) | ${fmt(r.float32_base_bytes)} | ${(r.base_bytes / r.float32_base_bytes).toFixed(3)} | ${r.load_avg_1m} |`);
  }
  for (const mode of modes) {
    const get = (c: Case) => rows.find((r) => r.case === c && r.mode === mode)!;
    const f = get("train-f32"), q = get("train-nf4"), df = get("decode-f32"), dq = get("decode-q4_0");
    console.log(`\n${mode}: NF4 step ${(q.ms / f.ms).toFixed(2)}x the float32 step time, peak RSS ${q.peak_rss_mib} vs ${f.peak_rss_mib} MiB (RSS while training ${q.rss_run_mib} vs ${f.rss_run_mib}), base weights ${(q.base_bytes / f.base_bytes).toFixed(3)}x float32 (≤ 0.3 required: ${q.base_bytes <= 0.3 * f.base_bytes ? "yes" : "NO"}); decode Q4_0 ${dq.tokens_per_s} vs float32 ${df.tokens_per_s} tokens/s (${(dq.tokens_per_s / df.tokens_per_s).toFixed(2)}x)`);
  }
  console.log(`load average at end ${loadavg().map((x) => x.toFixed(2)).join(" ")}: other jobs share these cores, so these are not quiet numbers`);
}
