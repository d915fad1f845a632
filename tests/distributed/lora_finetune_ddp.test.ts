/**
 * The main job distributed: `mpirun -np 2 bun examples/lora_finetune.ts --ddp` (2 ranks × batch
 * 4) trains the same LoRA weights as `finetune()` in one process with batch 8, within float32
 * tolerance, and only rank 0 logs and writes the adapter.
 */
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { pretrain } from "../../examples/pretrain_char_gpt.ts";
import { launch } from "../../src/distributed/launch.ts";
import { load_file } from "../../src/io/index.ts";
import { tmp } from "../models/helpers.ts";
import { MPI_SKIP } from "./helpers.ts";

test.skipIf(MPI_SKIP !== "")(`lora_finetune.ts --ddp on 2 ranks × batch 4 == one process × batch 8${MPI_SKIP ? ` (skipped: ${MPI_SKIP})` : ""}`, () => {
  const dir = tmp("ddp-main-job");
  const ckpt = join(dir, "char-gpt");
  pretrain({ steps: 2, batch_size: 4, block_size: 16, n_embd: 32, n_layer: 1, n_head: 2, eval_every: 2, eval_batches: 1, out: ckpt, verbose: false });
  const example = join(import.meta.dir, "../../examples/lora_finetune.ts");
  const hp = ["--steps", "4", "--batch-size", "8", "--block-size", "16", "--rank", "4", "--alpha", "8", "--lr", "3e-2", "--eval-every", "4", "--checkpoint", ckpt];
  // both runs in fresh processes: the LoRA A initialization draws from the default generator
  const one = spawnSync(process.execPath, [example, ...hp, "--out", join(dir, "single")], { encoding: "utf8", timeout: 60_000 });
  expect(one.status).toBe(0);
  const run = launch(2, example, ["--ddp", ...hp, "--out", join(dir, "ddp")], { timeout_ms: 60_000 });
  expect(run.status).toBe(0);
  // rank 0 alone logs (and saves): each line once
  expect(run.stdout.split("saved the adapter (PEFT format)").length - 1).toBe(1);
  expect(run.stdout.split("validation loss on female first names").length - 1).toBe(1);
  expect(run.stdout).toContain("2 ranks");
  const single = load_file(join(dir, "single", "adapter_model.safetensors")).tensors;
  const ddp = load_file(join(dir, "ddp", "adapter_model.safetensors")).tensors;
  const keys = [...single.keys()].sort();
  expect([...ddp.keys()].sort()).toEqual(keys);
  expect(keys.length).toBe(4); // lora_A and lora_B of c_attn and c_proj, one layer
  let maxDiff = 0, maxMoved = 0;
  for (const k of keys) {
    const a = single.get(k)!.data, b = ddp.get(k)!.data;
    for (let i = 0; i < a.length; i++) maxDiff = Math.max(maxDiff, Math.abs(Number(a[i]) - Number(b[i])));
    if (k.includes("lora_B")) for (let i = 0; i < a.length; i++) maxMoved = Math.max(maxMoved, Math.abs(Number(a[i]))); // B starts at 0
  }
  expect(maxMoved).toBeGreaterThan(1e-2); // training moved the weights...
  expect(maxDiff).toBeLessThan(1e-5); // ...and the two runs agree to float32 rounding
  rmSync(dir, { recursive: true });
}, 90_000);
