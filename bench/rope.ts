/**
 * RoPE forward + backward (issue 13): q [B=4, H=8, T=128, D=64] float32, cos/sin [B, T, D]
 * unsqueezed at dim 1 (HF apply_rotary_pos_emb), the gradient to q for a fixed upstream gradient.
 * In one run, alternating (every round times each line once, the order reversed every other
 * round; the table gives medians over the rounds):
 * - Loom, the registry op `rotary_embedding` (native/kernels/rope.c; the gradient is its
 *   transposed form), eager and lazy (one plan computing y and dL/dq);
 * - Loom, the decomposition (q·cos + rotate_half(q)·sin with neg, cat, mul, add), eager and lazy;
 * - PyTorch 1.13 eager, HF's formula (bench/ref_torch_rope.py, a server process), 2 threads (the
 *   ratio column's reference) and 1 thread (under load, 2 OpenMP threads spin-wait for each other).
 * Each Loom call ends with both results read on the host.
 *
 *   bun bench/rope.ts                  # 9 rounds, with PyTorch
 *   bun bench/rope.ts --rounds 5 --no-torch
 */
import * as loom from "../src/index.ts";
import { nativeBackend } from "../src/backends/native/backend.ts";
import { rotary_embedding, rotary_embedding_decomposed } from "../src/graph/ops/rope.ts";
import { set_default_backend } from "../src/lazy/device.ts";
import { cli, median } from "./lib/harness.ts";
import { alternatingRounds, loadavg, TorchServer } from "./lib/rounds.ts";
import { resolve } from "node:path";

const [B, H, T, D] = [4, 8, 128, 64];
const ROUNDS = Number(cli.opt("--rounds", "9"));
const ITERS = Number(cli.opt("--iters", "20"));
const TORCH = !cli.flag("--no-torch");

if (!nativeBackend()) throw new Error("[rope] the native backend is unavailable");
set_default_backend("native");

// HF's cos/sin: positions · inv_freq, cat(freqs, freqs), [B, T, D] -> [B, 1, T, D]
const inv = loom.arange(0, D, 2, { dtype: "float32" }).div(D).mul(Math.log(10000)).neg().exp(); // [D/2]
const freqs = loom.arange(0, T, 1, { dtype: "float32" }).unsqueeze(1).mul(inv.unsqueeze(0)); // [T, D/2]
const emb = loom.cat([freqs, freqs], -1).unsqueeze(0).expand(B, T, D).contiguous();
const cos = emb.cos().unsqueeze(1), sin = emb.sin().unsqueeze(1); // [B, 1, T, D]
const q0 = loom.randn([B, H, T, D], { generator: new loom.Generator(1) });
const g0 = loom.randn([B, H, T, D], { generator: new loom.Generator(2) });

type Rope = (q: any, c: any, s: any) => any;
const fused: Rope = (q, c, s) => q._apply(rotary_embedding, [c, s], { transposed: false });
const decomposed: Rope = (q, c, s) => rotary_embedding_decomposed(q, c, s);

/** One forward + backward, both results read on the host. */
function eager(f: Rope): () => void {
  return () => {
    const q = q0.detach().requires_grad_(true);
    const y = f(q, cos, sin);
    const [gq] = loom.autograd.grad(y, [q], { grad_outputs: [g0] });
    y.dataSync();
    gq!.dataSync();
  };
}
function lazy(f: Rope): () => void {
  const c = cos.lazy(), s = sin.lazy(), g = g0.lazy();
  return () => {
    const q = q0.lazy().requires_grad_(true);
    const y = f(q, c, s);
    const [gq] = loom.autograd.grad(y, [q], { grad_outputs: [g] });
    const [yv, gv] = loom.realizeAll([y, gq!]);
    yv!.dataSync();
    gv!.dataSync();
  };
}

const lines = ([
  ["loom eager, rotary_embedding op", eager(fused)],
  ["loom eager, decomposition", eager(decomposed)],
  ["loom lazy, rotary_embedding op", lazy(fused)],
  ["loom lazy, decomposition", lazy(decomposed)],
] as const).map(([name, run]) => ({ name, run, iters: ITERS }));
const kernels = (f: Rope) => {
  const q = q0.lazy().requires_grad_(true);
  const y = f(q, cos.lazy(), sin.lazy());
  const [gq] = loom.autograd.grad(y, [q], { grad_outputs: [g0.lazy()] });
  return loom.compile_plan([y, gq!]).kernelCount;
};

const torch = TORCH ? new TorchServer(resolve(import.meta.dir, "ref_torch_rope.py"), "rope") : null;
const info = torch ? await torch.line() : null;
const load0 = loadavg();
for (const { run } of lines) for (let i = 0; i < 3; i++) run(); // warm-up (plans compiled once)
const times = await alternatingRounds(lines, ROUNDS, torch ? async (add) => {
  add("pytorch 1.13 eager, HF formula", (await torch.ask(`rope ${ITERS} 2`)).ms);
  add("pytorch 1.13 eager, HF formula, 1 thread", (await torch.ask(`rope ${ITERS} 1`)).ms);
} : undefined);
torch?.quit();
const load1 = loadavg();
const cpu = (await Bun.file("/proc/cpuinfo").text()).match(/model name\s*:\s*(.*)/)?.[1] ?? "?";
const ref = median(times.get("pytorch 1.13 eager, HF formula") ?? [NaN]);
console.log(`RoPE fwd+bwd, q [${B}, ${H}, ${T}, ${D}] float32, cos/sin [${B}, 1, ${T}, ${D}]; ${ROUNDS} rounds × ${ITERS} calls, medians`);
console.log(`CPU: ${cpu}; LOOM_NATIVE_THREADS ${process.env.LOOM_NATIVE_THREADS ?? "default (cores)"}; ${info ? `torch ${info.torch}, ${info.threads} threads` : "no torch"}`);
console.log(`load average before: ${load0}; after: ${load1}`);
console.log(`lazy plan kernels (fwd+bwd): op ${kernels(fused)}, decomposition ${kernels(decomposed)}`);
console.log("| line | ms | vs PyTorch (t_torch / t) |\n|---|---:|---:|");
for (const [name, ts] of times) console.log(`| ${name} | ${median(ts).toFixed(3)} | ${(ref / median(ts)).toFixed(2)}× |`);
