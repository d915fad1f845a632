/**
 * Memory: RSS stays flat over repeated native training steps (a short soak; the 2,000-step
 * LoRA check is bench/native_rss.ts). Bound: < 24 MiB growth after warm-up over 150 steps, not
 * counting the native buffer pool's cache (checked against its own bound).
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { set_default_backend } from "../../src/lazy/device.ts";
import { NATIVE } from "./helpers.ts";

describe.skipIf(!NATIVE)("native memory", () => {
  test("RSS is flat over 150 LoRA steps (eager and lazy)", () => {
    const prev = set_default_backend("native");
    try {
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
      for (let i = 0; i < 30; i++) step(i % 2 === 0);
      Bun.gc(true);
      // the pool's cache of freed blocks is bounded by design (max(32 MiB, bytes in use)): not a leak
      const held = () => process.memoryUsage().rss - NATIVE!.memory.stats().cached;
      const base = held();
      let first = 0, last = 0;
      for (let i = 0; i < 150; i++) {
        last = step(i % 2 === 0);
        if (i === 0) first = last;
      }
      Bun.gc(true);
      const growth = (held() - base) / 2 ** 20;
      const pool = NATIVE!.memory.stats();
      expect(pool.cached).toBeLessThanOrEqual(Math.max(32 * 2 ** 20, pool.live));
      expect(growth).toBeLessThan(24);
      expect(last).toBeLessThan(first); // it trains
    } finally {
      set_default_backend(prev as "js" | "native");
    }
  });
});
