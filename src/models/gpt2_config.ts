/**
 * GPT2Config: the hyperparameters of a GPT-2 model, with the field names and defaults of
 * Hugging Face's `config.json` (transformers GPT2Config), so a config written by transformers
 * loads here and one written here loads in transformers.
 * Source: https://github.com/huggingface/transformers/blob/main/src/transformers/models/gpt2/configuration_gpt2.py
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { read_config_json } from "./hf_checkpoint.ts";
import { LoomValueError } from "../tensor/errors.ts";

/** The activations GPT-2 configs name (transformers ACT2FN keys Loom supports). */
export type GPT2Activation = "gelu_new" | "gelu_pytorch_tanh" | "gelu" | "relu" | "silu" | "swish" | "tanh";
const ACTIVATIONS: readonly string[] = ["gelu_new", "gelu_pytorch_tanh", "gelu", "relu", "silu", "swish", "tanh"];

/** The name of the config file in a checkpoint directory. */
export const CONFIG_NAME = "config.json";

/** The fields of GPT2Config (config.json keys). Every field is optional when constructing. */
export interface GPT2ConfigFields {
  /** Number of token ids (50257 for OpenAI's GPT-2). */
  vocab_size: number;
  /** Longest sequence the position embedding covers. */
  n_positions: number;
  /** Hidden size. */
  n_embd: number;
  /** Number of transformer blocks. */
  n_layer: number;
  /** Attention heads per block; n_embd must be divisible by it. */
  n_head: number;
  /** MLP hidden size; null means 4·n_embd. */
  n_inner: number | null;
  /** MLP activation; "gelu_new" is the tanh-approximated GELU GPT-2 was trained with. */
  activation_function: GPT2Activation;
  /** Dropout probability after each residual branch (and in the MLP), while training. */
  resid_pdrop: number;
  /** Dropout probability on token + position embeddings, while training. */
  embd_pdrop: number;
  /** Dropout probability on the attention weights, while training. */
  attn_pdrop: number;
  /** LayerNorm epsilon (absolute, added to the variance). */
  layer_norm_epsilon: number;
  /** Standard deviation of the N(0, σ²) weight initialization. */
  initializer_range: number;
  /** Divide attention scores by √head_dim (true in every released GPT-2). */
  scale_attn_weights: boolean;
  /** Share one matrix between wte and lm_head (true for GPT-2). */
  tie_word_embeddings: boolean;
  bos_token_id: number | null;
  eos_token_id: number | null;
  model_type: "gpt2";
  architectures: string[];
}

const DEFAULTS: GPT2ConfigFields = {
  vocab_size: 50257, n_positions: 1024, n_embd: 768, n_layer: 12, n_head: 12, n_inner: null,
  activation_function: "gelu_new", resid_pdrop: 0.1, embd_pdrop: 0.1, attn_pdrop: 0.1,
  layer_norm_epsilon: 1e-5, initializer_range: 0.02, scale_attn_weights: true, tie_word_embeddings: true,
  bos_token_id: 50256, eos_token_id: 50256, model_type: "gpt2", architectures: ["GPT2LMHeadModel"],
};

