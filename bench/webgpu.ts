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
import { torchRef as torchRefMs } from "./lib/torch_ref.ts";

type T = loom.Tensor | loom.LazyTensor;
const args = process.argv.slice(2);
const opt = (k: string, d: string) => { const i = args.indexOf(k); return i >= 0 ? args[i + 1]! : d; };
const ONLY = opt("--only", "").split(",").filter(Boolean);
const MIN_TIME = Number(opt("--min-time", "1.5")) * 1e3;
const MIN_REPS = Number(opt("--min-reps", "5"));
const WARMUP = Number(opt("--warmup", "2"));
const MAX_TIME = Number(opt("--max-time", "20")) * 1e3;
const TORCH = !args.includes("--no-torch");

const status = await loom.init_webgpu();
if (!status.available) {
  console.log(`webgpu unavailable: ${status.reason}`);
  process.exit(0);
}
const gpu = webgpuBackend();

/** Median ms of `fn` + waiting for the GPU, after warm-up (which also compiles the kernels). */
function bench(fn: () => unknown): { ms: number; reps: number } {
  for (let i = 0; i < WARMUP; i++) { fn(); gpu.synchronizeSync(); }
  const times: number[] = [];
  const start = performance.now();
  for (;;) {
    const t0 = performance.now();
    fn();
    gpu.synchronizeSync(); // the realize/eager work is submitted; wait until it has run
    const t1 = performance.now();
    times.push(t1 - t0);
    if ((times.length >= MIN_REPS && t1 - start >= MIN_TIME) || (t1 - start >= MAX_TIME && times.length >= 3)) break;
  }
  times.sort((a, b) => a - b);
  return { ms: times[Math.floor(times.length / 2)]!, reps: times.length };
}

const G = (t: loom.Tensor) => t.to("webgpu");
const L = (x: loom.Tensor, lazy: boolean): T => (lazy ? x.lazy() : x);
const done = (y: T) => (y.isLazy ? (y as loom.LazyTensor).eval() : y);

function matmul(m: number, k: number, n: number) {
  return (lazy: boolean) => {
    const a = G(loom.randn([m, k])), b = G(loom.randn([k, n]));
    return () => done((L(a, lazy) as any).matmul(L(b, lazy)));
  };
}

/** Parameters of a pre-norm GPT block (on the GPU), optionally with LoRA on q, k, v, o. */
function block(d: number, H: number, dm: number) {
  const p = (...s: number[]) => G(loom.randn(s).mul(0.02));
  const z = (n: number) => G(loom.zeros(n)), o = (n: number) => G(loom.ones(n));
  return {
    ln1w: o(d), ln1b: z(d), ln2w: o(d), ln2b: z(d),
    q: p(d, d), k: p(d, d), v: p(d, d), o: p(d, d), qb: z(d), kb: z(d), vb: z(d), ob: z(d),
    fc1: p(dm, d), fc1b: z(dm), fc2: p(d, dm), fc2b: z(d), H,
    lora: null as null | Record<"q" | "k" | "v" | "o", { A: loom.Tensor; B: loom.Tensor }>,
  };
}
type Block = ReturnType<typeof block>;

function blockForward(x: T, b: Block, lazy: boolean): T {
  const P = (t: loom.Tensor) => L(t, lazy) as any;
  const [B, Tn, C] = x.shape as [number, number, number];
  const hd = C / b.H;
  const lin = (h: T, name: "q" | "k" | "v" | "o", w: loom.Tensor, bias: loom.Tensor): T => {
    const lr = b.lora?.[name];
    return lr ? loom.lora_linear(h as any, P(w), P(lr.A), P(lr.B), 2, P(bias)) : loom.linear(h as any, P(w), P(bias));
  };
  const h = loom.layer_norm(x as any, [C], P(b.ln1w), P(b.ln1b)) as T;
  const heads = (t: T) => (t as any).view([B, Tn, b.H, hd]).transpose(1, 2) as T;
  const q = heads(lin(h, "q", b.q, b.qb)), k = heads(lin(h, "k", b.k, b.kb)), v = heads(lin(h, "v", b.v, b.vb));
  const att = (loom.scaled_dot_product_attention(q as any, k as any, v as any, { is_causal: true }) as any).transpose(1, 2).reshape([B, Tn, C]);
  x = (x as any).add(lin(att, "o", b.o, b.ob));
  const h2 = loom.layer_norm(x as any, [C], P(b.ln2w), P(b.ln2b));
  const m = loom.linear(loom.gelu(loom.linear(h2 as any, P(b.fc1), P(b.fc1b)) as any) as any, P(b.fc2), P(b.fc2b));
  return (x as any).add(m);
}

const V = 96, D = 384, NL = 6, NH = 6, CTX = 128, BATCH = 16;
function charGpt() {
  loom.manual_seed(0);
  const blocks = Array.from({ length: NL }, () => {
    const b = block(D, NH, 4 * D);
    const lr = () => ({ A: G(loom.randn([8, D]).mul(1 / Math.sqrt(D))).requires_grad_(true), B: G(loom.zeros(D, 8)).requires_grad_(true) });
    b.lora = { q: lr(), k: lr(), v: lr(), o: lr() };
    return b;
  });
  const model = {
    tok: G(loom.randn([V, D]).mul(0.02)), pos: G(loom.randn([CTX, D]).mul(0.02)), blocks,
    lnfw: G(loom.ones(D)), lnfb: G(loom.zeros(D)), head: G(loom.randn([V, D]).mul(0.02)),
    idx: G(loom.randint(0, V, [BATCH, CTX])), tgt: G(loom.randint(0, V, [BATCH, CTX])), pidx: G(loom.arange(0, CTX)),
  };
  const loraParams = blocks.flatMap((b) => Object.values(b.lora!).flatMap((p) => [p.A, p.B]));
  return { model, loraParams };
}
type Gpt = ReturnType<typeof charGpt>["model"];

