"""
Goldens for examples/llama_block.ts: Hugging Face transformers' LlamaDecoderLayer written
functionally in torch 1.13 (no transformers package here), following modeling_llama.py:
LlamaRMSNorm, LlamaRotaryEmbedding (default rope), rotate_half / apply_rotary_pos_emb, repeat_kv,
eager_attention_forward, LlamaMLP and the pre-norm decoder layer.

Computed in float64 (the reference for Loom's float32). Writes llama_goldens.json next to this file:
  config, parameters (HF names), input x [B, T, hidden], loss weights w (loss = sum(out * w)),
  out [B, T, hidden], grads of x and of every parameter, and the outputs of three wrong variants
  (interleaved RoPE pairs, tiled GQA head order, eps outside the sqrt) with their distance from out.

Run: /usr/bin/python3 tests/examples/gen_llama_goldens.py
"""
import json
import os

import torch

torch.manual_seed(0)
DT = torch.float64
CFG = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
           intermediate_size=48, rope_theta=10000.0, rms_norm_eps=1e-6, attention_bias=False, mlp_bias=False)
B, T = 2, 7
H, NH, KV, D, I = CFG["hidden_size"], CFG["num_attention_heads"], CFG["num_key_value_heads"], CFG["head_dim"], CFG["intermediate_size"]


def rms_norm(x, weight, eps, eps_outside=False):
    # LlamaRMSNorm.forward
    input_dtype = x.dtype
    h = x.to(torch.float32) if input_dtype not in (torch.float32, torch.float64) else x
    variance = h.pow(2).mean(-1, keepdim=True)
    if eps_outside:  # wrong variant: x / (sqrt(var) + eps)
        h = h / (variance.sqrt() + eps)
    else:
        h = h * torch.rsqrt(variance + eps)
    return weight * h.to(input_dtype)


