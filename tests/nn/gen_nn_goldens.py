"""Golden values for tests/nn from PyTorch (run with torch 1.13: /usr/bin/python3 gen_nn_goldens.py).

Writes nn_goldens.json next to this file:
- "layers": per case, the module's state dict, the input, the output of the forward pass, and
  the gradients of sum(out * grad_output) with respect to the input (floating inputs) and every
  parameter. Tensors are {"shape", "dtype", "data"} with data flattened row-major; float32 values
  are written as the exact doubles of the float32 numbers.
- "reprs": str(module) for a few modules, to check Loom's toString.
- "state_dict_keys": the key order of a nanoGPT-style model's state dict.

torch 1.13 has no nn.RMSNorm or F.scaled_dot_product_attention: RMSNorm is computed by its
definition x * rsqrt(mean(x^2) + eps) * weight (eps = finfo(float32).eps, torch's default), and
attention by nanoGPT's explicit path (masked softmax(q k^T / sqrt(hs)) v).
"""
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(1234)


def arr(t):
    t = t.detach()
    dtype = {torch.float32: "float32", torch.int64: "int64", torch.float64: "float64"}[t.dtype]
    return {"shape": list(t.shape), "dtype": dtype, "data": [float(v) if t.is_floating_point() else int(v) for v in t.flatten().tolist()]}


def run_case(name, module, x, forward=None, **meta):
    """Forward, then backward of sum(out * grad_output); records state, input, output, grads."""
    state = {k: arr(v) for k, v in module.state_dict().items()}
    xin = x.clone().requires_grad_(x.is_floating_point())
    out = forward(module, xin) if forward else module(xin)
    gout = torch.randn(out.shape)
    (out * gout).sum().backward()
    grads = {k: arr(p.grad) if p.grad is not None else None for k, p in module.named_parameters()}
    case = {"name": name, "state": state, "input": arr(x), "output": arr(out), "grad_output": arr(gout), "param_grads": grads}
    if x.is_floating_point():
        case["input_grad"] = arr(xin.grad)
    case.update(meta)
    return case


class RMSNormRef(nn.Module):
    """torch.nn.RMSNorm (torch >= 2.4) by its definition."""

    def __init__(self, shape, eps=None):
        super().__init__()
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(self.shape))

    def forward(self, x):
        dims = tuple(range(-len(self.shape), 0))
        eps = self.eps if self.eps is not None else torch.finfo(x.dtype).eps
        return x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps) * self.weight


class CausalSelfAttention(nn.Module):
    """nanoGPT's CausalSelfAttention (model.py), explicit attention path, dropout 0."""

    def __init__(self, n_embd, n_head, bias=True):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.attn_dropout = nn.Dropout(0.0)
        self.resid_dropout = nn.Dropout(0.0)
        self.n_head = n_head
        self.n_embd = n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.tril(torch.ones(T, T)).view(1, 1, T, T)
        att = att.masked_fill(mask == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


def with_ones_weight_perturbed(m):
    """Norm layers start at weight 1, bias 0; perturb so the affine part is tested."""
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn(p.shape) * 0.5)
    return m


layers = []
layers.append(run_case("linear", nn.Linear(4, 3), torch.randn(2, 5, 4)))
layers.append(run_case("linear_nobias", nn.Linear(4, 3, bias=False), torch.randn(3, 4)))
layers.append(run_case("linear_1d", nn.Linear(3, 2), torch.randn(3)))
layers.append(run_case("embedding_padding", nn.Embedding(6, 3, padding_idx=2), torch.tensor([[2, 4, 1], [0, 2, 4]]), padding_idx=2))
layers.append(run_case("embedding", nn.Embedding(5, 4), torch.tensor([3, 3, 0])))
layers.append(run_case("layer_norm", with_ones_weight_perturbed(nn.LayerNorm(5)), torch.randn(3, 5) * 2 + 1))
layers.append(run_case("layer_norm_2d_eps", with_ones_weight_perturbed(nn.LayerNorm([2, 3], eps=1e-3)), torch.randn(2, 2, 3), normalized_shape=[2, 3], eps=1e-3))
layers.append(run_case("layer_norm_no_affine", nn.LayerNorm(4, elementwise_affine=False), torch.randn(2, 4), elementwise_affine=False))
layers.append(run_case("rms_norm", with_ones_weight_perturbed(RMSNormRef(6)), torch.randn(2, 3, 6)))
layers.append(run_case("rms_norm_eps", with_ones_weight_perturbed(RMSNormRef([2, 2], eps=1e-2)), torch.randn(3, 2, 2) * 0.1, normalized_shape=[2, 2], eps=1e-2))
act_x = torch.linspace(-4, 4, 12).reshape(3, 4)
for name, m in [("relu", nn.ReLU()), ("gelu", nn.GELU()), ("gelu_tanh", nn.GELU(approximate="tanh")),
                ("silu", nn.SiLU()), ("tanh", nn.Tanh()), ("sigmoid", nn.Sigmoid()), ("identity", nn.Identity()),
                ("dropout_eval", nn.Dropout(0.5).eval())]:
    layers.append(run_case(name, m, act_x))
