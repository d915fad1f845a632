/**
 * First-run cost of generated kernels on a whole training step: W7 (char-GPT LoRA step, lazy,
 * native) once with an empty kernel cache (compile) and again in a fresh process (disk hits).
 * `LOOM_CACHE_DIR=$(mktemp -d) bun bench/jit_w7.ts` twice.
 */
import * as loom from "../src/index.ts";
import { set_default_backend } from "../src/lazy/device.ts";
import { nativeBackend } from "../src/backends/native/backend.ts";
import { jitStats } from "../src/backends/native/jit.ts";
import { selectionStats } from "../src/scheduler/select.ts";
import { workloads, type T } from "../bench/lib/workloads.ts";

set_default_backend("native");
const done = (y: T) => { const t = y.isLazy ? (y as loom.LazyTensor).eval() : y; nativeBackend()?.synchronize(); return t; };
const id = process.argv[2] ?? "W7";
const w = workloads({ place: (t) => t, done, onePlanStep: true }).find((x) => x[0] === id)!;
const step = w[2](true);
for (let i = 0; i < 3; i++) {
  const t0 = performance.now();
  step();
  console.log(`${id} step ${i}: ${(performance.now() - t0).toFixed(0)} ms`);
}
const jit = [...selectionStats.chosen].filter(([k]) => k.includes(".jit")).map(([k, v]) => `${k} ×${v}`).join(", ");
console.log(`generated programs ${jitStats.programs}, compiles ${jitStats.compiles} (${jitStats.compileMs.toFixed(0)} ms), disk hits ${jitStats.diskHits}; chosen: ${jit}`);
