/**
 * W1–W9 of shared/bench/README.md on Loom (native lazy, native eager, js eager) next to PyTorch
 * measured in the same run by shared/bench/ref_torch.py, alternating per workload.
 *
 *   bun bench/native.ts                  # all workloads, with PyTorch
 *   bun bench/native.ts --only W1,W8     # subset (prefix match)
 *   bun bench/native.ts --no-torch       # Loom only
 *   bun bench/native.ts --js-all         # also run js on W1c/W6/W7/W9 (minutes)
 *   bun bench/native.ts --no-js          # native only
 *
 * Timing follows ref_torch.py: warm-up, then reps until both --min-reps and --min-time are met
 * (or --max-time), median reported. Every timed call returns a realized result (eager ops have
 * run; lazy graphs are eval()'d), so no iteration times a submit alone.
 */
import * as loom from "../src/index.ts";
import { set_default_backend } from "../src/lazy/device.ts";
import { nativeBackend } from "../src/backends/native/backend.ts";
import { torchRef as torchRefMs } from "./lib/torch_ref.ts";

type T = loom.Tensor | loom.LazyTensor;
const args = process.argv.slice(2);
const opt = (k: string, d: string) => { const i = args.indexOf(k); return i >= 0 ? args[i + 1]! : d; };
const ONLY = opt("--only", "").split(",").filter(Boolean);
const MIN_TIME = Number(opt("--min-time", "1.5")) * 1e3;
const MIN_REPS = Number(opt("--min-reps", "10"));
const MAX_TIME = Number(opt("--max-time", "20")) * 1e3;
const TORCH = !args.includes("--no-torch");
const JS_ALL = args.includes("--js-all");
const NO_JS = args.includes("--no-js");

function bench(fn: () => unknown): { ms: number; reps: number } {
  for (let i = 0; i < 2; i++) fn();
  const times: number[] = [];
  const start = performance.now();
  for (;;) {
    const t0 = performance.now();
    fn();
    const t1 = performance.now();
    times.push(t1 - t0);
    if ((times.length >= MIN_REPS && t1 - start >= MIN_TIME) || (t1 - start >= MAX_TIME && times.length >= 3)) break;
  }
  times.sort((a, b) => a - b);
  return { ms: times[Math.floor(times.length / 2)]!, reps: times.length };
}

// ---- workloads: make(lazy) -> a function returning a realized result ---------------------------
/** Lazy views of eager tensors made during one W7 step (one view per parameter: autograd.grad targets). */
let views: Map<loom.Tensor, loom.LazyTensor> | null = null;
const L = (x: loom.Tensor, lazy: boolean): T => {
  if (!lazy) return x;
  if (!views) return x.lazy();
  let v = views.get(x);
  if (!v) views.set(x, (v = x.lazy()));
  return v;
};
/** The realized result, after every queued command buffer has finished (lazy plans run asynchronously). */
const done = (y: T) => {
  const t = y.isLazy ? (y as loom.LazyTensor).eval() : y;
  nativeBackend()?.synchronize();
  return t;
};

function matmul(m: number, k: number, n: number) {
  return (lazy: boolean) => {
    const a = loom.randn([m, k]), b = loom.randn([k, n]);
    return () => done((L(a, lazy) as any).matmul(L(b, lazy)));
  };
}

function block(d: number, H: number, dm: number) {
  const p = (...s: number[]) => loom.randn(s).mul(0.02);
  return {
    ln1w: loom.ones(d), ln1b: loom.zeros(d), ln2w: loom.ones(d), ln2b: loom.zeros(d),
    q: p(d, d), k: p(d, d), v: p(d, d), o: p(d, d), qb: loom.zeros(d), kb: loom.zeros(d), vb: loom.zeros(d), ob: loom.zeros(d),
    fc1: p(dm, d), fc1b: loom.zeros(dm), fc2: p(d, dm), fc2b: loom.zeros(d), H,
    lora: null as null | Record<"q" | "k" | "v" | "o", { A: loom.Tensor; B: loom.Tensor }>,
  };
}
type Block = ReturnType<typeof block>;

/** Pre-norm GPT block: x + attn(ln1(x)); x + mlp(ln2(x)), causal attention, GELU (erf). */
function blockForward(x: T, b: Block, lazy: boolean): T {
  const P = (t: loom.Tensor) => L(t, lazy);
  const [B, Tn, C] = x.shape as [number, number, number];
  const hd = C / b.H;
  const lin = (h: T, name: "q" | "k" | "v" | "o", w: loom.Tensor, bias: loom.Tensor): T => {
    const lr = b.lora?.[name];
    return lr ? loom.lora_linear(h as any, P(w) as any, P(lr.A) as any, P(lr.B) as any, 2, P(bias) as any) : loom.linear(h as any, P(w) as any, P(bias) as any);
  };
  const h = loom.layer_norm(x as any, [C], P(b.ln1w) as any, P(b.ln1b) as any) as T;
  const heads = (t: T) => (t as any).view([B, Tn, b.H, hd]).transpose(1, 2) as T;
  const q = heads(lin(h, "q", b.q, b.qb)), k = heads(lin(h, "k", b.k, b.kb)), v = heads(lin(h, "v", b.v, b.vb));
  const att = (loom.scaled_dot_product_attention(q as any, k as any, v as any, { is_causal: true }) as any).transpose(1, 2).reshape([B, Tn, C]);
  x = (x as any).add(lin(att, "o", b.o, b.ob));
  const h2 = loom.layer_norm(x as any, [C], P(b.ln2w) as any, P(b.ln2b) as any);
  const m = loom.linear(loom.gelu(loom.linear(h2 as any, P(b.fc1) as any, P(b.fc1b) as any)) as any, P(b.fc2) as any, P(b.fc2b) as any);
  return (x as any).add(m);
}

