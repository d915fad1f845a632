/**
 * W1–W10 and W7u of shared/bench/README.md, written once for every device: `place` moves the
 * inputs to the benchmarked device and `done` returns a realized result once the device has
 * finished. Each workload is `make(lazy)` -> a function timed per iteration.
 */
import * as loom from "../../src/index.ts";
import { with_execution_mode } from "../../src/nn/execution.ts";

export type T = loom.Tensor | loom.LazyTensor;

export interface BenchEnv {
  /** A new tensor on the benchmarked device. */
  place: (t: loom.Tensor) => loom.Tensor;
  /** The realized result, after the device's queued work has finished. */
  done: (y: T) => T;
  /** W7 lazy as one plan (loss and LoRA gradients realized together, then the optimizer). */
  onePlanStep: boolean;
}

export type Workload = [id: string, name: string, make: (lazy: boolean) => () => unknown, derive: (ms: number) => string];

const V = 96, D = 384, NL = 6, NH = 6, CTX = 128, BATCH = 16;

export function workloads(env: BenchEnv): Workload[] {
  const { place: G, done } = env;
  /** Lazy views made during one W7 step: one view per parameter (the autograd.grad targets). */
  let views: Map<loom.Tensor, loom.LazyTensor> | null = null;
  const L = (x: loom.Tensor, lazy: boolean): any => {
    if (!lazy) return x;
    if (!views) return x.lazy();
    let v = views.get(x);
    if (!v) views.set(x, (v = x.lazy()));
    return v;
  };

  const matmul = (m: number, k: number, n: number) => (lazy: boolean) => {
    const a = G(loom.randn([m, k])), b = G(loom.randn([k, n]));
    return () => done(L(a, lazy).matmul(L(b, lazy)));
  };

  /** Parameters of a pre-norm GPT block, optionally with LoRA on q, k, v, o. */
  const block = (d: number, H: number, dm: number) => {
    const p = (...s: number[]) => G(loom.randn(s).mul(0.02));
    const z = (n: number) => G(loom.zeros(n)), o = (n: number) => G(loom.ones(n));
    return {
      ln1w: o(d), ln1b: z(d), ln2w: o(d), ln2b: z(d),
      q: p(d, d), k: p(d, d), v: p(d, d), o: p(d, d), qb: z(d), kb: z(d), vb: z(d), ob: z(d),
      fc1: p(dm, d), fc1b: z(dm), fc2: p(d, dm), fc2b: z(d), H,
      lora: null as null | Record<"q" | "k" | "v" | "o", { A: loom.Tensor; B: loom.Tensor }>,
    };
  };
  type Block = ReturnType<typeof block>;

  /** Pre-norm GPT block: x + attn(ln1(x)); x + mlp(ln2(x)), causal attention, GELU (erf). */
  const blockForward = (x: T, b: Block, lazy: boolean): T => {
    const P = (t: loom.Tensor) => L(t, lazy);
    const [B, Tn, C] = x.shape as [number, number, number];
    const hd = C / b.H;
    const lin = (h: T, name: "q" | "k" | "v" | "o", w: loom.Tensor, bias: loom.Tensor): T => {
      const lr = b.lora?.[name];
      return lr ? loom.lora_linear(h as any, P(w), P(lr.A), P(lr.B), 2, P(bias)) : loom.linear(h as any, P(w), P(bias));
    };
    const h = loom.layer_norm(x as any, [C], P(b.ln1w), P(b.ln1b)) as T;
    const heads = (t: T) => (t as any).view([B, Tn, b.H, hd]).transpose(1, 2) as T; // [B, H, T, hd]
    const q = heads(lin(h, "q", b.q, b.qb)), k = heads(lin(h, "k", b.k, b.kb)), v = heads(lin(h, "v", b.v, b.vb));
    const att = (loom.scaled_dot_product_attention(q as any, k as any, v as any, { is_causal: true }) as any).transpose(1, 2).reshape([B, Tn, C]);
    x = (x as any).add(lin(att, "o", b.o, b.ob));
    const h2 = loom.layer_norm(x as any, [C], P(b.ln2w), P(b.ln2b));
    const m = loom.linear(loom.gelu(loom.linear(h2 as any, P(b.fc1), P(b.fc1b)) as any) as any, P(b.fc2), P(b.fc2b));
    return (x as any).add(m);
  };

  /** The W7/W9 char GPT: vocab 96, 6 layers, d 384, 6 heads, context 128, LoRA r 8 on q, k, v, o. */
  const charGpt = () => {
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
  };
  type Gpt = ReturnType<typeof charGpt>["model"];

  const gptForward = (m: Gpt, lazy: boolean): T => {
    const P = (t: loom.Tensor) => L(t, lazy);
    let x = (loom.embedding(P(m.idx), P(m.tok)) as any).add(loom.embedding(P(m.pidx), P(m.pos))) as T;
    for (const b of m.blocks) x = blockForward(x, b, lazy);
    return loom.linear(loom.layer_norm(x as any, [D], P(m.lnfw), P(m.lnfb)) as any, P(m.head)) as T;
  };
  const gptLoss = (m: Gpt, lazy: boolean) => {
    const logits = gptForward(m, lazy) as any;
    return loom.cross_entropy(logits.view([-1, V]), L(m.tgt, lazy).view([-1])) as any;
  };

  return [
    ["W1a", "matmul 512", matmul(512, 512, 512), (ms) => `${(2 * 512 ** 3 / ms / 1e6).toFixed(1)} GFLOP/s`],
    ["W1b", "matmul 1024", matmul(1024, 1024, 1024), (ms) => `${(2 * 1024 ** 3 / ms / 1e6).toFixed(1)} GFLOP/s`],
    ["W1c", "matmul 64x4096x4096", matmul(64, 4096, 4096), (ms) => `${(2 * 64 * 4096 * 4096 / ms / 1e6).toFixed(1)} GFLOP/s`],
    ["W2", "gelu(x*a+b) 4M", (lazy) => {
      const N = 4 * 1024 * 1024, x = G(loom.randn([N])), a = G(loom.randn([N])), b = G(loom.randn([N]));
      return () => done(loom.gelu(L(x, lazy).mul(L(a, lazy)).add(L(b, lazy))) as T);
    }, (ms) => `${(16 * 4 * 1024 * 1024 / ms / 1e6).toFixed(1)} GB/s`],
    ["W3", "softmax [4096,1024]", (lazy) => {
      const x = G(loom.randn([4096, 1024]));
      return () => done(loom.softmax(L(x, lazy), -1) as T);
    }, () => ""],
    ["W4", "rmsnorm [4096,1024]", (lazy) => {
      const x = G(loom.randn([4096, 1024])), w = G(loom.randn([1024]));
      return () => { const X = L(x, lazy); return done(X.mul(X.pow(2).mean(-1, true).add(1e-5).rsqrt()).mul(L(w, lazy))); };
    }, () => ""],
    ["W5", "lora linear", (lazy) => {
      const x = G(loom.randn([64, 1024])), W = G(loom.randn([1024, 1024]).mul(0.03)), A = G(loom.randn([8, 1024]).mul(0.03)), B = G(loom.randn([1024, 8]).mul(0.03));
      return () => done(loom.lora_linear(L(x, lazy), L(W, lazy), L(A, lazy), L(B, lazy), 2) as T);
    }, () => ""],
    ["W6", "GPT block fwd", (lazy) => {
      loom.manual_seed(0);
      const b = block(512, 8, 2048), x = G(loom.randn([4, 256, 512]));
      return () => loom.no_grad(() => done(blockForward(L(x, lazy), b, lazy)));
    }, () => ""],
    ["W7", "char-GPT LoRA step", (lazy) => {
      const { model, loraParams } = charGpt();
      const opt = new loom.optim.AdamW(loraParams, { lr: 1e-3 });
      if (!(lazy && env.onePlanStep)) {
        return () => {
          const loss = gptLoss(model, lazy);
          opt.zero_grad();
          loss.backward();
          opt.step();
          return done(loss);
        };
      }
      // the loss and the LoRA gradients realize as ONE plan (forward and backward fused), then
      // the optimizer (written as backward(); step(); loss.item(), reading the loss would
      // recompute the forward: the gradient plan does not keep it)
      return () => {
        views = new Map();
        const loss = gptLoss(model, lazy);
        const grads = loom.autograd.grad(loss, loraParams.map((p) => views!.get(p)!)) as loom.LazyTensor[];
        views = null;
        const [l, ...gs] = loom.realizeAll([loss, ...grads]);
        loraParams.forEach((p, i) => { p.grad = gs[i]!; });
        opt.step();
        return done(l!);
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
    ["W7u", "char-GPT LoRA step, user code", (lazy) => {
      const { step } = userGptStep(G, lazy);
      return () => done(step().loss);
    }, (ms) => `${(BATCH * CTX / ms * 1e3).toFixed(0)} tok/s`],
    // W10: small ops, the result read on the host every call (dataSync)
    ["W10a", "small lora linear [8,64] r8", (lazy) => {
      loom.manual_seed(0);
      const x = G(loom.randn([8, 64])), W = G(loom.randn([64, 64]).mul(0.1)), A = G(loom.randn([8, 64]).mul(0.1)), B = G(loom.randn([64, 8]).mul(0.1));
      return () => host(loom.lora_linear(L(x, lazy), L(W, lazy), L(A, lazy), L(B, lazy), 2) as T);
    }, (ms) => `${(ms * 1e3).toFixed(2)} µs/call`],
    ["W10b", "small softmax [8,64]", (lazy) => {
      loom.manual_seed(0);
      const x = G(loom.randn([8, 64]));
      return () => host(loom.softmax(L(x, lazy), -1) as T);
    }, (ms) => `${(ms * 1e3).toFixed(2)} µs/call`],
    ["W10c", "small rmsnorm [8,64]", (lazy) => {
      loom.manual_seed(0);
      const x = G(loom.randn([8, 64])), w = G(loom.randn([64]));
      return () => host(loom.rms_norm(L(x, lazy), [64], L(w, lazy), 1e-5) as T);
    }, (ms) => `${(ms * 1e3).toFixed(2)} µs/call`],
  ];
}

/** The values on the host (a lazy result is realized first): what a caller reading a small result pays. */
function host(y: T): Float64Array {
  return (y.isLazy ? (y as loom.LazyTensor).eval() : (y as loom.Tensor)).dataSync();
}

/**
 * The W7 model as a Loom GPT2LMHeadModel (vocab 96, n_embd 384, 6 layers, 6 heads, n_positions
 * 128, exact-erf GELU, dropout 0), random init after manual_seed(0): W7u trains it, W11 decodes.
 */
export function w7Model(): loom.models.GPT2LMHeadModel {
  loom.manual_seed(0);
  const config = new loom.models.GPT2Config({
    vocab_size: V, n_positions: CTX, n_embd: D, n_layer: NL, n_head: NH,
    resid_pdrop: 0, embd_pdrop: 0, attn_pdrop: 0, activation_function: "gelu",
  });
  return new loom.models.GPT2LMHeadModel(config);
}

/**
 * W7u's LoRA (r 8, alpha 16, on attn.c_attn and attn.c_proj) injected into `model` in place
 * (lora.get_peft_model); returns the trainable parameters (the LoRA factors).
 */
export function w7Lora(model: loom.models.GPT2LMHeadModel): loom.Tensor[] {
  loom.lora.get_peft_model(model, new loom.lora.LoraConfig({
    r: 8, lora_alpha: 16, lora_dropout: 0, target_modules: ["attn.c_attn", "attn.c_proj"], fan_in_fan_out: true, bias: "none", task_type: "CAUSAL_LM",
  }));
  return model.parameters().filter((p) => p.requires_grad);
}

/**
 * W7u: the W7 model and step as a user writes them with the project's own modules
 * (models.GPT2LMHeadModel, PEFT-style LoRA via lora.get_peft_model, optim.AdamW), run in the
 * execution mode `lazy` selects (Module.forward records and realizes per call, or runs op by
 * op). GELU is the erf form, as the PyTorch reference's F.gelu; dropout 0. One `step()` is the
 * user's loop body: forward with targets, zero_grad, backward, step, loss.item().
 * `beforeLora` changes the model before LoRA is injected (bench/qlora.ts: loom.compress, the
 * QLoRA order: quantize, then get_peft_model).
 */
export function userGptStep(place: (t: loom.Tensor) => loom.Tensor, lazy: boolean,
  beforeLora?: (model: loom.models.GPT2LMHeadModel) => void) {
  const model = w7Model();
  beforeLora?.(model);
  const params = w7Lora(model);
  const opt = new loom.optim.AdamW(params, { lr: 1e-3 });
  const x = place(loom.randint(0, V, [BATCH, CTX])), y = place(loom.randint(0, V, [BATCH, CTX]));
  model.train();
  const step = () => with_execution_mode(lazy ? "lazy" : "eager", () => {
    const { loss } = model.call(x, { targets: y });
    opt.zero_grad();
    loss!.backward();
    opt.step();
    return { loss: loss!, value: loss!.item() };
  });
  return { model, params, step };
}
