/**
 * The graph compiler, measured (workload names from shared/bench/README.md), on the js backend:
 *  1. kernels launched per GPT block forward (W6 shapes) and per LoRA training step (W7), unfused vs fused;
 *  2. peak transient memory of the W7 LoRA training step: naive allocation vs the planned workspace;
 *  3. W2 (gelu(x·a + b), 4M elements) and W6 (GPT block forward) eager vs lazy, timed with tinybench;
 *  4. graph build + plan time per op, with a plan-cache miss and with a hit.
 *
 *   bun bench/compiler.ts                 # everything (W6 timing takes a few minutes on js)
 *   bun bench/compiler.ts --quick         # smaller W6 timing run (B=1), fewer iterations
 *   bun bench/compiler.ts --json out.json # also write the numbers as JSON
 *
 * Every timed iteration realizes its result (lazy graphs are eval()'d), so no iteration times a
 * graph that has not run.
 */
import { writeFileSync } from "node:fs";
import { Bench } from "tinybench";
import * as loom from "../src/index.ts";
import { set_default_backend } from "../src/lazy/device.ts";
import { compile_plan, type LazyTensor } from "../src/lazy/lazy_tensor.ts";
import { clear_plan_cache, planCacheStats } from "../src/scheduler/compile.ts";
import { with_compiler_options } from "../src/scheduler/options.ts";
import type { CompiledPlan } from "../src/scheduler/plan.ts";
import { batch, block, gptLoss, initGpt, trainedNames, type GptConfig, type Params } from "./lib/gpt.ts";

const args = process.argv.slice(2);
const QUICK = args.includes("--quick");
const jsonAt = args.indexOf("--json");
set_default_backend("js");
loom.manual_seed(0);

const W6: GptConfig = { vocab: 96, layers: 1, d: 512, heads: 8, ctx: 256, mlp: 2048, lora: null };
const W7: GptConfig = { vocab: 96, layers: 6, d: 384, heads: 6, ctx: 128, mlp: 1536, lora: { r: 8, alpha: 16 } };
const results: Record<string, unknown> = {};
const mib = (b: number) => `${(b / (1 << 20)).toFixed(2)} MiB`;

/** The roots of one lazy LoRA training step (forward, cross-entropy, backward, AdamW), not run. */
function loraStepRoots(p: Params, c: GptConfig, B: number): LazyTensor[] {
  const names = trainedNames(p, c);
  const lift = (t: loom.Tensor) => t.lazy().detach();
  const P = new Map([...p].map(([k, t]) => [k, names.includes(k) ? lift(t).requires_grad_() : lift(t)]));
  const { idx, targets } = batch(c, B);
  const loss = gptLoss(lift(idx), lift(targets), (k) => P.get(k)!, c);
  loss.backward();
  const outs: LazyTensor[] = [loss];
  const b1 = 0.9, b2 = 0.999, lr = 1e-3, eps = 1e-8, wd = 0.01, t = 7;
  loom.no_grad(() => {
    for (const k of names) {
      const w = P.get(k)!.detach(), g = P.get(k)!.grad!;
      const m = lift(loom.zeros_like(p.get(k)!)).mul(b1).add(g.mul(1 - b1));
      const v = lift(loom.zeros_like(p.get(k)!)).mul(b2).add(g.mul(g).mul(1 - b2));
      outs.push(w.mul(1 - lr * wd).sub(m.div(1 - b1 ** t).div(v.div(1 - b2 ** t).sqrt().add(eps)).mul(lr)), m, v);
    }
  });
  return outs;
}

function plans(make: () => LazyTensor[]): { fused: CompiledPlan; unfused: CompiledPlan } {
  return {
    fused: compile_plan(make()),
    unfused: with_compiler_options({ fuse: false, patterns: false }, () => compile_plan(make())),
  };
}

// ---- 1 + 2: kernel counts and memory (compile only) ----------------------------------------------
console.log("## Kernels and memory (js backend, compiled plans)\n");
const p6 = initGpt(W6);
const x6 = loom.randn([4, W6.ctx, W6.d]);
const blockRoots = () => [block(x6.lazy(), (k) => p6.get(k)!.lazy(), 0, W6)];
const b6 = plans(blockRoots);
const p7 = initGpt(W7);
const s7 = plans(() => loraStepRoots(p7, W7, 16));
const rows = [
  ["W6 GPT block forward (B4 T256 d512)", b6],
  ["W7 LoRA training step (6 layers, B16 T128 d384)", s7],
] as const;
console.log("| graph | kernels unfused | kernels fused | naive transients | planned unfused | planned fused | outputs |");
console.log("|---|---:|---:|---:|---:|---:|---:|");
for (const [name, { fused, unfused }] of rows) {
  console.log(`| ${name} | ${unfused.kernelCount} | ${fused.kernelCount} | ${mib(unfused.memory.naive)} | ${mib(unfused.memory.peak)} | ${mib(fused.memory.peak)} | ${mib(fused.outputBytes)} |`);
  results[name] = {
    kernels_unfused: unfused.kernelCount, kernels_fused: fused.kernelCount,
    naive_bytes: unfused.memory.naive, planned_unfused_bytes: unfused.memory.peak, planned_fused_bytes: fused.memory.peak,
    live_bound_fused_bytes: fused.memory.liveBound, output_bytes: fused.outputBytes,
  };
}
console.log("\nnaive = every transient in its own buffer (sum of sizes); planned = one workspace, offsets reused when lifetimes do not overlap, in place where safe.\n");

