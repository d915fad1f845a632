/**
 * nanoGPT's model.py, ported line by line to Loom's public API.
 * Source: https://github.com/karpathy/nanoGPT/blob/master/model.py (MIT), whose docstrings and
 * comments are kept; "Loom:" comments mark where the port differs and why.
 *
 * Full definition of a GPT Language Model, all of it in this single file.
 * References:
 * 1) the official GPT-2 TensorFlow implementation released by OpenAI:
 * https://github.com/openai/gpt-2/blob/master/src/model.py
 * 2) huggingface/transformers PyTorch implementation:
 * https://github.com/huggingface/transformers/blob/main/src/transformers/models/gpt2/modeling_gpt2.py
 *
 * Run: `bun examples/nanogpt.ts [--steps 200]` trains a tiny character model on a few lines of
 * text (lazy mode: one plan per step) and samples from it with top-k.
 */
import * as loom from "../src/index.ts";
import { nn, optim, type Tensor } from "../src/index.ts";

const F = nn.functional;

/** nanoGPT prints a few facts while building; `NANOGPT_QUIET=1` (the tests) silences them. */
function print(...args: unknown[]): void {
  if (process.env.NANOGPT_QUIET !== "1") console.log(...args);
}

/** LayerNorm but with an optional bias. PyTorch doesn't support simply bias=False */
export class LayerNorm extends nn.Module {
  weight: nn.Parameter;
  bias: nn.Parameter | null;

  constructor(ndim: number, bias: boolean) {
    super();
    this.weight = new nn.Parameter(loom.ones(ndim));
    this.bias = bias ? new nn.Parameter(loom.zeros(ndim)) : null;
  }

  // Loom: `forward` overrides nn.Module's, as in PyTorch; `call(x)` (torch's `module(x)`) runs it
  // op by op in eager mode, or records it as one graph in lazy mode (the default)
  override forward(input: Tensor): Tensor {
    return F.layer_norm(input, this.weight.shape, this.weight, this.bias, 1e-5);
  }
}

export class CausalSelfAttention extends nn.Module {
  c_attn: nn.Linear;
  c_proj: nn.Linear;
  attn_dropout: nn.Dropout;
  resid_dropout: nn.Dropout;
  n_head: number;
  n_embd: number;
  dropout: number;
  flash: boolean;
  declare bias?: Tensor;

  constructor(config: GPTConfig) {
    super();
    if (config.n_embd % config.n_head !== 0) throw new loom.LoomValueError("assert config.n_embd % config.n_head == 0");
    // key, query, value projections for all heads, but in a batch
    this.c_attn = new nn.Linear(config.n_embd, 3 * config.n_embd, { bias: config.bias });
    // output projection
    this.c_proj = new nn.Linear(config.n_embd, config.n_embd, { bias: config.bias });
    // regularization
    this.attn_dropout = new nn.Dropout(config.dropout);
    this.resid_dropout = new nn.Dropout(config.dropout);
    this.n_head = config.n_head;
    this.n_embd = config.n_embd;
    this.dropout = config.dropout;
    // flash attention make GPU go brrrrr but support is only in PyTorch >= 2.0
    // Loom: F.scaled_dot_product_attention always exists; `flash = false` selects the manual path
    this.flash = typeof F.scaled_dot_product_attention === "function" && !config._manual_attention;
    if (!this.flash) {
      print("WARNING: using slow attention. Flash Attention requires PyTorch >= 2.0");
      // causal mask to ensure that attention is only applied to the left in the input sequence
      this.register_buffer("bias", loom.tril(loom.ones(config.block_size, config.block_size))
        .view(1, 1, config.block_size, config.block_size));
    }
  }

