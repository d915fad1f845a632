/**
 * W1–W9 of shared/bench/README.md on the webgpu device (lazy: compiled, fused plans; eager: op by
 * op), next to PyTorch (CPU) measured in the same run by shared/bench/ref_torch.py.
 *
 *   bun bench/webgpu.ts                  # all workloads (lavapipe: slow, see --only)
 *   bun bench/webgpu.ts --only W1a,W8    # subset (prefix match)
 *   bun bench/webgpu.ts --no-torch       # Loom only
 *   bun bench/webgpu.ts --only W7,W9 --warmup 1 --min-reps 1   # the model workloads on lavapipe (minutes per step)
 *
 * Every timed iteration waits until the GPU has finished (queue.onSubmittedWorkDone after the
 * realize's submit), so the number is kernel time plus dispatch overhead, never a submit alone.
 * On a machine without a GPU this is Mesa's lavapipe (Vulkan on the CPU): the figures measure
 * the WebGPU path's overheads and lavapipe's code generation, not a GPU.
 */
import * as loom from "../src/index.ts";
import { webgpuBackend } from "../src/backends/webgpu/index.ts";
import { cli, measure, selected } from "./lib/harness.ts";
import { torchRef } from "./lib/torch_ref.ts";
import { workloads, type T } from "./lib/workloads.ts";

const MIN_REPS = cli.minReps(5);
const TORCH = !cli.flag("--no-torch");

const status = await loom.init_webgpu();
if (!status.available) {
  console.log(`webgpu unavailable: ${status.reason}`);
  process.exit(0);
}
const gpu = webgpuBackend();

const WORKLOADS = workloads({
  place: (t) => t.to("webgpu"),
  done: (y) => (y.isLazy ? (y as loom.LazyTensor).eval() : y),
  onePlanStep: false,
});

console.log(`# Loom bench on webgpu: ${status.device}`);
const MODES = [{ name: "webgpu lazy", lazy: true }, { name: "webgpu eager", lazy: false }];
const rows = ["| id | workload | PyTorch CPU ms | " + MODES.map((m) => `${m.name} ms (speedup)`).join(" | ") + " | derived (lazy) |", "|---|---|---:|" + MODES.map(() => "---:").join("|") + "|---|"];
for (const [id, name, make, derive] of WORKLOADS) {
  if (!selected(id)) continue;
  const ref = TORCH ? torchRef(id, cli.minTime) : null;
  const cells: string[] = [];
  let lazyMs = 0;
  for (const m of MODES) {
    try {
      const s0 = gpu.stats();
      const r = measure(make(m.lazy), MIN_REPS, () => gpu.synchronizeSync());
      const s1 = gpu.stats();
      if (m.lazy) lazyMs = r.ms;
      cells.push(`${r.ms.toFixed(2)}${ref ? ` (${(ref / r.ms).toFixed(2)}×)` : ""}`);
      console.log(JSON.stringify({ id, mode: m.name, ms: +r.ms.toFixed(3), reps: r.reps, torch_ms: ref, speedup: ref ? +(ref / r.ms).toFixed(3) : null, submits: s1.submits - s0.submits, dispatches: s1.dispatches - s0.dispatches }));
    } catch (e) {
      cells.push(`error: ${(e as Error).message.slice(0, 60)}`);
    }
  }
  rows.push(`| ${id} | ${name} | ${ref?.toFixed(3) ?? "—"} | ${cells.join(" | ")} | ${lazyMs ? derive(lazyMs) : ""} |`);
}
console.log("\n" + rows.join("\n"));
