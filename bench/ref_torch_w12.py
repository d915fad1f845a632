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

Threads: 2 (the machine's cores; the README's environment is set by bench/w12.ts).
"""
import json
import sys
import time

import torch
import torch.nn.functional as F

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
print(json.dumps({"ready": True, "torch": torch.__version__, "threads": torch.get_num_threads()}), flush=True)

for line in sys.stdin:
    cmd, *rest = line.split()
    if cmd == "quit":
        break
    iters = int(rest[0]) if rest else 10
    if cmd == "linear":
        t0 = time.perf_counter()
        for _ in range(iters):
            y = F.linear(x, W)
        ms = (time.perf_counter() - t0) * 1e3 / iters
        print(json.dumps({"ms": ms}), flush=True)
    elif cmd == "copy":
        t0 = time.perf_counter()
        for _ in range(iters):
            dst.copy_(src)
        ms = (time.perf_counter() - t0) * 1e3 / iters
        print(json.dumps({"ms": ms, "gbps": 2 * COPY_ELEMS * 4 / (ms * 1e-3) / 1e9}), flush=True)
    else:
        print(json.dumps({"error": f"unknown command {cmd}"}), flush=True)
