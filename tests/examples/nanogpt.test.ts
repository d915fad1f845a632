/**
 * The nanoGPT port (examples/nanogpt.ts) behaves as nanoGPT's model.py: weight tying, the scaled
 * init of the residual projections, configure_optimizers' weight-decay groups (2-D parameters
 * decayed, the rest not), training in lazy mode (one plan per step, eager == lazy, the loss
 * falls), generate with top_k (reproducible given a generator; top_k = 1 is the greedy argmax
 * chain), crop_block_size, and from_pretrained from a Hugging Face GPT-2 directory (logits equal
 * to Loom's GPT2LMHeadModel with the same exact GELU).
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { models, nn } from "../../src/index.ts";
import { FLOAT32_TOLERANCE, type Contract } from "../../src/backends/catalog.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { expectWithinContract } from "../catalog/helpers.ts";
import { GPT, GPTConfig, train_tiny } from "../../examples/nanogpt.ts";

process.env.NANOGPT_QUIET = "1"; // nanoGPT's prints (parameter counts, optimizer groups)

const tiny = (over: Partial<GPTConfig> = {}) => new GPTConfig({ block_size: 8, vocab_size: 11, n_layer: 2, n_head: 2, n_embd: 16, dropout: 0, bias: true, ...over });

describe("model structure", () => {
  test("tied embeddings, nanoGPT's state dict keys and parameter counts", () => {
    loom.manual_seed(0);
    const m = new GPT(tiny());
    expect(m.wte.weight).toBe(m.lm_head.weight);
    const keys = Object.keys(m.state_dict());
    expect(keys.slice(0, 3)).toEqual(["transformer.wte.weight", "transformer.wpe.weight", "transformer.h.0.ln_1.weight"]);
    expect(keys).toContain("transformer.h.1.attn.c_attn.weight");
    expect(keys.at(-1)).toBe("lm_head.weight");
    // C = 16, V = 11, T = 8, L = 2: per block 2·2C (ln) + 3C·C+3C + C·C+C + 4C·C+4C + C·4C+C = 12C² + 13C
    const C = 16, perBlock = 12 * C * C + 13 * C;
    const total = 11 * C + 8 * C + 2 * perBlock + 2 * C; // wte (= lm_head), wpe, blocks, ln_f
    expect(m.get_num_params(false)).toBe(total);
    expect(m.get_num_params()).toBe(total - 8 * C);
  });

  test("_init_weights: N(0, 0.02), zero biases; c_proj weights N(0, 0.02/√(2·n_layer))", () => {
    loom.manual_seed(1);
    const m = new GPT(tiny({ n_embd: 32, n_layer: 2 }));
    const std = (t: loom.Tensor) => Math.sqrt(t.square().mean().item());
    const named = Object.fromEntries(m.named_parameters());
    // 4096 draws: the sample std is within 5% of σ with overwhelming probability
    expect(std(named["transformer.h.0.mlp.c_proj.weight"]!) / (0.02 / 2)).toBeCloseTo(1, 1);
    expect(std(named["transformer.h.0.mlp.c_fc.weight"]!) / 0.02).toBeCloseTo(1, 1);
    for (const [n, p] of m.named_parameters()) if (n.endsWith(".bias") && !n.includes("ln")) expect(p.abs().max().item()).toBe(0);
    expect(named["transformer.ln_f.weight"]!.dataSync().every((x) => x === 1)).toBe(true);
  });

  test("configure_optimizers: 2-D parameters decayed, biases and LayerNorm weights not", () => {
    loom.manual_seed(2);
    const m = new GPT(tiny());
    const opt = m.configure_optimizers(0.1, 6e-4, [0.9, 0.95], "cpu");
    expect(opt).toBeInstanceOf(loom.optim.AdamW);
    const [decay, nodecay] = opt.param_groups;
    const names = new Map(m.named_parameters().map(([n, p]) => [p, n]));
    const dn = decay!.params.map((p) => names.get(p as nn.Parameter)!);
    const nn_ = nodecay!.params.map((p) => names.get(p as nn.Parameter)!);
    expect(decay!.weight_decay).toBe(0.1);
    expect(nodecay!.weight_decay).toBe(0);
    expect(decay!.lr).toBe(6e-4);
    expect(decay!.betas).toEqual([0.9, 0.95]);
    // wte appears once (lm_head.weight is the same tensor), then wpe and the four matrices per block
    expect(dn).toEqual([
      "transformer.wte.weight", "transformer.wpe.weight",
      ...[0, 1].flatMap((i) => ["attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"].map((s) => `transformer.h.${i}.${s}`)),
    ]);
    expect(nn_.every((n) => n.endsWith(".bias") || n.includes("ln"))).toBe(true);
    expect(nn_.length).toBe(2 * 8 + 2); // per block: 2 LayerNorms × 2 + 4 Linear biases; ln_f weight and bias
    expect(decay!.params.length + nodecay!.params.length).toBe(m.parameters().length);
    expect(m.configure_optimizers(0.1, 1e-3, [0.9, 0.95], "cuda").param_groups[0]!.fused).toBe(true);
  });

  test("flash (scaled_dot_product_attention) and manual attention give the same logits", () => {
    loom.manual_seed(3);
    const a = new GPT(tiny());
    const b = new GPT(tiny({ _manual_attention: true }));
    b.load_state_dict(a.state_dict(), false); // b also has the causal-mask buffers
    expect(b.h.get(0).attn.bias!.shape).toEqual([1, 1, 8, 8]);
    const idx = loom.randint(0, 11, [2, 8]);
    const [la] = a.call(idx, idx);
    const [lb] = b.call(idx, idx);
    const FLOAT32: Contract = { kind: "bound", ...(FLOAT32_TOLERANCE as { atol: number; rtol: number }), source: "torch.testing float32" };
    expectWithinContract(la.dataSync(), lb.dataSync(), FLOAT32, { float64: true, what: "logits" });
  });

  test("forward without targets gives the last position only; too long a sequence raises", () => {
    loom.manual_seed(4);
    const m = new GPT(tiny());
    const [logits, loss] = m.call(loom.randint(0, 11, [3, 5]));
    expect(logits.shape).toEqual([3, 1, 11]);
    expect(loss).toBeNull();
    expect(() => m.call(loom.randint(0, 11, [1, 9]))).toThrow("Cannot forward sequence of length 9, block size is only 8");
  });

  test("crop_block_size shrinks wpe and the masks", () => {
    loom.manual_seed(5);
    const m = new GPT(tiny({ _manual_attention: true }));
    const wpe = m.wpe.weight.dataSync().slice(0, 4 * 16);
    m.crop_block_size(4);
    expect(m.wpe.weight.shape).toEqual([4, 16]);
    expect(Array.from(m.wpe.weight.dataSync())).toEqual(Array.from(wpe));
    expect(m.h.get(1).attn.bias!.shape).toEqual([1, 1, 4, 4]);
    expect(m.call(loom.randint(0, 11, [1, 4]))[0].shape).toEqual([1, 1, 11]);
    expect(() => m.call(loom.randint(0, 11, [1, 5]))).toThrow("block size is only 4");
  });
});

interface Run { losses: number[]; params: Float64Array[]; plansPerStep: number[] }

/** 5 AdamW steps of nanoGPT's training loop on fixed batches, in one execution mode. */
function train(mode: nn.ExecutionMode): Run {
  loom.manual_seed(7);
  const model = new GPT(tiny({ bias: false }));
  const optimizer = model.configure_optimizers(0.1, 1e-2, [0.9, 0.95], "cpu");
  const X = loom.randint(0, 11, [4, 8]), Y = loom.randint(0, 11, [4, 8]);
  const losses: number[] = [], plansPerStep: number[] = [];
  nn.with_execution_mode(mode, () => {
    for (let step = 0; step < 5; step++) {
      const r0 = loom.realizeStats.realizes;
      const [, loss] = model.call(X, Y);
      optimizer.zero_grad(true);
      loss!.backward();
      optimizer.step();
      losses.push(loss!.item());
      if (step > 0) plansPerStep.push(loom.realizeStats.realizes - r0);
    }
  });
  return { losses, params: model.parameters().map((p) => p.dataSync()), plansPerStep };
}

