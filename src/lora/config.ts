/**
 * LoraConfig: PEFT's LoRA hyperparameters with PEFT's names, defaults and `adapter_config.json`
 * layout, so adapters move between Loom and PEFT.
 * Source: https://github.com/huggingface/peft/blob/main/src/peft/tuners/lora/config.py (LoraConfig);
 * Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models" (https://arxiv.org/abs/2106.09685).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readCheckpointFile } from "../io/index.ts";
import { LoomValueError } from "../tensor/errors.ts";

/** File names of a PEFT adapter directory. */
export const ADAPTER_CONFIG_NAME = "adapter_config.json";
export const ADAPTER_WEIGHTS_NAME = "adapter_model.safetensors";

/** PEFT's task types (what the base model does). */
export type TaskType = "CAUSAL_LM" | "SEQ_CLS" | "SEQ_2_SEQ_LM" | "TOKEN_CLS" | "QUESTION_ANS" | "FEATURE_EXTRACTION";
export type LoraBias = "none" | "all" | "lora_only";

/** The fields of LoraConfig (adapter_config.json keys), all optional when constructing. */
export interface LoraConfigFields {
  /** Rank of the update B·A (positive integer; default 8). */
  r: number;
  /** The update is scaled by lora_alpha / r (lora_alpha / √r with use_rslora); default 8. */
  lora_alpha: number;
  /** Dropout probability on the LoRA branch's input while training (default 0). */
  lora_dropout: number;
  /**
   * Modules to wrap: a list matched against module paths (a path equal to an entry, or ending in
   * "." + entry), or one string used as a regular expression on the whole path. null uses
   * PEFT's default for the model type (GPT-2: ["c_attn"]; Llama, Qwen2, Mistral: ["q_proj", "v_proj"]).
   * "all-linear": every Linear/Conv1D except the output head (replaced by their names on injection).
   */
  target_modules: string[] | string | null;
  /** True when the base weight is stored [in, out] (GPT-2's Conv1D); set automatically for Conv1D targets. */
  fan_in_fan_out: boolean;
  /** Which biases train and are saved: "none" (default), "all", or "lora_only" (biases of wrapped layers). */
  bias: LoraBias;
  /** true: A kaiming-uniform(a=√5), B zeros (the update starts at 0); "gaussian": A ~ N(0, 1/r²), B zeros; false: both random (tests only). */
  init_lora_weights: boolean | "gaussian";
  /** Scale by lora_alpha / √r (Kalajdzievski 2023) instead of lora_alpha / r. */
  use_rslora: boolean;
  /** Per-module rank overrides: {pattern: r}, pattern matched as PEFT's rank_pattern. */
  rank_pattern: Record<string, number>;
  /** Per-module alpha overrides: {pattern: alpha}. */
  alpha_pattern: Record<string, number>;
  /** Only wrap the blocks with these indices (e.g. [0, 1] of transformer.h). */
  layers_to_transform: number[] | number | null;
  /** The ModuleList name the indices refer to (e.g. "h"); null tries PEFT's common names. */
  layers_pattern: string[] | string | null;
  /** Extra modules trained and saved in full (not supported by Loom yet; must be null). */
  modules_to_save: string[] | null;
  peft_type: "LORA";
  task_type: TaskType | null;
  /** The base checkpoint the adapter was trained on (informational). */
  base_model_name_or_path: string | null;
  revision: string | null;
  /** Saved adapters say true; a model loaded for training sets false. */
  inference_mode: boolean;
  /** DoRA (not supported: must be false). */
  use_dora: boolean;
}

const DEFAULTS: LoraConfigFields = {
  r: 8, lora_alpha: 8, lora_dropout: 0, target_modules: null, fan_in_fan_out: false, bias: "none",
  init_lora_weights: true, use_rslora: false, rank_pattern: {}, alpha_pattern: {}, layers_to_transform: null,
  layers_pattern: null, modules_to_save: null, peft_type: "LORA", task_type: null, base_model_name_or_path: null,
  revision: null, inference_mode: false, use_dora: false,
};

/** PEFT's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING, for the model types Loom has. */
export const DEFAULT_TARGET_MODULES: Readonly<Record<string, readonly string[]>> = {
  gpt2: ["c_attn"], llama: ["q_proj", "v_proj"], qwen2: ["q_proj", "v_proj"], mistral: ["q_proj", "v_proj"],
};