  override forward(x: Tensor): Tensor {
    const [B, T, C] = x.size() as [number, number, number]; // batch size, sequence length, embedding dimensionality (n_embd)

    // calculate query, key, values for all heads in batch and move head forward to be the batch dim
    let [q, k, v] = this.c_attn.call(x).split(this.n_embd, 2) as [Tensor, Tensor, Tensor];
    k = k.view(B, T, this.n_head, C / this.n_head).transpose(1, 2); // (B, nh, T, hs)
    q = q.view(B, T, this.n_head, C / this.n_head).transpose(1, 2); // (B, nh, T, hs)
    v = v.view(B, T, this.n_head, C / this.n_head).transpose(1, 2); // (B, nh, T, hs)

    // causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
    let y: Tensor;
    if (this.flash) {
      // efficient attention using Flash Attention CUDA kernels
      y = F.scaled_dot_product_attention(q, k, v, { attn_mask: null, dropout_p: this.training ? this.dropout : 0, is_causal: true });
    } else {
      // manual implementation of attention
      let att = q.matmul(k.transpose(-2, -1)).mul(1.0 / Math.sqrt(k.size(-1)));
      att = att.masked_fill(this.bias!.index(":", ":", `:${T}`, `:${T}`).eq(0), -Infinity);
      att = F.softmax(att, -1);
      att = this.attn_dropout.call(att);
      y = att.matmul(v); // (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
    }
    y = y.transpose(1, 2).contiguous().view(B, T, C); // re-assemble all head outputs side by side

    // output projection
    y = this.resid_dropout.call(this.c_proj.call(y));
    return y;
  }
}

export class MLP extends nn.Module {
  c_fc: nn.Linear;
  gelu: nn.GELU;
  c_proj: nn.Linear;
  dropout: nn.Dropout;

  constructor(config: GPTConfig) {
    super();
    this.c_fc = new nn.Linear(config.n_embd, 4 * config.n_embd, { bias: config.bias });
    this.gelu = new nn.GELU();
    this.c_proj = new nn.Linear(4 * config.n_embd, config.n_embd, { bias: config.bias });
    this.dropout = new nn.Dropout(config.dropout);
  }

  override forward(x: Tensor): Tensor {
    x = this.c_fc.call(x);
    x = this.gelu.call(x);
    x = this.c_proj.call(x);
    x = this.dropout.call(x);
    return x;
  }
}

export class Block extends nn.Module {
  ln_1: LayerNorm;
  attn: CausalSelfAttention;
  ln_2: LayerNorm;
  mlp: MLP;

  constructor(config: GPTConfig) {
    super();
    this.ln_1 = new LayerNorm(config.n_embd, config.bias);
    this.attn = new CausalSelfAttention(config);
    this.ln_2 = new LayerNorm(config.n_embd, config.bias);
    this.mlp = new MLP(config);
  }

  override forward(x: Tensor): Tensor {
    x = x.add(this.attn.call(this.ln_1.call(x)));
    x = x.add(this.mlp.call(this.ln_2.call(x)));
    return x;
  }
}

/** Loom: a Python @dataclass becomes a class whose constructor takes the fields to override. */
export class GPTConfig {
  block_size = 1024;
  vocab_size = 50304; // GPT-2 vocab_size of 50257, padded up to nearest multiple of 64 for efficiency
  n_layer = 12;
  n_head = 12;
  n_embd = 768;
  dropout = 0.0;
  bias = true; // True: bias in Linears and LayerNorms, like GPT-2. False: a bit better and faster
  /** Loom: not in nanoGPT; true takes the manual attention path (nanoGPT on PyTorch < 2.0). */
  _manual_attention = false;

  constructor(fields: Partial<GPTConfig> = {}) {
    Object.assign(this, fields);
  }
}

/** transformer's members: ModuleDict is typed by them (`get("wte")` is an Embedding, no cast). */
type Transformer = nn.ModuleDict<{ wte: nn.Embedding; wpe: nn.Embedding; drop: nn.Dropout; h: nn.ModuleList<Block>; ln_f: LayerNorm }>;

export class GPT extends nn.Module {
  config: GPTConfig;
  transformer: Transformer;
  lm_head: nn.Linear;

