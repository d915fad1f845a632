/**
 * LlamaConfig: the hyperparameters of a Llama-family decoder (Llama, Qwen2, Mistral, SmolLM) with
 * the field names and defaults of Hugging Face's `config.json`, so a config written by
 * transformers loads here and one written here loads in transformers. One class serves the three
 * `model_type`s; the type picks transformers' defaults for it (LlamaConfig, Qwen2Config,
 * MistralConfig) and the architecture differences HF hard-codes per model:
 * - llama / mistral: every attention projection has a bias iff `attention_bias` (default false);
 * - qwen2: q_proj, k_proj and v_proj always have a bias, o_proj never (modeling_qwen2.py);
 * - mistral: `sliding_window` (null = full causal attention) limits how far back a query attends.
 * Sources: transformers configuration_llama.py, configuration_qwen2.py, configuration_mistral.py.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LoomValueError } from "../tensor/errors.ts";
import { read_config_json } from "./hf_checkpoint.ts";

export { read_config_json };

/** The `model_type`s this config (and LlamaForCausalLM) covers. */
export type LlamaModelType = "llama" | "qwen2" | "mistral";
export const LLAMA_MODEL_TYPES: readonly LlamaModelType[] = ["llama", "qwen2", "mistral"];

/** The fields of LlamaConfig (config.json keys). Every field is optional when constructing. */
export interface LlamaConfigFields {
  model_type: LlamaModelType;
  /** Number of token ids. */
  vocab_size: number;
  /** Width of the residual stream. */
  hidden_size: number;
  /** SwiGLU hidden size (gate_proj / up_proj outputs). */
  intermediate_size: number;
  num_hidden_layers: number;
  /** Query heads; hidden_size must be divisible by it unless head_dim is given. */
  num_attention_heads: number;
  /** KV heads (grouped-query attention); divides num_attention_heads. null: = num_attention_heads. */
  num_key_value_heads: number | null;
  /** Size of one head; null: hidden_size / num_attention_heads. */
  head_dim: number | null;
  /** MLP activation; only "silu" (SwiGLU) is implemented. */
  hidden_act: string;
  /** Longest sequence the model was trained on (default length of the KV cache). */
  max_position_embeddings: number;
  /** Standard deviation of the N(0, σ²) weight initialization. */
  initializer_range: number;
  /** RMSNorm epsilon, absolute, added to mean(x²) inside the square root. */
  rms_norm_eps: number;
  /** RoPE base θ: inv_freq = 1 / θ^(2i/head_dim). */
  rope_theta: number;
  /** null, or {rope_type: "default" | "linear" | "llama3", ...}; other scalings (yarn, dynamic, ...) are refused. */
  rope_scaling: Record<string, unknown> | null;
  /** Bias on q/k/v/o_proj (llama, mistral; qwen2 ignores it, see the file comment). */
  attention_bias: boolean;
  /** Dropout probability on the attention weights while training. */
  attention_dropout: number;
  /** Bias on gate/up/down_proj. */
  mlp_bias: boolean;
  /** Share one matrix between embed_tokens and lm_head. */
  tie_word_embeddings: boolean;
  /** Mistral: keys older than this many positions are not attended; null = no window. */
  sliding_window: number | null;
  /** Qwen2: sliding-window attention on (not implemented: refused). */
  use_sliding_window: boolean;
  pretraining_tp: number;
  bos_token_id: number | null;
  eos_token_id: number | number[] | null;
  pad_token_id: number | null;
  architectures: string[];
}

const LLAMA: LlamaConfigFields = {
  model_type: "llama", vocab_size: 32000, hidden_size: 4096, intermediate_size: 11008, num_hidden_layers: 32,
  num_attention_heads: 32, num_key_value_heads: null, head_dim: null, hidden_act: "silu", max_position_embeddings: 2048,
  initializer_range: 0.02, rms_norm_eps: 1e-6, rope_theta: 10000.0, rope_scaling: null, attention_bias: false,
  attention_dropout: 0.0, mlp_bias: false, tie_word_embeddings: false, sliding_window: null, use_sliding_window: false,
  pretraining_tp: 1, bos_token_id: 1, eos_token_id: 2, pad_token_id: null, architectures: ["LlamaForCausalLM"],
};
/** transformers' defaults per model_type (Qwen2-7B, Mistral-7B). */
const DEFAULTS: Record<LlamaModelType, LlamaConfigFields> = {
  llama: LLAMA,
  qwen2: {
    ...LLAMA, model_type: "qwen2", vocab_size: 151936, intermediate_size: 22016, num_key_value_heads: 32,
    max_position_embeddings: 32768, sliding_window: 4096, bos_token_id: null, eos_token_id: null, architectures: ["Qwen2ForCausalLM"],
  },
  mistral: {
    ...LLAMA, model_type: "mistral", intermediate_size: 14336, num_key_value_heads: 8, max_position_embeddings: 4096 * 32,
    sliding_window: 4096, architectures: ["MistralForCausalLM"],
  },
};
// Fields written to config.json only when set (transformers omits a null head_dim for qwen2/mistral).
const TYPE_FIELDS: Record<LlamaModelType, readonly string[]> = {
  llama: ["attention_bias", "mlp_bias", "head_dim", "pretraining_tp"],
  qwen2: ["use_sliding_window"],
  mistral: ["head_dim"],
};
const COMMON = [
  "model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
  "num_key_value_heads", "hidden_act", "max_position_embeddings", "initializer_range", "rms_norm_eps", "rope_theta",
  "rope_scaling", "attention_dropout", "tie_word_embeddings", "bos_token_id", "eos_token_id", "pad_token_id", "architectures",
];

