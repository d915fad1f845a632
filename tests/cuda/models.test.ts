/**
 * Whole models on the cuda device: the shared checks of tests/models/device_models.ts (GPT-2 and
 * its LoRA adapter vs PyTorch, lora_linear, AdamW vs the js backend), then which ops ran on the GPU.
 */
import { describe, expect, test } from "bun:test";
import { load_adapter } from "../../src/lora/save_load.ts";
import { GPT2LMHeadModel } from "../../src/models/gpt2.ts";
import { with_execution_mode } from "../../src/nn/execution.ts";
import { CUDA } from "./device.ts";
import { TINY, TINY_ADAPTER, ids, labels } from "../models/helpers.ts";
import { describeModelsOn } from "../models/device_models.ts";

const LONG = 120_000;

describeModelsOn("cuda", CUDA, { timeout: LONG });

describe.if(CUDA)("what ran where", () => {
  test("the GPT-2 LoRA step's matmuls, reductions and fused programs ran on the device; CPU runs are counted by op", async () => {
    const { cudaBackend } = await import("../../src/backends/cuda/index.ts");
    const b = cudaBackend();
    const before = new Map(b.stats.fallbackByOp);
    with_execution_mode("lazy", () => {
      const model = GPT2LMHeadModel.from_pretrained(TINY).train();
      load_adapter(model, TINY_ADAPTER, "default", { is_trainable: true });
      model.to("cuda");
      model.call(ids().to("cuda"), { labels: labels().to("cuda") }).loss!.backward();
    });
    const ran = b.deviceCounters().byOp;
    for (const op of ["matmul", "fused_elementwise"]) expect(ran.get(op) ?? 0).toBeGreaterThan(0);
    expect((ran.get("fused_reduce") ?? 0) + (ran.get("sum") ?? 0)).toBeGreaterThan(0);
    const cpu = [...b.stats.fallbackByOp].filter(([k, n]) => n !== (before.get(k) ?? 0));
    console.warn(`[cuda] CPU runs in the GPT-2 LoRA step: ${cpu.map(([k, n]) => `${k} ×${n - (before.get(k) ?? 0)}`).join("; ") || "none"}`);
    for (const [k] of cpu) expect(k).not.toMatch(/^(matmul|sum|amax|fused_elementwise|fused_reduce):/);
  }, LONG);
});
