#!/usr/bin/python3
"""W7v reference (bench/w7v.ts): the W7 step of shared/bench/ref_torch.py (CharGPT with LoRA r 8 on
q, k, v and the output projection, AdamW lr 1e-3 on the LoRA parameters, batch 16) on batches whose
sequence length takes the values of --lengths, the list run twice. PyTorch eager compiles nothing,
so both passes cost the same; prints one JSON line like bench/w7v.ts's children. Threads: 2.
Run with shared/bench/README.md's environment (bench/w7v.ts sets it).
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "bench"))
from ref_torch import CharGPT, freeze_all_but_lora  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--lengths", required=True)
ap.add_argument("--threads", type=int, default=2)
args = ap.parse_args()
torch.set_num_threads(args.threads)
lengths = [int(t) for t in args.lengths.split(",")]
V, B = 96, 16

torch.manual_seed(0)
model = CharGPT()
lora = freeze_all_but_lora(model)
opt = torch.optim.AdamW(lora, lr=1e-3)
model.train()
g = torch.Generator().manual_seed(1)
batches = [(torch.randint(0, V, (B, T), generator=g), torch.randint(0, V, (B, T), generator=g)) for T in lengths]
loss = None


def run_pass():
    global loss
    t0 = time.perf_counter()
    for x, y in batches:
        logits = model(x)
        out = F.cross_entropy(logits.view(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        out.backward()
        opt.step()
        loss = out.item()
    return (time.perf_counter() - t0) * 1e3


first = run_pass()
second = run_pass()
tokens = B * sum(lengths)
print(json.dumps({"id": "W7v", "impl": "pytorch eager", "first_ms": first, "second_ms": second, "compiles": 0, "tokens_per_s": tokens / second * 1e3, "loss": loss}))