function gptForward(m: Gpt, lazy: boolean): T {
  const P = (t: loom.Tensor) => L(t, lazy) as any;
  let x = (loom.embedding(P(m.idx), P(m.tok)) as any).add(loom.embedding(P(m.pidx), P(m.pos))) as T;
  for (const b of m.blocks) x = blockForward(x, b, lazy);
  return loom.linear(loom.layer_norm(x as any, [D], P(m.lnfw), P(m.lnfb)) as any, P(m.head)) as T;
}

const WORKLOADS: [string, string, (lazy: boolean) => () => unknown, (ms: number) => string][] = [
  ["W1a", "matmul 512", matmul(512, 512, 512), (ms) => `${(2 * 512 ** 3 / ms / 1e6).toFixed(1)} GFLOP/s`],
  ["W1b", "matmul 1024", matmul(1024, 1024, 1024), (ms) => `${(2 * 1024 ** 3 / ms / 1e6).toFixed(1)} GFLOP/s`],
  ["W1c", "matmul 64x4096x4096", matmul(64, 4096, 4096), (ms) => `${(2 * 64 * 4096 * 4096 / ms / 1e6).toFixed(1)} GFLOP/s`],
  ["W2", "gelu(x*a+b) 4M", (lazy) => {
    const N = 4 * 1024 * 1024, x = G(loom.randn([N])), a = G(loom.randn([N])), b = G(loom.randn([N]));
    return () => done(loom.gelu(L(x, lazy).mul(L(a, lazy) as any).add(L(b, lazy) as any) as any) as T);
  }, (ms) => `${(16 * 4 * 1024 * 1024 / ms / 1e6).toFixed(1)} GB/s`],
  ["W3", "softmax [4096,1024]", (lazy) => { const x = G(loom.randn([4096, 1024])); return () => done(loom.softmax(L(x, lazy) as any, -1) as T); }, () => ""],
  ["W4", "rmsnorm [4096,1024]", (lazy) => {
    const x = G(loom.randn([4096, 1024])), w = G(loom.randn([1024]));
    return () => { const X = L(x, lazy) as any; return done(X.mul(X.pow(2).mean(-1, true).add(1e-5).rsqrt()).mul(L(w, lazy))); };
  }, () => ""],
  ["W5", "lora linear", (lazy) => {
    const x = G(loom.randn([64, 1024])), W = G(loom.randn([1024, 1024]).mul(0.03)), A = G(loom.randn([8, 1024]).mul(0.03)), B = G(loom.randn([1024, 8]).mul(0.03));
    return () => done(loom.lora_linear(L(x, lazy) as any, L(W, lazy) as any, L(A, lazy) as any, L(B, lazy) as any, 2) as T);
  }, () => ""],
  ["W6", "GPT block fwd", (lazy) => {
    loom.manual_seed(0);
    const b = block(512, 8, 2048), x = G(loom.randn([4, 256, 512]));
    return () => loom.no_grad(() => done(blockForward(L(x, lazy), b, lazy)));
  }, () => ""],
  ["W7", "char-GPT LoRA step", (lazy) => {
    const { model, loraParams } = charGpt();
    const opt = new loom.optim.AdamW(loraParams, { lr: 1e-3 });
    return () => {
      const logits = gptForward(model, lazy) as any;
      const loss = loom.cross_entropy(logits.view([-1, V]), (L(model.tgt, lazy) as any).view([-1])) as any;
      opt.zero_grad();
      loss.backward();
      opt.step();
      return done(loss);
    };
  }, (ms) => `${(BATCH * CTX / ms * 1e3).toFixed(0)} tok/s`],
  ["W8", "10k y=y+x [16]", (lazy) => {
    const x = G(loom.randn([16])), y0 = G(loom.zeros(16));
    return () => { let y: T = L(y0, lazy); const xx = L(x, lazy); for (let i = 0; i < 10000; i++) y = (y as any).add(xx); return done(y); };
  }, (ms) => `${(ms * 1e3 / 10000).toFixed(3)} µs/op`],
  ["W9", "char-GPT fwd", (lazy) => {
    const { model } = charGpt();
    return () => loom.no_grad(() => done(gptForward(model, lazy)));
  }, () => ""],
];

function torchRef(id: string): number | null {
  return TORCH ? torchRefMs(id, MIN_TIME) : null;
}

console.log(`# Loom bench on webgpu: ${status.device}`);
const MODES = [{ name: "webgpu lazy", lazy: true }, { name: "webgpu eager", lazy: false }];
const rows = ["| id | workload | PyTorch CPU ms | " + MODES.map((m) => `${m.name} ms (speedup)`).join(" | ") + " | derived (lazy) |", "|---|---|---:|" + MODES.map(() => "---:").join("|") + "|---|"];
for (const [id, name, make, derive] of WORKLOADS) {
  if (ONLY.length && !ONLY.some((o) => id.startsWith(o))) continue;
  const ref = torchRef(id);
  const cells: string[] = [];
  let lazyMs = 0;
  for (const m of MODES) {
    try {
      const s0 = gpu.stats();
      const r = bench(make(m.lazy));
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
