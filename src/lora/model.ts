/**
 * LoRA on a whole model, with PEFT's names and rules:
 * - `inject_adapter_in_model(config, model, name)` replaces every target Linear/Conv1D by a
 *   LoraLayer (in place) and freezes everything but the LoRA weights;
 * - `get_peft_model(model, config)` does the same and wraps the model as PEFT does
 *   (PeftModel.base_model = LoraModel, LoraModel.model = your model), so state-dict keys read
 *   `base_model.model.transformer.h.0.attn.c_attn.lora_A.default.weight`;
 * - several named adapters: add_adapter / set_adapter / delete_adapter, disable_adapter(fn);
 * - merge_adapter / unmerge_adapter / merge_and_unload / unload.
 * Every function takes the model you passed in or the PeftModel around it.
 * Source: https://github.com/huggingface/peft/blob/main/src/peft/tuners/lora/model.py (LoraModel),
 * peft/tuners/tuners_utils.py (BaseTuner.inject_adapter, check_target_module_exists),
 * peft/peft_model.py (PeftModel).
 */
import type { Tensor } from "../lazy/tensor.ts";
import { Module } from "../nn/module.ts";
import { LoomValueError } from "../tensor/errors.ts";
import type { Generator } from "../tensor/rng.ts";
import { DEFAULT_TARGET_MODULES, INCLUDE_LINEAR_LAYERS_SHORTHAND, LoraConfig, check_target_module_exists, pattern_value } from "./config.ts";
import { LoraLayer, is_compressed_base, is_lora_target_layer } from "./layer.ts";
import { Conv1D } from "../nn/conv1d.ts";
import { Parameter } from "../nn/parameter.ts";

/** Adapter configs and the active adapter of each model LoRA was injected into. */
interface LoraState {
  peft_config: Map<string, LoraConfig>;
  active_adapter: string | string[];
}
const STATE = new WeakMap<Module, LoraState>();

/**
 * PEFT's LoraModel: holds the model LoRA was injected into as `model` (so keys gain "model.").
 * Forward is the inner model's. PeftModel (peft_model.ts) keeps one as `base_model`.
 */
export class LoraModel<M extends Module = Module> extends Module {
  model: M;
  constructor(model: M) {
    super();
    this.model = model;
  }
  override forward_lazy(...args: any[]): any {
    return this.model.forward_lazy(...args);
  }
}

/** The model whose modules LoRA wraps: a PeftModel's (or LoraModel's) inner model, or `model` itself. */
export function unwrap(model: Module): Module {
  if (model instanceof LoraModel) return model.model;
  const base = (model as unknown as { base_model?: unknown }).base_model;
  return base instanceof LoraModel ? base.model : model;
}

function stateOf(op: string, model: Module): LoraState {
  const s = STATE.get(unwrap(model));
  if (!s) throw new LoomValueError(`[${op}] ${unwrap(model)._get_name()} has no LoRA adapters (inject_adapter_in_model or get_peft_model first)`);
  return s;
}

/** Every LoraLayer in the model as [dotted path, layer], paths relative to the inner model. */
export function lora_layers(model: Module): [string, LoraLayer][] {
  return unwrap(model).named_modules().filter((e): e is [string, LoraLayer] => e[1] instanceof LoraLayer);
}

/** The parent module and attribute name of the module at `path`. */
function parentOf(root: Module, path: string): [Module, string] {
  const i = path.lastIndexOf(".");
  return [root.get_submodule(i < 0 ? "" : path.slice(0, i)), path.slice(i + 1)];
}

/** Put `child` at `path`, replacing what was there (add_module replaces a registered child; ModuleList/ModuleDict aware). */
function replaceModule(root: Module, path: string, child: Module): void {
  const [parent, name] = parentOf(root, path);
  parent.add_module(name, child);
}

export interface InjectOptions {
  /** Random source for lora_A's initialization (default generator when omitted). */
  generator?: Generator;
}

/**
 * PEFT's `_maybe_include_all_linear_layers` for target_modules "all-linear": the last name
 * component of every Linear/Conv1D (e.g. "q_proj", "down_proj"), less the output head's name
 * (`get_output_embeddings()`, else `lm_head`). The config then lists these names, as PEFT saves it.
 */
function all_linear_names(root: Module): string[] {
  const names = new Set<string>();
  for (const [path, m] of root.named_modules()) {
    if (path.includes(".base_layer") || !(is_lora_target_layer(m) || m instanceof LoraLayer)) continue;
    names.add(path.slice(path.lastIndexOf(".") + 1));
  }
  const r = root as unknown as { get_output_embeddings?: () => Module; lm_head?: Module };
  const head = r.get_output_embeddings?.() ?? r.lm_head;
  const headPath = head ? root.named_modules().find(([, m]) => m === head)?.[0] : undefined;
  if (headPath) names.delete(headPath);
  return [...names].sort();
}

