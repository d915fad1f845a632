/**
 * A/B of the softmax rows (W3 [4096,1024], W10b [8,64] read on the host) in ONE process,
 * variants alternating round by round, so a loaded machine slows each alike:
 * - eager op by op (the decomposition: what eager softmax ran before eager_fused.ts; reached
 *   with `patterns: false`), eager fused (the catalog's kernel at the default tolerance), lazy;
 * - W3 kernels forced through the catalog: native.fused_softmax.f32 (double exp) and .f32x.
 * Prints the median per call of each variant, the copy roof's equivalent (32 MB moved for W3)
 * and the 1-minute load average. Usage: bun bench/softmax_ab.ts [--rounds 15]
 */
import { loadavg } from "node:os";
import * as loom from "../src/index.ts";
import { nativeBackend } from "../src/backends/native/backend.ts";
import { set_default_backend } from "../src/lazy/device.ts";
import { cli } from "./lib/harness.ts";

set_default_backend("native");
const ROUNDS = Number(cli.opt("--rounds", "15"));
const nb = nativeBackend()!;
const med = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1]!;

type Variant = { name: string; run: () => void; perRound: number };
function variants(shape: number[], host: boolean): Variant[] {
  const x = loom.randn(shape);
  const fin = (y: loom.Tensor | loom.LazyTensor) => {
    const t = y.isLazy ? (y as loom.LazyTensor).eval() : (y as loom.Tensor);
    if (host) t.dataSync();
    else nb.synchronize();
  };
  const reps = host ? 2000 : 20;
  return [
    { name: "eager op by op", perRound: reps, run: () => loom.with_compiler_options({ patterns: false }, () => fin(x.softmax(-1))) },
    { name: "eager fused", perRound: reps, run: () => fin(x.softmax(-1)) },
    { name: "lazy", perRound: reps, run: () => fin(x.lazy().softmax(-1)) },
  ];
}

function ab(title: string, vs: Variant[], bytes: number) {
  const times = vs.map(() => [] as number[]);
  for (const v of vs) for (let i = 0; i < 3; i++) v.run(); // warm-up: plans cached, kernels built
  for (let r = 0; r < ROUNDS; r++) {
    vs.forEach((v, k) => {
      const t0 = performance.now();
      for (let i = 0; i < v.perRound; i++) v.run();
      times[k]!.push((performance.now() - t0) / v.perRound);
    });
  }
  console.log(`${title} (load ${loadavg().map((l) => l.toFixed(2)).join(" ")})`);
  vs.forEach((v, k) => {
    const ms = med(times[k]!);
    const gbs = bytes ? `, ${(bytes / ms / 1e6).toFixed(1)} GB/s` : "";
    console.log(`  ${v.name.padEnd(16)} ${ms < 0.1 ? `${(ms * 1e3).toFixed(2)} µs` : `${ms.toFixed(3)} ms`} (min ${(Math.min(...times[k]!) * (ms < 0.1 ? 1e3 : 1)).toFixed(3)})${gbs}`);
  });
}

ab("W3 softmax [4096,1024]", variants([4096, 1024], false), 2 * 4096 * 1024 * 4);
ab("W10b softmax [8,64], read on the host", variants([8, 64], true), 0);
