/**
 * The main job with `--quantize nf4` (QLoRA) at toy size: pretrain a tiny char GPT (n_embd 64, so
 * every linear's K is a multiple of NF4's block of 64), compress its linear layers to NF4, LoRA
 * fine-tune on the first-names corpus. The validation loss falls; the PEFT adapter reloads onto a
 * fresh NF4 base to identical logits, and onto the float32 base with a validation loss close to the
 * NF4 one; the compressed layers take ≤ 0.3× their float32 bytes.
 */
import { expect, test } from "bun:test";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { finetune } from "../../examples/lora_finetune.ts";
import { pretrain } from "../../examples/pretrain_char_gpt.ts";
import { tmp } from "../models/helpers.ts";

test("QLoRA main job (nf4): validation loss falls; adapter reloads on NF4 and on the float32 base", () => {
  const dir = tmp("main-job-qlora");
  const ckpt = join(dir, "char-gpt"), out = join(dir, "adapter");
  pretrain({ steps: 30, batch_size: 8, block_size: 16, n_embd: 64, n_layer: 1, n_head: 2, lr: 1e-2, eval_every: 30, eval_batches: 2, out: ckpt, verbose: false });
  const r = finetune({
    steps: 40, batch_size: 8, block_size: 16, rank: 4, lora_alpha: 8, lr: 3e-2, eval_every: 40, eval_batches: 2,
    checkpoint: ckpt, out, verbose: false, quantize: "nf4",
  });
  expect(r.val_after).toBeLessThan(r.val_before - 0.3);
  expect(r.reload_max_abs_diff).toBe(0); // same deterministic NF4 quantization, same adapter
  expect(r.merge_max_abs_diff).toBeGreaterThan(0); // merged = requantized W + ΔW: one more rounding
  expect(r.merge_max_abs_diff).toBeLessThan(0.5);
  expect(r.float_base_val_after).toBeDefined();
  expect(Math.abs(r.float_base_val_after! - r.val_after)).toBeLessThan(0.15);
  expect(r.float_base_val_after!).toBeLessThan(r.val_before - 0.2);
  expect(r.quantized_bytes!.after).toBeLessThanOrEqual(0.3 * r.quantized_bytes!.before);
  const config = JSON.parse(readFileSync(join(out, "adapter_config.json"), "utf8"));
  expect(config).toMatchObject({ peft_type: "LORA", r: 4, target_modules: ["attn.c_attn", "attn.c_proj"], fan_in_fan_out: true });
  rmSync(dir, { recursive: true });
}, 90_000);
