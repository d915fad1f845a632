#!/usr/bin/python3
"""W12 reference (issue 12): PyTorch's float32 decode-size matmul, x [1, 4096] @ W[4096, 4096]^T
(F.linear, CPU eager, fp32: what a float32 model's decode step runs), and a STREAM-like copy
(dst.copy_(src), 64 MiB float32) for the bandwidth it reaches on this machine.

bench/w12.ts runs this as a server, so PyTorch's timings alternate with Loom's in one run:
each line on stdin is a command, each answer one JSON line on stdout:

  linear <iters>   -> {"ms": <ms per call, over iters calls>}
  copy <iters>     -> {"ms": <ms per copy>, "gbps": <(read + written bytes) / s / 1e9>}
  quit

    /usr/bin/python3 bench/ref_torch_w12.py          # (normally started by bench/w12.ts)

Threads: 2 (the machine's cores; the README's environment is set by bench/w12.ts). Server loop:
bench/lib/torch_server.py.
"""
import torch
import torch.nn.functional as F

from lib.torch_server import serve  # bench/lib/torch_server.py (this folder is on sys.path)

N = K = 4096
COPY_ELEMS = 16 * 1024 * 1024  # 64 MiB of float32

torch.set_num_threads(2)
torch.manual_seed(0)
W = torch.randn(N, K)
x = torch.randn(1, K)
src = torch.randn(COPY_ELEMS)
dst = torch.empty_like(src)
F.linear(x, W)  # warm-up
dst.copy_(src)

def linear():
    F.linear(x, W)


serve({"linear": linear, "copy": lambda: dst.copy_(src)},
      {"copy": lambda ms: {"gbps": 2 * COPY_ELEMS * 4 / (ms * 1e-3) / 1e9}})
