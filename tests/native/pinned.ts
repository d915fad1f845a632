/**
 * Run by runtime.test.ts under `taskset -c 0` (every thread on one CPU, so the pool's threads
 * are oversubscribed): times a loop of small parallel kernels and prints {"ms"} on the last line.
 */
import * as loom from "../../src/index.ts";
import { nativeBackend } from "../../src/backends/native/backend.ts";
import { set_default_backend } from "../../src/lazy/device.ts";

if (!nativeBackend()) throw new Error("native backend unavailable");
set_default_backend("native");
loom.manual_seed(0);
const x = loom.randn([256, 1024]);
const run = (n: number) => { for (let i = 0; i < n; i++) loom.softmax(x, -1); };
run(20); // warm-up
const t0 = performance.now();
run(300);
console.log(JSON.stringify({ ms: performance.now() - t0 }));
