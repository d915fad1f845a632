/**
 * DistributedDataParallel on 2 ranks equals one process on the combined batch: each rank also
 * trains a plain copy on the whole batch (the single-process run) and reports the largest
 * parameter difference. Rank 1 starts from perturbed weights, so equality also shows rank 0's
 * broadcast. Cases: SGD on an MLP with 3 buckets; the same with gradient accumulation (no_sync
 * for the first micro-batch); the main job's LoRA GPT-2 step (AdamW, grad clip) with 2 ranks ×
 * batch 2 against batch 4; each on js and native, eager and lazy (lazy: the step stays ONE plan,
 * the bucket all-reduces being instructions of it).
 */
import { describe, expect, test } from "bun:test";
import { MPI_SKIP, runRanks } from "./helpers.ts";

describe.skipIf(MPI_SKIP !== "")(`DistributedDataParallel on 2 ranks${MPI_SKIP ? ` (skipped: ${MPI_SKIP})` : ""}`, () => {
  test("equals the single-process run on the combined batch (MLP, no_sync accumulation, LoRA GPT-2 main-job step)", () => {
    const run = runRanks(2, "ddp.ts");
    expect(run.status).toBe(0);
    for (const res of run.results) {
      const cases = Object.keys(res).filter((k) => k.includes("/"));
      expect(cases).toContain("js/eager");
      expect(cases).toContain("js/lazy");
      for (const c of cases) {
        const r = res[c];
        // float32: the average of two half-batch means vs one mean, a few ulps after 3-4 steps
        expect(r.mlp.diff).toBeLessThan(1e-6);
        expect(r.accumulate.diff).toBeLessThan(1e-6);
        expect(r.lora.diff).toBeLessThan(1e-6);
        expect(r.mlp.buckets).toBe(3); // 256-byte cap over the reversed parameters: [bias 3 + weight 48 floats], [bias 16], [weight 80]
        if (c.endsWith("/lazy")) expect(r.lora.plans_per_step).toEqual([1, 1, 1]);
        if (c.endsWith("/eager")) {
          expect(r.mlp.stats.buckets).toBe(3);
          expect(r.mlp.stats.bytes).toBe(4 * (80 + 16 + 48 + 3));
          expect(r.mlp.stats.wait_ms).toBeGreaterThanOrEqual(0);
        }
      }
      expect(res.unused.name).toBe("LoomValueError");
      expect(res.unused.message).toContain("Expected to have finished reduction in the prior iteration");
      expect(res.unused.message).toContain("unused.bias, unused.weight");
    }
  }, 60_000);
});
