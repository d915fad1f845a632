/**
 * A small char GPT checkpoint and LoRA adapter in the main job's format (config.json,
 * model.safetensors, vocab.json; adapter_config.json, adapter_model.safetensors), seeded, for
 * the browser test and the Deno WebGPU test. Written with the public API only.
 */
import { join } from "node:path";
import type * as Loom from "../../src/index.ts";

/** Write `dir/model/` and `dir/adapter/`; returns the tokenizer's vocabulary size. */
export function writeDemoCheckpoint(loom: typeof Loom, dir: string): { vocab_size: number } {
  loom.manual_seed(0);
  const tok = loom.models.CharTokenizer.from_text("\nAabdeilmnorsty ");
  const config = new loom.models.GPT2Config({ vocab_size: tok.vocab_size, n_positions: 32, n_embd: 32, n_layer: 2, n_head: 4, resid_pdrop: 0, embd_pdrop: 0, attn_pdrop: 0 });
  const base = new loom.models.GPT2LMHeadModel(config, { generator: new loom.Generator(1) });
  // a wider init than GPT-2's 0.02, so that logits are O(1) and the comparisons are not trivially close
  loom.no_grad(() => {
    const g = new loom.Generator(3);
    for (const [name, p] of base.named_parameters()) if (name.endsWith(".weight") && p.dim() === 2) p.copy_(loom.randn([...p.shape], { generator: g }).mul(0.3));
  });
  loom.models.save_checkpoint(base, join(dir, "model"), { skip: ["lm_head.weight"] });
  config.save_pretrained(join(dir, "model"));
  tok.save_pretrained(join(dir, "model"));
  const peft = loom.lora.get_peft_model(base, new loom.lora.LoraConfig({ r: 4, lora_alpha: 8, target_modules: ["c_attn", "c_proj"], fan_in_fan_out: true, task_type: "CAUSAL_LM" }));
  loom.no_grad(() => {
    const g = new loom.Generator(2);
    for (const [name, p] of peft.named_parameters()) if (name.includes("lora_B")) p.copy_(loom.randn([...p.shape], { generator: g }).mul(0.2));
  });
  loom.lora.save_adapter(peft, join(dir, "adapter"));
  return { vocab_size: tok.vocab_size };
}