const V = 96, D = 384, NL = 6, NH = 6, CTX = 128, BATCH = 16;
function charGpt() {
  loom.manual_seed(0);
  const blocks = Array.from({ length: NL }, () => {
    const b = block(D, NH, 4 * D);
    const lr = () => ({ A: loom.randn([8, D]).mul(1 / Math.sqrt(D)).requires_grad_(true), B: loom.zeros(D, 8).requires_grad_(true) });
    b.lora = { q: lr(), k: lr(), v: lr(), o: lr() };
    return b;
  });
  const model = {
    tok: loom.randn([V, D]).mul(0.02), pos: loom.randn([CTX, D]).mul(0.02), blocks,
    lnfw: loom.ones(D), lnfb: loom.zeros(D), head: loom.randn([V, D]).mul(0.02),
    idx: loom.randint(0, V, [BATCH, CTX]), tgt: loom.randint(0, V, [BATCH, CTX]), pidx: loom.arange(0, CTX),
  };
  const loraParams = blocks.flatMap((b) => Object.values(b.lora!).flatMap((p) => [p.A, p.B]));
  return { model, loraParams };
}
type Gpt = ReturnType<typeof charGpt>["model"];

function gptForward(m: Gpt, lazy: boolean): T {
  const P = (t: loom.Tensor) => L(t, lazy);
  let x = (loom.embedding(P(m.idx) as any, P(m.tok) as any) as any).add(loom.embedding(P(m.pidx) as any, P(m.pos) as any)) as T;
  for (const b of m.blocks) x = blockForward(x, b, lazy);
  return loom.linear(loom.layer_norm(x as any, [D], P(m.lnfw) as any, P(m.lnfb) as any) as any, P(m.head) as any) as T;
}

const WORKLOADS: [string, string, (lazy: boolean) => () => unknown, (ms: number) => string][] = [
  ["W1a", "matmul 512", matmul(512, 512, 512), (ms) => `${(2 * 512 ** 3 / ms / 1e6).toFixed(1)} GFLOP/s`],
  ["W1b", "matmul 1024", matmul(1024, 1024, 1024), (ms) => `${(2 * 1024 ** 3 / ms / 1e6).toFixed(1)} GFLOP/s`],
  ["W1c", "matmul 64x4096x4096", matmul(64, 4096, 4096), (ms) => `${(2 * 64 * 4096 * 4096 / ms / 1e6).toFixed(1)} GFLOP/s`],
  ["W2", "gelu(x*a+b) 4M", (lazy) => {
    const N = 4 * 1024 * 1024, x = loom.randn([N]), a = loom.randn([N]), b = loom.randn([N]);
    return () => done(loom.gelu(L(x, lazy).mul(L(a, lazy) as any).add(L(b, lazy) as any) as any) as T);
  }, (ms) => `${(16 * 4 * 1024 * 1024 / ms / 1e6).toFixed(1)} GB/s`],
  ["W3", "softmax [4096,1024]", (lazy) => { const x = loom.randn([4096, 1024]); return () => done(loom.softmax(L(x, lazy) as any, -1) as T); }, () => ""],
  ["W4", "rmsnorm [4096,1024]", (lazy) => {
    const x = loom.randn([4096, 1024]), w = loom.randn([1024]);
    return () => { const X = L(x, lazy) as any; return done(X.mul(X.pow(2).mean(-1, true).add(1e-5).rsqrt()).mul(L(w, lazy))); };
  }, () => ""],
  ["W5", "lora linear", (lazy) => {
    const x = loom.randn([64, 1024]), W = loom.randn([1024, 1024]).mul(0.03), A = loom.randn([8, 1024]).mul(0.03), B = loom.randn([1024, 8]).mul(0.03);
    return () => done(loom.lora_linear(L(x, lazy) as any, L(W, lazy) as any, L(A, lazy) as any, L(B, lazy) as any, 2) as T);
  }, () => ""],
  ["W6", "GPT block fwd", (lazy) => {
    loom.manual_seed(0);
    const b = block(512, 8, 2048), x = loom.randn([4, 256, 512]);
    return () => loom.no_grad(() => done(blockForward(L(x, lazy), b, lazy)));
  }, () => ""],
  ["W7", "char-GPT LoRA step", (lazy) => {
    const { model, loraParams } = charGpt();
    const opt = new loom.optim.AdamW(loraParams, { lr: 1e-3 });
    if (!lazy) {
      return () => {
        const logits = gptForward(model, lazy) as any;
        const loss = loom.cross_entropy(logits.view([-1, V]), L(model.tgt, lazy).view([-1]) as any) as any;
        opt.zero_grad();
        loss.backward();
        opt.step();
        return done(loss);
      };
    }
    // lazy: the loss and the LoRA gradients realize as ONE plan (forward and backward fused),
    // then AdamW's fused update per parameter
    return () => {
      views = new Map();
      const logits = gptForward(model, lazy) as any;
      const loss = loom.cross_entropy(logits.view([-1, V]), L(model.tgt, lazy).view([-1]) as any) as any;
      const grads = loom.autograd.grad(loss, loraParams.map((p) => views!.get(p)!)) as loom.LazyTensor[];
      views = null;
      const [l, ...gs] = loom.realizeAll([loss, ...grads]);
      loraParams.forEach((p, i) => { p.grad = gs[i]!; });
      opt.step();
      return done(l!);
    };
  }, (ms) => `${(BATCH * CTX / ms * 1e3).toFixed(0)} tok/s`],
  ["W8", "10k y=y+x [16]", (lazy) => {
    const x = loom.randn([16]), y0 = loom.zeros(16);
    return () => { let y: T = L(y0, lazy); const xx = L(x, lazy); for (let i = 0; i < 10000; i++) y = (y as any).add(xx); return done(y); };
  }, (ms) => `${(ms * 1e3 / 10000).toFixed(3)} µs/op`],
  ["W9", "char-GPT fwd", (lazy) => {
    const { model } = charGpt();
    return () => loom.no_grad(() => done(gptForward(model, lazy)));
  }, () => ""],
];

