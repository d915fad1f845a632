/**
 * W7v: W7u (shared/bench/README.md) on batches of varying length, as training on real text with
 * length bucketing runs: the same model, LoRA and AdamW, batch 16, one step per batch, the
 * sequence length T taking 12 distinct values in [16, 128] (LENGTHS), the list run twice. Issue
 * 11's "training on batches of varying length compiles once per symbol binding range".
 *
 * Loom modes, each in a fresh process on the native backend:
 *   symbolic  lazy, each batch's input and targets marked `mark_dynamic(x, 1, Dim("seq", {max: 128}))`
 *   fixed     lazy, no marks: each new length compiles its own plan
 *   eager     op by op
 * and PyTorch eager on the same model and lengths (bench/ref_torch_w7v.py), all in one run.
 * Reported per mode: the first pass over the lengths (compiles included), the second pass
 * (every plan cached), plan compiles, tokens/s of the second pass.
 *
 *   bun bench/w7v.ts                 # all modes, then PyTorch
 *   bun bench/w7v.ts --modes symbolic,fixed --no-torch
 */
import * as loom from "../src/index.ts";
import { set_default_backend } from "../src/lazy/device.ts";
import { with_execution_mode } from "../src/nn/execution.ts";
import { planCacheStats } from "../src/scheduler/compile.ts";
import { cli } from "./lib/harness.ts";
import { w7Model } from "./lib/workloads.ts";
import { TORCH_ENV } from "./lib/torch_ref.ts";
import { resolve } from "node:path";

/** The 12 lengths of one pass, in the order they come (shared with ref_torch_w7v.py). */
export const LENGTHS = [64, 100, 37, 128, 80, 23, 112, 50, 96, 16, 71, 120];
const V = 96, BATCH = 16;

interface Result { id: "W7v"; impl: string; first_ms: number; second_ms: number; compiles: number; tokens_per_s: number; loss: number }

function child(mode: string): Result {
  set_default_backend("native");
  const model = w7Model();
  loom.lora.get_peft_model(model, new loom.lora.LoraConfig({
    r: 8, lora_alpha: 16, lora_dropout: 0, target_modules: ["attn.c_attn", "attn.c_proj"], fan_in_fan_out: true, bias: "none", task_type: "CAUSAL_LM",
  }));
  const opt = new loom.optim.AdamW(model.parameters().filter((p) => p.requires_grad), { lr: 1e-3 });
  model.train();
  const seq = new loom.Dim("seq", { max: 128 });
  loom.manual_seed(1);
  const batches = LENGTHS.map((T) => [loom.randint(0, V, [BATCH, T]), loom.randint(0, V, [BATCH, T])] as const);
  let loss = 0;
  const pass = () => {
    const t0 = performance.now();
    for (const [x, y] of batches) {
      if (mode === "symbolic") {
        loom.mark_dynamic(x, 1, seq);
        loom.mark_dynamic(y, 1, seq);
      }
      with_execution_mode(mode === "eager" ? "eager" : "lazy", () => {
        const out = model.call(x, { targets: y });
        opt.zero_grad();
        out.loss!.backward();
        opt.step();
        loss = out.loss!.item();
      });
    }
    return performance.now() - t0;
  };
  const m0 = planCacheStats.misses;
  const first = pass();
  const second = pass();
  const tokens = BATCH * LENGTHS.reduce((a, b) => a + b, 0);
  return { id: "W7v", impl: `loom ${mode}`, first_ms: first, second_ms: second, compiles: planCacheStats.misses - m0, tokens_per_s: tokens / second * 1e3, loss };
}

const mode = cli.opt("--child", "");
if (mode) console.log(JSON.stringify(child(mode)));
else {
  const modes = cli.opt("--modes", "symbolic,fixed,eager").split(",");
  const rows: Result[] = [];
  const run = (argv: string[], env: Record<string, string> = {}) => {
    const r = Bun.spawnSync(argv, { env: { ...process.env, ...env }, stdout: "pipe", stderr: "inherit" });
    const line = r.stdout.toString().split("\n").find((l) => l.startsWith("{"));
    if (line) rows.push(JSON.parse(line));
  };
  console.log(`load average at start: ${(await Bun.file("/proc/loadavg").text()).split(" ").slice(0, 3).join(" ")}`);
  for (const m of modes) run([process.execPath, import.meta.path, "--child", m]);
  if (!cli.flag("--no-torch")) run(["/usr/bin/python3", resolve(import.meta.dir, "ref_torch_w7v.py"), "--lengths", LENGTHS.join(",")], TORCH_ENV);
  for (const r of rows) {
    console.log(`${r.impl.padEnd(16)} first pass ${r.first_ms.toFixed(0).padStart(6)} ms  second pass ${r.second_ms.toFixed(0).padStart(6)} ms  ${r.tokens_per_s.toFixed(0).padStart(6)} tok/s  compiles ${r.compiles}  loss ${r.loss.toFixed(4)}`);
  }
  console.log(`load average at end: ${(await Bun.file("/proc/loadavg").text()).split(" ").slice(0, 3).join(" ")}`);
}
