/**
 * GPT-2 in the Hugging Face layout (transformers GPT2LMHeadModel): the same module tree, so
 * state-dict keys equal HF's (`transformer.h.0.attn.c_attn.weight`, Conv1D weights [in, out]) and
 * HF checkpoints load as they are (see pretrained.ts).
 *
 * ```
 * GPT2LMHeadModel
 *   transformer: GPT2Model
 *     wte [vocab, n_embd], wpe [n_positions, n_embd], drop
 *     h: ModuleList of GPT2Block { ln_1, attn { c_attn, c_proj, attn_dropout, resid_dropout },
 *                                  ln_2, mlp { c_fc, c_proj, act, dropout } }
 *     ln_f
 *   lm_head: Linear(n_embd, vocab, bias=false), weight tied to transformer.wte.weight
 * ```
 * Every forward is written once (`forward_lazy`, generic over Tensor and LazyTensor).
 * Source: https://github.com/huggingface/transformers/blob/main/src/transformers/models/gpt2/modeling_gpt2.py;
 * Radford et al. 2019, "Language Models are Unsupervised Multitask Learners".
 */
import { no_grad } from "../autograd/grad_mode.ts";
import { arange, tensor } from "../lazy/creation.ts";
import { cross_entropy, scaled_dot_product_attention } from "../lazy/functional.ts";
import type { TensorOps } from "../lazy/surface.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { Dropout, GELU, ReLU, SiLU, Tanh } from "../nn/activation.ts";
import { ModuleList } from "../nn/container.ts";
import { Conv1D } from "../nn/conv1d.ts";
import { lift } from "../nn/execution.ts";
import { normal_, ones_, zeros_ } from "../nn/init.ts";
import { Embedding, Linear } from "../nn/linear.ts";
import { Module, TensorModule } from "../nn/module.ts";
import { LayerNorm } from "../nn/normalization.ts";
import type { DType } from "../tensor/dtype.ts";
import { LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { default_generator, type Generator } from "../tensor/rng.ts";
import { GPT2Config, type GPT2Activation } from "./gpt2_config.ts";
import { load_checkpoint, save_checkpoint } from "./hf_checkpoint.ts";

export interface GPT2Options {
  /** Parameter dtype (default float32). */
  dtype?: DType;
  /** Random source for the initialization (default generator when omitted). */
  generator?: Generator;
  /** Draw the HF initialization (default true); false leaves the weights at their constructor values, e.g. before loading a checkpoint. */
  init?: boolean;
}

/** The activation module transformers' ACT2FN gives for a config name ("gelu_new" = tanh GELU). */
export function activation_module(name: GPT2Activation): TensorModule {
  switch (name) {
    case "gelu_new": case "gelu_pytorch_tanh": return new GELU("tanh");
    case "gelu": return new GELU("none");
    case "relu": return new ReLU();
    case "silu": case "swish": return new SiLU();
    case "tanh": return new Tanh();
  }
}

/**
 * Causal multi-head self-attention (HF GPT2Attention): q, k, v = split(c_attn(x)),
 * softmax(q kᵀ / √head_dim + causal mask) v, heads merged, then c_proj and resid_dropout.
 * c_attn: Conv1D(3·n_embd, n_embd); c_proj: Conv1D(n_embd, n_embd). HF's non-persistent
 * `attn.bias` mask buffer is not kept: the mask comes from scaled_dot_product_attention(is_causal).
 */
export class GPT2Attention extends TensorModule {
  /** q/k/v projection; a LoRA wrapper may replace it (any [*, n_embd] -> [*, 3·n_embd] module). */
  c_attn: TensorModule;
  c_proj: TensorModule;
  attn_dropout: Dropout;
  resid_dropout: Dropout;
  readonly n_embd: number;
  readonly n_head: number;
  readonly scale_attn_weights: boolean;

  constructor(config: GPT2Config, opts: GPT2Options = {}) {
    super();
    const o = { dtype: opts.dtype, generator: opts.generator };
    this.c_attn = new Conv1D(3 * config.n_embd, config.n_embd, o);
    this.c_proj = new Conv1D(config.n_embd, config.n_embd, o);
    this.attn_dropout = new Dropout(config.attn_pdrop);
    this.resid_dropout = new Dropout(config.resid_pdrop);
    this.n_embd = config.n_embd;
    this.n_head = config.n_head;
    this.scale_attn_weights = config.scale_attn_weights;
  }

  /**
   * @param x - [B, T, n_embd] float
   * @returns [B, T, n_embd]
   */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    const [B, T, C] = x.shape as [number, number, number];
    const nh = this.n_head, hd = C / nh;
    const [q, k, v] = this.c_attn.forward(x).split(C, 2) as [S, S, S]; // 3 × [B, T, C]
    const heads = (t: S) => t.view(B, T, nh, hd).transpose(1, 2); // [B, nh, T, hd]
    const y = scaled_dot_product_attention(heads(q), heads(k), heads(v), {
      dropout_p: this.training ? this.attn_dropout.p : 0,
      is_causal: true,
      scale: this.scale_attn_weights ? 1 / Math.sqrt(hd) : 1,
    }); // [B, nh, T, hd]
    const merged = y.transpose(1, 2).contiguous().view(B, T, C); // heads side by side again
    return this.resid_dropout.forward(this.c_proj.forward(merged));
  }
}

