#!/usr/bin/python3
"""Reference values for Loom's Llama-family models (src/models/llama.ts), computed with PyTorch 1.13.

Run:  /usr/bin/python3 tests/models/gen_llama_goldens.py

transformers and peft are not installed, so the models are written here functionally in plain torch,
following Hugging Face's formulas line by line (transformers/models/llama/modeling_llama.py and
qwen2/modeling_qwen2.py, eager attention): LlamaRMSNorm (float32 statistics, eps inside the sqrt),
default RoPE (inv_freq = 1/theta^(2i/d), cat(freqs, freqs), rotate_half), repeat_kv (KV head j serves
query heads j*n_rep .. j*n_rep+n_rep-1), additive causal (+ padding) mask with finfo.min, softmax in
float32, SwiGLU MLP down(silu(gate) * up), final norm, lm_head, ForCausalLMLoss (shifted labels, -100
ignored). LoRA as PEFT's Linear: base(x) + lora_B(lora_A(x)) * lora_alpha / r.

Two tiny models, written as HF checkpoint folders (config.json + model.safetensors, float32):
- fixtures/tiny_llama: model_type llama, GQA (4 query heads, 2 KV heads), untied lm_head, no biases;
- fixtures/tiny_qwen2: model_type qwen2, GQA, q/k/v biases (o_proj without), tied lm_head (not written).
Both use a large rms_norm_eps (0.05, activations of rms ~0.3) so that eps inside or outside the
square root changes the outputs a lot.

llama_goldens.json holds, per model (computed in float64 from the float32 weights):
  input_ids [2, 9], labels (some -100), logits, loss;
  masked: logits with a 2-D attention_mask (row 1 left-padded by 2);
  lora (r=4, alpha=8 on q_proj and v_proj, nonzero A and B given here): loss, gradients of every
    lora_A / lora_B, and the A / B values after one torch.optim.AdamW step (lr 1e-2, weight_decay 0.1);
  variants: logits of three wrong implementations (interleaved RoPE pairs, tiled GQA head order,
    eps outside the sqrt) and their max |diff| from the true logits: the test requires Loom's
    logits to be far from each (the fixtures are sensitive to these mistakes).
Decode-step references are the full-forward logits (a KV-cache decode must reproduce them).
rope_scaling: inv_freq for rope_type default / linear / llama3 (float32, as HF computes it).
"""
import json
import os

import torch

from safetensors_writer import write_safetensors  # this folder is on sys.path when run as a script

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures")
DT = torch.float64

BASE = dict(vocab_size=40, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=0.05, rope_theta=10000.0,
            hidden_act="silu", initializer_range=0.02, attention_dropout=0.0)
CONFIGS = {
    "tiny_llama": dict(BASE, model_type="llama", architectures=["LlamaForCausalLM"], tie_word_embeddings=False,
                       attention_bias=False, mlp_bias=False, head_dim=8, bos_token_id=1, eos_token_id=2),
    "tiny_qwen2": dict(BASE, model_type="qwen2", architectures=["Qwen2ForCausalLM"], tie_word_embeddings=True,
                       use_sliding_window=False, sliding_window=64, max_window_layers=2, rope_theta=1000.0,
                       bos_token_id=None, eos_token_id=3),
}
LORA = dict(r=4, lora_alpha=8, targets=["q_proj", "v_proj"])
ADAMW = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)


def f32(t):
    """Round to float32 and back: the weights Loom reads are exactly these values."""
    return t.to(torch.float32).to(DT)


def make_weights(cfg, gen):
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    NH, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = H // NH
    qwen = cfg["model_type"] == "qwen2"
    w = {}

    def rnd(*shape, std):
        return f32(torch.randn(*shape, generator=gen, dtype=DT) * std)

    w["model.embed_tokens.weight"] = rnd(V, H, std=0.3)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "self_attn.q_proj.weight"] = rnd(NH * D, H, std=1.5 / H ** 0.5)
        w[p + "self_attn.k_proj.weight"] = rnd(KV * D, H, std=1.5 / H ** 0.5)
        w[p + "self_attn.v_proj.weight"] = rnd(KV * D, H, std=1.0 / H ** 0.5)
        if qwen:
            w[p + "self_attn.q_proj.bias"] = rnd(NH * D, std=0.3)
            w[p + "self_attn.k_proj.bias"] = rnd(KV * D, std=0.3)
            w[p + "self_attn.v_proj.bias"] = rnd(KV * D, std=0.3)
        w[p + "self_attn.o_proj.weight"] = rnd(H, NH * D, std=0.5 / H ** 0.5)
        w[p + "mlp.gate_proj.weight"] = rnd(I, H, std=1.0 / H ** 0.5)
        w[p + "mlp.up_proj.weight"] = rnd(I, H, std=1.0 / H ** 0.5)
        w[p + "mlp.down_proj.weight"] = rnd(H, I, std=0.5 / I ** 0.5)
        w[p + "input_layernorm.weight"] = f32(1 + 0.2 * torch.randn(H, generator=gen, dtype=DT))
        w[p + "post_attention_layernorm.weight"] = f32(1 + 0.2 * torch.randn(H, generator=gen, dtype=DT))
    w["model.norm.weight"] = f32(1 + 0.2 * torch.randn(H, generator=gen, dtype=DT))
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = rnd(V, H, std=2.0 / H ** 0.5)
    return w