layers.append(run_case("attention", CausalSelfAttention(8, 2), torch.randn(2, 5, 8), n_embd=8, n_head=2))
layers.append(run_case("attention_nobias", CausalSelfAttention(6, 3, bias=False), torch.randn(1, 4, 6), n_embd=6, n_head=3, bias=False))
layers.append(run_case("sequential_mlp", nn.Sequential(nn.Linear(3, 5), nn.GELU(approximate="tanh"), nn.Linear(5, 2)), torch.randn(4, 3)))

reprs = {
    "linear": str(nn.Linear(4, 3)),
    "linear_nobias": str(nn.Linear(2, 5, bias=False)),
    "embedding": str(nn.Embedding(10, 4, padding_idx=0)),
    "layer_norm": str(nn.LayerNorm(8)),
    "layer_norm_2d": str(nn.LayerNorm([2, 3], eps=1e-6, elementwise_affine=False)),
    "sequential": str(nn.Sequential(nn.Linear(2, 3), nn.GELU(approximate="tanh"), nn.Dropout(0.1), nn.ReLU())),
    "attention": str(CausalSelfAttention(8, 2)),
    "module_list": str(nn.ModuleList([nn.Tanh(), nn.Sigmoid()])),
    "module_dict": str(nn.ModuleDict({"act": nn.SiLU(), "proj": nn.Linear(1, 1)})),
}


class MLP(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.c_fc = nn.Linear(n, 4 * n)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * n, n)
        self.dropout = nn.Dropout(0.0)


class Block(nn.Module):
    def __init__(self, n, h):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n)
        self.attn = CausalSelfAttention(n, h)
        self.ln_2 = nn.LayerNorm(n)
        self.mlp = MLP(n)


class GPT(nn.Module):
    def __init__(self, vocab=11, block=7, n=8, h=2, layers=2):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, n),
            wpe=nn.Embedding(block, n),
            drop=nn.Dropout(0.0),
            h=nn.ModuleList([Block(n, h) for _ in range(layers)]),
            ln_f=nn.LayerNorm(n),
        ))
        self.lm_head = nn.Linear(n, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying, as nanoGPT



def mlp_training():
    """Linear(2, 8) - ReLU - Linear(8, 1) on y = x0 - 2·x1 + 0.5, MSE loss, 8 steps of
    SGD(lr=0.05, momentum=0.9) and of AdamW(lr=0.01): the initial state, the data and the losses."""
    model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
    state = {k: arr(v) for k, v in model.state_dict().items()}
    x = torch.randn(16, 2)
    y = (x[:, :1] - 2 * x[:, 1:] + 0.5)
    runs = {}
    for name, make in [("sgd", lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9)),
                       ("adamw", lambda ps: torch.optim.AdamW(ps, lr=0.01))]:
        m = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
        m.load_state_dict(model.state_dict())
        opt = make(m.parameters())
        losses = []
        for _ in range(8):
            opt.zero_grad()
            loss = F.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            losses.append(float(loss.item()))
        runs[name] = losses
    return {"state": state, "x": arr(x), "y": arr(y), "losses": runs}


training = mlp_training()
gpt = GPT()
goldens = {
    "mlp_training": training,
    "torch_version": torch.__version__,
    "layers": layers,
    "reprs": reprs,
    "state_dict_keys": list(gpt.state_dict().keys()),
    "named_parameters": [n for n, _ in gpt.named_parameters()],
    "named_modules": [n for n, _ in gpt.named_modules()],
}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nn_goldens.json")
with open(out, "w") as f:
    json.dump(goldens, f)
print(f"wrote {out}: {len(layers)} layer cases")
