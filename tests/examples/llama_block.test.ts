/**
 * The Llama block port (examples/llama_block.ts) against Hugging Face's formulas written
 * functionally in torch 1.13 (tests/examples/gen_llama_goldens.py, float64): a full causal
 * forward of T=7 with GQA (4 query heads, 2 KV heads) and RoPE, the gradients of the input and of
 * every parameter, and cached decoding with models.StaticCache (prefill 4 tokens, then 3 one at a
 * time) equal to the full forward at each position. The goldens are sensitive: interleaved RoPE
 * pairs, the tiled GQA head order and eps outside the square root each move the output far
 * beyond the tolerance (the generator computes those variants; Loom's output must be far from
 * them). On js and native; eager == lazy; lazy decoding compiles one plan for the prefill and one
 * for all decode steps.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import * as loom from "../../src/index.ts";
import { nn } from "../../src/index.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { LlamaConfig, LlamaDecoder, eager_attention_forward, make_static_cache, repeat_kv, rotate_half } from "../../examples/llama_block.ts";

interface Goldens {
  config: { hidden_size: number; num_attention_heads: number; num_key_value_heads: number; head_dim: number; intermediate_size: number; rope_theta: number; rms_norm_eps: number };
  B: number;
  T: number;
  params: Record<string, { shape: number[]; data: number[] }>;
  x: number[];
  w: number[];
  out: number[];
  grads: Record<string, number[]>;
  variants: Record<string, number[]>;
  variant_max_abs_diff: Record<string, number>;
}
const G: Goldens = JSON.parse(readFileSync(new URL("./llama_goldens.json", import.meta.url), "utf8"));
const { B, T } = G;
const H = G.config.hidden_size;
const F32 = { dtype: "float32" } as const; // JS numbers do not tell 1.0 from 1: say float32

// float32 against torch's float64 through one block (|out| up to ~10, gradients up to ~45): measured
// on js, max |diff| 1.9e-6 for the outputs, 2.4e-5 for the parameter gradients, 2.3e-3 for the
// input gradient at the token scaled by 1e-3 (there the gradient is ~1/rms ≈ 1000× larger; within
// rtol); the wrong variants are >= 3.1 away
const ATOL = 1e-4, RTOL = 1e-4;

function maxExcess(y: ArrayLike<number>, ref: ArrayLike<number>): { excess: number; diff: number } {
  expect(y.length).toBe(ref.length);
  let excess = -Infinity, diff = 0;
  for (let i = 0; i < ref.length; i++) {
    const d = Math.abs(y[i]! - ref[i]!);
    diff = Math.max(diff, d);
    excess = Math.max(excess, d - (ATOL + RTOL * Math.abs(ref[i]!)));
  }
  return { excess, diff };
}
const expectClose = (y: ArrayLike<number>, ref: ArrayLike<number>, what: string) => {
  const { excess, diff } = maxExcess(y, ref);
  if (excess > 0) throw new Error(`${what}: max |diff| ${diff} beyond atol ${ATOL} + rtol ${RTOL}`);
};

function build(): LlamaDecoder {
  const config = new LlamaConfig({ ...G.config, num_hidden_layers: 1, max_position_embeddings: 16 });
  const model = new LlamaDecoder(config);
  const sd = Object.fromEntries(Object.entries(G.params).map(([k, v]) => [k, loom.tensor(v.data, F32).view(v.shape)]));
  model.layers.get(0).load_state_dict(sd); // strict: HF's names, all of them
  return model;
}
const input = () => loom.tensor(G.x, F32).view(B, T, H);

/** Full forward and backward of loss = sum(out · w) in one execution mode. */
function fullRun(mode: nn.ExecutionMode): { out: Float64Array; grads: Record<string, Float64Array> } {
  const model = build();
  const x = input().requires_grad_();
  return nn.with_execution_mode(mode, () => {
    const out = model.call(x) as loom.Tensor;
    out.mul(loom.tensor(G.w, F32).view(B, T, H)).sum().backward();
    const grads: Record<string, Float64Array> = { x: x.grad!.dataSync() };
    for (const [n, p] of model.layers.get(0).named_parameters()) grads[n] = p.grad!.dataSync();
    return { out: out.dataSync(), grads };
  });
}

