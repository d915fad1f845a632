/**
 * The RSS soak of memory.test.ts, run in a fresh process (the test suite's own heap would make
 * RSS noise larger than the bound): LoRA training steps alternating eager and lazy on native.
 * Prints one JSON line {growth_mib, first, last, cached, live}; growth is RSS after a forced
 * collection minus the native buffer pool's cache (bounded by design), end minus start.
 *   bun tests/native/rss_soak.ts [steps=150]
 */
import * as loom from "../../src/index.ts";
import { nativeBackend } from "../../src/backends/native/backend.ts";
import { set_default_backend } from "../../src/lazy/device.ts";

const steps = Number(process.argv[2] ?? 150);
const nb = nativeBackend()!;
set_default_backend("native");
loom.manual_seed(0);
const x = loom.randn([32, 256]), W = loom.randn([256, 256]).mul(0.05), target = loom.randn([32, 256]);
const A = loom.randn([4, 256]).mul(0.05).requires_grad_(true), B = loom.zeros(256, 4).requires_grad_(true);
const step = (lazy: boolean) => {
  const P = (t: loom.Tensor): any => (lazy ? t.lazy() : t);
  const y = loom.gelu(loom.lora_linear(P(x), P(W), P(A), P(B), 2) as any) as any;
  const loss = loom.mse_loss(y, P(target)) as any;
  A.grad = null;
  B.grad = null;
  loss.backward();
  loom.no_grad(() => { A.sub_(A.grad!.mul(0.1)); B.sub_(B.grad!.mul(0.1)); });
  return (lazy ? loss.eval() : loss).item();
};
const held = () => {
  Bun.gc(true);
  return process.memoryUsage().rss - nb.memory.stats().cached;
};
for (let i = 0; i < 30; i++) step(i % 2 === 0);
const base = held();
let first = 0, last = 0;
for (let i = 0; i < steps; i++) {
  last = step(i % 2 === 0);
  if (i === 0) first = last;
}
const growth = (held() - base) / 2 ** 20;
const pool = nb.memory.stats();
console.log(JSON.stringify({ growth_mib: growth, first, last, cached: pool.cached, live: pool.live }));