/** PEFT's INCLUDE_LINEAR_LAYERS_SHORTHAND: target every Linear/Conv1D except the output head. */
export const INCLUDE_LINEAR_LAYERS_SHORTHAND = "all-linear";

/** LoRA hyperparameters (PEFT LoraConfig). Unknown adapter_config.json fields are kept in `extra`. */
export class LoraConfig implements LoraConfigFields {
  r!: number;
  lora_alpha!: number;
  lora_dropout!: number;
  target_modules!: string[] | string | null;
  fan_in_fan_out!: boolean;
  bias!: LoraBias;
  init_lora_weights!: boolean | "gaussian";
  use_rslora!: boolean;
  rank_pattern!: Record<string, number>;
  alpha_pattern!: Record<string, number>;
  layers_to_transform!: number[] | number | null;
  layers_pattern!: string[] | string | null;
  modules_to_save!: string[] | null;
  peft_type!: "LORA";
  task_type!: TaskType | null;
  base_model_name_or_path!: string | null;
  revision!: string | null;
  inference_mode!: boolean;
  use_dora!: boolean;
  /** Fields of adapter_config.json Loom does not interpret (megatron_config, loftq_config...), kept for the round trip. */
  extra: Record<string, unknown> = {};

  /**
   * @throws LoomValueError for r not a positive integer, lora_dropout outside [0, 1), an unknown
   *   bias or init_lora_weights, peft_type other than "LORA", layers_to_transform with a regex
   *   target_modules, target_modules neither null, a string nor a list of strings, a
   *   target_modules / rank_pattern / alpha_pattern regular expression that does not compile or
   *   that Python's re would read differently (see checkRegex), or features Loom does not
   *   implement (use_dora, modules_to_save)
   */
  constructor(fields: Partial<LoraConfigFields> & Record<string, unknown> = {}) {
    const known = new Set(Object.keys(DEFAULTS));
    const self = this as unknown as Record<string, unknown>;
    for (const k of known) self[k] = structuredClone((fields as Record<string, unknown>)[k] ?? (DEFAULTS as unknown as Record<string, unknown>)[k]);
    // defineProperty: a "__proto__" field of an adapter_config.json stays a field, not extra's prototype
    for (const [k, v] of Object.entries(fields)) if (!known.has(k)) Object.defineProperty(this.extra, k, { value: v, enumerable: true, writable: true, configurable: true });
    // PEFT stores target_modules as a set; a list is kept in its given order here.
    if (!Number.isInteger(this.r) || this.r <= 0) throw new LoomValueError(`[LoraConfig] \`r\` should be a positive integer value but the value passed is ${this.r}`);
    if (typeof this.lora_alpha !== "number" || !Number.isFinite(this.lora_alpha)) throw new LoomValueError(`[LoraConfig] lora_alpha must be a finite number, got ${String(this.lora_alpha)}`);
    if (!(this.lora_dropout >= 0 && this.lora_dropout < 1)) throw new LoomValueError(`[LoraConfig] lora_dropout must be in [0, 1), got ${this.lora_dropout}`);
    if (!["none", "all", "lora_only"].includes(this.bias)) throw new LoomValueError(`[LoraConfig] bias must be "none", "all" or "lora_only", got ${JSON.stringify(this.bias)}`);
    if (![true, false, "gaussian"].includes(this.init_lora_weights)) {
      throw new LoomValueError(`[LoraConfig] init_lora_weights must be true, false or "gaussian" (others are not supported by Loom), got ${JSON.stringify(this.init_lora_weights)}`);
    }
    if (this.peft_type !== "LORA") throw new LoomValueError(`[LoraConfig] peft_type must be "LORA", got ${JSON.stringify(this.peft_type)}`);
    if (this.use_dora) throw new LoomValueError("[LoraConfig] use_dora=true is not supported by Loom");
    if (this.modules_to_save !== null && this.modules_to_save.length > 0) throw new LoomValueError("[LoraConfig] modules_to_save is not supported by Loom");
    if (typeof this.target_modules === "string" && this.layers_to_transform !== null) {
      throw new LoomValueError("[LoraConfig] `layers_to_transform` cannot be used when `target_modules` is a str.");
    }
    const tm: unknown = this.target_modules;
    if (tm !== null && typeof tm !== "string" && !Array.isArray(tm)) {
      throw new LoomValueError(`[LoraConfig] target_modules must be null, a regular expression string or a list of module names, got ${JSON.stringify(tm)}`);
    }
    if (Array.isArray(tm) && tm.some((t) => typeof t !== "string" || t === "")) {
      throw new LoomValueError(`[LoraConfig] target_modules entries must be non-empty strings, got ${JSON.stringify(tm)}`);
    }
    if (typeof tm === "string") targetRegex(tm);
    for (const [name, pat] of [["rank_pattern", this.rank_pattern], ["alpha_pattern", this.alpha_pattern]] as const) {
      if (typeof pat !== "object" || pat === null || Array.isArray(pat)) throw new LoomValueError(`[LoraConfig] ${name} must be an object of pattern -> value, got ${JSON.stringify(pat)}`);
      for (const [k, v] of Object.entries(pat)) {
        patternRegex(name, k);
        if (typeof v !== "number" || (name === "rank_pattern" && (!Number.isInteger(v) || v <= 0))) throw new LoomValueError(`[LoraConfig] ${name}[${JSON.stringify(k)}] must be ${name === "rank_pattern" ? "a positive integer" : "a number"}, got ${JSON.stringify(v)}`);
      }
    }
  }

