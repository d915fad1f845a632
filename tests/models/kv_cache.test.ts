/**
 * The GPT-2 KV cache (models/kv_cache.ts StaticCache, HF's past_key_values interface): decoding
 * with the cache gives PyTorch's logits (fixtures/gpt2_reference.json, written by
 * fixtures/gen_gpt2_fixtures.py) and the logits of full recomputation at every position, eager
 * and lazy, on every backend; generate with the cache picks the same tokens as without it;
 * decoding past T_max and caches that do not fit raise typed errors and leave the cache as it was;
 * lazy decoding records the same graph at every step (plan compiles counted).
 */
import { describe, expect, test } from "bun:test";
import { no_grad } from "../../src/autograd/grad_mode.ts";
import { tensor } from "../../src/lazy/creation.ts";
import type { Tensor } from "../../src/lazy/tensor.ts";
import { with_execution_mode, type ExecutionMode } from "../../src/nn/execution.ts";
import { GPT2Config } from "../../src/models/gpt2_config.ts";
import { GPT2LMHeadModel } from "../../src/models/gpt2.ts";
import { StaticCache, finfo_min } from "../../src/models/kv_cache.ts";
import { cachedPlans, clear_plan_cache, planCacheStats } from "../../src/scheduler/compile.ts";
import { realizeStats } from "../../src/scheduler/realize.ts";
import { LoomDtypeError, LoomIndexError, LoomShapeError, LoomValueError } from "../../src/tensor/errors.ts";
import { Generator } from "../../src/tensor/rng.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { REF, TINY, expectBitwise, expectClose, maxAbsDiff } from "./helpers.ts";

const MODES: readonly ExecutionMode[] = ["eager", "lazy"];
const int64 = { dtype: "int64" as const };
/** REF's ids [2, 7]; the tiny model has n_positions 8. */
const IDS = REF.input_ids;
const [B, T, V] = REF.logits.shape as [number, number, number];

/** Rows [from, to) of every sequence of REF's logits, as a flat [B, to-from, V] array. */
function refLogits(from: number, to: number): number[] {
  const out: number[] = [];
  for (let b = 0; b < B; b++) out.push(...REF.logits.data.slice((b * T + from) * V, (b * T + to) * V));
  return out;
}

/** Prefill ids[:, :prefill], then decode ids[:, t] one at a time; the logits of every call. */
function decode(model: GPT2LMHeadModel, cache: StaticCache, prefill: number): Tensor[] {
  const out: Tensor[] = [model.call(tensor(IDS.map((r) => r.slice(0, prefill)), int64), { past_key_values: cache }).logits];
  for (let t = prefill; t < T; t++) out.push(model.call(tensor(IDS.map((r) => [r[t]!]), int64), { past_key_values: cache }).logits);
  return out;
}

/** A small random GPT-2 with sharp logits (large init), so greedy choices have no near-ties. */
function smallModel(seed = 3): GPT2LMHeadModel {
  const cfg = new GPT2Config({ vocab_size: 37, n_positions: 32, n_embd: 32, n_layer: 2, n_head: 4, initializer_range: 0.3, resid_pdrop: 0, embd_pdrop: 0, attn_pdrop: 0 });
  return new GPT2LMHeadModel(cfg, { generator: new Generator(seed) }).eval();
}

const snapshot = (c: StaticCache) => [...c.key_cache, ...c.value_cache].map((t) => t.clone());
function expectUnchanged(c: StaticCache, before: Tensor[], seen: number): void {
  [...c.key_cache, ...c.value_cache].forEach((t, i) => expectBitwise(t, before[i]!));
  expect(c.get_seq_length()).toBe(seen);
}