/** Prefill 4 positions, then 3 decode steps, in one execution mode: outputs and plan compiles after each call. */
function cachedRun(mode: nn.ExecutionMode): { steps: Float64Array[]; misses: number[]; realizes: number[] } {
  const model = build();
  const x = input();
  const cache = make_static_cache(model.config, { max_batch_size: B, max_cache_len: 16 });
  const steps: Float64Array[] = [], misses: number[] = [], realizes: number[] = [];
  const m0 = loom.planCacheStats.misses;
  let r0 = 0;
  nn.with_execution_mode(mode, () => loom.no_grad(() => {
    for (const [start, len] of [[0, 4], [4, 1], [5, 1], [6, 1]] as const) {
      const xs = x.narrow(1, start, len).contiguous().clone(); // its own tensor: its realize is not the step's
      r0 = loom.realizeStats.realizes;
      steps.push((model.call(xs, { past_key_values: cache }) as loom.Tensor).dataSync());
      misses.push(loom.planCacheStats.misses - m0);
      realizes.push(loom.realizeStats.realizes - r0);
    }
  }));
  expect(cache.get_seq_length()).toBe(T);
  return { steps, misses, realizes };
}

/** out[:, start:start+len] of a [B, T, H] golden. */
function positions(flat: readonly number[], start: number, len: number): number[] {
  const r: number[] = [];
  for (let b = 0; b < B; b++) r.push(...flat.slice((b * T + start) * H, (b * T + start + len) * H));
  return r;
}

describe("building blocks", () => {
  test("rotate_half is cat(-x2, x1); repeat_kv gives query head h the KV head ⌊h / n_rep⌋", () => {
    expect(Array.from(rotate_half(loom.tensor([1, 2, 3, 4, 5, 6], F32)).dataSync())).toEqual([-4, -5, -6, 1, 2, 3]);
    const kv = loom.tensor([10, 20], F32).view(1, 2, 1, 1); // two KV heads
    expect(Array.from(repeat_kv(kv, 2).dataSync())).toEqual([10, 10, 20, 20]); // not [10, 20, 10, 20]
  });

  describe.each(BACKENDS)("on %s", (backend) => {
    useBackend(backend);
    test("eager_attention_forward (repeat_kv) equals F.scaled_dot_product_attention with enable_gqa, values and gradients, eager == lazy", () => {
      const attn = build().layers.get(0).self_attn;
      const [Hq, Hkv, D] = [G.config.num_attention_heads, G.config.num_key_value_heads, G.config.head_dim];
      const mk = (h: number, seed: number) => loom.tensor(Array.from({ length: B * h * T * D }, (_, i) => Math.cos(0.37 * i + seed)), F32).view(B, h, T, D).requires_grad_(true);
      const mask = loom.tensor(Array.from({ length: T * T }, (_, i) => (i % T <= Math.floor(i / T) ? 0 : -1e30)), F32).view(1, 1, T, T);
      const run = (gqa: boolean, lazy: boolean) => {
        const [q, k, v] = [mk(Hq, 1), mk(Hkv, 2), mk(Hkv, 3)];
        const lz = (x: loom.Tensor) => (lazy ? x.lazy() : x) as any;
        const out = gqa
          ? nn.F.scaled_dot_product_attention(lz(q), lz(k), lz(v), { attn_mask: lz(mask), scale: attn.scaling, enable_gqa: true }).transpose(1, 2)
          : eager_attention_forward(attn, lz(q), lz(k), lz(v), lz(mask), attn.scaling);
        out.mul(out).sum().backward();
        return [out, q.grad!, k.grad!, v.grad!].map((t) => Array.from(t.dataSync() as ArrayLike<number>));
      };
      const ref = run(false, false);
      for (const [gqa, lazy] of [[true, false], [true, true], [false, true]] as const) {
        const got = run(gqa, lazy);
        got.forEach((g, i) => expect(Math.max(...g.map((x: number, j: number) => Math.abs(x - ref[i]![j]!)))).toBeLessThan(1e-5));
      }
    });
  });

  test("HF parameter names and shapes", () => {
    const sd = build().state_dict();
    expect(Object.keys(sd).sort()).toEqual(Object.keys(G.params).map((k) => `layers.0.${k}`).sort()); // inv_freq is not persistent
    expect(sd["layers.0.self_attn.k_proj.weight"]!.shape).toEqual([16, 32]); // 2 KV heads × head_dim 8
  });

  test("the goldens are sensitive: each wrong variant is far from HF's output (generator's numbers)", () => {
    // max |variant - out| from the generator: interleaved RoPE 8.33, tiled GQA 10.67, eps outside the sqrt 3.11
    for (const [name, d] of Object.entries(G.variant_max_abs_diff)) expect(d, name).toBeGreaterThan(1000 * ATOL);
  });
});