def rope_cos_sin(position_ids, dim, theta):
    # LlamaRotaryEmbedding.__init__ (default rope) and forward; attention_scaling = 1
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).to(DT) / dim))
    inv_freq_expanded = inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = position_ids[:, None, :].to(DT)
    freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotate_interleaved(x, cos, sin):
    # wrong variant (GPT-J / Meta's original complex form): pairs (0,1), (2,3), ... rotated by
    # frequency i = pair index, instead of HF's halves (i, i + d/2)
    c = cos[..., : x.shape[-1] // 2].repeat_interleave(2, -1)
    s = sin[..., : x.shape[-1] // 2].repeat_interleave(2, -1)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    rot = torch.stack((-x2, x1), dim=-1).flatten(-2)
    return x * c + rot * s


def apply_rotary_pos_emb(q, k, cos, sin, interleaved=False):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    if interleaved:
        return rotate_interleaved(q, cos, sin), rotate_interleaved(k, cos, sin)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def repeat_kv(h, n_rep, tiled=False):
    b, kv, slen, hd = h.shape
    if n_rep == 1:
        return h
    if tiled:  # wrong variant: kv heads as [0, 1, 0, 1] instead of [0, 0, 1, 1]
        return h.repeat(1, n_rep, 1, 1)
    return h[:, :, None, :, :].expand(b, kv, n_rep, slen, hd).reshape(b, kv * n_rep, slen, hd)


def decoder_layer(x, p, interleaved=False, tiled=False, eps_outside=False):
    eps = CFG["rms_norm_eps"]
    position_ids = torch.arange(T)[None, :].expand(x.shape[0], -1)
    cos, sin = rope_cos_sin(position_ids, D, CFG["rope_theta"])
    # causal mask as HF's: 0 where allowed, finfo.min above the diagonal
    mask = torch.full((T, T), torch.finfo(DT).min, dtype=DT).triu(1)[None, None]

    residual = x
    h = rms_norm(x, p["input_layernorm.weight"], eps, eps_outside)
    # LlamaAttention.forward
    shape = (x.shape[0], T, -1, D)
    q = (h @ p["self_attn.q_proj.weight"].T).view(shape).transpose(1, 2)
    k = (h @ p["self_attn.k_proj.weight"].T).view(shape).transpose(1, 2)
    v = (h @ p["self_attn.v_proj.weight"].T).view(shape).transpose(1, 2)
    q, k = apply_rotary_pos_emb(q, k, cos, sin, interleaved)
    # eager_attention_forward
    ks, vs = repeat_kv(k, NH // KV, tiled), repeat_kv(v, NH // KV, tiled)
    w = q @ ks.transpose(2, 3) * D ** -0.5 + mask
    w = torch.softmax(w, dim=-1, dtype=torch.float32 if DT != torch.float64 else DT).to(q.dtype)
    a = (w @ vs).transpose(1, 2).contiguous().reshape(x.shape[0], T, -1)
    h = a @ p["self_attn.o_proj.weight"].T
    h = residual + h
    residual = h
    h2 = rms_norm(h, p["post_attention_layernorm.weight"], eps, eps_outside)
    # LlamaMLP: down_proj(act_fn(gate_proj(x)) * up_proj(x)), act_fn = silu
    m = torch.nn.functional.silu(h2 @ p["mlp.gate_proj.weight"].T) * (h2 @ p["mlp.up_proj.weight"].T)
    return residual + m @ p["mlp.down_proj.weight"].T


shapes = {
    "self_attn.q_proj.weight": (NH * D, H),
    "self_attn.k_proj.weight": (KV * D, H),
    "self_attn.v_proj.weight": (KV * D, H),
    "self_attn.o_proj.weight": (H, NH * D),
    "mlp.gate_proj.weight": (I, H),
    "mlp.up_proj.weight": (I, H),
    "mlp.down_proj.weight": (H, I),
    "input_layernorm.weight": (H,),
    "post_attention_layernorm.weight": (H,),
}
# weights of the size that keeps every path (attention scores, silu) away from saturation; norm
# weights around 1 but not 1, so a missing weight shows
params = {}
for name, s in shapes.items():
    if len(s) == 1:
        t = 1 + 0.2 * torch.randn(s, dtype=DT)
    else:
        t = torch.randn(s, dtype=DT) * (1.5 / s[1] ** 0.5)
    params[name] = t.to(torch.float32).to(DT)  # exactly representable in float32 (Loom's dtype)
x = torch.randn(B, T, H, dtype=DT)
# one token with mean(x²) ≈ 1e-6 ≈ eps: there eps inside or outside the sqrt differs by ~30%
x[1, 2] *= 1e-3
x = x.to(torch.float32).to(DT)
wl = torch.randn(B, T, H, dtype=DT).to(torch.float32).to(DT)

leaves = {n: t.clone().requires_grad_(True) for n, t in params.items()}
xl = x.clone().requires_grad_(True)
out = decoder_layer(xl, leaves)
(out * wl).sum().backward()

variants = {
    "interleaved_rope": dict(interleaved=True),
    "tiled_gqa": dict(tiled=True),
    "eps_outside_sqrt": dict(eps_outside=True),
}
var_out = {}
var_dist = {}
with torch.no_grad():
    for name, kw in variants.items():
        o = decoder_layer(x, params, **kw)
        var_out[name] = o
        var_dist[name] = (o - out).abs().max().item()

flat = lambda t: [float("%.9g" % v) for v in t.detach().reshape(-1).tolist()]  # 9 digits: float32-exact inputs round-trip
res = {
    "config": CFG,
    "B": B,
    "T": T,
    "params": {n: {"shape": list(t.shape), "data": flat(t)} for n, t in params.items()},
    "x": flat(x),
    "w": flat(wl),
    "out": flat(out),
    "grads": {"x": flat(xl.grad), **{n: flat(t.grad) for n, t in leaves.items()}},
    "variants": {n: flat(o) for n, o in var_out.items()},
    "variant_max_abs_diff": var_dist,
}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "llama_goldens.json")
with open(path, "w") as f:
    json.dump(res, f, separators=(",", ":"))
print("wrote", path, {k: round(v, 5) for k, v in var_dist.items()}, "max |out|", out.abs().max().item())