describe.each(BACKENDS)("StaticCache decoding on %s", (backend) => {
  useBackend(backend);

  for (const mode of MODES) {
    test(`${mode}: cached logits = PyTorch's and = full recomputation at every position (prefill 1 and 3)`, () => {
      const model = GPT2LMHeadModel.from_pretrained(TINY);
      no_grad(() => with_execution_mode(mode, () => {
        const full = model.call(tensor(IDS, int64)).logits; // [B, T, V], no cache
        for (const prefill of [1, 3]) {
          const cache = model.make_cache({ shape: [B, 1], device: "cpu" });
          const calls = decode(model, cache, prefill);
          expect(cache.get_seq_length()).toBe(T);
          expect(calls[0]!.shape).toEqual([B, prefill, V]);
          expectClose(calls[0]!, refLogits(0, prefill), 1e-5, 1e-5);
          expect(maxAbsDiff(calls[0]!.contiguous().dataSync(), full.narrow(1, 0, prefill).contiguous().dataSync())).toBeLessThan(1e-5);
          calls.slice(1).forEach((lg, i) => {
            const t = prefill + i;
            expect(lg.shape).toEqual([B, 1, V]);
            expectClose(lg, refLogits(t, t + 1), 1e-5, 1e-5);
            expect(maxAbsDiff(lg.contiguous().dataSync(), full.narrow(1, t, 1).contiguous().dataSync())).toBeLessThan(1e-5);
          });
        }
      }));
    });
  }

  test("masked slots weigh exactly 0: garbage in the unfilled slots changes no logit bit", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    for (const mode of MODES) {
      no_grad(() => with_execution_mode(mode, () => {
        const clean = model.make_cache({ shape: [B, 1], device: "cpu" });
        const dirty = model.make_cache({ shape: [B, 1], device: "cpu" });
        for (const t of [...dirty.key_cache, ...dirty.value_cache]) t.fill_(1e4); // finite, so 0·1e4 = 0
        const a = decode(model, clean, 2), b = decode(model, dirty, 2);
        a.forEach((lg, i) => expectBitwise(lg, b[i]!));
      }));
    }
  });

  test("use_cache without past_key_values makes a cache and returns it; an explicit cache_position/position_ids equal to the defaults change nothing", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    no_grad(() => {
      const out = model.call(tensor(IDS.map((r) => r.slice(0, 4)), int64), { use_cache: true });
      const cache = out.past_key_values!;
      expect(cache).toBeInstanceOf(StaticCache);
      expect(cache.get_seq_length()).toBe(4);
      expect(cache.shape).toEqual([B, 3, 8, 4]);
      const next = model.call(tensor(IDS.map((r) => [r[4]!]), int64), {
        past_key_values: cache, cache_position: tensor([4], int64), position_ids: tensor([[4], [4]], int64),
      });
      expect(next.past_key_values).toBe(cache);
      expectClose(next.logits, refLogits(4, 5), 1e-5, 1e-5);
      expect(model.call(tensor(IDS, int64)).past_key_values).toBeNull(); // no cache asked: none made
    });
  });
});

describe.each(BACKENDS)("a training forward through the cache on %s", (backend) => {
  useBackend(backend);
  for (const mode of MODES) {
    test(`${mode}: prefill of the whole sequence with a cache: HF loss and every gradient as PyTorch's (the cache itself stores detached values)`, () => {
      const model = GPT2LMHeadModel.from_pretrained(TINY).train();
      const cache = model.make_cache({ shape: [B, 1], device: "cpu" });
      with_execution_mode(mode, () => {
        const { loss } = model.call(tensor(IDS, int64), { labels: tensor(REF.labels, int64), past_key_values: cache });
        expect(loss!.item()).toBeCloseTo(REF.loss, 5);
        loss!.backward();
      });
      for (const [k, p] of model.named_parameters()) expectClose(p.grad as never, REF.grads[k]!, 1e-5, 1e-3);
      expect(cache.key_cache.every((t) => !t.requires_grad)).toBe(true);
      expect(cache.get_seq_length()).toBe(T);
    });
  }
});

describe("eager == lazy with the cache (js backend, bitwise)", () => {
  useBackend("js");
  test("every call's logits and the cache contents", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    const run = (mode: ExecutionMode) => no_grad(() => with_execution_mode(mode, () => {
      const cache = model.make_cache({ shape: [B, 1], device: "cpu" });
      return { logits: decode(model, cache, 3), cache };
    }));
    const e = run("eager"), l = run("lazy");
    e.logits.forEach((lg, i) => expectBitwise(lg, l.logits[i]!));
    e.cache.key_cache.forEach((k, i) => expectBitwise(k, l.cache.key_cache[i]!));
    e.cache.value_cache.forEach((v, i) => expectBitwise(v, l.cache.value_cache[i]!));
  });
});

