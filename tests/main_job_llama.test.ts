/**
 * The main job's Llama path (examples/llama_pipeline.ts, `npm start -- --model llama`) end to
 * end at toy size: pretrain a tiny Llama (GQA, tied embeddings) with GPT-2's r50k BPE on
 * Moby-Dick, check the folder it saves loads with AutoModelForCausalLM + AutoTokenizer to the
 * same logits and ids, then LoRA-fine-tune it on the first-names corpus with PEFT's names, save
 * the adapter in PEFT's layout and reload it.
 */
import { expect, test } from "bun:test";
import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { encode_cached } from "../examples/data.ts";
import { llama_finetune, pretrain_llama, write_llama_plots } from "../examples/llama_pipeline.ts";
import { read_header_file } from "../src/io/index.ts";
import { tensor } from "../src/lazy/creation.ts";
import { AutoModelForCausalLM } from "../src/models/auto.ts";
import { LlamaForCausalLM } from "../src/models/llama.ts";
import { AutoTokenizer } from "../src/tokenizers/auto.ts";
import { gpt2_tokenizer } from "../src/tokenizers/gpt2_bpe.ts";
import { tmp } from "./models/helpers.ts";
import { check_loss_svg } from "./svg_check.ts";

const TINY = {
  hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1,
  block_size: 16, batch_size: 8, eval_every: 20, eval_batches: 2, sample_tokens: 8, verbose: false,
};

test("Llama + GPT-2 BPE: pretrain (loss falls), HF folder reloads with the Auto classes, LoRA q_proj/v_proj adapter saved and reloaded", async () => {
  const dir = tmp("main-job-llama");
  const ckpt = join(dir, "llama"), out = join(dir, "adapter");
  const pre = await pretrain_llama({ ...TINY, pretrain_steps: 20, pretrain_lr: 2e-2, checkpoint: ckpt });
  // ln(50257) = 10.82 at the start; a unigram-ish model of Moby-Dick after 20 steps (8.19)
  expect(pre.val_history[0]![1]).toBeGreaterThan(10.5);
  expect(pre.val_history.at(-1)![1]).toBeLessThan(pre.val_history[0]![1] - 2);
  for (const f of ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]) expect(existsSync(join(ckpt, f))).toBe(true);
  const keys = [...read_header_file(join(ckpt, "model.safetensors")).tensors.keys()];
  expect(keys).toContain("model.layers.0.self_attn.k_proj.weight");
  expect(keys).not.toContain("lm_head.weight"); // tied: transformers does not write it either

  // the folder as a user loads it: model_type "llama" -> LlamaForCausalLM, GPT-2's real ids
  const model = AutoModelForCausalLM.from_pretrained(ckpt);
  expect(model).toBeInstanceOf(LlamaForCausalLM);
  const config = (model as LlamaForCausalLM).config;
  expect([config.vocab_size, config.num_attention_heads, config.num_key_value_heads, config.tie_word_embeddings]).toEqual([50257, 2, 1, true]);
  const tok = AutoTokenizer.from_pretrained(ckpt);
  expect(tok.encode("Hello world")).toEqual([15496, 995]); // GPT-2's ids (tiktoken r50k_base)
  expect(tok.decode(tok.encode("Call me Ishmael."))).toBe("Call me Ishmael.");
  const x = tensor([tok.encode("Call me Ishmael. Some years ago")], { dtype: "int64" });
  expect(Array.from((model as LlamaForCausalLM).call(x).logits.dataSync())).toEqual(Array.from(pre.model.call(x).logits.dataSync()));

  const r = await llama_finetune({ ...TINY, steps: 20, lr: 3e-2, rank: 4, lora_alpha: 8, corpus: "names", checkpoint: ckpt, out });
  expect(r.pretrain).toBeUndefined(); // the checkpoint existed
  expect(r.val_after).toBeLessThan(r.val_before - 0.15); // 9.31 -> 9.03
  expect(r.reload_max_abs_diff).toBe(0);
  expect(r.merge_max_abs_diff).toBeLessThan(1e-4);
  expect(r.sample_after.length).toBeGreaterThan(0);
  const adapter = [...read_header_file(join(out, "adapter_model.safetensors")).tensors.keys()].sort();
  expect(adapter).toEqual([
    "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight",
    "base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight", "base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight",
  ]);
  const acfg = JSON.parse(readFileSync(join(out, "adapter_config.json"), "utf8"));
  expect(acfg).toMatchObject({ peft_type: "LORA", r: 4, lora_alpha: 8, target_modules: ["q_proj", "v_proj"], task_type: "CAUSAL_LM", base_model_name_or_path: ckpt });
  const paths = await write_llama_plots(r, { out, checkpoint: ckpt, rank: 4, corpus: "names", verbose: false });
  check_loss_svg(readFileSync(paths[0]!, "utf8"), ["train (smoothed)", "validation"], [20, 2]);
  rmSync(dir, { recursive: true });
}, 120_000);

test("encode_cached: the tokenizer's ids, written once under a key of tokenizer.json and text, then read back", async () => {
  const dir = tmp("encode-cache");
  const tok = await gpt2_tokenizer();
  const text = "Call me Ishmael. Some years ago—never mind how long precisely—";
  const ids = encode_cached(text, tok, dir);
  expect(Array.from(ids)).toEqual(tok.encode(text, { add_special_tokens: false }));
  const files = readdirSync(dir);
  expect(files).toHaveLength(1);
  writeFileSync(join(dir, files[0]!), new Uint8Array(Int32Array.of(7, 8, 9).buffer)); // a hit reads the file, not the tokenizer
  expect(Array.from(encode_cached(text, tok, dir))).toEqual([7, 8, 9]);
  expect(Array.from(encode_cached(text + " ", tok, dir))).toEqual(tok.encode(text + " ", { add_special_tokens: false })); // another text, another key
  expect(readdirSync(dir)).toHaveLength(2);
  rmSync(dir, { recursive: true });
});