/**
 * Llama-family hyperparameters (HF LlamaConfig / Qwen2Config / MistralConfig, picked by
 * `model_type`). Unknown config.json fields (`torch_dtype`, `transformers_version`, ...) are kept
 * in `extra` and written back on save.
 */
export class LlamaConfig implements LlamaConfigFields {
  model_type!: LlamaModelType;
  vocab_size!: number;
  hidden_size!: number;
  intermediate_size!: number;
  num_hidden_layers!: number;
  num_attention_heads!: number;
  /** Resolved: never null after construction. */
  num_key_value_heads!: number;
  /** Resolved: never null after construction. */
  head_dim!: number;
  hidden_act!: string;
  max_position_embeddings!: number;
  initializer_range!: number;
  rms_norm_eps!: number;
  rope_theta!: number;
  rope_scaling!: Record<string, unknown> | null;
  attention_bias!: boolean;
  attention_dropout!: number;
  mlp_bias!: boolean;
  tie_word_embeddings!: boolean;
  sliding_window!: number | null;
  use_sliding_window!: boolean;
  pretraining_tp!: number;
  bos_token_id!: number | null;
  eos_token_id!: number | number[] | null;
  pad_token_id!: number | null;
  architectures!: string[];
  /** config.json fields this class does not interpret, kept for the round trip. */
  extra: Record<string, unknown> = {};
  /** Whether head_dim / num_key_value_heads were given (written back only then). */
  private readonly given: Set<string>;