describe.each(BACKENDS)("generate with the cache on %s", (backend) => {
  useBackend(backend);
  for (const mode of MODES) {
    test(`${mode}: greedy and seeded sampling pick the same tokens with and without the cache`, () => {
      const model = smallModel();
      const prompt = tensor([[1, 5, 9], [2, 2, 30]], int64);
      with_execution_mode(mode, () => {
        const cached = model.generate(prompt, 20, { temperature: 0, use_cache: true });
        const full = model.generate(prompt, 20, { temperature: 0, use_cache: false });
        expect(cached.shape).toEqual([2, 23]);
        expect(cached.tolist()).toEqual(full.tolist());
        expect(model.generate(prompt, 20, { temperature: 0 }).tolist()).toEqual(cached.tolist()); // default: cache (fits)
        const s1 = model.generate(prompt, 12, { temperature: 0.9, top_k: 5, generator: new Generator(11), use_cache: true });
        const s2 = model.generate(prompt, 12, { temperature: 0.9, top_k: 5, generator: new Generator(11), use_cache: false });
        expect(s1.tolist()).toEqual(s2.tolist());
      });
    });
  }
});

describe("decoding past T_max and caches that do not fit", () => {
  useBackend("js");
  for (const mode of MODES) {
    test(`${mode}: the call past T_max raises LoomIndexError naming the position and T_max; the cache is unchanged`, () => {
      const model = GPT2LMHeadModel.from_pretrained(TINY);
      no_grad(() => with_execution_mode(mode, () => {
        const cache = model.make_cache({ shape: [B, 1], device: "cpu" });
        model.call(tensor(IDS.map((r) => [...r, 1]), int64), { past_key_values: cache }); // positions 0..7 = T_max
        expect(cache.get_seq_length()).toBe(8);
        const before = snapshot(cache);
        const one = tensor([[1], [2]], int64);
        expect(() => model.call(one, { past_key_values: cache })).toThrow(LoomIndexError);
        expect(() => model.call(one, { past_key_values: cache })).toThrow(/position 8.*T_max=8/);
        expectUnchanged(cache, before, 8);
        // a shorter cache than n_positions: its own T_max counts
        const short = model.make_cache({ shape: [B, 1], device: "cpu" }, 4);
        model.call(tensor(IDS.map((r) => r.slice(0, 4)), int64), { past_key_values: short });
        const s0 = snapshot(short);
        expect(() => model.call(one, { past_key_values: short })).toThrow(/position 4.*T_max=4/);
        expect(() => model.call(tensor([[1, 2], [3, 4]], int64), { past_key_values: short, cache_position: tensor([3, 4], int64) })).toThrow(LoomIndexError);
        expectUnchanged(short, s0, 4);
        // a cache longer than n_positions: the position embedding ends first
        const long = model.make_cache({ shape: [B, 1], device: "cpu" }, 10);
        model.call(tensor(IDS.map((r) => [...r, 1]), int64), { past_key_values: long });
        const l0 = snapshot(long);
        expect(() => model.call(one, { past_key_values: long })).toThrow(/position 8 has no position embedding \(n_positions=8\)/);
        expectUnchanged(long, l0, 8);
      }));
    });
  }

  test("generate with use_cache past T_max raises before any call; without it the context is cropped", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    const prompt = tensor([[1, 2], [3, 4]], int64);
    expect(model.generate(prompt, 7, { temperature: 0, use_cache: true }).shape).toEqual([2, 9]); // feeds positions 0..7
    expect(() => model.generate(prompt, 8, { temperature: 0, use_cache: true })).toThrow(/positions up to 8, past T_max=8/);
    expect(model.generate(prompt, 8, { temperature: 0 }).shape).toEqual([2, 10]); // default: cropping path
    const cache = model.make_cache({ shape: [2, 1], device: "cpu" }, 5);
    expect(() => model.generate(prompt, 5, { past_key_values: cache })).toThrow(LoomIndexError);
    expect(cache.get_seq_length()).toBe(0);
    const want = model.generate(prompt, 4, { temperature: 0, use_cache: false }).tolist();
    expect(model.generate(prompt, 4, { temperature: 0, past_key_values: cache }).tolist()).toEqual(want);
    expect(cache.get_seq_length()).toBe(5);
    expect(model.generate(prompt, 4, { temperature: 0, past_key_values: cache }).tolist()).toEqual(want); // reset, then reused
  });

  test("bad caches and positions throw typed errors before any write", () => {
    const model = GPT2LMHeadModel.from_pretrained(TINY);
    const ids = tensor(IDS.map((r) => r.slice(0, 2)), int64);
    no_grad(() => {
      const cache = model.make_cache({ shape: [B, 1], device: "cpu" });
      model.call(ids, { past_key_values: cache });
      const before = snapshot(cache);
      const one = tensor([[1], [2]], int64);
      const cfg = model.config;
      expect(() => model.call(tensor([[1]], int64), { past_key_values: cache })).toThrow(LoomShapeError); // batch 1 vs 2
      expect(() => model.call(one, { past_key_values: new StaticCache({ config: cfg, max_batch_size: 2, dtype: "float64" }) })).toThrow(LoomDtypeError);
      expect(() => model.call(one, { past_key_values: new StaticCache({ config: { ...cfg, n_layer: 3 }, max_batch_size: 2 }) })).toThrow(/3 layers/);
      expect(() => model.call(one, { past_key_values: new StaticCache({ config: { ...cfg, n_head: 2 }, max_batch_size: 2 }) })).toThrow(LoomShapeError);
      expect(() => model.call(one, { past_key_values: {} as StaticCache })).toThrow(LoomValueError);
      expect(() => model.call(one, { past_key_values: cache, cache_position: tensor([-1], int64) })).toThrow(LoomIndexError);
      expect(() => model.call(tensor([[1, 2], [3, 4]], int64), { past_key_values: cache, cache_position: tensor([5, 5], int64) })).toThrow(/repeats/);
      expect(() => model.call(one, { past_key_values: cache, cache_position: tensor([2, 3], int64) })).toThrow(LoomShapeError);
      expect(() => model.call(one, { past_key_values: cache, position_ids: tensor([[1, 2]], int64) })).toThrow(LoomShapeError);
      expectUnchanged(cache, before, 2);
      // StaticCache itself
      expect(() => new StaticCache({ config: cfg, dtype: "int64" })).toThrow(LoomDtypeError);
      expect(() => new StaticCache({ config: cfg, max_cache_len: 0 })).toThrow(LoomValueError);
      expect(() => new StaticCache({ config: cfg, max_batch_size: 1.5 })).toThrow(LoomValueError);
      const k = tensor(new Array(2 * 3 * 1 * 4).fill(0), { dtype: "float32" }).reshape([2, 3, 1, 4]);
      expect(() => cache.update(k.reshape([2, 1, 3, 4]), k, 0, { cache_position: tensor([2], int64) })).toThrow(/key_states \[2, 1, 3, 4\] does not fit the cache \[2, 3, 8, 4\]/);
      expect(() => cache.update(k.to("float64"), k, 0, { cache_position: tensor([2], int64) })).toThrow(LoomDtypeError);
      expect(() => cache.update(k, k, 2, { cache_position: tensor([2], int64) })).toThrow(LoomIndexError);
      expect(() => cache.update(k, k, 0, { cache_position: tensor([2], { dtype: "float32" }) })).toThrow(/cache_position must be int64/);
      expect(() => cache.update(k, k, 0, { cache_position: tensor([8], int64) })).toThrow(/position 8.*T_max=8/);
      expectUnchanged(cache, before, 2);
      expect(finfo_min("float32")).toBe(-3.4028234663852886e38); // torch.finfo(torch.float32).min
    });
  });
});

