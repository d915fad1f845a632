/**
 * One LoRA fine-tuning step on a tiny random GPT-2, written against the public namespace only
 * (`import * as loom from ...`), so that the Deno tests, the package test (a fresh Bun and Deno
 * project importing the package) and Bun itself run the very same code and can compare results.
 *
 * Run directly (`bun tests/deno/lora_step.ts` / `deno run -A tests/deno/lora_step.ts`) it prints
 * the result as one JSON line.
 */
import type * as Loom from "../../src/index.ts";

/** The outcome of `loraStep`: losses before and after one AdamW step, and what ran it. */
export interface LoraStepResult {
  loss0: number;
  loss1: number;
  /** The backend of device "cpu" ("native" or "js"). */
  backend: string;
  /** Number of trainable (LoRA) parameters. */
  trainable: number;
  /** Sum of |lora_B| after the step (nonzero: the adapter learned something). */
  loraBAbs: number;
}

/** One AdamW step of a rank-2 LoRA (c_attn, c_proj) on a 1-layer GPT-2 with vocab 32, seeded. */
export function loraStep(loom: typeof Loom, mode: "eager" | "lazy" = "eager"): LoraStepResult {
  loom.manual_seed(0);
  const config = new loom.models.GPT2Config({ vocab_size: 32, n_positions: 16, n_embd: 16, n_layer: 1, n_head: 2, resid_pdrop: 0, embd_pdrop: 0, attn_pdrop: 0 });
  const base = new loom.models.GPT2LMHeadModel(config, { generator: new loom.Generator(1) });
  const model = loom.lora.get_peft_model(base, new loom.lora.LoraConfig({ r: 2, lora_alpha: 4, target_modules: ["c_attn", "c_proj"], fan_in_fan_out: true, task_type: "CAUSAL_LM" }));
  const params = model.parameters().filter((p) => p.requires_grad);
  const opt = new loom.optim.AdamW(params, { lr: 0.05 });
  const ids = loom.tensor([[1, 5, 9, 2, 7, 3, 30, 11], [4, 4, 8, 15, 16, 23, 0, 1]], { dtype: "int64" });
  const step = (): number => {
    opt.zero_grad();
    const { loss } = model.forward(ids, { labels: ids });
    loss!.backward();
    opt.step();
    return loss!.item();
  };
  const run = () => {
    const loss0 = step();
    const loss1 = loom.no_grad(() => model.forward(ids, { labels: ids }).loss!.item());
    return { loss0, loss1 };
  };
  const { loss0, loss1 } = mode === "lazy" ? loom.nn.with_execution_mode("lazy", run) : run();
  let loraBAbs = 0;
  for (const [name, p] of model.named_parameters()) if (name.includes("lora_B")) loraBAbs += p.abs().sum().item();
  return { loss0, loss1, backend: loom.runtime_info().cpu_backend, trainable: params.reduce((n, p) => n + p.numel(), 0), loraBAbs };
}

if (import.meta.main) {
  const loom = await import("../../src/index.ts");
  console.log(JSON.stringify(loraStep(loom, (globalThis as { process?: { argv: string[] } }).process?.argv.includes("--lazy") ? "lazy" : "eager")));
}