const MODES = [
  { name: "native lazy", backend: "native" as const, lazy: true },
  { name: "native eager", backend: "native" as const, lazy: false },
  { name: "js eager", backend: "js" as const, lazy: false },
];
const JS_SLOW = new Set(["W1c", "W6", "W7", "W9"]);

function torchRef(id: string): number | null {
  return TORCH ? torchRefMs(id, MIN_TIME) : null;
}

const nb = nativeBackend();
console.log(`# Loom bench: native ${nb ? `${nb.lib.threads} threads, BLAS ${nb.blas() || "built-in GEMM"}` : "unavailable"}`);
const rows: string[] = ["| id | workload | PyTorch ms | " + MODES.map((m) => `${m.name} ms (speedup)`).join(" | ") + " | derived (native lazy) |", "|---|---|---:|" + MODES.map(() => "---:").join("|") + "|---|"];
for (const [id, name, make, derive] of WORKLOADS) {
  if (ONLY.length && !ONLY.some((o) => id.startsWith(o))) continue;
  const ref = torchRef(id);
  const cells: string[] = [];
  let lazyMs = 0;
  for (const m of MODES) {
    if (m.backend === "native" && !nb) { cells.push("n/a"); continue; }
    if (m.backend === "js" && ((JS_SLOW.has(id) && !JS_ALL) || NO_JS)) { cells.push("(skipped)"); continue; }
    set_default_backend(m.backend);
    try {
      const r = bench(make(m.lazy));
      if (m.lazy && m.backend === "native") lazyMs = r.ms;
      cells.push(`${r.ms.toFixed(3)}${ref ? ` (${(ref / r.ms).toFixed(2)}×)` : ""}`);
      console.log(JSON.stringify({ id, mode: m.name, ms: +r.ms.toFixed(4), reps: r.reps, torch_ms: ref, speedup: ref ? +(ref / r.ms).toFixed(3) : null }));
    } catch (e) {
      cells.push(`error: ${(e as Error).message.slice(0, 60)}`);
    }
  }
  set_default_backend(nb ? "native" : "js");
  rows.push(`| ${id} | ${name} | ${ref?.toFixed(3) ?? "—"} | ${cells.join(" | ")} | ${lazyMs ? derive(lazyMs) : ""} |`);
}
console.log("\n" + rows.join("\n"));

// W8 split: recording 10k lazy ops (no realize) and the one realize, native
if (nb && (!ONLY.length || ONLY.some((o) => "W8".startsWith(o)))) {
  set_default_backend("native");
  const x = loom.randn([16]), y0 = loom.zeros(16);
  const record = () => { let y: any = y0.lazy(); const xx = x.lazy(); for (let i = 0; i < 10000; i++) y = y.add(xx); return y as loom.LazyTensor; };
  for (let i = 0; i < 3; i++) done(record());
  const rec: number[] = [], real: number[] = [];
  for (let i = 0; i < 15; i++) {
    const t0 = performance.now();
    const y = record();
    const t1 = performance.now();
    done(y);
    rec.push(t1 - t0);
    real.push(performance.now() - t1);
  }
  const med = (a: number[]) => a.sort((p, q) => p - q)[a.length >> 1]!;
  console.log(`W8 native lazy: recording ${(med(rec) * 1e3 / 10000).toFixed(3)} µs/op, realize ${med(real).toFixed(2)} ms (${(med(real) * 1e3 / 10000).toFixed(3)} µs/op)`);
}
