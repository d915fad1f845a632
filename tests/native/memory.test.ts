/**
 * Memory: RSS stays flat over repeated native training steps (a short soak in a fresh process,
 * tests/native/rss_soak.ts; the 2,000-step LoRA check is bench/native_rss.ts). Bound: < 24 MiB
 * growth over 150 steps after warm-up, not counting the native buffer pool's cache, which is
 * checked against its own bound (max(32 MiB, bytes in use)).
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { NATIVE } from "./helpers.ts";

describe.skipIf(!NATIVE)("native memory", () => {
  test("RSS is flat over 150 LoRA steps (eager and lazy)", () => {
    const r = Bun.spawnSync([process.execPath, join(import.meta.dir, "rss_soak.ts"), "150"], { stdout: "pipe", stderr: "pipe" });
    const line = r.stdout.toString().trim().split("\n").pop() ?? "";
    if (!line.startsWith("{")) throw new Error(`soak failed: ${r.stderr.toString().slice(-2000)}`);
    const s = JSON.parse(line) as { growth_mib: number; first: number; last: number; cached: number; live: number };
    expect(s.growth_mib).toBeLessThan(24);
    expect(s.cached).toBeLessThanOrEqual(Math.max(32 * 2 ** 20, s.live));
    expect(s.last).toBeLessThan(s.first); // it trains
  }, 60000);
});