/** The feed-forward block (HF GPT2MLP): dropout(c_proj(act(c_fc(x)))), hidden size inner_dim. */
export class GPT2MLP extends TensorModule {
  c_fc: TensorModule;
  act: TensorModule;
  c_proj: TensorModule;
  dropout: Dropout;

  constructor(config: GPT2Config, opts: GPT2Options = {}) {
    super();
    const o = { dtype: opts.dtype, generator: opts.generator };
    this.c_fc = new Conv1D(config.inner_dim, config.n_embd, o);
    this.act = activation_module(config.activation_function);
    this.c_proj = new Conv1D(config.n_embd, config.inner_dim, o);
    this.dropout = new Dropout(config.resid_pdrop);
  }

  /** @param x - [B, T, n_embd] @returns [B, T, n_embd] */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    return this.dropout.forward(this.c_proj.forward(this.act.forward(this.c_fc.forward(x))));
  }
}

/** A pre-norm transformer block (HF GPT2Block): x + attn(ln_1(x)), then + mlp(ln_2(·)). */
export class GPT2Block extends TensorModule {
  ln_1: LayerNorm;
  attn: GPT2Attention;
  ln_2: LayerNorm;
  mlp: GPT2MLP;

  constructor(config: GPT2Config, opts: GPT2Options = {}) {
    super();
    const ln = { eps: config.layer_norm_epsilon, dtype: opts.dtype };
    this.ln_1 = new LayerNorm(config.n_embd, ln);
    this.attn = new GPT2Attention(config, opts);
    this.ln_2 = new LayerNorm(config.n_embd, ln);
    this.mlp = new GPT2MLP(config, opts);
  }

  /** @param x - [B, T, n_embd] @returns [B, T, n_embd] */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    const h = x.add(this.attn.forward(this.ln_1.forward(x)));
    return h.add(this.mlp.forward(this.ln_2.forward(h)));
  }
}

/** The transformer body (HF GPT2Model): embeddings, blocks, final LayerNorm. */
export class GPT2Model extends TensorModule {
  wte: Embedding;
  wpe: Embedding;
  drop: Dropout;
  h: ModuleList<GPT2Block>;
  ln_f: LayerNorm;
  readonly config: GPT2Config;

  constructor(config: GPT2Config, opts: GPT2Options = {}) {
    super();
    this.config = config;
    const e = { dtype: opts.dtype, generator: opts.generator };
    this.wte = new Embedding(config.vocab_size, config.n_embd, e);
    this.wpe = new Embedding(config.n_positions, config.n_embd, e);
    this.drop = new Dropout(config.embd_pdrop);
    this.h = new ModuleList(Array.from({ length: config.n_layer }, () => new GPT2Block(config, opts)));
    this.ln_f = new LayerNorm(config.n_embd, { eps: config.layer_norm_epsilon, dtype: opts.dtype });
  }

