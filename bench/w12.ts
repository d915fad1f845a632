/**
 * W12 (issue 12): decode-size matmul, batch 1: x [1, 4096] times W [4096, 4096] with W packed as
 * Q8_0, Q4_0 and NF4 (loom.quantized_linear, the fused dequantize-matmul: the dense weight is
 * never built), against Loom's float32 GEMV (x @ Wᵀ, BLAS sgemv) and PyTorch's float32
 * F.linear (bench/ref_torch_w12.py, a server process), all in the same run and alternating:
 * every round times each implementation once (the order reversed every other round), and the
 * table gives medians over the rounds. At batch 1 the weight read dominates, so each line also
 * gives GB/s of weight bytes, next to a STREAM-like copy of 64 MiB float32 measured in the same
 * rounds (bytes read + written): memcpy from this process (TypedArray.set, one thread; Loom's
 * own elementwise copy runs through its double-precision interpreter and is no bandwidth
 * measure) and PyTorch's copy_ (2 threads). The % column is against the faster of the two.
 *
 *   bun bench/w12.ts                      # 9 rounds, with PyTorch
 *   bun bench/w12.ts --rounds 5 --no-torch
 *   bun bench/w12.ts --json               # JSON lines only
 *
 * Targets (issue 12): Q4_0 at least 2.5× faster than the float32 GEMV, Q8_0 at least 1.6×.
 * Weights are random packed bytes with sane fp16 scales (tests/quantized/helpers.ts): a kernel's
 * speed does not depend on the values.
 */
import * as loom from "../src/index.ts";
import { set_default_backend } from "../src/lazy/device.ts";
import { nativeBackend } from "../src/backends/native/backend.ts";
import { cli, median } from "./lib/harness.ts";
import { alternatingRounds, loadavg, TorchServer, type RoundLine } from "./lib/rounds.ts";
import { operands, randomPacked } from "../tests/quantized/helpers.ts";
import type { QuantFormat } from "../src/graph/ops/quantized.ts";
import { resolve } from "node:path";
import { existsSync } from "node:fs";

const N = 4096, K = 4096;
const ROUNDS = Number(cli.opt("--rounds", "9"));
const TORCH = !cli.flag("--no-torch");
const JSON_ONLY = cli.flag("--json");
const log = (s: string) => { if (!JSON_ONLY) console.log(s); };
const COPY_ELEMS = 16 * 1024 * 1024;
const STREAM_JS = "STREAM copy: memcpy (TypedArray.set, 1 thread, 64 MiB)";
const STREAM_TORCH = "STREAM copy: torch copy_ (2 threads, 64 MiB)";

if (!nativeBackend()) throw new Error("[w12] the native backend is unavailable");
set_default_backend("native");

const cpu = (await Bun.file("/proc/cpuinfo").text()).match(/model name\s*:\s*(.*)/)?.[1] ?? "?";
const load0 = loadavg();
log(`W12: x [1, ${K}] × W [${N}, ${K}]ᵀ, batch 1, native backend (${nativeBackend()!.lib.opcodes.size} opcodes), ${ROUNDS} rounds; ${cpu}; load average ${load0}`);

loom.manual_seed(0);
const x = loom.randn([1, K]);
const W = loom.randn([N, K]);
const Wt = W.t();
const packed = (["q8_0", "q4_0", "nf4"] as QuantFormat[]).map((format) => {
  const p = randomPacked(format, N, K, 7);
  const { qweight, scales } = operands(p);
  return { format, qweight, scales, bytes: p.bytes.length + (p.scales ? p.scales.length * 4 : 0) };
});
const src = new Float32Array(COPY_ELEMS).fill(1.5); // values do not matter to a copy
const dst = new Float32Array(COPY_ELEMS);

interface Impl extends RoundLine { bytes: number }
const impls: Impl[] = [
  { name: "loom float32 GEMV", bytes: N * K * 4, iters: 10, run: () => { x.matmul(Wt).dataSync(); } },
  ...packed.map((q): Impl => ({
    name: `loom ${q.format}`, bytes: q.bytes, iters: 20,
    run: () => { loom.quantized_linear(x, q.qweight, { format: q.format, scales: q.scales }).dataSync(); },
  })),
  { name: STREAM_JS, bytes: 2 * COPY_ELEMS * 4, iters: 5, run: () => { dst.set(src); } },
];
for (const i of impls) i.run(); // warm-up: library, pools, pages

const torchOk = TORCH && existsSync("/usr/bin/python3");
const torch = torchOk ? new TorchServer(resolve(import.meta.dir, "ref_torch_w12.py"), "w12") : null;
const hello = torch ? await torch.line() : null;
const times = Object.fromEntries(await alternatingRounds(impls, ROUNDS, torch ? async (put) => {
  put("torch float32 F.linear", (await torch.ask("linear 10")).ms);
  put(STREAM_TORCH, (await torch.ask("copy 5")).ms);
} : undefined));
torch?.quit();
const load1 = loadavg();

const bytesOf: Record<string, number> = Object.fromEntries(impls.map((i) => [i.name, i.bytes]));
bytesOf["torch float32 F.linear"] = N * K * 4;
bytesOf[STREAM_TORCH] = 2 * COPY_ELEMS * 4;
const ms = (k: string) => median(times[k]!);
const gbps = (k: string) => bytesOf[k]! / (ms(k) * 1e-3) / 1e9;
const stream = Math.max(gbps(STREAM_JS), torch ? gbps(STREAM_TORCH) : 0);
const f32 = ms("loom float32 GEMV");
const tf32 = torch ? ms("torch float32 F.linear") : NaN;
for (const k of Object.keys(times)) {
  console.log(JSON.stringify({ id: "W12", impl: k, ms: ms(k), min_ms: Math.min(...times[k]!), gbps: gbps(k), bytes: bytesOf[k], rounds: times[k]!.length, speedup_vs_loom_f32: f32 / ms(k), speedup_vs_torch_f32: tf32 / ms(k), stream_gbps: stream, load_before: load0, load_after: load1, torch: hello?.torch }));
}
log("");
log(`| impl | ms (median) | weight GB/s | % of STREAM copy | × Loom float32 GEMV | × PyTorch float32 |`);
log(`|---|---|---|---|---|---|`);
for (const k of Object.keys(times)) {
  const copy = k.includes("STREAM");
  log(`| ${k} | ${ms(k).toFixed(3)} | ${gbps(k).toFixed(1)} | ${copy ? "-" : ((gbps(k) / stream) * 100).toFixed(0) + "%"} | ${copy ? "-" : (f32 / ms(k)).toFixed(2)} | ${copy || !torch ? "-" : (tf32 / ms(k)).toFixed(2)} |`);
}
log(`targets: Q4_0 ≥ 2.5× float32 GEMV (${(f32 / ms("loom q4_0")).toFixed(2)}×), Q8_0 ≥ 1.6× (${(f32 / ms("loom q8_0")).toFixed(2)}×); load average before ${load0}, after ${load1}`);
