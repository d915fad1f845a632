/**
 * Llama-family models (src/models/llama.ts) against Hugging Face's formulas written functionally in
 * torch 1.13 (tests/models/gen_llama_goldens.py, float64 reference from float32 weights): a tiny
 * Llama (GQA 4/2 heads, untied head) and a tiny Qwen2 (q/k/v biases, tied head), loaded from HF
 * checkpoint folders by AutoModelForCausalLM. Logits and loss, a left-padded attention_mask,
 * KV-cache decoding (prefill 5, then 4 single tokens) equal to the full forward, LoRA gradients on
 * q_proj/v_proj and one AdamW step. The fixtures are sensitive: interleaved RoPE, tiled GQA order
 * and eps outside the sqrt move the logits by >= 0.56 (generator's numbers), 1000× the tolerance.
 * On js and native; eager == lazy (bit-equal on js).
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { tensor } from "../../src/lazy/creation.ts";
import { no_grad } from "../../src/autograd/grad_mode.ts";
import type { Tensor } from "../../src/lazy/tensor.ts";
import { with_execution_mode, type ExecutionMode } from "../../src/nn/execution.ts";
import { AutoModelForCausalLM, LlamaForCausalLM, Qwen2ForCausalLM } from "../../src/models/index.ts";
import { AdamW } from "../../src/optim/adam.ts";
import { LoraConfig } from "../../src/lora/config.ts";
import { lora_layers } from "../../src/lora/model.ts";
import { get_peft_model } from "../../src/lora/peft_model.ts";
import { with_compiler_options } from "../../src/scheduler/options.ts";
import { planCacheStats } from "../../src/scheduler/compile.ts";
import { realizeStats } from "../../src/scheduler/realize.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { FIXTURES, expectClose, maxAbsDiff } from "./helpers.ts";

interface Arr { shape: number[]; data: number[] }
interface ModelRef {
  config: Record<string, unknown>;
  input_ids: number[][];
  labels: number[][];
  logits: Arr;
  loss: number;
  masked: { attention_mask: number[][]; logits: Arr };
  lora: { init: Record<string, Arr>; loss: number; grads: Record<string, number[]>; after_adamw: Record<string, number[]> };
  variants: Record<string, number[]>;
  variant_max_abs_diff: Record<string, number>;
}
interface Goldens {
  lora: { r: number; lora_alpha: number; targets: string[] };
  adamw: { lr: number; betas: [number, number]; eps: number; weight_decay: number };
  models: Record<string, ModelRef>;
}
export const LLAMA_REF: Goldens = JSON.parse(readFileSync(join(import.meta.dir, "llama_goldens.json"), "utf8"));
const NAMES = ["tiny_llama", "tiny_qwen2"] as const;
export const load = (name: string): LlamaForCausalLM => AutoModelForCausalLM.from_pretrained(join(FIXTURES, name)) as LlamaForCausalLM;
const int = (x: number[][]) => tensor(x, { dtype: "int64" });
// float32 against torch's float64 through 2 layers, |logits| <= 7.6: measured max |diff| 1.7e-6
const ATOL = 2e-5, RTOL = 1e-4;

/** Run `fn` in one execution mode; on js the lazy plan keeps float32 rounding exact (eager == lazy bit for bit). */
function inMode<R>(mode: ExecutionMode, exact: boolean, fn: () => R): R {
  const run = () => with_execution_mode(mode, fn);
  return exact && mode === "lazy" ? with_compiler_options({ tolerance: "exact" }, run) : run();
}

/** logits[:, start:start+len] of a [B, T, V] golden, flattened. */
function span(ref: Arr, start: number, len: number): number[] {
  const [B, T, V] = ref.shape as [number, number, number];
  const r: number[] = [];
  for (let b = 0; b < B; b++) r.push(...ref.data.slice((b * T + start) * V, (b * T + start + len) * V));
  return r;
}