// on native the plans run asynchronously: a cache write must not flush the previous token's
// write still running (that made a second plan per token before)
describe.each(BACKENDS)("lazy decoding on %s: plan compiles (planCacheStats misses)", (backend) => {
  useBackend(backend);
  test("a 20-token greedy generation compiles 2 plans (prefill, decode), one realize per token; a second generation compiles nothing", () => {
    const model = smallModel(5);
    const prompt = tensor([[4, 8, 15, 16]], int64);
    const misses: number[] = [], realizes: number[] = [];
    with_execution_mode("lazy", () => {
      const m0 = planCacheStats.misses, r0 = realizeStats.realizes;
      model.generate(prompt, 20, { temperature: 0, on_token: () => { misses.push(planCacheStats.misses - m0); realizes.push(realizeStats.realizes - r0); } });
      const m1 = planCacheStats.misses;
      model.generate(prompt, 20, { temperature: 0 });
      expect(planCacheStats.misses).toBe(m1); // same graphs: all hits
    });
    expect(realizes).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    // misses[s]: cumulative compiles after the call producing token s (0 = prefill)
    const prefill = misses[0]!, decode = misses[1]! - misses[0]!;
    expect(misses.slice(1).every((m) => m === misses[1])).toBe(true); // decode steps 2..19 compile nothing
    // the cache writes are deferred assigns: each forward (its logits read by generate, its
    // 2·n_layer cache writes) is ONE plan; the prefill plan and the decode plan are all it compiles
    expect(prefill).toBe(1);
    expect(decode).toBe(1);
    expect(misses.at(-1)).toBe(2);
  });
});