# ---- HF's formulas, functionally ------------------------------------------------------------------

def rms_norm(x, weight, eps, eps_outside=False):
    variance = x.pow(2).mean(-1, keepdim=True)
    h = x / (variance.sqrt() + eps) if eps_outside else x * torch.rsqrt(variance + eps)
    return weight * h


def rope_cos_sin(position_ids, dim, theta):
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).to(DT) / dim))
    freqs = (inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1) @ position_ids[:, None, :].to(DT)).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    d = x.shape[-1] // 2
    return torch.cat((-x[..., d:], x[..., :d]), dim=-1)


def rotate_interleaved(x, cos, sin):
    # wrong variant (Meta's complex form on unpermuted weights): pairs (0,1), (2,3), ...
    c = cos[..., : x.shape[-1] // 2].repeat_interleave(2, -1)
    s = sin[..., : x.shape[-1] // 2].repeat_interleave(2, -1)
    rot = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return x * c + rot * s


def repeat_kv(h, n_rep, tiled=False):
    b, kv, slen, hd = h.shape
    if n_rep == 1:
        return h
    if tiled:  # wrong variant: heads [0, 1, 0, 1] instead of [0, 0, 1, 1]
        return h.repeat(1, n_rep, 1, 1)
    return h[:, :, None].expand(b, kv, n_rep, slen, hd).reshape(b, kv * n_rep, slen, hd)


def linear(x, w, name, lora=None):
    y = x @ w[name + ".weight"].T
    if name + ".bias" in w:
        y = y + w[name + ".bias"]
    if lora is not None and name in lora:
        A, B = lora[name]
        y = y + (x @ A.T @ B.T) * (LORA["lora_alpha"] / LORA["r"])
    return y


def forward(cfg, w, input_ids, attention_mask=None, lora=None, interleaved=False, tiled=False, eps_outside=False):
    """HF LlamaForCausalLM.forward (eager attention) -> logits [B, T, V]."""
    Bsz, T = input_ids.shape
    NH, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg["hidden_size"] // NH
    eps = cfg["rms_norm_eps"]
    x = w["model.embed_tokens.weight"][input_ids]
    position_ids = torch.arange(T)[None, :]
    cos, sin = rope_cos_sin(position_ids, D, cfg["rope_theta"])
    cos, sin = cos[:, None], sin[:, None]
    allowed = torch.ones(T, T, dtype=torch.bool).tril()[None, None]
    if attention_mask is not None:
        allowed = allowed & attention_mask.bool()[:, None, None, :]
    mask = torch.zeros(allowed.shape, dtype=DT).masked_fill(~allowed, torch.finfo(DT).min)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps, eps_outside)
        q = linear(h, w, p + "self_attn.q_proj", lora).view(Bsz, T, -1, D).transpose(1, 2)
        k = linear(h, w, p + "self_attn.k_proj", lora).view(Bsz, T, -1, D).transpose(1, 2)
        v = linear(h, w, p + "self_attn.v_proj", lora).view(Bsz, T, -1, D).transpose(1, 2)
        if interleaved:
            q, k = rotate_interleaved(q, cos, sin), rotate_interleaved(k, cos, sin)
        else:
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        ks, vs = repeat_kv(k, NH // KV, tiled), repeat_kv(v, NH // KV, tiled)
        s = q @ ks.transpose(2, 3) * D ** -0.5 + mask
        a = (torch.softmax(s, dim=-1) @ vs).transpose(1, 2).reshape(Bsz, T, -1)
        x = x + linear(a, w, p + "self_attn.o_proj", lora)
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps, eps_outside)
        m = torch.nn.functional.silu(linear(h, w, p + "mlp.gate_proj", lora)) * linear(h, w, p + "mlp.up_proj", lora)
        x = x + linear(m, w, p + "mlp.down_proj", lora)
    x = rms_norm(x, w["model.norm.weight"], eps, eps_outside)
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    return x @ head.T


def causal_lm_loss(logits, labels):
    V = logits.shape[-1]
    return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1), ignore_index=-100)


