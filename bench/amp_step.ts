/**
 * Half precision against float32 on the native backend, written as users write it: an MLP
 * (Linear 256 -> ReLU -> Linear 10, batch 64) trained with AdamW, in float32, pure bfloat16
 * (`model.to("bfloat16")`), bf16 autocast, and fp16 autocast + GradScaler; eager and lazy. Prints
 * ms per step (best of 5 rounds of 10 steps) and the ratio to float32 in the same mode. A ratio of
 * Loom to itself: no PyTorch reference. Run on a quiet machine (load average < 0.5).
 *
 *   bun bench/amp_step.ts
 */
import * as loom from "../src/index.ts";
import { nn, optim, amp } from "../src/index.ts";
import { set_default_backend } from "../src/lazy/device.ts";
set_default_backend("native");
const D = 256;
type Cfg = "f32" | "bf16-pure" | "bf16-autocast" | "fp16-autocast+scaler";
function setup(mode: "eager" | "lazy", cfg: Cfg) {
  loom.manual_seed(0);
  const model = new nn.Sequential(new nn.Linear(D, D), new nn.ReLU(), new nn.Linear(D, 10));
  if (cfg === "bf16-pure") model.to("bfloat16");
  const opt = new optim.AdamW(model.parameters(), { lr: 1e-3 });
  const x = loom.randn([64, D]).to(cfg === "bf16-pure" ? "bfloat16" : "float32"), y = loom.randint(0, 10, [64]);
  const scaler = cfg.includes("scaler") ? new amp.GradScaler() : null;
  const ac = cfg.includes("autocast") ? { device_type: "cpu" as const, dtype: (cfg.startsWith("fp16") ? "float16" : "bfloat16") as any } : { device_type: "cpu" as const, enabled: false };
  const step = () => nn.with_execution_mode(mode, () => {
    opt.zero_grad();
    const loss = loom.autocast(ac, () => nn.functional.cross_entropy(model.call(x), y));
    if (scaler) { scaler.scale(loss).backward(); scaler.step(opt); scaler.update(); } else { loss.backward(); opt.step(); }
    return loss.item();
  });
  for (let i = 0; i < 3; i++) step();
  return step;
}
const cfgs: Cfg[] = ["f32", "bf16-pure", "bf16-autocast", "fp16-autocast+scaler"];
for (const mode of ["eager", "lazy"] as const) {
  const steps = cfgs.map((c) => setup(mode, c));
  const best = cfgs.map(() => Infinity);
  for (let round = 0; round < 5; round++) cfgs.forEach((_, i) => {
    const t0 = performance.now();
    for (let k = 0; k < 10; k++) steps[i]!();
    best[i] = Math.min(best[i]!, (performance.now() - t0) / 10);
  });
  cfgs.forEach((c, i) => console.log(mode.padEnd(5), c.padEnd(22), best[i]!.toFixed(2), "ms/step (min of 5x10)", (best[i]! / best[0]!).toFixed(2) + "x"));
}