describe.each(BACKENDS)("lazy cache writes on %s: only the new rows", (backend) => {
  useBackend(backend);
  test("the prefill plan assigns [T, B, H, D] and the decode plan [1, B, H, D] per layer and kind (not all T_max slots)", () => {
    const model = smallModel(5); // n_layer 2, n_head 4, head_dim 8, T_max 32
    const prompt = tensor([[4, 8, 15, 16]], int64);
    clear_plan_cache();
    const lazy = with_execution_mode("lazy", () => model.generate(prompt, 6, { temperature: 0 }));
    const eager = with_execution_mode("eager", () => model.generate(prompt, 6, { temperature: 0 }));
    expect(lazy.tolist()).toEqual(eager.tolist());
    const dests = cachedPlans().filter((p) => p.destSlots.length).map((p) => p.destSlots.map((s) => p.slots[s]!.shape));
    expect(dests.length).toBe(2); // prefill, decode
    expect(dests.map((d) => d.length)).toEqual([4, 4]); // 2 layers × keys, values
    expect(dests[0]!.every((sh) => sh.join() === "4,1,4,8")).toBe(true);
    expect(dests[1]!.every((sh) => sh.join() === "1,1,4,8")).toBe(true);
  });
});

describe("StaticCache config forms", () => {
  test("GPT-2 names, HF Llama names (num_key_value_heads, head_dim defaults) and the explicit form give the same kind of cache", () => {
    expect(new StaticCache({ config: { n_layer: 2, n_head: 4, n_embd: 32, n_positions: 8 } }).shape).toEqual([1, 4, 8, 8]);
    const hf = { num_hidden_layers: 3, num_attention_heads: 8, hidden_size: 64, max_position_embeddings: 16 };
    const full = new StaticCache({ config: hf, max_batch_size: 2 });
    expect([full.num_layers, ...full.shape]).toEqual([3, 2, 8, 16, 8]); // kv heads = attention heads, head_dim = 64 / 8
    const gqa = new StaticCache({ config: { ...hf, num_key_value_heads: 2, head_dim: 5 }, max_cache_len: 6, dtype: "float64" });
    expect([gqa.num_layers, ...gqa.shape, gqa.dtype]).toEqual([3, 1, 2, 6, 5, "float64"]);
    const explicit = new StaticCache({ num_layers: 2, num_kv_heads: 3, head_dim: 4, max_cache_len: 5, max_batch_size: 2, dtype: "float32" });
    expect([explicit.num_layers, ...explicit.shape]).toEqual([2, 2, 3, 5, 4]);
    expect(explicit.key_cache.length).toBe(2);
    expect(explicit.key_cache[1]!.shape).toEqual([2, 3, 5, 4]);
  });

  test("bad configs raise LoomValueError naming the keys", () => {
    const hf = { num_hidden_layers: 1, num_attention_heads: 6, hidden_size: 64, max_position_embeddings: 8 };
    expect(() => new StaticCache({ config: hf })).toThrow(/hidden_size=64 is not divisible by num_attention_heads=6/);
    expect(() => new StaticCache({ config: { ...hf, hidden_size: 60, num_key_value_heads: 4 } })).toThrow(/num_attention_heads=6 is not divisible by num_key_value_heads=4/);
    expect(() => new StaticCache({ config: { ...hf, hidden_size: 60, num_key_value_heads: 0 } })).toThrow(LoomValueError);
    expect(() => new StaticCache({ config: { n_layer: 1, n_head: 3, n_embd: 32, n_positions: 8 } })).toThrow(/n_embd=32 is not divisible by n_head=3/);
    expect(() => new StaticCache({ num_layers: 2, num_kv_heads: 3, head_dim: 4 })).toThrow(/max_cache_len must be a positive integer/);
    expect(() => new StaticCache({ num_layers: 2, head_dim: 4, max_cache_len: 4 })).toThrow(/num_kv_heads must be a positive integer/);
    expect(() => new StaticCache({})).toThrow(LoomValueError);
  });
});

