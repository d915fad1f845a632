/**
 * W2 (gelu(x·a + b), 4M float32, lazy, native) with the exact kernels and with generated kernels,
 * plus the first-compile cost: `bun bench/jit_w2.ts` (LOOM_CACHE_DIR to time a cold cache).
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
const MODES = [["exact", "exact"], ["generated (default tolerance)", { atol: 1e-5, rtol: 1.3e-6 }]] as const;
const times: number[][] = MODES.map(() => []);
MODES.forEach(([name, tol]) => {
  loom.set_compiler_options({ tolerance: tol });
  const t0 = performance.now();
  step();
  console.log(`${name}: first run ${(performance.now() - t0).toFixed(1)} ms`);
});
// alternate the modes so that both see the same machine load
for (let i = 0; i < 20; i++) {
  MODES.forEach(([, tol], k) => {
    loom.set_compiler_options({ tolerance: tol });
    const s = performance.now();
    step();
    times[k]!.push(performance.now() - s);
  });
}
MODES.forEach(([name], k) => {
  const ts = times[k]!.sort((p, q) => p - q);
  console.log(`${name}: median ${ts[10]!.toFixed(2)} ms, min ${ts[0]!.toFixed(2)} ms (20 runs, ${(16 * N / ts[10]! / 1e6).toFixed(1)} GB/s at the median)`);
});
console.log(`generated kernels: ${jitStats.compiles} compile(s), ${jitStats.compileMs.toFixed(0)} ms; ${jitStats.diskHits} disk hits`);
