/**
 * Where a W7u step's time goes (shared/bench/README.md W7u: the natural lazy LoRA step of the W7
 * model on native): native kernel wall time per step by opcode (the shim's nsByOp counters),
 * against the step's wall time, and the GEMM share with its throughput. A roofline for the W7u
 * target: the products are about 95 GFLOP per step (forward 2·N·T over the 10.6M block weights
 * and 2048 tokens, the input gradients again, attention's 6 batched products per layer; the
 * frozen base weights get no weight gradients), so the GEMM time bounds the step from below.
 *
 *   bun bench/w7u_kernels.ts [--steps 5]
 */
import { nativeBackend } from "../src/backends/native/backend.ts";
import { set_default_backend } from "../src/lazy/device.ts";
import { cli } from "./lib/harness.ts";
import { userGptStep } from "./lib/workloads.ts";

const STEPS = Number(cli.opt("--steps", "5"));
const nb = nativeBackend();
if (!nb) throw new Error("[w7u_kernels] the native backend is unavailable");
set_default_backend("native");
const { step } = userGptStep((t) => t, true);
for (let i = 0; i < 3; i++) step();
const c0 = nb.shimCounters();
const t0 = performance.now();
for (let i = 0; i < STEPS; i++) step();
const wall = (performance.now() - t0) / STEPS;
const c1 = nb.shimCounters();
const rows = [...c1.nsByOp].map(([k, ns]) => [k, (ns - (c0.nsByOp.get(k) ?? 0)) / STEPS / 1e6, ((c1.byOp.get(k) ?? 0) - (c0.byOp.get(k) ?? 0)) / STEPS] as const)
  .filter((r) => r[2] > 0).sort((a, b) => b[1] - a[1]);
const kernels = rows.reduce((s, r) => s + r[1], 0);
const GEMM = new Set(["matmul", "lora_linear", "fused_matmul", "fused_lora_linear", "fused_attention"]);
const gemm = rows.filter((r) => GEMM.has(r[0])).reduce((s, r) => s + r[1], 0);
// products per step: 6 layers × (qkv 384→1152, proj 384→384, fc 384→1536, proj 1536→384) over
// 2048 tokens, forward and input gradient; attention 2 products forward, 4 backward per layer
const T = 16 * 128, D = 384, L = 6;
const linear = 2 * T * D * (3 * D + D + 4 * D + 4 * D) * L;
const attention = 2 * 16 * 6 * 128 * 128 * 64 * L;
const gflop = (2 * linear + 6 * attention + 2 * 2 * T * D * 96) / 1e9;
console.log(`W7u lazy, native: ${wall.toFixed(1)} ms/step wall, ${kernels.toFixed(1)} ms in kernels`);
console.log(`products: ${gemm.toFixed(1)} ms (${(100 * gemm / wall).toFixed(0)}% of the step), ~${gflop.toFixed(1)} GFLOP -> ${(gflop / gemm * 1e3).toFixed(0)} GFLOP/s`);
for (const [k, ms, n] of rows.slice(0, 12)) console.log(`  ${k.padEnd(24)} ${ms.toFixed(2).padStart(8)} ms ${n.toFixed(0).padStart(5)} calls`);