  /** The adapter_config.json object: PEFT's fields (sorted, as PEFT writes them) plus kept extras. */
  to_dict(): Record<string, unknown> {
    const self = this as unknown as Record<string, unknown>;
    const d: Record<string, unknown> = { ...this.extra };
    for (const k of Object.keys(DEFAULTS)) d[k] = structuredClone(self[k]);
    return Object.fromEntries(Object.keys(d).sort().map((k) => [k, d[k]]));
  }

  /** A copy with some fields replaced (dataclasses.replace). */
  replace(fields: Partial<LoraConfigFields>): LoraConfig {
    return new LoraConfig({ ...this.to_dict(), ...fields } as Partial<LoraConfigFields>);
  }

  /** adapter_config.json text (2-space indent, sorted keys, as PEFT's to_json_string). */
  to_json_string(): string {
    return JSON.stringify(this.to_dict(), null, 2) + "\n";
  }

  /** Write `dir/adapter_config.json` (the directory is created). */
  save_pretrained(dir: string): void {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, ADAPTER_CONFIG_NAME), this.to_json_string());
  }

  /** @throws LoomValueError for a non-LORA peft_type or invalid fields (see constructor) */
  static from_dict(d: Record<string, unknown>): LoraConfig {
    return new LoraConfig(d as Partial<LoraConfigFields>);
  }

  /**
   * Read `dir/adapter_config.json`.
   * @throws LoomValueError if missing, not JSON, or invalid; LoomFormatError if it is not a
   *   regular file (a directory, a FIFO...) or a symlink resolving outside `dir` (links into a
   *   Hugging Face cache's blobs/ are fine)
   */
  static from_pretrained(dir: string): LoraConfig {
    const path = join(dir, ADAPTER_CONFIG_NAME);
    const bytes = readCheckpointFile(dir, ADAPTER_CONFIG_NAME, "[LoraConfig.from_pretrained]");
    if (bytes === null) throw new LoomValueError(`[LoraConfig.from_pretrained] no ${ADAPTER_CONFIG_NAME} in ${dir}`);
    let d: unknown;
    try {
      d = JSON.parse(new TextDecoder().decode(bytes));
    } catch (e) {
      throw new LoomValueError(`[LoraConfig.from_pretrained] ${path} is not valid JSON: ${(e as Error).message}`);
    }
    if (typeof d !== "object" || d === null || Array.isArray(d)) throw new LoomValueError(`[LoraConfig.from_pretrained] ${path} must hold a JSON object`);
    return LoraConfig.from_dict(d as Record<string, unknown>);
  }
}

// ---- regular expressions (PEFT applies them with Python's re) ----------------------------------

// Letter escapes that Python's re and JavaScript read alike. JavaScript reads any other \<letter>
// as the plain letter, where Python means something else (\A, \Z) or raises (\c, \k, \p, \q).
const SHARED_ESCAPES = new Set("dDwWsSbBnrtfvxu");