def rope_scaling_goldens():
    """inv_freq of HF's ROPE_INIT_FUNCTIONS, float32 as HF computes it: default, "linear" and
    "llama3" (_compute_llama3_parameters), head_dim 16, theta 500000, with an original context of
    512 so that the 8 frequencies fall in all three llama3 bands (kept, interpolated, divided)."""
    import math
    dim, theta = 16, 500000.0
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float32) / dim))
    res = {"head_dim": dim, "rope_theta": theta, "default": inv_freq.tolist()}
    res["linear"] = {"rope_scaling": {"rope_type": "linear", "factor": 4.0}, "inv_freq": (inv_freq / 4.0).tolist()}
    rs = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 512}
    factor, low, high, old = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    inv_freq_llama = torch.where(is_medium, smoothed, inv_freq_llama)
    bands = ["kept" if w < high_freq_wavelen else "divided" if w > low_freq_wavelen else "interpolated" for w in wavelen.tolist()]
    res["llama3"] = {"rope_scaling": rs, "inv_freq": inv_freq_llama.tolist(), "bands": bands}
    return res


# ---- files -----------------------------------------------------------------------------------------

def flat(t):
    return [float("%.9g" % v) for v in t.detach().reshape(-1).tolist()]


def arr(t):
    return {"shape": list(t.shape), "data": flat(t)}


def main():
    gen = torch.Generator().manual_seed(13)
    out = {"torch_version": torch.__version__, "lora": dict(LORA), "adamw": dict(ADAMW, betas=list(ADAMW["betas"])), "models": {}}
    for name, cfg in CONFIGS.items():
        w = make_weights(cfg, gen)
        folder = os.path.join(FIX, name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
            f.write("\n")
        write_safetensors(os.path.join(folder, "model.safetensors"), list(w.items()), {"format": "pt"})

        input_ids = torch.randint(0, cfg["vocab_size"], (2, 9), generator=gen)
        labels = input_ids.clone()
        labels[0, 3] = -100
        labels[1, 7] = -100
        logits = forward(cfg, w, input_ids)
        loss = causal_lm_loss(logits, labels)
        am = torch.ones(2, 9, dtype=torch.int64)
        am[1, :2] = 0
        masked = forward(cfg, w, input_ids, attention_mask=am)

        # LoRA on q_proj / v_proj with nonzero A and B (so both get gradients)
        lora_w = {}
        for i in range(cfg["num_hidden_layers"]):
            for t in LORA["targets"]:
                mod = f"model.layers.{i}.self_attn.{t}"
                out_f, in_f = w[mod + ".weight"].shape
                A = f32(torch.randn(LORA["r"], in_f, generator=gen, dtype=DT) * 0.2).requires_grad_(True)
                Bm = f32(torch.randn(out_f, LORA["r"], generator=gen, dtype=DT) * 0.2).requires_grad_(True)
                lora_w[mod] = (A, Bm)
        lora_loss = causal_lm_loss(forward(cfg, w, input_ids, lora=lora_w), labels)
        lora_loss.backward()
        lora_init, lora_grads = {}, {}
        for mod, (A, Bm) in lora_w.items():
            lora_init[mod + ".lora_A.weight"] = arr(A)
            lora_init[mod + ".lora_B.weight"] = arr(Bm)
            lora_grads[mod + ".lora_A.weight"] = flat(A.grad)
            lora_grads[mod + ".lora_B.weight"] = flat(Bm.grad)
        opt = torch.optim.AdamW([t for ab in lora_w.values() for t in ab], **ADAMW)
        opt.step()
        lora_after = {}
        for mod, (A, Bm) in lora_w.items():
            lora_after[mod + ".lora_A.weight"] = flat(A)
            lora_after[mod + ".lora_B.weight"] = flat(Bm)

        variants, dist = {}, {}
        with torch.no_grad():
            for vname, kw in {"interleaved_rope": dict(interleaved=True), "tiled_gqa": dict(tiled=True), "eps_outside_sqrt": dict(eps_outside=True)}.items():
                o = forward(cfg, w, input_ids, **kw)
                variants[vname] = flat(o)
                dist[vname] = (o - logits).abs().max().item()

        out["models"][name] = {
            "config": cfg,
            "input_ids": input_ids.tolist(),
            "labels": labels.tolist(),
            "logits": arr(logits),
            "loss": loss.item(),
            "masked": {"attention_mask": am.tolist(), "logits": arr(masked)},
            "lora": {"init": lora_init, "loss": lora_loss.item(), "grads": lora_grads, "after_adamw": lora_after},
            "variants": variants,
            "variant_max_abs_diff": dist,
        }
        print(name, "loss", round(loss.item(), 5), "max|logits|", round(logits.abs().max().item(), 3),
              "variants", {k: round(v, 4) for k, v in dist.items()})
    out["rope_scaling"] = rope_scaling_goldens()
    with open(os.path.join(HERE, "llama_goldens.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
