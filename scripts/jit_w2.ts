/**
 * W2 (gelu(x·a + b), 4M float32, lazy, native) with the exact kernels and with generated kernels,
 * plus the first-compile cost: `bun scripts/jit_w2.ts` (LOOM_CACHE_DIR to time a cold cache).
 */
import * as loom from "../src/index.ts";
import { set_default_backend } from "../src/lazy/device.ts";
import { nativeBackend } from "../src/backends/native/backend.ts";
import { jitStats } from "../src/backends/native/jit.ts";

set_default_backend("native");
const N = 4 * 1024 * 1024;
const [x, a, b] = [loom.randn([N]), loom.randn([N]), loom.randn([N])];
const step = () => {
  const y = loom.gelu(x.lazy().mul(a.lazy()).add(b.lazy())).eval();
  nativeBackend()!.synchronize();
  return y;
};
for (const [name, tol] of [["exact", "exact"], ["jit (default tolerance)", { atol: 1e-5, rtol: 1.3e-6 }]] as const) {
  loom.set_compiler_options({ tolerance: tol });
  const t0 = performance.now();
  step();
  const first = performance.now() - t0;
  const ts: number[] = [];
  for (let i = 0; i < 15; i++) {
    const s = performance.now();
    step();
    ts.push(performance.now() - s);
  }
  ts.sort((p, q) => p - q);
  console.log(`${name}: first ${first.toFixed(1)} ms, median ${ts[7]!.toFixed(2)} ms, min ${ts[0]!.toFixed(2)} ms`);
}
console.log(`jit: ${jitStats.compiles} compile(s), ${jitStats.compileMs.toFixed(0)} ms; ${jitStats.diskHits} disk hits`);