  /**
   * @param input_ids - int64/int32 [B, T] token ids in [0, vocab_size), T <= n_positions
   * @returns hidden states [B, T, n_embd] after ln_f
   * @throws LoomShapeError for a non-2-D input or T > n_positions
   */
  forward_lazy<S extends TensorOps<S>>(input_ids: S): S {
    if (input_ids.ndim !== 2) throw new LoomShapeError(`[GPT2Model] input_ids must be [B, T], got ${fmtShape(input_ids.shape)}`);
    const T = input_ids.shape[1]!;
    if (T > this.config.n_positions) {
      throw new LoomShapeError(`[GPT2Model] sequence length ${T} exceeds n_positions=${this.config.n_positions}`);
    }
    const pos = lift(arange(T, undefined, 1, { dtype: "int64", device: input_ids.device }), input_ids); // [T], on the input's device
    let x = this.drop.forward(this.wte.forward(input_ids).add(this.wpe.forward(pos))); // [B, T, C]
    for (const block of this.h) x = block.forward(x);
    return this.ln_f.forward(x);
  }
}

/** What GPT2LMHeadModel.forward returns (HF CausalLMOutput): logits and, given labels/targets, the loss. */
export interface CausalLMOutput<S> {
  /** [B, T, vocab_size] unnormalized next-token scores. */
  logits: S;
  /** 0-d mean cross entropy, or null without labels/targets. */
  loss: S | null;
}

export interface CausalLMInputs<S> {
  /**
   * HF semantics: token ids [B, T] aligned with input_ids; the model shifts them (position t
   * predicts labels[t+1]); -100 is ignored.
   */
  labels?: S | null;
  /** nanoGPT semantics: next-token ids [B, T] already shifted (targets[t] follows input[t]); -100 is ignored. */
  targets?: S | null;
}

export interface GenerateOptions {
  /** Divide logits by this before sampling (> 0, default 1); 0 picks the argmax (greedy). */
  temperature?: number;
  /** Sample only among the k most likely tokens (default: all). */
  top_k?: number | null;
  /** Source of the sampling draws (default generator when omitted). */
  generator?: Generator;
}

/**
 * GPT-2 with a language-modeling head (HF GPT2LMHeadModel). lm_head shares its weight with
 * transformer.wte when `config.tie_word_embeddings` (one Parameter, one gradient).
 * Checkpoint I/O (`from_pretrained`, `save_pretrained`) and `generate` live in pretrained.ts and
 * generate.ts and are attached to this class there.
 */
export class GPT2LMHeadModel extends Module {
  transformer: GPT2Model;
  lm_head: Linear;
  readonly config: GPT2Config;

  /** @param opts.init - false skips the random initialization (weights to be loaded) */
  constructor(config: GPT2Config, opts: GPT2Options = {}) {
    super();
    this.config = config;
    this.transformer = new GPT2Model(config, opts);
    this.lm_head = new Linear(config.n_embd, config.vocab_size, { bias: false, dtype: opts.dtype });
    if (opts.init !== false) this.init_weights(opts.generator);
    if (config.tie_word_embeddings) this.tie_weights();
  }

  /** Make lm_head.weight the very Parameter of transformer.wte.weight (HF tie_weights). */
  tie_weights(): void {
    this.lm_head.weight = this.transformer.wte.weight;
  }

  /**
   * HF's `_init_weights`: Linear/Conv1D weights and embeddings N(0, initializer_range²), biases
   * zero, LayerNorm weight 1 and bias 0, and every `c_proj.weight` N(0, (initializer_range/√(2·n_layer))²)
   * (GPT-2 paper: residual projections scaled by 1/√N).
   */
  init_weights(generator?: Generator): void {
    const std = this.config.initializer_range;
    const g = { generator };
    for (const [name, m] of this.named_modules()) {
      if (m instanceof Conv1D || m instanceof Linear) {
        const projStd = name.endsWith("c_proj") ? std / Math.sqrt(2 * this.config.n_layer) : std;
        normal_(m.weight, 0, projStd, g);
        if (m.bias) zeros_(m.bias);
      } else if (m instanceof Embedding) {
        normal_(m.weight, 0, std, g);
      } else if (m instanceof LayerNorm) {
        if (m.weight) ones_(m.weight);
        if (m.bias) zeros_(m.bias);
      }
    }
  }

