/**
 * PeftModel: PEFT's wrapper around a model with LoRA, with PEFT's methods (`save_pretrained`,
 * `from_pretrained`, `add_adapter`, `set_adapter`, `disable_adapter`, `merge_and_unload`, ...)
 * bound to the functions of model.ts and save_load.ts.
 * Source: https://github.com/huggingface/peft/blob/main/src/peft/peft_model.py
 */
import { Module } from "../nn/module.ts";
import type { LoraConfig } from "./config.ts";
import {
  type InjectOptions, LoraModel, active_adapter, add_adapter, delete_adapter, disable_adapter, get_nb_trainable_parameters,
  inject_adapter_in_model, merge_adapter, merge_and_unload, peft_config, set_adapter, trainable_parameters_summary, unload,
  unmerge_adapter,
} from "./model.ts";
import { type LoadAdapterOptions, type SaveAdapterOptions, load_adapter, save_adapter } from "./save_load.ts";

/**
 * PEFT's PeftModel: `base_model` is a LoraModel around your model, so `state_dict()` keys are
 * PEFT's in-memory keys (`base_model.model.<path>.lora_A.default.weight`). Forward (`call`) is
 * your model's; the methods are the functions of model.ts and save_load.ts bound to it.
 */
export class PeftModel<M extends Module = Module> extends Module {
  base_model: LoraModel<M>;

  /** Wraps `model` (already injected, see get_peft_model). */
  constructor(model: M) {
    super();
    this.base_model = new LoraModel(model);
  }
  override forward_lazy(...args: any[]): any {
    return this.base_model.model.forward_lazy(...args);
  }
  /** The model LoRA was injected into (PEFT get_base_model). */
  get_base_model(): M {
    return this.base_model.model;
  }
  get peft_config(): Map<string, LoraConfig> {
    return peft_config(this);
  }
  get active_adapter(): string | string[] {
    return active_adapter(this);
  }
  add_adapter(adapter_name: string, config: LoraConfig, opts: InjectOptions = {}): void {
    add_adapter(this, adapter_name, config, opts);
  }
  set_adapter(adapter_name: string | string[]): void {
    set_adapter(this, adapter_name);
  }
  delete_adapter(adapter_name: string): void {
    delete_adapter(this, adapter_name);
  }
  /** Run fn with adapters disabled (`with model.disable_adapter():`). */
  disable_adapter<R>(fn: () => R): R {
    return disable_adapter(this, fn);
  }
  merge_adapter(opts: { safe_merge?: boolean; adapter_names?: string[] } = {}): void {
    merge_adapter(this, opts);
  }
  unmerge_adapter(): void {
    unmerge_adapter(this);
  }
  merge_and_unload(opts: { safe_merge?: boolean; adapter_names?: string[] } = {}): M {
    return merge_and_unload<M>(this, opts);
  }
  unload(): M {
    return unload<M>(this);
  }
  /** Save an adapter as PEFT does (adapter_model.safetensors + adapter_config.json). @returns the saved keys */
  save_pretrained(dir: string, opts: SaveAdapterOptions = {}): string[] {
    return save_adapter(this, dir, opts);
  }
  /** Load a PEFT adapter directory as adapter `adapter_name` (PeftModel.load_adapter). */
  load_adapter(dir: string, adapter_name: string, opts: LoadAdapterOptions = {}): LoraConfig {
    return load_adapter(this, dir, adapter_name, opts);
  }
  /**
   * Load the PEFT adapter in `dir` into `model` (in place) and wrap it (PEFT
   * PeftModel.from_pretrained): frozen, inference mode, unless opts.is_trainable.
   */
  static from_pretrained<M extends Module>(model: M, dir: string, opts: LoadAdapterOptions & { adapter_name?: string } = {}): PeftModel<M> {
    load_adapter(model, dir, opts.adapter_name ?? "default", opts);
    return new PeftModel(model);
  }
  get_nb_trainable_parameters(): [number, number] {
    return get_nb_trainable_parameters(this);
  }
  print_trainable_parameters(): void {
    console.log(trainable_parameters_summary(this));
  }
}

/**
 * Inject adapter `adapter_name` from `config` into `model` and wrap it as a PeftModel (PEFT
 * get_peft_model). `model` itself is modified in place and stays usable directly.
 * @throws LoomValueError as inject_adapter_in_model
 */
export function get_peft_model<M extends Module>(model: M, config: LoraConfig, adapter_name = "default", opts: InjectOptions = {}): PeftModel<M> {
  inject_adapter_in_model(config, model, adapter_name, opts);
  return new PeftModel(model);
}