describe.each(BACKENDS)("nanoGPT training on %s", (backend) => {
  useBackend(backend);
  test("lazy: one plan per step, the loss falls, eager == lazy", () => {
    const exact = backend === "js";
    const lazy = exact ? loom.with_compiler_options({ tolerance: "exact" }, () => train("lazy")) : train("lazy");
    const eager = train("eager");
    expect(lazy.plansPerStep).toEqual([1, 1, 1, 1]);
    expect(lazy.losses.at(-1)!).toBeLessThan(lazy.losses[0]! * 0.9);
    if (exact) {
      expect(lazy.losses).toEqual(eager.losses);
      lazy.params.forEach((p, i) => expect(Array.from(p)).toEqual(Array.from(eager.params[i]!)));
    } else {
      const FLOAT32: Contract = { kind: "bound", ...(FLOAT32_TOLERANCE as { atol: number; rtol: number }), source: "torch.testing float32" };
      expectWithinContract(lazy.losses, eager.losses, FLOAT32, { float64: true, what: "losses" });
      lazy.params.forEach((p, i) => expectWithinContract(p, eager.params[i]!, FLOAT32, { float64: true, what: `param ${i}` }));
    }
  });
});

describe.each(BACKENDS)("generate on %s", (backend) => {
  useBackend(backend);
  test("top_k sampling is reproducible given a generator and stays within the top k", () => {
    loom.manual_seed(8);
    const m = new GPT(tiny()).eval();
    const start = loom.tensor([[1, 2], [3, 4]], { dtype: "int64" });
    const a = m.generate(start, 10, 1.0, 3, new loom.Generator(123));
    const b = m.generate(start, 10, 1.0, 3, new loom.Generator(123));
    expect(a.shape).toEqual([2, 12]);
    expect(a.tolist()).toEqual(b.tolist());
    expect((a.tolist() as number[][]).map((r) => r.slice(0, 2))).toEqual([[1, 2], [3, 4]]);
    // every sampled token is among the 3 largest logits of its context (contexts cropped to block_size 8)
    const rows = a.tolist() as number[][];
    for (let s = 2; s < 12; s++) {
      const ctx = loom.tensor(rows.map((r) => r.slice(Math.max(0, s - 8), s)), { dtype: "int64" });
      const [logits] = loom.no_grad(() => m.call(ctx));
      const [, top] = loom.topk(logits.index(":", -1, ":"), 3);
      (top.tolist() as number[][]).forEach((t, r) => expect(t).toContain(rows[r]![s]!));
    }
  });

  test("top_k = 1 is the greedy argmax chain", () => {
    loom.manual_seed(9);
    const m = new GPT(tiny()).eval();
    const out = m.generate(loom.tensor([[5]], { dtype: "int64" }), 6, 0.7, 1, new loom.Generator(0)).tolist() as number[][];
    const greedy = [5];
    for (let s = 0; s < 6; s++) {
      const [logits] = loom.no_grad(() => m.call(loom.tensor([greedy.slice(-8)], { dtype: "int64" })));
      greedy.push(logits.index(0, -1).argmax().item());
    }
    expect(out[0]).toEqual(greedy);
  });
});

