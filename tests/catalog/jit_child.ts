/**
 * Child process of tests/catalog/jit.test.ts: runs one small lazy program on the native backend
 * (default tolerance, so the generated kernel is chosen) and prints the jit counters and the
 * values as JSON. The parent sets LOOM_CACHE_DIR (and LOOM_JIT_CC) for it.
 */
import * as loom from "../../src/index.ts";
import { set_default_backend } from "../../src/lazy/device.ts";
import { jitStats } from "../../src/backends/native/jit.ts";

set_default_backend("native");
const n = Number(process.argv[2] ?? 37);
const x = loom.arange(0, n).mul(0.25);
const y = x.lazy().mul(0.5).tanh().add(1).eval();
const impls = x.lazy().mul(0.5).tanh().add(1).plan().instructions.map((i) => i.impl);
console.log(JSON.stringify({ stats: jitStats, impls, values: Array.from(y.dataSync()) }));