  /**
   * @param fields - any subset of config.json's fields; the rest take the model_type's defaults
   *   (model_type default "llama")
   * @param source - the file the fields came from, named in errors
   * @throws LoomValueError naming the key (and `source`) for: an unknown model_type, a
   *   non-positive size, hidden_size not divisible by num_attention_heads (without head_dim),
   *   num_attention_heads not divisible by num_key_value_heads, hidden_act other than "silu",
   *   rope_scaling other than default / linear / llama3 (or missing its numbers), Qwen2's use_sliding_window, or a bad probability / eps
   */
  constructor(fields: Partial<Omit<LlamaConfigFields, "model_type">> & { model_type?: string } & Record<string, unknown> = {}, source?: string) {
    const at = source ? ` ${source}:` : "";
    const fail = (msg: string) => new LoomValueError(`[LlamaConfig]${at} ${msg}`);
    const type = (fields.model_type ?? "llama") as LlamaModelType;
    if (!LLAMA_MODEL_TYPES.includes(type)) throw fail(`model_type "${String(type)}" is not a Llama-family type (one of ${LLAMA_MODEL_TYPES.join(", ")})`);
    const dflt = DEFAULTS[type];
    const merged = { ...dflt, ...fields } as LlamaConfigFields & Record<string, unknown>;
    for (const k of Object.keys(dflt)) (this as unknown as Record<string, unknown>)[k] = merged[k];
    for (const [k, v] of Object.entries(fields)) if (!(k in dflt)) this.extra[k] = v;
    this.given = new Set(Object.keys(fields).filter((k) => fields[k] !== null && fields[k] !== undefined));

    const int = (k: keyof LlamaConfigFields, min = 1): number => {
      const v = (this as unknown as Record<string, unknown>)[k];
      if (typeof v !== "number" || !Number.isInteger(v) || v < min) throw fail(`${k} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
      return v;
    };
    for (const k of ["vocab_size", "hidden_size", "intermediate_size", "num_attention_heads", "max_position_embeddings"] as const) int(k);
    int("num_hidden_layers", 0);
    this.num_key_value_heads ??= this.num_attention_heads;
    int("num_key_value_heads");
    if (this.head_dim === null) {
      if (this.hidden_size % this.num_attention_heads !== 0) {
        throw fail(`hidden_size=${this.hidden_size} is not divisible by num_attention_heads=${this.num_attention_heads} (and no head_dim is given)`);
      }
      this.head_dim = this.hidden_size / this.num_attention_heads;
    }
    int("head_dim");
    if (this.head_dim % 2 !== 0) throw fail(`head_dim=${this.head_dim} must be even (RoPE rotates pairs of halves)`);
    if (this.num_attention_heads % this.num_key_value_heads !== 0) {
      throw fail(`num_attention_heads=${this.num_attention_heads} is not divisible by num_key_value_heads=${this.num_key_value_heads}`);
    }
    if (this.hidden_act !== "silu") throw fail(`hidden_act "${this.hidden_act}" is not supported (only "silu": the SwiGLU MLP)`);
    if (this.rope_scaling !== null) {
      const rs = this.rope_scaling, rope_type = rs.rope_type ?? rs.type;
      const num = (k: string, ok: (v: number) => boolean) => {
        if (typeof rs[k] !== "number" || !ok(rs[k] as number)) throw fail(`rope_scaling.${k} must be a number (${rope_type}), got ${JSON.stringify(rs[k])}`);
      };
      if (rope_type === "linear" || rope_type === "llama3") num("factor", (v) => v >= 1);
      if (rope_type === "llama3") {
        num("low_freq_factor", (v) => v > 0);
        num("high_freq_factor", (v) => v > (rs.low_freq_factor as number));
        num("original_max_position_embeddings", (v) => Number.isInteger(v) && v > 0);
      } else if (rope_type !== "default" && rope_type !== "linear") {
        throw fail(`rope_scaling ${JSON.stringify(rs)} is not supported (rope_type "default", "linear" or "llama3")`);
      }
    }
    if (type === "qwen2" && this.use_sliding_window) throw fail("use_sliding_window=true (Qwen2's per-layer sliding window) is not supported");
    if (type === "mistral" && this.sliding_window !== null) int("sliding_window");
    if (!(this.rms_norm_eps > 0)) throw fail(`rms_norm_eps must be > 0, got ${JSON.stringify(this.rms_norm_eps)}`);
    if (!(this.rope_theta > 0)) throw fail(`rope_theta must be > 0, got ${JSON.stringify(this.rope_theta)}`);
    if (!(this.attention_dropout >= 0 && this.attention_dropout <= 1)) throw fail(`attention_dropout must be a probability in [0, 1], got ${JSON.stringify(this.attention_dropout)}`);
  }

  /** Query heads sharing one KV head (HF num_key_value_groups). */
  get num_key_value_groups(): number {
    return this.num_attention_heads / this.num_key_value_heads;
  }
  /** Bias on q_proj, k_proj, v_proj: always for qwen2, else attention_bias. */
  get qkv_bias(): boolean {
    return this.model_type === "qwen2" || this.attention_bias;
  }
  /** Bias on o_proj: never for qwen2, else attention_bias. */
  get o_bias(): boolean {
    return this.model_type !== "qwen2" && this.attention_bias;
  }
  /** The attention window in positions (Mistral), or null for full causal attention. */
  get attention_window(): number | null {
    return this.model_type === "mistral" ? this.sliding_window : null;
  }

  /** The config as config.json's object: the type's fields, then the kept extras. */
  to_dict(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    const self = this as unknown as Record<string, unknown>;
    for (const k of COMMON) out[k] = self[k];
    for (const k of TYPE_FIELDS[this.model_type]) if (k !== "head_dim" || this.model_type === "llama" || this.given.has(k)) out[k] = self[k];
    if (this.model_type !== "llama") {
      out.sliding_window = this.sliding_window;
      if (this.attention_bias) out.attention_bias = true;
    }
    if (this.model_type === "qwen2") out.max_window_layers = this.extra.max_window_layers ?? this.num_hidden_layers;
    return { ...this.extra, ...out };
  }

  /** config.json text: sorted keys, 2-space indent (as transformers writes it). */
  to_json_string(): string {
    const d = this.to_dict();
    return JSON.stringify(Object.fromEntries(Object.keys(d).sort().map((k) => [k, d[k]])), null, 2) + "\n";
  }

  /** Write `config.json` into `dir` (created if missing). */
  save_pretrained(dir: string): void {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "config.json"), this.to_json_string());
  }

  /** @throws LoomValueError as the constructor (naming `source`) */
  static from_dict(d: Record<string, unknown>, source?: string): LlamaConfig {
    return new LlamaConfig(d as Partial<LlamaConfigFields>, source);
  }

  /**
   * Read `dir/config.json`.
   * @throws LoomValueError if it is missing, not a JSON object, or invalid (naming the key and the
   *   file); LoomFormatError if it is not a regular file or a symlink resolving outside `dir`
   */
  static from_pretrained(dir: string): LlamaConfig {
    const [d, path] = read_config_json(dir, "[LlamaConfig.from_pretrained]");
    return LlamaConfig.from_dict(d, path);
  }
}