  /**
   * @param input_ids - int64/int32 [B, T]
   * @param inputs - optional `labels` (HF, shifted inside) or `targets` (already shifted), int [B, T]
   * @returns {logits [B, T, vocab_size], loss 0-d or null}
   * @throws LoomValueError when both labels and targets are given; LoomShapeError for mismatched shapes
   */
  override forward_lazy<S extends TensorOps<S>>(input_ids: S, inputs: CausalLMInputs<S> = {}): CausalLMOutput<S> {
    const hidden = this.transformer.forward(input_ids) as S; // [B, T, C]
    const logits = this.lm_head.forward(hidden); // [B, T, V]
    const { labels = null, targets = null } = inputs;
    if (labels && targets) throw new LoomValueError("[GPT2LMHeadModel] pass labels (HF, shifted inside) or targets (already shifted), not both");
    let loss: S | null = null;
    const [B, T, V] = logits.shape as [number, number, number];
    if (labels) {
      if (labels.ndim !== 2 || labels.shape[0] !== B || labels.shape[1] !== T) {
        throw new LoomShapeError(`[GPT2LMHeadModel] labels ${fmtShape(labels.shape)} must match input_ids [${B}, ${T}]`);
      }
      const l = logits.narrow(1, 0, T - 1).reshape([-1, V]); // [B·(T-1), V]: positions 0..T-2
      loss = cross_entropy(l, labels.narrow(1, 1, T - 1).reshape([-1]));
    } else if (targets) {
      if (targets.ndim !== 2 || targets.shape[0] !== B || targets.shape[1] !== T) {
        throw new LoomShapeError(`[GPT2LMHeadModel] targets ${fmtShape(targets.shape)} must match input_ids [${B}, ${T}]`);
      }
      loss = cross_entropy(logits.reshape([-1, V]), targets.reshape([-1]));
    }
    return { logits, loss };
  }

  override forward<S extends TensorOps<S>>(input_ids: S, inputs: CausalLMInputs<S> = {}): CausalLMOutput<S> {
    return super.forward(input_ids, inputs) as CausalLMOutput<S>;
  }
  override call<S extends TensorOps<S>>(input_ids: S, inputs: CausalLMInputs<S> = {}): CausalLMOutput<S> {
    return this.forward(input_ids, inputs);
  }
  override forward_eager<S extends TensorOps<S>>(input_ids: S, inputs: CausalLMInputs<S> = {}): CausalLMOutput<S> {
    return super.forward_eager(input_ids, inputs) as CausalLMOutput<S>;
  }

  /**
   * Load a Hugging Face GPT-2 checkpoint directory: `config.json` + `model.safetensors` (or
   * `model.safetensors.index.json` and its shards). Keys saved without `transformer.` (OpenAI's
   * `gpt2` files), HF's non-persistent `attn.bias`/`attn.masked_bias` buffers and a missing tied
   * `lm_head.weight` are accepted, as transformers does. The model is returned in eval() mode.
   * @param opts.strict - throw on other missing/unexpected keys (default true)
   * @throws LoomValueError for a missing/invalid config.json, missing weights, key or shape
   *   mismatches; LoomFormatError for malformed safetensors
   */
  static from_pretrained(dir: string, opts: { dtype?: DType; strict?: boolean } = {}): GPT2LMHeadModel {
    const config = GPT2Config.from_pretrained(dir);
    const model = new GPT2LMHeadModel(config, { dtype: opts.dtype, init: false });
    load_checkpoint(model, dir, {
      base_model_prefix: "transformer",
      ignore_unexpected: [/(^|\.)attn\.(masked_)?bias$/],
      allow_missing: config.tie_word_embeddings ? ["lm_head.weight"] : [],
      strict: opts.strict,
    });
    return model.eval();
  }

  /**
   * Write `config.json` and `model.safetensors` (shards + index above max_shard_size) in the HF
   * layout, metadata {"format": "pt"}; a tied lm_head.weight is not written (transformers drops it too).
   * @param opts.max_shard_size - bytes or "10MB"-style text (default 5 GB)
   */
  save_pretrained(dir: string, opts: { max_shard_size?: number | string } = {}): void {
    const tied = this.lm_head.weight === this.transformer.wte.weight;
    this.config.save_pretrained(dir);
    save_checkpoint(this, dir, { skip: tied ? ["lm_head.weight"] : [], max_shard_size: opts.max_shard_size });
  }

