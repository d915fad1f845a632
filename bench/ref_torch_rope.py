#!/usr/bin/python3
"""RoPE reference (issue 13): Hugging Face's apply_rotary_pos_emb formula in PyTorch eager, forward
and backward, q [B=4, H=8, T=128, D=64] float32 with cos/sin [B, T, D] unsqueezed at dim 1:

    q_embed = q * cos + rotate_half(q) * sin,   rotate_half(x) = cat(-x2, x1)
    (g,) = torch.autograd.grad(q_embed, q, grad_output)

(transformers/models/llama/modeling_llama.py). bench/rope.ts runs this as a server so PyTorch's
timings alternate with Loom's in one run: each stdin line is a command, each answer one JSON line.

  rope <iters> [threads]   -> {"ms": <ms per forward + backward>} (torch.set_num_threads first)
  quit

Threads: 2 (the machine's cores) unless a command names another count: under load, 2 OpenMP
threads spin-wait for each other and 1 thread can be several times faster, so bench/rope.ts times
both. Environment set by bench/rope.ts (bench/lib/torch_ref.ts). Server loop: bench/lib/torch_server.py.
"""
import torch

from lib.torch_server import serve  # bench/lib/torch_server.py (this folder is on sys.path)

B, H, T, D = 4, 8, 128, 64

torch.set_num_threads(2)
torch.manual_seed(0)
q = torch.randn(B, H, T, D, requires_grad=True)
pos = torch.arange(T, dtype=torch.float32)
inv_freq = 1.0 / (10000 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
freqs = torch.outer(pos, inv_freq)
emb = torch.cat((freqs, freqs), dim=-1).expand(B, T, D)
cos, sin = emb.cos(), emb.sin()
g = torch.randn(B, H, T, D)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def step():
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    y = q * c + rotate_half(q) * s
    (gq,) = torch.autograd.grad(y, q, g)
    return y, gq


step()
serve({"rope": step}, thread_arg=True)
