/**
 * AutoConfig / AutoModelForCausalLM (transformers' auto classes): read a checkpoint directory's
 * `config.json`, dispatch on its `model_type` and load the matching class.
 *
 * | model_type | config      | model            |
 * |------------|-------------|------------------|
 * | gpt2       | GPT2Config  | GPT2LMHeadModel  |
 * | llama      | LlamaConfig | LlamaForCausalLM (SmolLM, TinyLlama, Llama 2/3 without rope scaling) |
 * | qwen2      | LlamaConfig | Qwen2ForCausalLM |
 * | mistral    | LlamaConfig | MistralForCausalLM |
 *
 * ```ts
 * const model = models.AutoModelForCausalLM.from_pretrained("path/to/SmolLM-135M");
 * const { logits } = model.call(input_ids);
 * ```
 * Source: transformers models/auto/configuration_auto.py, modeling_auto.py.
 */
import { resolve_pretrained_dir } from "../io/index.ts";
import { LoomValueError } from "../tensor/errors.ts";
import { GPT2LMHeadModel } from "./gpt2.ts";
import type { FromPretrainedOptions } from "./hf_checkpoint.ts";
import { GPT2Config } from "./gpt2_config.ts";
import { LLAMA_CAUSAL_LM, type LlamaForCausalLM } from "./llama.ts";
import { LLAMA_MODEL_TYPES, LlamaConfig, read_config_json, type LlamaModelType } from "./llama_config.ts";

/** The model_types the auto classes know. */
export const AUTO_MODEL_TYPES: readonly string[] = ["gpt2", ...LLAMA_MODEL_TYPES];

/** model_type of a config.json object. @throws LoomValueError naming the key and the file */
function model_type_of(d: Record<string, unknown>, path: string): string {
  const t = d.model_type;
  if (typeof t !== "string") throw new LoomValueError(`[AutoConfig] ${path} has no "model_type" key (a string); cannot tell which model it configures (known: ${AUTO_MODEL_TYPES.join(", ")})`);
  if (!AUTO_MODEL_TYPES.includes(t)) throw new LoomValueError(`[AutoConfig] ${path}: "model_type" is "${t}", which Loom does not implement (known: ${AUTO_MODEL_TYPES.join(", ")})`);
  return t;
}

export class AutoConfig {
  /**
   * The config of `dir/config.json`, by its model_type.
   * @throws LoomValueError for a missing file, an unknown or missing model_type (naming the key
   *   and the file), or an invalid config
   */
  static from_pretrained(dir: string, opts: { revision?: string } = {}): GPT2Config | LlamaConfig {
    dir = resolve_pretrained_dir(dir, opts.revision);
    const [d, path] = read_config_json(dir, "[AutoConfig.from_pretrained]");
    const t = model_type_of(d, path);
    if (t === "gpt2") return GPT2Config.from_dict(d);
    return LlamaConfig.from_dict(d, path);
  }
}

/** Options of AutoModelForCausalLM.from_pretrained (those of the classes it dispatches to). */
export type AutoFromPretrainedOptions = FromPretrainedOptions;

export class AutoModelForCausalLM {
  /**
   * Load `dir` (config.json + safetensors) as the causal-LM class of its model_type.
   * @throws LoomValueError for an unknown model_type (naming the key and the file) and whatever
   *   the class's from_pretrained throws
   */
  static from_pretrained(dir: string, opts: AutoFromPretrainedOptions = {}): GPT2LMHeadModel | LlamaForCausalLM {
    dir = resolve_pretrained_dir(dir, opts.revision);
    const [d, path] = read_config_json(dir, "[AutoModelForCausalLM.from_pretrained]");
    const t = model_type_of(d, path);
    if (t === "gpt2") return GPT2LMHeadModel.from_pretrained(dir, opts);
    return LLAMA_CAUSAL_LM[t as LlamaModelType].from_pretrained(dir, opts);
  }
}
