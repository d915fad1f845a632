/**
 * loom.lora: LoRA fine-tuning with PEFT's names, semantics and file format.
 *
 * ```ts
 * const config = new lora.LoraConfig({ r: 8, lora_alpha: 16, target_modules: ["attn.c_attn", "attn.c_proj"], task_type: "CAUSAL_LM" });
 * const peft = lora.get_peft_model(model, config);      // model is modified in place; only lora_A/lora_B train
 * ... train ...
 * lora.save_adapter(peft, "out/adapter");               // adapter_model.safetensors + adapter_config.json, loadable by PEFT
 * const merged = peft.merge_and_unload();               // plain model again, W + s·B·A
 * ```
 * Source: Hu et al. 2021 (https://arxiv.org/abs/2106.09685); https://github.com/huggingface/peft
 */
export {
  ADAPTER_CONFIG_NAME, ADAPTER_WEIGHTS_NAME, DEFAULT_TARGET_MODULES, LoraConfig, type LoraBias, type LoraConfigFields,
  type TaskType, check_target_module_exists, pattern_value,
} from "./config.ts";
export {
  LoraLayer, type LoraAdapterSpec, type LoraBaseLayer, type LoraCompressedBase, is_compressed_base, is_lora_target_layer,
} from "./layer.ts";
export {
  type InjectOptions, LoraModel, active_adapter, adapter_names, add_adapter, delete_adapter, disable_adapter,
  disable_adapter_layers, enable_adapter_layers, get_nb_trainable_parameters, has_adapter,
  inject_adapter_in_model, lora_layers, lora_parameters, mark_only_lora_as_trainable, merge_adapter, prepare_model_for_kbit_training, merge_and_unload,
  peft_config, set_adapter, trainable_parameters_summary, unload, unmerge_adapter, unwrap,
} from "./model.ts";
export { PeftModel, get_peft_model } from "./peft_model.ts";
export {
  type LoadAdapterOptions, PEFT_PREFIX, type SaveAdapterOptions, get_peft_model_state_dict, load_adapter, save_adapter,
  set_peft_model_state_dict,
} from "./save_load.ts";
export { tensor_from_io, tensor_to_io } from "./tensor_io.ts";
