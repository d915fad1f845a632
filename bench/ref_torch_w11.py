#!/usr/bin/python3
"""W11 reference (shared/bench/README.md): greedy decoding with the W7 model in PyTorch (CPU eager, fp32).

The W7 model as a GPT-2 (vocab 96, n_embd 384, 6 layers, 6 heads, n_positions 128, exact-erf GELU,
LayerNorm, learned positions, dropout 0, no LoRA: decoding only), random init with a fixed seed.
Batch 1, prompt 16 tokens, 112 new tokens, greedy. Three ways to decode, each timed:

  kv         HF's default cache (DynamicCache): keys/values of each layer concatenated per step,
             the new token attends over the positions so far
  kv_static  HF's StaticCache: [1, 6, 128, 64] per layer preallocated, written with index_copy_ at
             cache_position, attention over all 128 slots with an additive finfo.min mask (what
             Loom's StaticCache does)
  full       no cache: the whole context recomputed for every new token

transformers is not installed here, so the caches are written by hand following
transformers' modeling_gpt2.py / cache_utils.py (DynamicCache.update, StaticCache.update).

    /usr/bin/python3 bench/ref_torch_w11.py            # JSON lines, one per mode
    /usr/bin/python3 bench/ref_torch_w11.py --reps 5 --modes kv,full
    python3 bench/ref_torch_w11.py --device cuda   # on a GPU (bench/cuda.ts); torch >= 2.0

Metrics per mode (median over --reps generations after one warm-up): tokens/s (112 / whole
generation), prefill ms, ms per decode step at positions 16, 64 and 127. "Position p" is the
decode step whose input token sits at position p (it writes cache slot p); p = 127 is read as the
last step (input at 126, output token 127), since the token at 127 is never fed. Threads: 2.
Run with shared/bench/README.md's environment (bench/w11.ts sets it).
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

V, D, NL, NH, CTX = 96, 384, 6, 6, 128
PROMPT, NEW = 16, 112
HD = D // NH


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(D)
        self.c_attn = nn.Linear(D, 3 * D)
        self.c_proj = nn.Linear(D, D)
        self.ln_2 = nn.LayerNorm(D)
        self.c_fc = nn.Linear(D, 4 * D)
        self.mlp_proj = nn.Linear(4 * D, D)

    def attn(self, x, layer, cache, cache_position):
        B, T, _ = x.shape
        q, k, v = self.c_attn(x).split(D, dim=2)
        q, k, v = (t.view(B, T, NH, HD).transpose(1, 2) for t in (q, k, v))  # [B, nh, T, hd]
        if cache is None:
            mask = torch.ones(T, T, dtype=torch.bool).tril().logical_not()
        elif isinstance(cache, StaticCache):
            k, v = cache.update(k, v, layer, cache_position)  # [B, nh, T_max, hd]
            mask = cache.mask(cache_position)
        else:
            k, v = cache.update(k, v, layer)  # [B, nh, past + T, hd]
            S = k.shape[2]
            mask = (torch.arange(S)[None, :] > torch.arange(S - T, S)[:, None])
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HD))
        att = att.masked_fill(mask, torch.finfo(att.dtype).min) if mask.dtype == torch.bool else att + mask
        y = att.softmax(-1) @ v
        return self.c_proj(y.transpose(1, 2).reshape(B, T, D))

    def forward(self, x, layer, cache, cache_position):
        x = x + self.attn(self.ln_1(x), layer, cache, cache_position)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, D)
        self.wpe = nn.Embedding(CTX, D)
        self.h = nn.ModuleList(Block() for _ in range(NL))
        self.ln_f = nn.LayerNorm(D)
        self.lm_head = nn.Linear(D, V, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as GPT2LMHeadModel

    def forward(self, idx, cache=None, cache_position=None):
        T = idx.shape[1]
        pos = cache_position if cache_position is not None else torch.arange(T)
        x = self.wte(idx) + self.wpe(pos)[None]
        for i, b in enumerate(self.h):
            x = b(x, i, cache, cache_position)
        return self.lm_head(self.ln_f(x))


class DynamicCache:
    """HF DynamicCache: per layer, keys/values grow by torch.cat along the sequence."""

    def __init__(self):
        self.k, self.v = [None] * NL, [None] * NL

    def update(self, k, v, layer):
        if self.k[layer] is not None:
            k = torch.cat([self.k[layer], k], dim=2)
            v = torch.cat([self.v[layer], v], dim=2)
        self.k[layer], self.v[layer] = k, v
        return k, v


class StaticCache:
    """HF StaticCache: preallocated [B, nh, T_max, hd] per layer, index_copy_ at cache_position."""

    def __init__(self, B=1):
        self.k = [torch.zeros(B, NH, CTX, HD) for _ in range(NL)]
        self.v = [torch.zeros(B, NH, CTX, HD) for _ in range(NL)]

    def update(self, k, v, layer, cache_position):
        if cache_position.max() >= CTX:
            raise IndexError(f"cache position {int(cache_position.max())} past T_max={CTX}")
        self.k[layer].index_copy_(2, cache_position, k)
        self.v[layer].index_copy_(2, cache_position, v)
        return self.k[layer], self.v[layer]

    def mask(self, cache_position):
        allowed = torch.arange(CTX)[None, :] <= cache_position[:, None]  # [T, T_max]
        return torch.zeros(allowed.shape).masked_fill(allowed.logical_not(), torch.finfo(torch.float32).min)


@torch.no_grad()
def generate(model, prompt, mode, stamps):
    """Greedy: prefill + one call per token (kv, kv_static) or full recompute; stamps[s] = time after token s."""
    idx = prompt
    t0 = time.perf_counter()
    cache = DynamicCache() if mode == "kv" else StaticCache(prompt.shape[0]) if mode == "kv_static" else None
    inp, pos = idx, torch.arange(idx.shape[1])
    for s in range(NEW):
        if mode == "full":
            logits = model(idx)
        else:
            logits = model(inp, cache, pos)
        nxt = logits[:, -1].argmax(-1, keepdim=True)  # [B, 1]
        idx = torch.cat([idx, nxt], dim=1)
        if idx.is_cuda:
            torch.cuda.synchronize()  # the token exists before it is stamped
        stamps.append(time.perf_counter() - t0)
        inp, pos = nxt, torch.tensor([idx.shape[1] - 1])
    return idx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--modes", default="kv,kv_static,full")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda for bench/cuda.ts (factories then default to it)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.device != "cpu":
        torch.set_default_device(args.device)  # every torch.zeros/arange/tensor above runs there
    model = GPT().eval()
    for n, p in model.named_parameters():  # HF init: N(0, 0.02²), residual projections scaled
        if n.endswith("bias"):
            nn.init.zeros_(p)
        elif "ln" in n:
            nn.init.ones_(p)
        else:
            nn.init.normal_(p, 0, 0.02 / math.sqrt(2 * NL) if n.endswith("c_proj.weight") or "mlp_proj" in n else 0.02)
    prompt = torch.randint(0, V, (1, PROMPT), generator=torch.Generator("cpu").manual_seed(1), device="cpu").to(args.device)
    print("# " + json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), "python": platform.python_version(), "device": args.device}), flush=True)
    outs = {}
    for mode in args.modes.split(","):
        runs = []
        for r in range(args.reps + 1):  # the first is warm-up
            stamps = []
            outs[mode] = generate(model, prompt, mode, stamps)
            if r:
                runs.append(stamps)
        step = lambda s: statistics.median(run[s] - run[s - 1] for run in runs) * 1e3  # ms of the call producing token s
        total = statistics.median(run[-1] for run in runs)
        at = lambda p: step(min(p, PROMPT + NEW - 1) - PROMPT + 1)  # input at position p -> call s = p - 16 + 1
        rec = {
            "id": "W11", "impl": "torch", "mode": mode, "tokens_per_s": NEW / total, "total_ms": total * 1e3,
            "prefill_ms": statistics.median(run[0] for run in runs) * 1e3,
            "ms_pos16": at(16), "ms_pos64": at(64), "ms_pos127": at(126), "reps": args.reps,
        }
        print(json.dumps(rec), flush=True)
    ms = list(outs)
    agree = all(torch.equal(outs[ms[0]], outs[m]) for m in ms)
    print(json.dumps({"id": "W11", "impl": "torch", "modes_agree": agree}), flush=True)


if __name__ == "__main__":
    main()