  constructor(config: GPTConfig) {
    super();
    if (config.vocab_size == null) throw new loom.LoomValueError("assert config.vocab_size is not None");
    if (config.block_size == null) throw new loom.LoomValueError("assert config.block_size is not None");
    this.config = config;

    this.transformer = new nn.ModuleDict({
      wte: new nn.Embedding(config.vocab_size, config.n_embd),
      wpe: new nn.Embedding(config.block_size, config.n_embd),
      drop: new nn.Dropout(config.dropout),
      h: new nn.ModuleList(Array.from({ length: config.n_layer }, () => new Block(config))),
      ln_f: new LayerNorm(config.n_embd, config.bias),
    });
    this.lm_head = new nn.Linear(config.n_embd, config.vocab_size, { bias: false });
    // with weight tying when using torch.compile() some warnings get generated:
    // "UserWarning: functional_call was passed multiple values for tied weights.
    // This behavior is deprecated and will be an error in future versions"
    // not 100% sure what this is, so far seems to be harmless. TODO investigate
    this.wte.weight = this.lm_head.weight; // https://paperswithcode.com/method/weight-tying

    // init all weights
    this.apply((m) => this._init_weights(m));
    // apply special scaled init to the residual projections, per GPT-2 paper
    for (const [pn, p] of this.named_parameters()) {
      if (pn.endsWith("c_proj.weight")) {
        nn.init.normal_(p, 0.0, 0.02 / Math.sqrt(2 * config.n_layer));
      }
    }

    // report number of parameters
    print(`number of parameters: ${(this.get_num_params() / 1e6).toFixed(2)}M`);
  }

  // Loom: nanoGPT's self.transformer.wte is `this.transformer.get("wte")` (typed by the dict's
  // members); these shorthands are for the tests and the surgery below
  get wte(): nn.Embedding { return this.transformer.get("wte"); }
  get wpe(): nn.Embedding { return this.transformer.get("wpe"); }
  get h(): nn.ModuleList<Block> { return this.transformer.get("h"); }

  /**
   * Return the number of parameters in the model.
   * For non-embedding count (default), the position embeddings get subtracted.
   * The token embeddings would too, except due to the parameter sharing these
   * params are actually used as weights in the final layer, so we include them.
   */
  get_num_params(non_embedding = true): number {
    let n_params = this.parameters().reduce((s, p) => s + p.numel(), 0);
    if (non_embedding) {
      n_params -= this.wpe.weight.numel();
    }
    return n_params;
  }

  _init_weights(module: nn.Module): void {
    if (module instanceof nn.Linear) {
      nn.init.normal_(module.weight, 0.0, 0.02);
      if (module.bias !== null) {
        nn.init.zeros_(module.bias);
      }
    } else if (module instanceof nn.Embedding) {
      nn.init.normal_(module.weight, 0.0, 0.02);
    }
  }