/**
 * Wrap every module of `model` that `config.target_modules` selects (see
 * check_target_module_exists; "all-linear" as PEFT: every Linear/Conv1D name but the output head's)
 * with a LoraLayer holding adapter `adapter_name`, or add the adapter
 * to layers already wrapped. The first adapter of a model becomes active; later ones are added
 * inactive (frozen) until set_adapter. All non-LoRA parameters are frozen, except biases per
 * `config.bias`. For Conv1D targets `config.fan_in_fan_out` is set to true (and to false for
 * Linear), with a warning, as PEFT does.
 * @returns `model`, modified in place
 * @throws LoomValueError if the adapter name exists, no module matched ("Target modules ... not
 *   found in the base model"), or a matched module is not Linear/Conv1D
 */
export function inject_adapter_in_model<M extends Module>(config: LoraConfig, model: M, adapter_name = "default", opts: InjectOptions = {}): M {
  const root = unwrap(model);
  if (adapter_name.includes(".") || adapter_name === "") throw new LoomValueError(`[inject_adapter_in_model] adapter name must be non-empty and contain no ".", got ${JSON.stringify(adapter_name)}`);
  let state = STATE.get(root);
  if (state?.peft_config.has(adapter_name)) throw new LoomValueError(`[inject_adapter_in_model] adapter "${adapter_name}" already exists`);
  const cfg = config.replace({});
  let targets = cfg.target_modules;
  if (targets === null) {
    const model_type = (root as unknown as { config?: { model_type?: string } }).config?.model_type;
    const dflt = model_type ? DEFAULT_TARGET_MODULES[model_type] : undefined;
    if (!dflt) throw new LoomValueError("[inject_adapter_in_model] Please specify `target_modules` in `peft_config`");
    targets = cfg.target_modules = [...dflt];
  }
  if (typeof targets === "string" && targets.toLowerCase() === INCLUDE_LINEAR_LAYERS_SHORTHAND) targets = cfg.target_modules = all_linear_names(root);
  const wrapped = new Set(lora_layers(root).map(([p]) => p));
  const inside = (p: string) => [...wrapped].some((w) => p.startsWith(`${w}.`)); // skip modules inside a LoraLayer
  const matched: string[] = [];
  for (const [path, m] of root.named_modules()) {
    if (path === "" || inside(path) || !check_target_module_exists(cfg, path, targets)) continue;
    matched.push(path);
    const r = pattern_value(cfg.rank_pattern, path, cfg.r);
    const spec = {
      r, lora_alpha: pattern_value(cfg.alpha_pattern, path, cfg.lora_alpha), lora_dropout: cfg.lora_dropout,
      init_lora_weights: cfg.init_lora_weights, use_rslora: cfg.use_rslora, generator: opts.generator,
    };
    if (m instanceof LoraLayer) {
      m.update_layer(adapter_name, spec);
      continue;
    }
    if (!is_lora_target_layer(m)) {
      throw new LoomValueError(`[inject_adapter_in_model] Target module ${m._get_name()} at "${path}" is not supported. Currently, only Linear, Conv1D and compressed linear layers are supported.`);
    }
    const fifo = m instanceof Conv1D;
    // a compressed base (QLoRA) computes x Wᵀ whatever layout its dense weight had: the config's
    // flag keeps describing the float base the adapter also loads onto
    if (!is_compressed_base(m) && cfg.fan_in_fan_out !== fifo) {
      console.warn(`[lora] fan_in_fan_out is set to ${cfg.fan_in_fan_out} but the target module is \`${m._get_name()}\`. Setting fan_in_fan_out to ${fifo}.`);
      cfg.fan_in_fan_out = fifo;
    }
    const layer = new LoraLayer(m, adapter_name, spec);
    layer.train(m.training);
    replaceModule(root, path, layer);
  }
  if (matched.length === 0) {
    throw new LoomValueError(`[inject_adapter_in_model] Target modules ${JSON.stringify(targets)} not found in the base model. Please check the target modules and try again.`);
  }
  if (!state) STATE.set(root, (state = { peft_config: new Map(), active_adapter: adapter_name }));
  state.peft_config.set(adapter_name, cfg);
  // Only the model's active adapters run and train; a later adapter starts inactive (PEFT add_adapter).
  for (const [, l] of lora_layers(root)) l.set_adapter(activeList(state.active_adapter).filter((n) => l.adapters.includes(n)));
  mark_only_lora_as_trainable(root, cfg.bias);
  return model;
}

function activeList(a: string | string[]): string[] {
  return typeof a === "string" ? [a] : a;
}