describe("Llama-family classes", () => {
  test("AutoModelForCausalLM picks the class by model_type; HF keys; the tied head is one Parameter", () => {
    const llama = load("tiny_llama"), qwen = load("tiny_qwen2");
    expect(llama.constructor).toBe(LlamaForCausalLM);
    expect(qwen).toBeInstanceOf(Qwen2ForCausalLM);
    expect(llama.training).toBe(false);
    const keys = Object.keys(llama.state_dict());
    for (const k of ["model.embed_tokens.weight", "model.layers.1.self_attn.k_proj.weight", "model.layers.0.mlp.down_proj.weight", "model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight", "model.norm.weight", "lm_head.weight"]) {
      expect(keys).toContain(k);
    }
    expect(keys.some((k) => k.includes("inv_freq") || k.endsWith("o_proj.bias") || k.includes("q_proj.bias"))).toBe(false);
    expect(llama.model.layers.get(0).self_attn.k_proj.state_dict().weight!.shape).toEqual([16, 32]); // 2 KV heads × head_dim 8
    const qk = Object.keys(qwen.state_dict());
    expect(qk).toContain("model.layers.0.self_attn.q_proj.bias");
    expect(qk).toContain("model.layers.0.self_attn.v_proj.bias");
    expect(qk).not.toContain("model.layers.0.self_attn.o_proj.bias"); // Qwen2: o_proj has no bias
    expect(qwen.lm_head.weight).toBe(qwen.model.embed_tokens.weight);
    expect(llama.lm_head.weight).not.toBe(llama.model.embed_tokens.weight);
    // parameters counted once (tied head): embed 40·32 + 2 layers + norm
    const layer = 32 * 32 + 2 * 16 * 32 + 32 * 32 + 3 * 32 * 48 + 2 * 32;
    expect(llama.num_parameters()).toBe(40 * 32 + 2 * layer + 32 + 40 * 32);
    expect(qwen.num_parameters()).toBe(40 * 32 + 2 * (layer + 32 + 16 + 16) + 32);
  });

  test("the goldens are sensitive: each wrong variant is >= 1000× the tolerance away (generator's numbers)", () => {
    for (const name of NAMES) {
      for (const [v, d] of Object.entries(LLAMA_REF.models[name]!.variant_max_abs_diff)) expect(d, `${name} ${v}`).toBeGreaterThan(1000 * ATOL);
    }
  });
});

