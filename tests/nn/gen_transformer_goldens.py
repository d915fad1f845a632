"""Golden values for tests/nn/transformer.test.ts from PyTorch 1.13
(run: /usr/bin/python3 tests/nn/gen_transformer_goldens.py).

Writes transformer_goldens.json next to this file. Per case: the module's state dict, the inputs
(and masks), the outputs, the random cotangents, and the gradients of
sum(out * g_out) [+ sum(weights * g_weights)] with respect to every floating input and every
parameter. Modules run in train() mode with dropout 0 (torch's eval fast path is a different
kernel; the math is the same). Tensors are {"shape", "dtype", "data"}, float32 values as their
shortest round-trip decimals. torch 1.13's MultiheadAttention has no is_causal: the "causal" case is computed here
with the equivalent bool mask triu(ones(L, S), 1) and Loom is called with is_causal=true.
"""
import json
import os

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(1616)


def arr(t):
    t = t.detach()
    dtype = {torch.float32: "float32", torch.int64: "int64", torch.bool: "bool"}[t.dtype]
    # float32 as its shortest round-trip decimal (np.float32 repr): Loom's float32 cast restores the bits
    conv = (lambda x: float(repr(np.float32(x)))) if t.is_floating_point() else int
    return {"shape": list(t.shape), "dtype": dtype, "data": [conv(v) for v in t.flatten().tolist()]}


def grads_of(module):
    return {k: arr(p.grad) if p.grad is not None else None for k, p in module.named_parameters()}


def mha_case(name, ctor, q, k=None, v=None, self_attn=False, fwd=None, loom_fwd=None):
    """ctor: MultiheadAttention kwargs; fwd: forward kwargs given to torch; loom_fwd: to Loom
    (defaults to fwd). Masks are tensors inside fwd."""
    fwd = fwd or {}
    m = nn.MultiheadAttention(**ctor)
    m.train()
    state = {k_: arr(v_) for k_, v_ in m.state_dict().items()}
    qin = q.clone().requires_grad_(True)
    if self_attn:
        kin = vin = qin
    else:
        kin = k.clone().requires_grad_(True)
        vin = v.clone().requires_grad_(True)
    out, w = m(qin, kin, vin, **fwd)
    g_out = torch.randn(out.shape)
    loss = (out * g_out).sum()
    case = {"name": name, "kind": "mha", "ctor": ctor, "self_attn": self_attn, "state": state, "query": arr(q), "output": arr(out), "g_output": arr(g_out)}
    if w is not None:
        g_w = torch.randn(w.shape)
        loss = loss + (torch.nan_to_num(w, nan=0.0) * g_w).sum()
        case["weights"] = arr(w)
        case["g_weights"] = arr(g_w)
    loss.backward()
    case["query_grad"] = arr(qin.grad)
    if not self_attn:
        case["key"], case["value"] = arr(k), arr(v)
        case["key_grad"], case["value_grad"] = arr(kin.grad), arr(vin.grad)
    case["param_grads"] = grads_of(m)
    lf = loom_fwd if loom_fwd is not None else fwd
    case["fwd"] = {k_: (arr(v_) if isinstance(v_, torch.Tensor) else v_) for k_, v_ in lf.items()}
    return case


def encoder_case(name, ctor, x, num_layers=None, with_norm=False, fwd=None):
    fwd = fwd or {}
    layer = nn.TransformerEncoderLayer(**ctor)
    if num_layers is None:
        m = layer
    else:
        norm = nn.LayerNorm(ctor["d_model"], eps=ctor.get("layer_norm_eps", 1e-5)) if with_norm else None
        m = nn.TransformerEncoder(layer, num_layers, norm=norm, enable_nested_tensor=False)
        with torch.no_grad():  # distinct layers: make the copies differ so a shared-weights bug shows
            for p in m.parameters():
                p.add_(torch.randn(p.shape) * 0.05)
    m.train()
    state = {k: arr(v) for k, v in m.state_dict().items()}
    xin = x.clone().requires_grad_(True)
    out = m(xin, **fwd)
    g_out = torch.randn(out.shape)
    (out * g_out).sum().backward()
    return {
        "name": name, "kind": "encoder" if num_layers is not None else "layer", "ctor": ctor, "num_layers": num_layers,
        "with_norm": with_norm, "state": state, "query": arr(x), "output": arr(out), "g_output": arr(g_out),
        "query_grad": arr(xin.grad), "param_grads": grads_of(m),
        "fwd": {k: (arr(v) if isinstance(v, torch.Tensor) else v) for k, v in fwd.items()},
    }


