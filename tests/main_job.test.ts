/**
 * The main job (examples/lora_finetune.ts) end to end at toy size: pretrain a tiny char GPT on
 * Moby-Dick, LoRA-fine-tune it on the first-names corpus, and check what `npm start` prints:
 * the losses fall, the adapter is saved in PEFT's format and reloads to identical logits, and
 * merged and unmerged models agree.
 */
import { expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { finetune, write_plots } from "../examples/lora_finetune.ts";
import { check_loss_svg } from "./svg_check.ts";
import { pretrain } from "../examples/pretrain_char_gpt.ts";
import { read_header_file } from "../src/io/index.ts";
import { tmp } from "./models/helpers.ts";

test("pretrain + LoRA fine-tune: losses fall, PEFT adapter saved and reloaded, merged == unmerged, loss curve drawn", async () => {
  const dir = tmp("main-job");
  const ckpt = join(dir, "char-gpt"), out = join(dir, "adapter");
  const pre = pretrain({ steps: 40, batch_size: 8, block_size: 16, n_embd: 32, n_layer: 1, n_head: 2, lr: 1e-2, eval_every: 40, eval_batches: 2, out: ckpt, verbose: false });
  expect(pre.val_history.at(-1)![1]).toBeLessThan(pre.val_history[0]![1] - 0.8); // 4.5 -> ~3.2
  for (const f of ["config.json", "model.safetensors", "vocab.json"]) expect(existsSync(join(ckpt, f))).toBe(true);

  const r = finetune({ steps: 40, batch_size: 8, block_size: 16, rank: 4, lora_alpha: 8, lr: 3e-2, eval_every: 40, eval_batches: 2, checkpoint: ckpt, out, verbose: false });
  expect(r.val_after).toBeLessThan(r.val_before - 0.3); // 3.98 -> 3.48
  const first = r.train_losses.slice(0, 5).reduce((a, b) => a + b) / 5, last = r.train_losses.slice(-5).reduce((a, b) => a + b) / 5;
  expect(last).toBeLessThan(first);
  expect(r.reload_max_abs_diff).toBe(0);
  expect(r.merge_max_abs_diff).toBeLessThan(1e-4);
  expect(r.sample_after.length).toBe(120);
  const header = read_header_file(join(out, "adapter_model.safetensors"));
  expect([...header.tensors.keys()]).toContain("base_model.model.transformer.h.0.attn.c_proj.lora_B.weight");
  const config = JSON.parse(readFileSync(join(out, "adapter_config.json"), "utf8"));
  expect(config).toMatchObject({ peft_type: "LORA", r: 4, lora_alpha: 8, target_modules: ["attn.c_attn", "attn.c_proj"], fan_in_fan_out: true, task_type: "CAUSAL_LM" });
  // step 5: the loss-curve SVG next to the adapter (the checkpoint existed: no pretraining curve)
  const paths = await write_plots(r, { out, checkpoint: ckpt, rank: 4, verbose: false });
  expect(paths).toEqual([join(out, "loss_curve.svg")]);
  check_loss_svg(readFileSync(paths[0]!, "utf8"), ["train (smoothed)", "validation"], [40, 2]);
  rmSync(dir, { recursive: true });
}, 60_000);
