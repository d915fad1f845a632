/**
 * A GPT written directly with the functional API (layer_norm, linear, scaled_dot_product_attention
 * with is_causal, gelu, cross_entropy), generic over Tensor and LazyTensor, with optional LoRA on
 * the attention projections (PEFT's forward: base(x) + lora_B(lora_A(x)) · alpha/r) and a
 * functional AdamW step. Used by the compiler tests (eager == lazy) and bench/compiler.ts
 * (kernel counts, memory). It does not use src/nn, so it measures the compiler alone.
 */
import * as loom from "../../src/index.ts";
import type { TensorOps } from "../../src/index.ts";

export interface GptConfig {
  vocab: number;
  layers: number;
  d: number;
  heads: number;
  ctx: number;
  /** MLP hidden size (4·d in GPT-2). */
  mlp: number;
  /** LoRA on q, k, v and the attention output projection; null = no adapters. */
  lora: { r: number; alpha: number } | null;
}

/** Parameters as eager tensors, by name (HF-like names). */
export type Params = Map<string, loom.Tensor>;

export function initGpt(c: GptConfig, seed = 0): Params {
  const g = new loom.Generator(seed);
  const p: Params = new Map();
  const w = (name: string, ...s: number[]) => p.set(name, loom.randn(s, { generator: g }).mul(0.02));
  const ones = (name: string, n: number) => p.set(name, loom.ones(n));
  const zeros = (name: string, ...s: number[]) => p.set(name, loom.zeros(s));
  w("wte", c.vocab, c.d);
  w("wpe", c.ctx, c.d);
  for (let l = 0; l < c.layers; l++) {
    const h = `h.${l}.`;
    ones(`${h}ln_1.weight`, c.d); zeros(`${h}ln_1.bias`, c.d);
    ones(`${h}ln_2.weight`, c.d); zeros(`${h}ln_2.bias`, c.d);
    for (const m of ["q", "k", "v", "o"]) {
      w(`${h}attn.${m}.weight`, c.d, c.d);
      zeros(`${h}attn.${m}.bias`, c.d);
      if (c.lora) {
        w(`${h}attn.${m}.lora_A`, c.lora.r, c.d);
        // B starts at zero in PEFT; small random values here so the test exercises every product
        w(`${h}attn.${m}.lora_B`, c.d, c.lora.r);
      }
    }
    w(`${h}mlp.fc.weight`, c.mlp, c.d); zeros(`${h}mlp.fc.bias`, c.mlp);
    w(`${h}mlp.proj.weight`, c.d, c.mlp); zeros(`${h}mlp.proj.bias`, c.d);
  }
  ones("ln_f.weight", c.d); zeros("ln_f.bias", c.d);
  w("lm_head.weight", c.vocab, c.d);
  return p;
}

/** Linear with optional LoRA: x Wᵀ + b + (x Aᵀ) Bᵀ · alpha/r. */
function proj<S extends TensorOps<S>>(x: S, P: (k: string) => S, name: string, c: GptConfig): S {
  const base = loom.linear(x, P(`${name}.weight`), P(`${name}.bias`));
  if (!c.lora) return base;
  return base.add(loom.linear(loom.linear(x, P(`${name}.lora_A`)), P(`${name}.lora_B`)).mul(c.lora.alpha / c.lora.r));
}

/** One pre-norm transformer block over x [B, T, d]. */
export function block<S extends TensorOps<S>>(x: S, P: (k: string) => S, l: number, c: GptConfig): S {
  const [B, T, d] = x.shape as [number, number, number];
  const hs = d / c.heads;
  const h = `h.${l}.`;
  const a = loom.layer_norm(x, [d], P(`${h}ln_1.weight`), P(`${h}ln_1.bias`));
  const heads = (t: S) => t.reshape([B, T, c.heads, hs]).transpose(1, 2); // [B, nh, T, hs]
  const q = heads(proj(a, P, `${h}attn.q`, c));
  const k = heads(proj(a, P, `${h}attn.k`, c));
  const v = heads(proj(a, P, `${h}attn.v`, c));
  const y = loom.scaled_dot_product_attention(q, k, v, { is_causal: true }).transpose(1, 2).reshape([B, T, d]);
  x = x.add(proj(y, P, `${h}attn.o`, c));
  const m = loom.layer_norm(x, [d], P(`${h}ln_2.weight`), P(`${h}ln_2.bias`));
  const f = loom.linear(loom.linear(m, P(`${h}mlp.fc.weight`), P(`${h}mlp.fc.bias`)).gelu(), P(`${h}mlp.proj.weight`), P(`${h}mlp.proj.bias`));
  return x.add(f);
}