describe.each(BACKENDS)("from_pretrained on %s", (backend) => {
  useBackend(backend);
  test("a Hugging Face GPT-2 directory: Conv1D weights transposed, logits equal GPT2LMHeadModel's", () => {
    const dir = new URL("../models/fixtures/tiny_gpt2", import.meta.url).pathname;
    const m = GPT.from_pretrained(dir);
    const hf = models.GPT2LMHeadModel.from_pretrained(dir);
    const sd = m.state_dict(), sd_hf = hf.state_dict();
    expect(Array.from(sd["transformer.h.0.attn.c_attn.weight"]!.dataSync())).toEqual(Array.from(sd_hf["transformer.h.0.attn.c_attn.weight"]!.t().contiguous().dataSync()));
    expect(m.wte.weight).toBe(m.lm_head.weight);
    // nanoGPT's MLP uses the exact GELU; the checkpoint says gelu_new (tanh): compare with that changed
    const cfg = models.GPT2Config.from_pretrained(dir);
    cfg.activation_function = "gelu";
    const ref = new models.GPT2LMHeadModel(cfg);
    ref.load_state_dict(hf.state_dict());
    const idx = loom.tensor([[10, 2, 1, 12, 0, 0, 0], [3, 9, 4, 2, 0, 9, 12]], { dtype: "int64" });
    m.eval(); ref.eval();
    const [logits] = m.call(idx, idx);
    const FLOAT32: Contract = { kind: "bound", ...(FLOAT32_TOLERANCE as { atol: number; rtol: number }), source: "torch.testing float32" };
    expectWithinContract(logits.dataSync(), ref.call(idx).logits.dataSync(), FLOAT32, { float64: true, what: "logits" });
  });
});

test("the example's character-level run (bun examples/nanogpt.ts --steps 6) trains and samples", () => {
  const { model, losses, itos } = train_tiny(6);
  expect(losses.length).toBe(6);
  expect(losses.at(-1)!).toBeLessThan(losses[0]!);
  const out = model.eval().generate(loom.tensor([[0]], { dtype: "int64" }), 5, 0.8, 5, new loom.Generator(42));
  expect((out.tolist() as number[][])[0]!.every((t) => t >= 0 && t < itos.length)).toBe(true);
});
