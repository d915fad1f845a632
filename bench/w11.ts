/**
 * W11 of shared/bench/README.md: greedy decoding with the W7 model (GPT2LMHeadModel, vocab 96,
 * n_embd 384, 6 layers, 6 heads, n_positions 128, exact-erf GELU, dropout 0, random init with a
 * fixed seed; no LoRA: decoding only), batch 1, prompt 16 tokens, 112 new tokens, on the native
 * backend in lazy and eager mode, next to PyTorch measured in the same run by
 * bench/ref_torch_w11.py (HF-style KV cache, dynamic and static, and full recomputation).
 *
 *   bun bench/w11.ts                    # native lazy + eager with the KV cache, then PyTorch
 *   bun bench/w11.ts --reps 3 --no-torch
 *   bun bench/w11.ts --modes lazy --full  # also Loom without the cache (use_cache: false; slow)
 *   bun bench/w11.ts --json             # JSON lines only
 *   bun bench/w11.ts --profile --no-torch # also per token: kernels, realizes and native kernel ms by op
 *
 * Per mode: one warm-up generation (its plan compiles, planCacheStats misses, are "compiles":
 * a fresh process, so they are all the plans the generation needs), then --reps timed
 * generations; medians over them. Reported: tokens/s (112 / whole generation, prefill
 * included), prefill ms, ms per decode step at positions 16, 64, 127 and the compiles during the
 * timed generations (0 when every step reuses a plan). "Position p" is the decode step whose
 * input token sits at position p (it writes cache slot p); 127 is read as the last step (input at
 * 126, output token 127), since the last token is never fed. Every step ends with the logits read
 * on the host (argmax), so no step times a submit alone.
 */
import * as loom from "../src/index.ts";
import { set_default_backend } from "../src/lazy/device.ts";
import { with_execution_mode } from "../src/nn/execution.ts";
import { planCacheStats } from "../src/scheduler/compile.ts";
import { realizeStats } from "../src/scheduler/realize.ts";
import { nativeBackend } from "../src/backends/native/backend.ts";
import { cli, median } from "./lib/harness.ts";
import { w7Model } from "./lib/workloads.ts";
import { TORCH_ENV } from "./lib/torch_ref.ts";
import { resolve } from "node:path";
import { existsSync } from "node:fs";

const V = 96, PROMPT = 16, NEW = 112; // the W7 model's vocabulary (w7Model); W11's prompt and new tokens
const REPS = Number(cli.opt("--reps", "5"));
const TORCH = !cli.flag("--no-torch");
const FULL = cli.flag("--full");
const JSON_ONLY = cli.flag("--json");
const PROFILE = cli.flag("--profile");
const MODES = cli.opt("--modes", "lazy,eager").split(",") as ("lazy" | "eager")[];
const log = (s: string) => { if (!JSON_ONLY) console.log(s); };

interface Result {
  id: "W11"; impl: string; mode: string; tokens_per_s: number; total_ms: number; prefill_ms: number;
  ms_pos16: number; ms_pos64: number; ms_pos127: number; reps: number; compiles?: number; compiles_timed?: number;
}

function model(): loom.models.GPT2LMHeadModel {
  return w7Model().eval();
}

function generate(m: loom.models.GPT2LMHeadModel, prompt: loom.Tensor, use_cache: boolean): { stamps: number[]; ids: number[] } {
  const stamps: number[] = [];
  const t0 = performance.now();
  const out = m.generate(prompt, NEW, { temperature: 0, use_cache, on_token: () => stamps.push(performance.now() - t0) });
  return { stamps, ids: (out.tolist() as number[][])[0]! };
}