/** Mean cross-entropy of next-token logits for tokens idx [B, T] against targets [B, T]. */
export function gptLoss<S extends TensorOps<S>>(idx: S, targets: S, P: (k: string) => S, c: GptConfig): S {
  const [B, T] = idx.shape as [number, number];
  const pos = P("wpe").narrow(0, 0, T);
  let x = loom.embedding(idx, P("wte")).add(pos);
  for (let l = 0; l < c.layers; l++) x = block(x, P, l, c);
  x = loom.layer_norm(x, [c.d], P("ln_f.weight"), P("ln_f.bias"));
  const logits = loom.linear(x, P("lm_head.weight"));
  return loom.cross_entropy(logits.reshape([B * T, c.vocab]), targets.reshape([B * T]));
}

/** Names of the trained parameters: the LoRA factors when there are adapters, else all. */
export function trainedNames(p: Params, c: GptConfig): string[] {
  return [...p.keys()].filter((k) => !c.lora || k.includes("lora_"));
}

export interface AdamState { m: Map<string, loom.Tensor>; v: Map<string, loom.Tensor>; t: number }

export function initAdam(p: Params, names: readonly string[]): AdamState {
  return { m: new Map(names.map((k) => [k, loom.zeros_like(p.get(k)!)])), v: new Map(names.map((k) => [k, loom.zeros_like(p.get(k)!)])), t: 0 };
}

/**
 * One training step — forward, cross-entropy, backward, AdamW (lr 1e-3 per step, decoupled weight
 * decay 0.01) — written once for both kinds. `lazy` lifts everything into one lazy graph whose
 * roots are realized together (one plan); eager runs op by op. Returns the loss and the new
 * parameters and moments (eager tensors); the caller's maps are not changed.
 */
export function trainStep(p: Params, st: AdamState, idx: loom.Tensor, targets: loom.Tensor, c: GptConfig, lazy: boolean) {
  const names = trainedNames(p, c);
  const trained = new Set(names);
  const lift = (t: loom.Tensor): any => (lazy ? t.lazy().detach() : t.detach());
  const leaves = new Map<string, any>();
  for (const [k, t] of p) leaves.set(k, trained.has(k) ? lift(t).requires_grad_() : lift(t));
  const P = (k: string) => leaves.get(k);
  const loss = gptLoss(lift(idx), lift(targets), P, c);
  loss.backward();
  const t = st.t + 1, b1 = 0.9, b2 = 0.999, lr = 1e-3, eps = 1e-8, wd = 0.01;
  const outs: any[] = [loss];
  loom.no_grad(() => {
    for (const k of names) {
      const w = P(k).detach(), g = P(k).grad;
      const m = lift(st.m.get(k)!).mul(b1).add(g.mul(1 - b1));
      const v = lift(st.v.get(k)!).mul(b2).add(g.mul(g).mul(1 - b2));
      const upd = m.div(1 - b1 ** t).div(v.div(1 - b2 ** t).sqrt().add(eps));
      outs.push(w.mul(1 - lr * wd).sub(upd.mul(lr)), m, v);
    }
  });
  const done: loom.Tensor[] = lazy ? loom.realizeAll(outs) : outs;
  const np: Params = new Map(p);
  const ns: AdamState = { m: new Map(), v: new Map(), t };
  names.forEach((k, i) => {
    np.set(k, done[1 + 3 * i]!.detach());
    ns.m.set(k, done[2 + 3 * i]!.detach());
    ns.v.set(k, done[3 + 3 * i]!.detach());
  });
  return { loss: done[0]!.detach(), params: np, state: ns, roots: outs };
}

/** Deterministic token batches of [B, T] for input and next-token targets. */
export function batch(c: GptConfig, B: number, seed = 1): { idx: loom.Tensor; targets: loom.Tensor } {
  const g = new loom.Generator(seed);
  const n = B * (c.ctx + 1);
  const toks = Array.from({ length: n }, () => Math.floor(g.uniform() * c.vocab));
  const rows = Array.from({ length: B }, (_, b) => toks.slice(b * (c.ctx + 1), (b + 1) * (c.ctx + 1)));
  return {
    idx: loom.tensor(rows.map((r) => r.slice(0, c.ctx))),
    targets: loom.tensor(rows.map((r) => r.slice(1))),
  };
}