function checkInt(name: string, v: unknown, min: number): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min) throw new LoomValueError(`[GPT2Config] ${name} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
  return v;
}
function checkProb(name: string, v: unknown): number {
  if (typeof v !== "number" || !(v >= 0 && v <= 1)) throw new LoomValueError(`[GPT2Config] ${name} must be a probability in [0, 1], got ${JSON.stringify(v)}`);
  return v;
}

/**
 * GPT-2 hyperparameters (HF GPT2Config). Unknown config.json fields (e.g. `n_ctx`,
 * `summary_type`, `transformers_version`) are kept in `extra` and written back on save.
 */
export class GPT2Config implements GPT2ConfigFields {
  vocab_size!: number;
  n_positions!: number;
  n_embd!: number;
  n_layer!: number;
  n_head!: number;
  n_inner!: number | null;
  activation_function!: GPT2Activation;
  resid_pdrop!: number;
  embd_pdrop!: number;
  attn_pdrop!: number;
  layer_norm_epsilon!: number;
  initializer_range!: number;
  scale_attn_weights!: boolean;
  tie_word_embeddings!: boolean;
  bos_token_id!: number | null;
  eos_token_id!: number | null;
  model_type!: "gpt2";
  architectures!: string[];
  /** config.json fields this class does not interpret, kept for the round trip. */
  extra: Record<string, unknown> = {};

  /**
   * @param fields - any subset of the config.json fields; the rest take GPT-2 small's defaults
   * @throws LoomValueError for non-positive sizes, n_embd not divisible by n_head, a probability
   *   outside [0, 1], an unsupported activation, or options Loom does not implement
   *   (reorder_and_upcast_attn, scale_attn_by_inverse_layer_idx)
   */
  constructor(fields: Partial<GPT2ConfigFields> & Record<string, unknown> = {}) {
    const known = new Set(Object.keys(DEFAULTS));
    const merged = { ...DEFAULTS, ...fields } as GPT2ConfigFields & Record<string, unknown>;
    for (const k of known) (this as unknown as Record<string, unknown>)[k] = merged[k];
    for (const [k, v] of Object.entries(fields)) if (!known.has(k)) this.extra[k] = v;
    for (const flag of ["reorder_and_upcast_attn", "scale_attn_by_inverse_layer_idx", "add_cross_attention"]) {
      if (this.extra[flag] === true) throw new LoomValueError(`[GPT2Config] ${flag}=true is not supported by Loom's GPT-2`);
    }
    checkInt("vocab_size", this.vocab_size, 1);
    checkInt("n_positions", this.n_positions, 1);
    checkInt("n_embd", this.n_embd, 1);
    checkInt("n_layer", this.n_layer, 0);
    checkInt("n_head", this.n_head, 1);
    if (this.n_inner !== null) checkInt("n_inner", this.n_inner, 1);
    if (this.n_embd % this.n_head !== 0) throw new LoomValueError(`[GPT2Config] n_embd (${this.n_embd}) must be divisible by n_head (${this.n_head})`);
    for (const p of ["resid_pdrop", "embd_pdrop", "attn_pdrop"] as const) checkProb(p, this[p]);
    if (!ACTIVATIONS.includes(this.activation_function)) {
      throw new LoomValueError(`[GPT2Config] activation_function "${this.activation_function}" is not supported (one of ${ACTIVATIONS.join(", ")})`);
    }
    if (!(this.layer_norm_epsilon > 0)) throw new LoomValueError(`[GPT2Config] layer_norm_epsilon must be > 0, got ${this.layer_norm_epsilon}`);
  }

  /** Head size n_embd / n_head. */
  get head_dim(): number {
    return this.n_embd / this.n_head;
  }
  /** MLP hidden size: n_inner or 4·n_embd. */
  get inner_dim(): number {
    return this.n_inner ?? 4 * this.n_embd;
  }

  /**
   * A small character-level config that trains from scratch on a 2-core CPU in about a minute
   * (native backend; a few minutes on the pure TypeScript one): 2 blocks of width 64 with 4
   * heads, context 32, no dropout — about 108k parameters for Moby-Dick's 89 characters.
   * @param vocab_size - the tokenizer's vocabulary size (characters)
   */
  static char_small(vocab_size: number, overrides: Partial<GPT2ConfigFields> = {}): GPT2Config {
    return new GPT2Config({
      vocab_size, n_positions: 32, n_embd: 64, n_layer: 2, n_head: 4, n_inner: null,
      resid_pdrop: 0, embd_pdrop: 0, attn_pdrop: 0, bos_token_id: null, eos_token_id: null, ...overrides,
    });
  }

  /** The config as config.json's object (known fields, then the kept extras). */
  to_dict(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(DEFAULTS)) out[k] = (this as unknown as Record<string, unknown>)[k];
    return { ...this.extra, ...out };
  }

  /** config.json text: sorted keys, 2-space indent (as transformers writes it). */
  to_json_string(): string {
    const d = this.to_dict();
    const sorted = Object.fromEntries(Object.keys(d).sort().map((k) => [k, d[k]]));
    return JSON.stringify(sorted, null, 2) + "\n";
  }

  /** Read a config.json object. @throws LoomValueError as the constructor, or if model_type is not "gpt2" */
  static from_dict(d: Record<string, unknown>): GPT2Config {
    if (d.model_type !== undefined && d.model_type !== "gpt2") throw new LoomValueError(`[GPT2Config] model_type is "${String(d.model_type)}", expected "gpt2"`);
    return new GPT2Config(d as Partial<GPT2ConfigFields>);
  }

  /** Write `config.json` into `dir` (created if missing). */
  save_pretrained(dir: string): void {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, CONFIG_NAME), this.to_json_string());
  }

  /**
   * Read `dir/config.json`. @throws LoomValueError if it is missing or not a JSON object;
   * LoomFormatError if it is not a regular file or a symlink resolving outside `dir`
   */
  static from_pretrained(dir: string): GPT2Config {
    // LoomFormatError for a directory, FIFO or escaping symlink (HF cache links into blobs/ are fine)
    const [d] = read_config_json(dir, "[GPT2Config.from_pretrained]");
    return GPT2Config.from_dict(d);
  }
}