  /**
   * @param idx - int64 [b, t] token ids, t <= block_size
   * @param targets - int64 [b, t] next-token ids (-1 ignored), or null
   * @returns [logits [b, t, vocab_size] (with targets) or [b, 1, vocab_size], loss (0-d) or null]
   */
  override forward(idx: Tensor, targets: Tensor | null = null): [Tensor, Tensor | null] {
    const device = idx.device;
    const [_b, t] = idx.size() as [number, number]; // Loom: b is unused, as in nanoGPT
    if (!(t <= this.config.block_size)) throw new loom.LoomValueError(`Cannot forward sequence of length ${t}, block size is only ${this.config.block_size}`);
    const pos = loom.arange(0, t, 1, { dtype: "int64", device }); // shape (t)

    // forward the GPT model itself
    const tok_emb = this.transformer.get("wte").call(idx); // token embeddings of shape (b, t, n_embd)
    const pos_emb = this.transformer.get("wpe").call(pos); // position embeddings of shape (t, n_embd)
    let x = this.transformer.get("drop").call(tok_emb.add(pos_emb));
    for (const block of this.transformer.get("h")) {
      x = block.call(x);
    }
    x = this.transformer.get("ln_f").call(x);

    let logits: Tensor, loss: Tensor | null;
    if (targets !== null) {
      // if we are given some desired targets also calculate the loss
      logits = this.lm_head.call(x);
      loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), { ignore_index: -1 });
    } else {
      // inference-time mini-optimization: only forward the lm_head on the very last position
      logits = this.lm_head.call(x.index(":", [-1], ":")); // note: using list [-1] to preserve the time dim
      loss = null;
    }
    return [logits, loss];
  }

  crop_block_size(block_size: number): void {
    // model surgery to decrease the block size if necessary
    // e.g. we may load the GPT2 pretrained model checkpoint (block size 1024)
    // but want to use a smaller block size for some smaller, simpler model
    if (!(block_size <= this.config.block_size)) throw new loom.LoomValueError("assert block_size <= self.config.block_size");
    this.config.block_size = block_size;
    this.wpe.weight = new nn.Parameter(this.wpe.weight.index(`:${block_size}`));
    for (const block of this.h) {
      if (block.attn.bias !== undefined) {
        block.attn.bias = block.attn.bias.index(":", ":", `:${block_size}`, `:${block_size}`);
      }
    }
  }

  /**
   * Loom: nanoGPT downloads `model_type` with transformers' GPT2LMHeadModel; here `model_dir` is a
   * local Hugging Face GPT-2 directory (config.json + model.safetensors) read by
   * loom.models.GPT2LMHeadModel. The copy (with the Conv1D transposes) is nanoGPT's.
   */
  static from_pretrained(model_dir: string, override_args: { dropout?: number } = {}): GPT {
    // only dropout can be overridden see more notes below
    if (!Object.keys(override_args).every((k) => k === "dropout")) throw new loom.LoomValueError("assert all(k == 'dropout' for k in override_args)");
    print(`loading weights from pretrained gpt: ${model_dir}`);
    const model_hf = loom.models.GPT2LMHeadModel.from_pretrained(model_dir);

    // n_layer, n_head and n_embd are determined from model_type (Loom: from its config.json)
    const c = model_hf.config;
    const config_args: Partial<GPTConfig> = { n_layer: c.n_layer, n_head: c.n_head, n_embd: c.n_embd };
    print("forcing bias=True; vocab_size and block_size from the checkpoint");
    config_args.vocab_size = c.vocab_size; // always 50257 for GPT model checkpoints
    config_args.block_size = c.n_positions; // always 1024 for GPT model checkpoints
    config_args.bias = true; // always True for GPT model checkpoints
    // we can override the dropout rate, if desired
    if (override_args.dropout !== undefined) {
      print(`overriding dropout rate to ${override_args.dropout}`);
      config_args.dropout = override_args.dropout;
    }
    // create a from-scratch initialized minGPT model
    const config = new GPTConfig(config_args);
    const model = new GPT(config);
    const sd = model.state_dict();
    let sd_keys = Object.keys(sd);
    sd_keys = sd_keys.filter((k) => !k.endsWith(".attn.bias")); // discard this mask / buffer, not a param

    const sd_hf = model_hf.state_dict();

    // copy while ensuring all of the parameters are aligned and match in names and shapes
    let sd_keys_hf = Object.keys(sd_hf);
    sd_keys_hf = sd_keys_hf.filter((k) => !k.endsWith(".attn.masked_bias")); // ignore these, just a buffer
    sd_keys_hf = sd_keys_hf.filter((k) => !k.endsWith(".attn.bias")); // same, just the mask (buffer)
    const transposed = ["attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"];
    // basically the openai checkpoints use a "Conv1D" module, but we only want to use a vanilla Linear
    // this means that we have to transpose these weights when we import them
    // Loom: the HF state dict has lm_head.weight too (tied, so a second name of wte.weight), as torch
    if (sd_keys_hf.length !== sd_keys.length) throw new loom.LoomValueError(`mismatched keys: ${sd_keys_hf.length} != ${sd_keys.length}`);
    const same = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((s, i) => s === b[i]);
    for (const k of sd_keys_hf) {
      if (transposed.some((w) => k.endsWith(w))) {
        // special treatment for the Conv1D weights we need to transpose
        if (!same([...sd_hf[k]!.shape].reverse(), sd[k]!.shape)) throw new loom.LoomShapeError(`assert sd_hf[${k}].shape[::-1] == sd[${k}].shape`);
        loom.no_grad(() => sd[k]!.copy_(sd_hf[k]!.t()));
      } else {
        // vanilla copy over the other parameters
        if (!same(sd_hf[k]!.shape, sd[k]!.shape)) throw new loom.LoomShapeError(`assert sd_hf[${k}].shape == sd[${k}].shape`);
        loom.no_grad(() => sd[k]!.copy_(sd_hf[k]!));
      }
    }

    return model;
  }

  configure_optimizers(weight_decay: number, learning_rate: number, betas: [number, number], device_type: string): optim.AdamW {
    // start with all of the candidate parameters
    let param_dict = Object.fromEntries(this.named_parameters());
    // filter out those that do not require grad
    param_dict = Object.fromEntries(Object.entries(param_dict).filter(([, p]) => p.requires_grad));
    // create optim groups. Any parameters that is 2D will be weight decayed, otherwise no.
    // i.e. all weight tensors in matmuls + embeddings decay, all biases and layernorms don't.
    const decay_params = Object.values(param_dict).filter((p) => p.dim() >= 2);
    const nodecay_params = Object.values(param_dict).filter((p) => p.dim() < 2);
    const optim_groups = [
      { params: decay_params, weight_decay: weight_decay },
      { params: nodecay_params, weight_decay: 0.0 },
    ];
    const num_decay_params = decay_params.reduce((s, p) => s + p.numel(), 0);
    const num_nodecay_params = nodecay_params.reduce((s, p) => s + p.numel(), 0);
    print(`num decayed parameter tensors: ${decay_params.length}, with ${num_decay_params.toLocaleString("en-US")} parameters`);
    print(`num non-decayed parameter tensors: ${nodecay_params.length}, with ${num_nodecay_params.toLocaleString("en-US")} parameters`);
    // Create AdamW optimizer and use the fused version if it is available
    const fused_available = true; // Loom: AdamW accepts fused (the compiler fuses the update anyway)
    const use_fused = fused_available && device_type === "cuda";
    const extra_args = use_fused ? { fused: true } : {};
    const optimizer = new optim.AdamW(optim_groups, { lr: learning_rate, betas, ...extra_args });
    print(`using fused AdamW: ${use_fused}`);

    return optimizer;
  }

  /** estimate model flops utilization (MFU) in units of A100 bfloat16 peak FLOPS */
  estimate_mfu(fwdbwd_per_iter: number, dt: number): number {
    // first estimate the number of flops we do per iteration.
    // see PaLM paper Appendix B as ref: https://arxiv.org/abs/2204.02311
    const N = this.get_num_params();
    const cfg = this.config;
    const [L, H, Q, T] = [cfg.n_layer, cfg.n_head, Math.floor(cfg.n_embd / cfg.n_head), cfg.block_size];
    const flops_per_token = 6 * N + 12 * L * H * Q * T;
    const flops_per_fwdbwd = flops_per_token * T;
    const flops_per_iter = flops_per_fwdbwd * fwdbwd_per_iter;
    // express our flops throughput as ratio of A100 bfloat16 peak flops
    const flops_achieved = flops_per_iter * (1.0 / dt); // per second
    const flops_promised = 312e12; // A100 GPU bfloat16 peak flops is 312 TFLOPS
    const mfu = flops_achieved / flops_promised;
    return mfu;
  }

  /**
   * Take a conditioning sequence of indices idx (LongTensor of shape (b,t)) and complete
   * the sequence max_new_tokens times, feeding the predictions back into the model each time.
   * Most likely you'll want to make sure to be in model.eval() mode of operation for this.
   * Loom: `generator` (not in nanoGPT) is the source of the sampling draws, for reproducible samples.
   */
  generate(idx: Tensor, max_new_tokens: number, temperature = 1.0, top_k: number | null = null, generator?: loom.Generator): Tensor {
    using _ = loom.no_grad(); // @torch.no_grad()
    for (let i = 0; i < max_new_tokens; i++) {
      // if the sequence context is growing too long we must crop it at block_size
      const idx_cond = idx.size(1) <= this.config.block_size ? idx : idx.index(":", `${-this.config.block_size}:`);
      // forward the model to get the logits for the index in the sequence
      let [logits] = this.call(idx_cond);
      // pluck the logits at the final step and scale by desired temperature
      logits = logits.index(":", -1, ":").div(temperature);
      // optionally crop the logits to only the top k options
      if (top_k !== null) {
        const [v] = loom.topk(logits, Math.min(top_k, logits.size(-1)));
        logits.set(logits.lt(v.index(":", [-1])), -Infinity); // logits[logits < v[:, [-1]]] = -float('Inf')
      }
      // apply softmax to convert logits to (normalized) probabilities
      const probs = F.softmax(logits, -1);
      // sample from the distribution
      const idx_next = loom.multinomial(probs, 1, { generator });
      // append sampled index to the running sequence and continue
      idx = loom.cat([idx, idx_next], 1);
    }
    return idx;
  }
}