describe.each(BACKENDS)("Llama family on %s", (backend) => {
  useBackend(backend);
  const exact = backend === "js";

  describe.each(NAMES)("%s", (name) => {
    const R = LLAMA_REF.models[name]!;

    test("logits and loss equal torch's; far from the wrong variants; eager == lazy", () => {
      const model = load(name);
      const run = (mode: ExecutionMode) => inMode(mode, exact, () => {
        const { logits, loss } = model.call(int(R.input_ids), { labels: int(R.labels) });
        return { logits: (logits as Tensor).contiguous(), loss: (loss as Tensor).item() };
      });
      const lazy = run("lazy"), eager = run("eager");
      expectClose(lazy.logits, R.logits, ATOL, RTOL);
      expect(Math.abs(lazy.loss - R.loss)).toBeLessThan(1e-5);
      for (const [v, ref] of Object.entries(R.variants)) expect(maxAbsDiff(lazy.logits.dataSync(), ref), v).toBeGreaterThan(100 * ATOL);
      if (exact) {
        expect(Array.from(lazy.logits.dataSync())).toEqual(Array.from(eager.logits.dataSync()));
        expect(lazy.loss).toBe(eager.loss);
      } else {
        expectClose(eager.logits, R.logits, ATOL, RTOL);
        expect(Math.abs(eager.loss - R.loss)).toBeLessThan(1e-5);
      }
    });

    test("a left-padded 2-D attention_mask combines with the causal mask as HF's", () => {
      const model = load(name);
      for (const mode of ["eager", "lazy"] as const) {
        const { logits } = inMode(mode, exact, () => model.call(int(R.input_ids), { attention_mask: int(R.masked.attention_mask) }));
        expectClose(logits as Tensor, R.masked.logits, ATOL, RTOL);
      }
      // the padding changes row 1 only, and changes it
      expect(maxAbsDiff(span(R.masked.logits, 0, 9).slice(0, 9 * 40), span(R.logits, 0, 9).slice(0, 9 * 40))).toBe(0);
      expect(maxAbsDiff(R.masked.logits.data, R.logits.data)).toBeGreaterThan(0.1);
    });

    test("KV cache: prefill 5 then 4 decode steps equal the full forward at each position, eager and lazy", () => {
      const model = load(name);
      const ids = int(R.input_ids);
      for (const mode of ["eager", "lazy"] as const) {
        const cache = model.make_cache(ids, 12);
        const m0 = planCacheStats.misses;
        const steps = no_grad(() => inMode(mode, exact, () => [[0, 5], [5, 1], [6, 1], [7, 1], [8, 1]].map(([s, n]) => {
          const r0 = realizeStats.realizes;
          const out = model.call(ids.narrow(1, s!, n!).contiguous().clone(), { past_key_values: cache });
          expect(out.past_key_values).toBe(cache);
          const logits = (out.logits as Tensor).contiguous().dataSync();
          return { s: s!, n: n!, logits, misses: planCacheStats.misses - m0, realizes: realizeStats.realizes - r0 };
        })));
        if (mode === "lazy") {
          // positions are tensor values: one plan for the prefill, one for every decode step, one run per call
          expect(steps.at(-1)!.misses).toBe(steps[1]!.misses);
          expect(steps.at(-1)!.misses).toBeLessThanOrEqual(2);
          expect(steps.map((x) => x.realizes)).toEqual([1, 1, 1, 1, 1]);
        }
        for (const { s, n, logits } of steps) {
          const ref = span(R.logits, s, n);
          const bad = Array.from(logits).findIndex((x, i) => !(Math.abs(x - ref[i]!) <= ATOL + RTOL * Math.abs(ref[i]!)));
          expect(bad, `${mode} positions ${s}..${s + n - 1}`).toBe(-1);
        }
        expect(cache.get_seq_length()).toBe(9);
      }
    });

    test("LoRA on q_proj/v_proj: loss and lora_A/lora_B gradients equal torch's, then one AdamW step", () => {
      const { r, lora_alpha, targets } = LLAMA_REF.lora;
      const peft = get_peft_model(load(name), new LoraConfig({ r, lora_alpha, target_modules: targets, task_type: "CAUSAL_LM" }));
      const layers = lora_layers(peft);
      expect(layers.map(([p]) => p)).toEqual(["model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.v_proj", "model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.v_proj"]);
      no_grad(() => {
        for (const [p, l] of layers) {
          for (const ab of ["A", "B"] as const) {
            const ref = R.lora.init[`${p}.lora_${ab}.weight`]!;
            (ab === "A" ? l.lora_A : l.lora_B).get("default").weight.copy_(tensor(ref.data, { dtype: "float32" }).view(ref.shape));
          }
        }
      });
      const params = layers.flatMap(([p, l]) => [[`${p}.lora_A.weight`, l.lora_A.get("default").weight], [`${p}.lora_B.weight`, l.lora_B.get("default").weight]] as const);
      const opt = new AdamW(params.map(([, w]) => w), { ...LLAMA_REF.adamw });
      inMode("lazy", exact, () => {
        peft.train();
        const { loss } = peft.call(int(R.input_ids), { labels: int(R.labels) }) as { loss: Tensor };
        expect(Math.abs(loss.item() - R.lora.loss)).toBeLessThan(1e-5);
        loss.backward();
        for (const [k, w] of params) expectClose(w.grad!, R.lora.grads[k]!, 1e-5, 1e-3);
        opt.step();
      });
      // one AdamW step moves each value by ≈ lr = 1e-2 (Adam's normalized step): 1e-6 is a tight check
      for (const [k, w] of params) expectClose(w, R.lora.after_adamw[k]!, 1e-6, 1e-4);
      // base weights frozen and untouched
      expect(peft.parameters().filter((p) => p.requires_grad).length).toBe(params.length);
    });
  });
});

describe.each(BACKENDS)("Llama generate on %s", (backend) => {
  useBackend(backend);
  test.each(["eager", "lazy"] as const)("%s: a left-padded batch generates greedily what each prompt generates alone (HF generate)", (mode) => {
    for (const name of NAMES) {
      const model = load(name);
      const V = model.config.vocab_size;
      const prompts = [[3, 9, 4, 1, 7], [5, 2], [8, 8, 1]].map((r) => r.map((t) => t % V));
      const alone = prompts.map((p) => with_execution_mode(mode, () => model.generate(int([p]), { max_new_tokens: 4 })).tolist() as number[][]);
      const T = Math.max(...prompts.map((p) => p.length));
      const pad = 0;
      const ids = prompts.map((p) => [...new Array<number>(T - p.length).fill(pad), ...p]);
      const mask = prompts.map((p) => [...new Array<number>(T - p.length).fill(0), ...p.map(() => 1)]);
      const out = with_execution_mode(mode, () => model.generate(int(ids), { max_new_tokens: 4, attention_mask: int(mask), pad_token_id: pad })).tolist() as number[][];
      prompts.forEach((p, b) => expect(out[b]!.slice(T)).toEqual(alone[b]![0]!.slice(p.length)));
      // the new tokens follow the model's own argmax: the first one equals the full forward's
      const logits = no_grad(() => model.forward(int([prompts[0]!])).logits) as Tensor; // [1, T, V]
      expect(alone[0]![0]![prompts[0]!.length]).toBe((logits.narrow(1, prompts[0]!.length - 1, 1).argmax(-1).tolist() as number[][])[0]![0]);
    }
  });
});