function run(m: loom.models.GPT2LMHeadModel, prompt: loom.Tensor, mode: "lazy" | "eager", use_cache: boolean): { r: Result; ids: number[] } {
  return with_execution_mode(mode, () => {
    const m0 = planCacheStats.misses;
    const warm = generate(m, prompt, use_cache);
    const m1 = planCacheStats.misses;
    const runs: number[][] = [];
    const c0 = PROFILE ? nativeBackend()!.shimCounters() : null, r0 = realizeStats.realizes, k0 = realizeStats.nodes;
    for (let i = 0; i < REPS; i++) runs.push(generate(m, prompt, use_cache).stamps);
    if (c0) {
      // per generated token (prefill included): native kernels by op (wall ms, calls), realizes and plan kernels
      const c1 = nativeBackend()!.shimCounters(), per = REPS * NEW;
      const ops = [...c1.nsByOp].map(([k, ns]) => [k, (ns - (c0.nsByOp.get(k) ?? 0)) / per / 1e6, ((c1.byOp.get(k) ?? 0) - (c0.byOp.get(k) ?? 0)) / per] as const).filter((o) => o[2] > 0).sort((a, b) => b[1] - a[1]);
      log(`[profile ${mode}] per token: realizes ${((realizeStats.realizes - r0) / per).toFixed(2)}, plan kernels ${((realizeStats.nodes - k0) / per).toFixed(1)}, native kernel ms ${ops.reduce((a, o) => a + o[1], 0).toFixed(3)}`);
      for (const [k, ms, n] of ops.slice(0, 8)) log(`  ${k.padEnd(24)} ${ms.toFixed(3)} ms  ${n.toFixed(1)} calls`);
    }
    const step = (s: number) => median(runs.map((st) => st[s]! - st[s - 1]!)); // the call producing token s
    const at = (p: number) => step(Math.min(p, PROMPT + NEW - 1) - PROMPT + 1); // input at p -> call p - 16 + 1
    const total = median(runs.map((st) => st[NEW - 1]!));
    const r: Result = {
      id: "W11", impl: "loom native", mode: `${mode}${use_cache ? "" : " full"}`, tokens_per_s: NEW / total * 1e3, total_ms: total,
      prefill_ms: median(runs.map((st) => st[0]!)), ms_pos16: at(16), ms_pos64: at(64), ms_pos127: at(126), reps: REPS,
      compiles: m1 - m0, compiles_timed: (planCacheStats.misses - m1) / REPS,
    };
    return { r, ids: warm.ids };
  });
}

/** PyTorch's records from bench/ref_torch_w11.py, run now with the README's environment. */
function torchRef(): Result[] {
  const script = resolve(import.meta.dir, "ref_torch_w11.py");
  if (!existsSync("/usr/bin/python3")) return [];
  const r = Bun.spawnSync(["/usr/bin/python3", script, "--reps", String(REPS)], { env: { ...process.env, ...TORCH_ENV }, stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) {
    console.error(`[w11] PyTorch reference failed: ${r.stderr.toString().slice(-500)}`);
    return [];
  }
  return r.stdout.toString().split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l)).filter((x) => x.mode);
}

if (!nativeBackend()) throw new Error("[w11] the native backend is unavailable");
set_default_backend("native");
const cpu = (await Bun.file("/proc/cpuinfo").text()).match(/model name\s*:\s*(.*)/)?.[1] ?? "?";
log(`W11: greedy decoding, W7 model, batch 1, prompt ${PROMPT}, ${NEW} new tokens; ${REPS} timed generations per mode; ${cpu}`);
const m = model();
loom.manual_seed(1);
const prompt = loom.randint(0, V, [1, PROMPT]);
const results: Result[] = [];
const ids: Record<string, number[]> = {};
for (const mode of MODES) {
  for (const use_cache of FULL ? [true, false] : [true]) {
    const { r, ids: out } = run(m, prompt, mode, use_cache);
    results.push(r);
    ids[r.mode] = out;
    console.log(JSON.stringify(r));
  }
}
const modes = Object.keys(ids);
const agree = modes.every((k) => ids[k]!.join() === ids[modes[0]!]!.join());
if (!agree) console.error(`[w11] the modes generated different tokens: ${modes.map((k) => `${k}: ${ids[k]!.slice(PROMPT, PROMPT + 8).join(",")}...`).join("; ")}`);
const torch = TORCH ? torchRef() : [];
for (const t of torch) console.log(JSON.stringify(t));

const kv = torch.find((t) => t.mode === "kv");
const f = (x: number | undefined, d = 1) => (x === undefined ? "-" : x.toFixed(d));
log("");
log("| impl | mode | tokens/s | prefill ms | ms @16 | ms @64 | ms @127 | @127/@16 | compiles (warm-up / per timed gen) | × torch kv |");
log("|---|---|---|---|---|---|---|---|---|---|");
for (const r of [...results, ...torch]) {
  log(`| ${r.impl} | ${r.mode} | ${f(r.tokens_per_s)} | ${f(r.prefill_ms, 2)} | ${f(r.ms_pos16, 2)} | ${f(r.ms_pos64, 2)} | ${f(r.ms_pos127, 2)} | ${f(r.ms_pos127 / r.ms_pos16, 2)} | ${r.compiles === undefined ? "-" : `${r.compiles} / ${f(r.compiles_timed, 1)}`} | ${kv ? f(r.tokens_per_s / kv.tokens_per_s, 2) : "-"} |`);
}
log(`tokens equal across Loom modes: ${agree}`);