E, H = 8, 2
cases = []
# self-attention, [L, N, E], weights averaged
cases.append(mha_case("self_seq_first", dict(embed_dim=E, num_heads=H), torch.randn(4, 2, E), self_attn=True))
# cross-attention, batch_first, bool 2-D attn_mask + bool key_padding_mask, per-head weights
L, S, N = 3, 5, 2
am = torch.rand(L, S) < 0.3
am[:, 0] = False  # no fully masked row
kpm = torch.tensor([[False, False, False, True, True], [False, True, False, False, False]])
cases.append(mha_case("cross_batch_first_bool_masks", dict(embed_dim=E, num_heads=H, batch_first=True),
                      torch.randn(N, L, E), torch.randn(N, S, E), torch.randn(N, S, E),
                      fwd=dict(attn_mask=am, key_padding_mask=kpm, average_attn_weights=False)))
# float 3-D attn_mask [N*H, L, S] + bool key_padding_mask, need_weights=False (the SDPA path);
# torch 1.13 cannot combine a float attn_mask with a float key_padding_mask (masked_fill), so the
# float key_padding_mask gets its own case
cases.append(mha_case("cross_float_mask_no_weights", dict(embed_dim=E, num_heads=H),
                      torch.randn(L, N, E), torch.randn(S, N, E), torch.randn(S, N, E),
                      fwd=dict(attn_mask=torch.randn(N * H, L, S), key_padding_mask=kpm, need_weights=False)))
cases.append(mha_case("float_key_padding_mask", dict(embed_dim=E, num_heads=H),
                      torch.randn(L, N, E), torch.randn(S, N, E), torch.randn(S, N, E),
                      fwd=dict(key_padding_mask=torch.randn(N, S))))
# kdim / vdim differ: q_proj_weight, k_proj_weight, v_proj_weight; no biases; bool key_padding_mask
cases.append(mha_case("kdim_vdim_nobias", dict(embed_dim=E, num_heads=4, kdim=6, vdim=4, bias=False),
                      torch.randn(L, N, E), torch.randn(S, N, 6), torch.randn(S, N, 4),
                      fwd=dict(key_padding_mask=kpm)))
# unbatched [L, E] with a bool [S] key_padding_mask
cases.append(mha_case("unbatched", dict(embed_dim=E, num_heads=H),
                      torch.randn(L, E), torch.randn(S, E), torch.randn(S, E),
                      fwd=dict(key_padding_mask=torch.tensor([False, False, True, False, True]))))
# add_bias_kv and add_zero_attn, with masks padded
cases.append(mha_case("bias_kv_zero_attn", dict(embed_dim=E, num_heads=H, add_bias_kv=True, add_zero_attn=True, batch_first=True),
                      torch.randn(N, L, E), torch.randn(N, S, E), torch.randn(N, S, E),
                      fwd=dict(attn_mask=am, key_padding_mask=kpm)))
# causal self-attention: torch with the bool mask, Loom with is_causal=true
T = 4
causal = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
cases.append(mha_case("causal_self", dict(embed_dim=E, num_heads=H, batch_first=True), torch.randn(N, T, E), self_attn=True,
                      fwd=dict(attn_mask=causal), loom_fwd=dict(is_causal=True)))

D, NH, FF = 8, 2, 16
src_mask = torch.rand(T, T) < 0.25
src_mask.fill_diagonal_(False)
src_kpm = torch.tensor([[False, False, False, True], [False, False, False, False]])
cases.append(encoder_case("layer_relu_post_norm", dict(d_model=D, nhead=NH, dim_feedforward=FF, dropout=0.0),
                          torch.randn(T, N, D), fwd=dict(src_mask=src_mask, src_key_padding_mask=src_kpm)))
cases.append(encoder_case("layer_gelu_norm_first_batch_first", dict(d_model=D, nhead=NH, dim_feedforward=FF, dropout=0.0, activation="gelu", norm_first=True, batch_first=True, layer_norm_eps=1e-3),
                          torch.randn(N, T, D), fwd=dict(src_key_padding_mask=src_kpm)))
cases.append(encoder_case("encoder_relu_norm_first", dict(d_model=D, nhead=NH, dim_feedforward=FF, dropout=0.0, norm_first=True),
                          torch.randn(T, N, D), num_layers=2, with_norm=True, fwd=dict(mask=src_mask)))
cases.append(encoder_case("encoder_gelu_post_norm_batch_first", dict(d_model=D, nhead=NH, dim_feedforward=FF, dropout=0.0, activation="gelu", batch_first=True),
                          torch.randn(N, T, D), num_layers=2, fwd=dict(src_key_padding_mask=src_kpm)))

# str(module), to check Loom's toString
reprs = {
    "mha": str(nn.MultiheadAttention(8, 2)),
    "layer": str(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)),
    "encoder": str(nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16), 2, norm=nn.LayerNorm(8), enable_nested_tensor=False)),
}

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transformer_goldens.json")
with open(out, "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases, "reprs": reprs}, f)
print(f"wrote {len(cases)} cases to {out}")