/**
 * Freeze every parameter whose name does not contain "lora_" (PEFT
 * _mark_only_adapters_as_trainable); then unfreeze biases: all of them with bias "all", those of
 * wrapped layers with "lora_only".
 */
export function mark_only_lora_as_trainable(model: Module, bias: "none" | "all" | "lora_only" = "none"): void {
  const root = unwrap(model);
  for (const [n, p] of root.named_parameters()) if (!n.includes("lora_")) p.requires_grad_(false);
  if (bias === "all") {
    for (const [n, p] of root.named_parameters()) if (n.endsWith("bias")) p.requires_grad_(true);
  } else if (bias === "lora_only") {
    for (const [, l] of lora_layers(root)) l.base_layer.bias?.requires_grad_(true);
  }
}

/**
 * PEFT's prepare_model_for_kbit_training, for a model whose linear layers were compressed
 * (`loom.compress(model, { method: "nf4" })`): freeze every parameter, and cast float16/bfloat16
 * parameters (layer norms, embeddings) to float32 for stable training. Compressed weights are not
 * parameters and stay as they are. PEFT also turns on gradient checkpointing; Loom has none, so
 * `use_gradient_checkpointing` is accepted and ignored.
 * @returns `model`, modified in place
 * Source: peft/utils/other.py prepare_model_for_kbit_training
 */
export function prepare_model_for_kbit_training<M extends Module>(model: M, _opts: { use_gradient_checkpointing?: boolean } = {}): M {
  const upcast = new Map<Parameter, Parameter>(); // keeps tied weights tied
  for (const [, m] of unwrap(model).named_modules()) {
    for (const [name, p] of m.named_parameters("", false)) {
      p.requires_grad_(false);
      if (p.dtype !== "float16" && p.dtype !== "bfloat16") continue;
      let q = upcast.get(p);
      if (!q) upcast.set(p, (q = new Parameter(p.detach().float(), false)));
      m.register_parameter(name, q);
    }
  }
  return model;
}

/** Adapter name -> config of a model with LoRA (PEFT `peft_config`). */
export function peft_config(model: Module): Map<string, LoraConfig> {
  return stateOf("peft_config", model).peft_config;
}

/** True when the model has LoRA with an adapter of this name. */
export function has_adapter(model: Module, adapter_name: string): boolean {
  return STATE.get(unwrap(model))?.peft_config.has(adapter_name) ?? false;
}

/** Names of the model's adapters ([] for a model without LoRA). */
export function adapter_names(model: Module): string[] {
  return [...(STATE.get(unwrap(model))?.peft_config.keys() ?? [])];
}

/** The active adapter name(s). */
export function active_adapter(model: Module): string | string[] {
  return stateOf("active_adapter", model).active_adapter;
}

/**
 * Add adapter `adapter_name` from `config` to a model that has LoRA (PEFT add_adapter): new
 * LoraLayers where its targets are not wrapped yet; the adapter starts inactive and frozen.
 * @throws LoomValueError as inject_adapter_in_model
 */
export function add_adapter(model: Module, adapter_name: string, config: LoraConfig, opts: InjectOptions = {}): void {
  stateOf("add_adapter", model);
  inject_adapter_in_model(config, model, adapter_name, opts);
}

/**
 * Make `adapter_name` (or several) the active adapter(s): forward applies them and only their
 * A/B train (PEFT set_adapter). Layers without that adapter keep computing their base output.
 * @throws LoomValueError for an unknown adapter name
 */
export function set_adapter(model: Module, adapter_name: string | string[]): void {
  const state = stateOf("set_adapter", model);
  for (const n of activeList(adapter_name)) {
    if (!state.peft_config.has(n)) throw new LoomValueError(`[set_adapter] Adapter ${n} not found (adapters: ${[...state.peft_config.keys()].join(", ")})`);
  }
  state.active_adapter = adapter_name;
  for (const [, l] of lora_layers(model)) {
    if (l.merged) console.warn("[lora] Adapter cannot be set when the model is merged. Unmerging the model first.");
    if (l.merged) l.unmerge();
    l.set_adapter(activeList(adapter_name).filter((n) => l.adapters.includes(n)));
  }
}

/** Turn every LoRA layer on (PEFT enable_adapter_layers). */
export function enable_adapter_layers(model: Module): void {
  for (const [, l] of lora_layers(model)) l.enable_adapters(true);
}
/** Turn every LoRA layer off: forward gives the base model's output (PEFT disable_adapter_layers). */
export function disable_adapter_layers(model: Module): void {
  for (const [, l] of lora_layers(model)) l.enable_adapters(false);
}

/**
 * Run `fn` with all adapters disabled (the base model's output), then re-enable them, even if
 * `fn` throws (PEFT's `with model.disable_adapter():` context manager).
 */