describe.each(BACKENDS)("Llama block on %s", (backend) => {
  useBackend(backend);
  const exact = backend === "js";

  test("full forward (T=7) and gradients equal torch's; far from the wrong variants; eager == lazy", () => {
    const lazy = exact ? loom.with_compiler_options({ tolerance: "exact" }, () => fullRun("lazy")) : fullRun("lazy");
    const eager = fullRun("eager");
    expectClose(lazy.out, G.out, "out");
    for (const [name, ref] of Object.entries(G.grads)) expectClose(lazy.grads[name]!, ref, `grad ${name}`);
    expect(Object.keys(lazy.grads).length).toBe(1 + Object.keys(G.params).length);
    for (const [name, v] of Object.entries(G.variants)) {
      expect(maxExcess(lazy.out, v).diff, name).toBeGreaterThan(100 * ATOL);
    }
    for (const [name, g] of Object.entries(lazy.grads)) {
      if (exact) expect(Array.from(g), name).toEqual(Array.from(eager.grads[name]!));
      else expectClose(g, eager.grads[name]!, `eager vs lazy grad ${name}`);
    }
    if (exact) expect(Array.from(lazy.out)).toEqual(Array.from(eager.out));
    else expectClose(lazy.out, eager.out, "eager vs lazy out");
  });

  test("KV cache: prefill 4 then 3 decode steps equal the full forward at each position; lazy compiles 2 plans", () => {
    const lazy = exact ? loom.with_compiler_options({ tolerance: "exact" }, () => cachedRun("lazy")) : cachedRun("lazy");
    const eager = cachedRun("eager");
    const spans = [[0, 4], [4, 1], [5, 1], [6, 1]] as const;
    spans.forEach(([start, len], i) => {
      expectClose(lazy.steps[i]!, positions(G.out, start, len), `lazy step ${i}`);
      expectClose(eager.steps[i]!, positions(G.out, start, len), `eager step ${i}`);
      expectClose(lazy.steps[i]!, eager.steps[i]!, `eager vs lazy step ${i}`);
    });
    // prefill: one plan; the three decode steps record the same graph (positions are tensor values)
    expect(lazy.misses[0]).toBeLessThanOrEqual(1);
    expect(lazy.misses.at(-1)).toBeLessThanOrEqual(2);
    expect(lazy.misses[3]).toBe(lazy.misses[1]);
    expect(lazy.realizes).toEqual([1, 1, 1, 1]); // each call (output and both cache writes) is one plan run
  });

  test("decoding past the cache's T_max is an error before anything is written", () => {
    const model = build();
    const cache = make_static_cache(model.config, { max_batch_size: B, max_cache_len: 4 });
    loom.no_grad(() => model.call(input().narrow(1, 0, 4), { past_key_values: cache }));
    expect(() => loom.no_grad(() => model.call(input().narrow(1, 4, 1), { past_key_values: cache }))).toThrow(loom.LoomIndexError);
    expect(cache.get_seq_length()).toBe(4);
  });
});