describe.each(BACKENDS)("StaticCache counts written positions on %s", (backend) => {
  useBackend(backend);
  const mk = () => new StaticCache({ num_layers: 2, num_kv_heads: 1, head_dim: 2, max_cache_len: 4 });
  const states = (T: number, base: number) => tensor([Array.from({ length: T }, (_, t) => [base + t, -(base + t)])], { dtype: "float32" }).reshape(1, 1, T, 2);

  for (const lazy of [false, true]) {
    test(`${lazy ? "lazy" : "eager"}: layer 0's update moves get_seq_length on, no advance needed; advance stays idempotent`, () => {
      const cache = mk();
      const lz = (x: Tensor) => (lazy ? x.lazy() : x) as unknown as Tensor;
      for (const [T, base] of [[2, 1], [1, 5]] as const) {
        const pos = cache.cache_positions(T, lz(states(T, 0)));
        expect(pos.isLazy).toBe(lazy);
        for (let l = 0; l < 2; l++) {
          const [k] = cache.update(lz(states(T, base)), lz(states(T, base)), l, { cache_position: pos });
          k.dataSync(); // realize (lazy writes happen at flush)
          expect(cache.get_seq_length()).toBe(base === 1 ? 2 : 3); // counted at layer 0
        }
      }
      cache.advance(3); cache.advance(1);
      expect(cache.get_seq_length()).toBe(3);
      // the slots hold what was written: positions 0, 1 from the prefill, 2 from the decode step
      expect(Array.from(cache.key_cache[1]!.dataSync())).toEqual([1, -1, 2, -2, 5, -5, 0, 0]);
      // an eager position tensor the cache did not make is read and counted too
      if (!lazy) {
        cache.update(states(1, 7), states(1, 7), 0, { cache_position: tensor([3], int64) });
        expect(cache.get_seq_length()).toBe(4);
      }
    });

    test(`${lazy ? "lazy" : "eager"}: positions past T_max raise LoomIndexError before any write`, () => {
      const cache = mk();
      const lz = (x: Tensor) => (lazy ? x.lazy() : x) as unknown as Tensor;
      cache.update(lz(states(4, 1)), lz(states(4, 1)), 0, { cache_position: cache.cache_positions(4, lz(states(4, 0))) })[0].dataSync();
      expect(cache.get_seq_length()).toBe(4);
      expect(() => cache.cache_positions(1, lz(states(1, 0)))).toThrow(LoomIndexError);
      expect(() => cache.cache_positions(1, lz(states(1, 0)))).toThrow(/cannot write position 4: the cache holds T_max=4/);
      // a position tensor made in range, then handed to update of a cache it no longer fits
      const small = new StaticCache({ num_layers: 1, num_kv_heads: 1, head_dim: 2, max_cache_len: 2 });
      const pos = cache.cache_positions(2, lz(states(2, 0)), 2); // slots 2, 3
      expect(() => small.update(lz(states(2, 9)), lz(states(2, 9)), 0, { cache_position: pos })).toThrow(LoomIndexError);
      expect(() => small.update(states(2, 9), states(2, 9), 0, { cache_position: tensor([1, 2], int64) })).toThrow(/cannot write position 2/);
      expect(Array.from(small.key_cache[0]!.dataSync())).toEqual([0, 0, 0, 0]);
      expect(small.get_seq_length()).toBe(0);
    });
  }
});