/**
 * Compiles `pattern` wrapped as `wrap(pattern)`, after checking that the pattern compiles on its
 * own (so "a)|(.*" cannot break out of the wrapping and match everything) and uses no letter
 * escape that Python would read differently.
 * @throws LoomValueError naming the field and the pattern
 */
function checkRegex(field: string, pattern: string, wrap: (p: string) => string, tag = "LoraConfig"): RegExp {
  const bad = (why: string) => new LoomValueError(`[${tag}] ${field} ${JSON.stringify(pattern)} ${why}`);
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] !== "\\") continue;
    const c = pattern[++i] ?? "";
    const hex = c === "x" ? 2 : c === "u" ? 4 : 0; // Python needs exactly these digits; JavaScript falls back to the letter
    const ok = !/[A-Za-z]/.test(c) || (SHARED_ESCAPES.has(c) && new RegExp(`^[0-9A-Fa-f]{${hex}}`).test(pattern.slice(i + 1)));
    if (!ok) throw bad(`uses \\${c}, which Python's re (PEFT) and JavaScript read differently; write it another way`);
  }
  try {
    new RegExp(pattern);
    return new RegExp(wrap(pattern));
  } catch (e) {
    throw bad(`does not compile as a JavaScript regular expression (${(e as Error).message})`);
  }
}

// re.fullmatch(target_modules, key)
function targetRegex(pattern: string, tag?: string): RegExp {
  return checkRegex("target_modules", pattern, (p) => `^(?:${p})$`, tag);
}

/**
 * PEFT's target_modules rule alone (no layers_to_transform): a string is a regular expression
 * that must match the whole dotted path; a list matches a path equal to an entry or ending in
 * "." + entry. Shared by LoRA injection and loom.compress.
 * @param tag - the op named in errors (a regular expression Python and JavaScript read differently)
 * @throws LoomValueError for such a regular expression
 */
export function matches_target_modules(key: string, target_modules: readonly string[] | string, tag?: string): boolean {
  if (typeof target_modules === "string") return targetRegex(target_modules, tag).test(key);
  return target_modules.includes(key) || target_modules.some((t) => key.endsWith(`.${t}`));
}

// PEFT get_pattern_key: re.match(rf"(.*\.)?{p}$", key)
function patternRegex(field: string, pattern: string): RegExp {
  return checkRegex(`${field} key`, pattern, (p) => `^(.*\\.)?${p}$`);
}

// ---- target matching (PEFT tuners_utils.check_target_module_exists) ----------------------------

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * Whether the module at dotted path `key` is a LoRA target under `config`, as PEFT decides:
 * a string target_modules is a regular expression that must match the whole path; a list
 * matches a path equal to an entry or ending in "." + entry (so "attn.c_proj" matches
 * "transformer.h.0.attn.c_proj" but not "transformer.h.0.mlp.c_proj"). With layers_to_transform,
 * the block index after the layers_pattern name (e.g. "h.3.") must also be listed.
 */
export function check_target_module_exists(config: LoraConfig, key: string, target_modules: string[] | string = config.target_modules ?? []): boolean {
  const found = matches_target_modules(key, target_modules);
  if (typeof target_modules === "string" || !found || config.layers_to_transform === null) return found;
  const wanted = typeof config.layers_to_transform === "number" ? [config.layers_to_transform] : config.layers_to_transform;
  const patterns = config.layers_pattern === null ? null : typeof config.layers_pattern === "string" ? [config.layers_pattern] : config.layers_pattern;
  let m: RegExpMatchArray | null = null;
  if (patterns === null) m = key.match(/^.*\.[^.]*\.(\d+)\./);
  else for (const p of patterns) if ((m = key.match(new RegExp(`^.*\\.${escapeRe(p)}\\.(\\d+)\\.`)))) break;
  return m !== null && wanted.includes(Number(m[1]));
}

/**
 * The value of a rank_pattern / alpha_pattern entry for module `key`: the first pattern p with
 * `key` matching `(.*\.)?p$` (PEFT's get_pattern_key), else `fallback`.
 */
export function pattern_value(pattern: Record<string, number>, key: string, fallback: number): number {
  for (const [p, v] of Object.entries(pattern)) if (patternRegex("pattern", p).test(key)) return v;
  return fallback;
}
