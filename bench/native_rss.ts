/**
 * Memory over many LoRA training steps on the native backend: RSS must stay flat (tensors are
 * GC-managed typed arrays, large ones over pooled native memory returned to the pool when they
 * are collected; kernels' scratch is per-thread and reused; plans share one workspace).
 *
 *   bun bench/native_rss.ts [steps=2000] [--lazy]
 *
 * Model: one LoRA linear layer as in W5 (x [64,1024], W [1024,1024] frozen, r 8, alpha 16) with
 * a GELU and an MSE loss, AdamW on A and B. Prints RSS after warm-up and every 250 steps.
 */
import * as loom from "../src/index.ts";
import { nativeBackend } from "../src/backends/native/backend.ts";

const steps = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 2000);
const lazy = process.argv.includes("--lazy");
if (!nativeBackend()) throw new Error("native backend unavailable");
loom.manual_seed(0);
const x = loom.randn([64, 1024]), W = loom.randn([1024, 1024]).mul(0.03), target = loom.randn([64, 1024]);
const A = loom.randn([8, 1024]).mul(0.03).requires_grad_(true), B = loom.zeros(1024, 8).requires_grad_(true);
const opt = new loom.optim.AdamW([A, B], { lr: 1e-3 });
const P = (t: loom.Tensor): any => (lazy ? t.lazy() : t);
const mb = () => process.memoryUsage().rss / 2 ** 20;

function step(): number {
  const y = loom.gelu(loom.lora_linear(P(x), P(W), P(A), P(B), 2) as any) as any;
  const loss = loom.mse_loss(y, P(target)) as any;
  opt.zero_grad();
  loss.backward();
  opt.step();
  return (lazy ? loss.eval() : loss).item();
}

for (let i = 0; i < 50; i++) step();
Bun.gc(true);
const base = mb();
console.log(`warm-up done: RSS ${base.toFixed(1)} MiB (${lazy ? "lazy" : "eager"}, ${steps} steps)`);
let last = 0;
const t0 = performance.now();
for (let i = 1; i <= steps; i++) {
  last = step();
  if (i % 250 === 0) {
    Bun.gc(true);
    console.log(`step ${i}: loss ${last.toFixed(5)} RSS ${mb().toFixed(1)} MiB (+${(mb() - base).toFixed(1)})`);
  }
}
Bun.gc(true);
const pool = nativeBackend()!.memory.stats();
console.log(`final: RSS ${mb().toFixed(1)} MiB, growth ${(mb() - base).toFixed(1)} MiB over ${steps} steps, ${((performance.now() - t0) / steps).toFixed(2)} ms/step; native pool: ${(pool.live / 2 ** 20).toFixed(1)} MiB in use, ${(pool.cached / 2 ** 20).toFixed(1)} MiB cached`);