  /** Number of parameters (tied weights counted once), as HF num_parameters(). */
  num_parameters(only_trainable = false): number {
    return this.parameters().filter((p) => !only_trainable || p.requires_grad).reduce((n, p) => n + p.numel(), 0);
  }

  /**
   * Autoregressive sampling (nanoGPT / HF generate with do_sample): appends `max_new_tokens`
   * tokens, each drawn from softmax(logits[:, -1] / temperature) restricted to the top_k,
   * feeding at most n_positions tokens of context. Runs under no_grad in eval() mode and restores
   * the training flag afterwards.
   * @param idx - int64 [B, T] prompt ids (T >= 1), any device
   * @returns int64 [B, T + max_new_tokens] on the cpu
   * @throws LoomValueError for a bad temperature or top_k, LoomShapeError for a non-2-D prompt
   */
  generate(idx: Tensor, max_new_tokens: number, opts: GenerateOptions = {}): Tensor {
    return generate_tokens(this, idx, max_new_tokens, opts);
  }
}

// ---- sampling ---------------------------------------------------------------------------------

/** One token from a row of logits under temperature/top-k, by inverse-CDF on one uniform draw. */
export function sample_logits(row: ArrayLike<number>, temperature: number, top_k: number | null, u: () => number): number {
  const V = row.length;
  let best = 0;
  for (let j = 1; j < V; j++) if (row[j]! > row[best]!) best = j;
  if (temperature === 0) return best;
  let cutoff = -Infinity;
  if (top_k !== null && top_k < V) {
    const sorted = Array.from(row).sort((a, b) => b - a);
    cutoff = sorted[top_k - 1]!; // keep logits >= the k-th largest (ties kept, as torch.topk + mask)
  }
  const p = new Float64Array(V);
  let sum = 0;
  for (let j = 0; j < V; j++) {
    if (row[j]! < cutoff) continue;
    p[j] = Math.exp((row[j]! - row[best]!) / temperature); // shifted by the max: no overflow
    sum += p[j]!;
  }
  let r = u() * sum;
  for (let j = 0; j < V; j++) {
    if (p[j]! === 0) continue;
    r -= p[j]!;
    if (r < 0) return j;
  }
  return best;
}

function generate_tokens(model: GPT2LMHeadModel, idx: Tensor, max_new_tokens: number, opts: GenerateOptions): Tensor {
  const { temperature = 1, top_k = null, generator = default_generator } = opts;
  if (!(temperature >= 0) || !Number.isFinite(temperature)) throw new LoomValueError(`[generate] temperature must be a finite number >= 0, got ${temperature}`);
  if (top_k !== null && (!Number.isInteger(top_k) || top_k < 1)) throw new LoomValueError(`[generate] top_k must be a positive integer, got ${top_k}`);
  if (idx.ndim !== 2 || idx.shape[1] === 0) throw new LoomShapeError(`[generate] idx must be [B, T] with T >= 1, got ${fmtShape(idx.shape)}`);
  const B = idx.shape[0]!;
  const rows: number[][] = idx.tolist() as number[][];
  const device = model.transformer.wte.weight.device; // feed the model on its own device
  const was_training = model.training;
  model.eval();
  try {
    no_grad(() => {
      const ctx = model.config.n_positions;
      for (let s = 0; s < max_new_tokens; s++) {
        const cond = rows.map((r) => r.slice(-ctx));
        const { logits } = model.forward(tensor(cond, { dtype: "int64", device })); // [B, Tc, V]
        const Tc = cond[0]!.length, V = logits.shape[2]!;
        const last = logits.narrow(1, Tc - 1, 1).contiguous().dataSync(); // [B, 1, V]
        for (let b = 0; b < B; b++) rows[b]!.push(sample_logits(last.subarray(b * V, (b + 1) * V), temperature, top_k, () => generator.uniform53()));
      }
    });
  } finally {
    model.train(was_training);
  }
  return tensor(rows, { dtype: "int64" });
}