// ---- a tiny character-level run: `bun examples/nanogpt.ts [--steps 200]` ------------------------

const TEXT = `First Citizen:
Before we proceed any further, hear me speak.
All:
Speak, speak.
First Citizen:
You are all resolved rather to die than to famish?
All:
Resolved. resolved.
`;

/** Train a tiny GPT on TEXT for `steps` AdamW steps (lazy mode) and return the losses. */
export function train_tiny(steps: number, seed = 1337): { model: GPT; losses: number[]; stoi: Map<string, number>; itos: string[] } {
  loom.manual_seed(seed);
  const itos = [...new Set(TEXT)].sort();
  const stoi = new Map(itos.map((c, i) => [c, i]));
  const data = [...TEXT].map((c) => stoi.get(c)!);
  const config = new GPTConfig({ block_size: 16, vocab_size: itos.length, n_layer: 2, n_head: 2, n_embd: 32, dropout: 0.0, bias: false });
  const model = new GPT(config);
  const optimizer = model.configure_optimizers(0.1, 3e-3, [0.9, 0.95], "cpu");
  const g = new loom.Generator(seed);
  const get_batch = (batch_size: number) => {
    const ix = loom.randint(0, data.length - config.block_size, [batch_size], { generator: g }).tolist() as number[];
    const x = loom.tensor(ix.map((i) => data.slice(i, i + config.block_size)), { dtype: "int64" });
    const y = loom.tensor(ix.map((i) => data.slice(i + 1, i + 1 + config.block_size)), { dtype: "int64" });
    return [x, y] as const;
  };
  const losses: number[] = [];
  for (let iter = 0; iter < steps; iter++) {
    const [X, Y] = get_batch(8);
    const [, loss] = model.call(X, Y);
    optimizer.zero_grad(true);
    loss!.backward();
    optimizer.step();
    losses.push(loss!.item());
  }
  return { model, losses, stoi, itos };
}

if (import.meta.main) {
  const i = process.argv.indexOf("--steps");
  const steps = i > 0 ? Number(process.argv[i + 1]) : 200;
  const t0 = performance.now();
  const { model, losses, stoi, itos } = train_tiny(steps);
  const dt = (performance.now() - t0) / 1000;
  for (let s = 0; s < steps; s += Math.max(1, Math.floor(steps / 10))) console.log(`iter ${String(s).padStart(4)}: loss ${losses[s]!.toFixed(4)}`);
  console.log(`iter ${steps - 1}: loss ${losses.at(-1)!.toFixed(4)}  (${((dt * 1000) / steps).toFixed(1)} ms/iter)`);
  model.eval();
  const start = loom.tensor([[stoi.get("A")!]], { dtype: "int64" });
  const out = model.generate(start, 60, 0.8, 5, new loom.Generator(42));
  console.log((out.tolist() as number[][])[0]!.map((t) => itos[t]).join(""));
}
