#!/usr/bin/env python3
"""PyTorch reference for bench/cuda.ts: W1a/W1b/W1c, W6 and W7 (W7u's reference) of
shared/bench/README.md on a CUDA device (or the CPU with --device cpu), fp32, eager.

The models are shared/bench/ref_torch.py's (copied here, since that file is outside the
repository a GPU machine receives): LoRALinear, the pre-norm Block with hand-written causal
attention, CharGPT (vocab 96, 6 layers, d 384, 6 heads, context 128, LoRA r 8 / alpha 16 on
q, k, v, proj), AdamW lr 1e-3 on the LoRA parameters, batch 16x128. Every timed call ends with
torch.cuda.synchronize(), so no iteration times a launch alone. TF32 is off (torch's default
for matmul since 1.12; set explicitly), as Loom's cuBLAS path does not use it.

    python3 bench/ref_torch_cuda.py --device cuda                 # JSON lines
    python3 bench/ref_torch_cuda.py --device cuda --only W1,W7 --json-out /tmp/ref.jsonl
"""
import argparse
import json
import math
import platform
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def bench(fn, sync, warmup=3, min_reps=20, min_time=2.0, max_time=30.0):
    for _ in range(warmup):
        fn()
    sync()
    times = []
    t_start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        fn()
        sync()
        t1 = time.perf_counter()
        times.append(t1 - t0)
        if (len(times) >= min_reps and t1 - t_start >= min_time) or (t1 - t_start >= max_time and len(times) >= 5):
            break
    times.sort()
    return {"ms": statistics.median(times) * 1e3, "min_ms": times[0] * 1e3, "reps": len(times)}


class LoRALinear(nn.Module):
    """Frozen base Linear + trainable low-rank update: y = x W^T + b + (x A^T) B^T * (alpha / r)."""

    def __init__(self, d_in, d_out, r=8, alpha=16, bias=True):
        super().__init__()
        self.base = nn.Linear(d_in, d_out, bias=bias)
        self.base.weight.requires_grad_(False)
        if bias:
            self.base.bias.requires_grad_(False)
        self.A = nn.Parameter(torch.randn(r, d_in) * (1.0 / math.sqrt(d_in)))
        self.B = nn.Parameter(torch.zeros(d_out, r))
        self.scale = alpha / r

    def forward(self, x):
        return self.base(x) + F.linear(F.linear(x, self.A), self.B) * self.scale


class Block(nn.Module):
    """Pre-norm GPT block: x + attn(ln1(x)); x + mlp(ln2(x)). Hand-written causal attention."""

    def __init__(self, d, n_head, d_mlp, ctx, lora_r=0, lora_alpha=16):
        super().__init__()
        self.n_head = n_head
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        mk = (lambda: LoRALinear(d, d, lora_r, lora_alpha)) if lora_r else (lambda: nn.Linear(d, d))
        self.q, self.k, self.v, self.proj = mk(), mk(), mk(), mk()
        self.fc1 = nn.Linear(d, d_mlp)
        self.fc2 = nn.Linear(d_mlp, d)
        self.register_buffer("causal", torch.tril(torch.ones(ctx, ctx, dtype=torch.bool)), persistent=False)

    def attn(self, x):
        B, T, C = x.shape
        H = self.n_head
        hd = C // H
        q = self.q(x).view(B, T, H, hd).transpose(1, 2)  # B,H,T,hd
        k = self.k(x).view(B, T, H, hd).transpose(1, 2)
        v = self.v(x).view(B, T, H, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))  # B,H,T,T
        att = att.masked_fill(~self.causal[:T, :T], float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x


class CharGPT(nn.Module):
    def __init__(self, vocab=96, n_layer=6, d=384, n_head=6, ctx=128, lora_r=8, lora_alpha=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList([Block(d, n_head, 4 * d, ctx, lora_r, lora_alpha) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)  # untied
        self.register_buffer("pos_idx", torch.arange(ctx), persistent=False)

    def forward(self, idx):
        B, T = idx.shape
        x = self.tok(idx) + self.pos(self.pos_idx[:T])
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


def workloads(dev):
    def matmul(m, k, n):
        a, b = torch.randn(m, k, device=dev), torch.randn(k, n, device=dev)
        return (lambda: a @ b), (lambda ms: {"gflops": 2.0 * m * k * n / (ms * 1e-3) / 1e9})

    def block():
        torch.manual_seed(0)
        blk = Block(512, 8, 2048, 256).eval().to(dev)
        x = torch.randn(4, 256, 512, device=dev)

        def f():
            with torch.no_grad():
                return blk(x)

        return f, (lambda ms: {})

    def gpt_step():
        torch.manual_seed(0)
        model = CharGPT().to(dev).train()
        lora = []
        for name, p in model.named_parameters():
            p.requires_grad_(name.endswith(".A") or name.endswith(".B"))
            if p.requires_grad:
                lora.append(p)
        g = torch.Generator().manual_seed(1)
        idx = torch.randint(0, 96, (16, 128), generator=g).to(dev)
        tgt = torch.randint(0, 96, (16, 128), generator=g).to(dev)
        opt = torch.optim.AdamW(lora, lr=1e-3)

        def step():
            loss = F.cross_entropy(model(idx).view(-1, 96), tgt.view(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss

        return step, (lambda ms: {"tokens_per_s": 16 * 128 / (ms * 1e-3)})

    return [
        ("W1a", "matmul 512", lambda: matmul(512, 512, 512)),
        ("W1b", "matmul 1024", lambda: matmul(1024, 1024, 1024)),
        ("W1c", "matmul 64x4096x4096", lambda: matmul(64, 4096, 4096)),
        ("W6", "GPT block fwd", block),
        ("W7", "char-GPT LoRA step", gpt_step),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--only", default="", help="comma-separated workload id prefixes, e.g. W1,W7")
    ap.add_argument("--min-reps", type=int, default=20)
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--json-out", default="")
    args = ap.parse_args()
    dev = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor()
    print("# " + json.dumps({"torch": torch.__version__, "python": platform.python_version(), "device": args.device, "name": name}), flush=True)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    out = open(args.json_out, "a") if args.json_out else None
    for wid, wname, make in workloads(dev):
        if only and not any(wid.startswith(o) for o in only):
            continue
        fn, extra = make()
        r = bench(fn, sync, min_reps=args.min_reps, min_time=args.min_time)
        r.update(extra(r["ms"]))
        rec = {"id": wid, "workload": wname, **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}, "torch": torch.__version__, "device": name}
        print(json.dumps(rec), flush=True)
        if out:
            out.write(json.dumps(rec) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