// ---- 3: W2 and W6 eager vs lazy ------------------------------------------------------------------
async function time(tasks: Record<string, () => unknown>, iterations: number): Promise<Record<string, number>> {
  const bench = new Bench({ time: 0, iterations, warmupIterations: 1, warmupTime: 0 });
  for (const [name, fn] of Object.entries(tasks)) bench.add(name, fn);
  await bench.run();
  const out: Record<string, number> = {};
  for (const t of bench.tasks) out[t.name] = (t.result as { latency: { p50: number } }).latency.p50;
  return out;
}

console.log("## W2 and W6, eager vs lazy (js backend, median ms)\n");
const N = 4 * 1024 * 1024;
const [x2, a2, b2] = [loom.randn([N]), loom.randn([N]), loom.randn([N])];
const w2 = (x: any, a: any, b: any) => x.mul(a).add(b).gelu();
const t2 = await time({
  "W2 eager": () => w2(x2, a2, b2),
  "W2 lazy": () => w2(x2.lazy(), a2.lazy(), b2.lazy()).eval(),
}, QUICK ? 5 : 15);
const B6 = QUICK ? 1 : 4;
const x6t = loom.randn([B6, W6.ctx, W6.d]);
const t6 = await time({
  "W6 eager": () => block(x6t, (k) => p6.get(k)!, 0, W6),
  "W6 lazy": () => block(x6t.lazy(), (k) => p6.get(k)!.lazy(), 0, W6).eval(),
}, QUICK ? 2 : 3);
const gbs = (ms: number) => ((4 * N * 4) / (ms / 1e3) / 1e9).toFixed(2);
console.log("| workload | eager ms | lazy ms | eager / lazy |");
console.log("|---|---:|---:|---:|");
console.log(`| W2 gelu(x·a+b), 4M (GB/s eager ${gbs(t2["W2 eager"]!)}, lazy ${gbs(t2["W2 lazy"]!)}) | ${t2["W2 eager"]!.toFixed(1)} | ${t2["W2 lazy"]!.toFixed(1)} | ${(t2["W2 eager"]! / t2["W2 lazy"]!).toFixed(2)} |`);
console.log(`| W6 GPT block forward, B${B6} | ${t6["W6 eager"]!.toFixed(0)} | ${t6["W6 lazy"]!.toFixed(0)} | ${(t6["W6 eager"]! / t6["W6 lazy"]!).toFixed(2)} |`);
results.timing_ms = { ...t2, ...t6, W6_batch: B6 };

// ---- 4: graph build + plan time per op -------------------------------------------------------------
console.log("\n## Graph build + plan time per op (W7 LoRA step graph, B2)\n");
const small = initGpt(W7);
const ops = with_compiler_options({ fuse: false, patterns: false }, () => compile_plan(loraStepRoots(small, W7, 2)).kernelCount);
let build = 0;
const t4 = await time({
  "build only": () => { build = loraStepRoots(small, W7, 2).length; },
  "build + plan, cache miss": () => { clear_plan_cache(); compile_plan(loraStepRoots(small, W7, 2)); },
  "build + plan, cache hit": () => { compile_plan(loraStepRoots(small, W7, 2)); },
}, QUICK ? 3 : 8);
void build;
console.log(`graph: ${ops} ops (unfused kernels); plan cache after the hit runs: ${planCacheStats.hits} hits, ${planCacheStats.misses} misses\n`);
console.log("| phase | ms per step | µs per op |");
console.log("|---|---:|---:|");
for (const [k, v] of Object.entries(t4)) console.log(`| ${k} | ${v.toFixed(1)} | ${((v * 1e3) / ops).toFixed(1)} |`);
console.log(`| plan alone, miss (miss − build) | ${(t4["build + plan, cache miss"]! - t4["build only"]!).toFixed(1)} | ${(((t4["build + plan, cache miss"]! - t4["build only"]!) * 1e3) / ops).toFixed(1)} |`);
console.log(`| plan alone, hit (hit − build) | ${(t4["build + plan, cache hit"]! - t4["build only"]!).toFixed(1)} | ${(((t4["build + plan, cache hit"]! - t4["build only"]!) * 1e3) / ops).toFixed(1)} |`);
results.plan_time_ms = { ...t4, ops };

if (jsonAt >= 0) writeFileSync(args[jsonAt + 1]!, JSON.stringify(results, null, 2));