export function disable_adapter<R>(model: Module, fn: () => R): R {
  stateOf("disable_adapter", model);
  disable_adapter_layers(model);
  try {
    return fn();
  } finally {
    enable_adapter_layers(model);
  }
}

/**
 * Delete adapter `adapter_name` from every layer and the config (PEFT delete_adapter). If it was
 * active, the first remaining adapter becomes active. When the last adapter goes, the model
 * keeps its LoraLayers with no adapters (forward = base layer); use unload() to remove them.
 * @throws LoomValueError for an unknown adapter, or one that is merged
 */
export function delete_adapter(model: Module, adapter_name: string): void {
  const state = stateOf("delete_adapter", model);
  if (!state.peft_config.has(adapter_name)) throw new LoomValueError(`[delete_adapter] Adapter ${adapter_name} does not exist`);
  for (const [, l] of lora_layers(model)) if (l.adapters.includes(adapter_name)) l.delete_adapter(adapter_name);
  state.peft_config.delete(adapter_name);
  const rest = activeList(state.active_adapter).filter((n) => n !== adapter_name);
  const next = rest.length > 0 ? rest : [...state.peft_config.keys()].slice(0, 1);
  if (next.length > 0) set_adapter(model, next.length === 1 ? next[0]! : next);
}

/**
 * Merge the active adapters into the base weights (PEFT merge_adapter); forward then costs the
 * base model's.
 * @param opts.adapter_names - merge these instead
 */
export function merge_adapter(model: Module, opts: { safe_merge?: boolean; adapter_names?: string[] } = {}): void {
  stateOf("merge_adapter", model);
  for (const [, l] of lora_layers(model)) {
    const names = (opts.adapter_names ?? l.active_adapters).filter((n) => l.adapters.includes(n));
    l.merge({ safe_merge: opts.safe_merge, adapter_names: names });
  }
}

/** Subtract merged adapters from the base weights (PEFT unmerge_adapter). */
export function unmerge_adapter(model: Module): void {
  for (const [, l] of lora_layers(model)) l.unmerge();
}

function unloadImpl<M extends Module>(model: Module, merge: boolean, opts: { safe_merge?: boolean; adapter_names?: string[] }): M {
  const root = unwrap(model) as M;
  for (const [path, l] of lora_layers(root)) {
    if (merge) {
      const names = (opts.adapter_names ?? l.active_adapters).filter((n) => l.adapters.includes(n));
      l.merge({ safe_merge: opts.safe_merge, adapter_names: names });
    }
    replaceModule(root, path, l.base_layer);
  }
  STATE.delete(root);
  return root;
}

/**
 * Merge the active adapters into the base weights and put the base layers back in place of the
 * LoraLayers (PEFT merge_and_unload): the result is the plain model (e.g. GPT2LMHeadModel with
 * HF keys again) computing base + LoRA. Parameters keep their requires_grad (frozen).
 * @returns the inner model (unwrapped from a PeftModel)
 */
export function merge_and_unload<M extends Module = Module>(model: Module, opts: { safe_merge?: boolean; adapter_names?: string[] } = {}): M {
  stateOf("merge_and_unload", model);
  return unloadImpl<M>(model, true, opts);
}

/** Put the base layers back without merging: the original model (PEFT unload). */
export function unload<M extends Module = Module>(model: Module): M {
  stateOf("unload", model);
  return unloadImpl<M>(model, false, {});
}

/** (trainable, all) parameter counts (PEFT get_nb_trainable_parameters). */
export function get_nb_trainable_parameters(model: Module): [number, number] {
  let trainable = 0, all = 0;
  for (const p of unwrap(model).parameters()) {
    all += p.numel();
    if (p.requires_grad) trainable += p.numel();
  }
  return [trainable, all];
}

/** "trainable params: 12,288 || all params: 124,452,096 || trainable%: 0.0099" (PEFT print_trainable_parameters). */
export function trainable_parameters_summary(model: Module): string {
  const [t, a] = get_nb_trainable_parameters(model);
  return `trainable params: ${t.toLocaleString("en-US")} || all params: ${a.toLocaleString("en-US")} || trainable%: ${(100 * t / a).toFixed(4)}`;
}

/** The LoRA parameters of adapter `adapter_name` (A and B of every layer that has it). */
export function lora_parameters(model: Module, adapter_name?: string): Tensor[] {
  const out: Tensor[] = [];
  for (const [, l] of lora_layers(model)) {
    for (const n of l.adapters) {
      if (adapter_name !== undefined && n !== adapter_name) continue;
      out.push(l.lora_A.get(n).weight, l.lora_B.get(n).weight);
    }
  }
  return out;
}
