/**
 * PEFT adapter files: `adapter_model.safetensors` + `adapter_config.json`.
 *
 * Saved keys are PEFT's: `base_model.model.<module path>.lora_A.weight` [r, in] and
 * `.lora_B.weight` [out, r] — the in-memory key without the adapter name — plus, for
 * bias "all"/"lora_only", the trained biases under their PeftModel keys. The safetensors
 * metadata is {"format": "pt"} and the saved config says inference_mode: true, as PEFT writes.
 * Source: https://github.com/huggingface/peft/blob/main/src/peft/utils/save_and_load.py
 * (get_peft_model_state_dict, set_peft_model_state_dict) and peft_model.py (save_pretrained,
 * load_adapter).
 */
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { load_file, resolveCheckpointFile, save_file, type TensorLike } from "../io/index.ts";
import type { Tensor } from "../lazy/tensor.ts";
import type { Module } from "../nn/module.ts";
import { LoomFormatError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { ADAPTER_CONFIG_NAME, ADAPTER_WEIGHTS_NAME, LoraConfig } from "./config.ts";
import {
  type InjectOptions, adapter_names, delete_adapter, has_adapter, inject_adapter_in_model, lora_layers, peft_config, unload, unwrap,
} from "./model.ts";
import { tensor_from_io, tensor_to_io } from "./tensor_io.ts";

/** The prefix PEFT's PeftModel (base_model) + LoraModel (model) put before module paths. */
export const PEFT_PREFIX = "base_model.model.";

/**
 * The adapter's tensors under PEFT's saved names (PEFT get_peft_model_state_dict):
 * `base_model.model.<path>.lora_A.weight`, `.lora_B.weight`, and biases for bias "all"
 * (every bias) or "lora_only" (biases of wrapped layers, `<path>.base_layer.bias`).
 * @returns key -> tensor sharing the parameters' buffers
 * @throws LoomValueError if the model has no such adapter
 */
export function get_peft_model_state_dict(model: Module, adapter_name = "default"): Map<string, Tensor> {
  const config = peft_config(model).get(adapter_name);
  if (!config) throw new LoomValueError(`[get_peft_model_state_dict] no adapter "${adapter_name}" (adapters: ${[...peft_config(model).keys()].join(", ")})`);
  const root = unwrap(model);
  const out = new Map<string, Tensor>();
  for (const [path, l] of lora_layers(root)) {
    if (!l.adapters.includes(adapter_name)) continue;
    out.set(`${PEFT_PREFIX}${path}.lora_A.weight`, l.lora_A.get(adapter_name).weight.detach());
    out.set(`${PEFT_PREFIX}${path}.lora_B.weight`, l.lora_B.get(adapter_name).weight.detach());
    if (config.bias === "lora_only" && l.base_layer.bias) out.set(`${PEFT_PREFIX}${path}.base_layer.bias`, l.base_layer.bias.detach());
  }
  if (config.bias === "all") {
    for (const [k, t] of Object.entries(root.state_dict())) if (k.endsWith("bias") && !k.includes("lora_")) out.set(PEFT_PREFIX + k, t);
  }
  return out;
}

/**
 * Load tensors saved with PEFT names into adapter `adapter_name` (PEFT set_peft_model_state_dict):
 * `<path>.lora_A.weight` goes to `<path>.lora_A.<adapter_name>.weight`; other keys (biases) load
 * into the model as they are. A missing "base_model.model." prefix is accepted.
 * @throws LoomValueError listing LoRA weights of the adapter the file lacks, keys that match
 *   nothing in the model, and shape mismatches (e.g. a different r); nothing is copied then
 */
export function set_peft_model_state_dict(model: Module, state: ReadonlyMap<string, Tensor>, adapter_name = "default"): void {
  const root = unwrap(model);
  const own = root.state_dict({ keep_vars: true });
  const want = new Map<string, Tensor>(); // in-memory key -> parameter
  for (const [path, l] of lora_layers(root)) {
    if (!l.adapters.includes(adapter_name)) continue;
    want.set(`${path}.lora_A.weight`, l.lora_A.get(adapter_name).weight);
    want.set(`${path}.lora_B.weight`, l.lora_B.get(adapter_name).weight);
  }
  const errors: string[] = [];
  const copies: [Tensor, Tensor][] = [];
  const seen = new Set<string>();
  for (const [key, t] of state) {
    const k = key.startsWith(PEFT_PREFIX) ? key.slice(PEFT_PREFIX.length) : key;
    // hasOwn: a key such as "constructor" or "__proto__" must not find Object.prototype's members
    const dst = want.get(k) ?? (k.includes("lora_") || !Object.hasOwn(own, k) ? undefined : own[k]);
    if (!dst) {
      errors.push(`unexpected key "${key}" (no such LoRA weight or parameter for adapter "${adapter_name}")`);
      continue;
    }
    seen.add(k);
    if (t.shape.length !== dst.shape.length || t.shape.some((s, i) => s !== dst.shape[i])) {
      errors.push(`size mismatch for ${key}: copying a param with shape ${fmtShape(t.shape)} from checkpoint, the shape in current model is ${fmtShape(dst.shape)}`);
      continue;
    }
    copies.push([dst, t]);
  }
  const missing = [...want.keys()].filter((k) => !seen.has(k));
  if (missing.length) errors.push(`missing LoRA weights: ${missing.map((k) => PEFT_PREFIX + k).join(", ")}`);
  if (errors.length) throw new LoomValueError(`[set_peft_model_state_dict] Error(s) loading adapter "${adapter_name}":\n\t${errors.join("\n\t")}`);
  for (const [dst, src] of copies) dst.detach().copy_(src.device === dst.device ? src : src.to(dst.device));
}

export interface SaveAdapterOptions {
  /** Which adapter to save (default "default"). */
  adapter_name?: string;
  /** Recorded as base_model_name_or_path in adapter_config.json. */
  base_model_name_or_path?: string | null;
}

/**
 * Save adapter `adapter_name` as PEFT does: `dir/adapter_model.safetensors` (PEFT keys,
 * metadata {"format": "pt"}) and `dir/adapter_config.json` (inference_mode true).
 * @returns the saved keys
 * @throws LoomValueError if the model has no such adapter
 */
export function save_adapter(model: Module, dir: string, opts: SaveAdapterOptions = {}): string[] {
  const name = opts.adapter_name ?? "default";
  const sd = get_peft_model_state_dict(model, name);
  const config = peft_config(model).get(name)!;
  const saved = config.replace({
    inference_mode: true,
    ...(opts.base_model_name_or_path !== undefined ? { base_model_name_or_path: opts.base_model_name_or_path } : {}),
  });
  mkdirSync(dir, { recursive: true });
  const tensors = new Map<string, TensorLike>([...sd].map(([k, t]) => [k, tensor_to_io(t)]));
  save_file(tensors, join(dir, ADAPTER_WEIGHTS_NAME), { format: "pt" });
  saved.save_pretrained(dir);
  return [...tensors.keys()];
}

export interface LoadAdapterOptions extends InjectOptions {
  /** Keep the loaded adapter trainable (default false: frozen, inference mode, as PEFT). */
  is_trainable?: boolean;
}

/**
 * Load a PEFT adapter directory into `model` as adapter `adapter_name` (PEFT load_adapter /
 * PeftModel.from_pretrained): reads adapter_config.json, injects the adapter if the model does
 * not have it yet, copies the weights. The first adapter of a model becomes active; a further
 * one is added inactive (set_adapter to use it).
 * On an error the model is left as it was (an adapter this call injected is removed again).
 * @returns the adapter's config
 * @throws LoomValueError for missing files, an invalid config, or weights that do not fit
 *   (see set_peft_model_state_dict); LoomFormatError for a malformed safetensors file, or an
 *   adapter file that is not a regular file or is a symlink resolving outside `dir` (or outside
 *   the models--* folder of a Hugging Face cache snapshot)
 */
export function load_adapter(model: Module, dir: string, adapter_name = "default", opts: LoadAdapterOptions = {}): LoraConfig {
  // a regular file (load_file refuses a directory or FIFO) inside dir or its Hugging Face cache folder
  const file = resolveCheckpointFile(dir, ADAPTER_WEIGHTS_NAME, (reason) => new LoomFormatError(`[load_adapter] ${join(dir, ADAPTER_WEIGHTS_NAME)}: ${reason}`));
  if (file === null) throw new LoomValueError(`[load_adapter] no ${ADAPTER_WEIGHTS_NAME} in ${dir}`);
  if (!existsSync(join(dir, ADAPTER_CONFIG_NAME))) throw new LoomValueError(`[load_adapter] no ${ADAPTER_CONFIG_NAME} in ${dir}`);
  const config = LoraConfig.from_pretrained(dir).replace({ inference_mode: !opts.is_trainable });
  const injected = !has_adapter(model, adapter_name);
  const first = injected && adapter_names(model).length === 0;
  if (injected) inject_adapter_in_model(config, model, adapter_name, opts);
  try {
    const { tensors } = load_file(file);
    set_peft_model_state_dict(model, new Map([...tensors].map(([k, t]) => [k, tensor_from_io(t)])), adapter_name);
  } catch (e) {
    // leave the model as it was: remove what this call injected
    if (first) unload(model);
    else if (injected) delete_adapter(model, adapter_name);
    throw e;
  }
  if (!opts.is_trainable) {
    for (const [, l] of lora_layers(model)) {
      if (!l.adapters.includes(adapter_name)) continue;
      l.lora_A.get(adapter_name).requires_grad_(false);
      l.lora_B.get(adapter_name).requires_grad_(false);
    }
  }
  return config;
}
