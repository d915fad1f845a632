#!/usr/bin/python3
"""Reference values for Loom's logits processors (src/models/logits_process.ts), computed with
real PyTorch (Debian python3-torch 1.13).

Run:  /usr/bin/python3 tests/models/gen_generate_goldens.py   (writes generate_goldens.json beside it)

transformers is not installed, so Hugging Face's processors are written here as plain torch
functions, line by line from transformers/generation/logits_process.py (RepetitionPenaltyLogitsProcessor,
TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper, filter_value -inf,
min_tokens_to_keep 1) and applied in generate's order (repetition penalty, then temperature,
top_k, top_p). It shares no code with Loom.

top_p cases are drawn until no cumulative probability lies within 1e-4 of 1 - top_p, so float32
rounding differences in softmax/cumsum cannot flip a token; ties are covered by hand-derived
tests in generate.test.ts. The ascending sort is stable here (Loom's documented tie order).
"""
import json
import math
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def fnum(v):
    v = float(v)
    return v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))


def arr(t):
    conv = fnum if t.is_floating_point() else int
    return {"shape": list(t.shape), "data": [conv(v) for v in t.flatten().tolist()]}


# --- HF's formulas (transformers/generation/logits_process.py) ---
def repetition_penalty(input_ids, scores, penalty):
    score = torch.gather(scores, 1, input_ids)
    score = torch.where(score < 0, score * penalty, score / penalty)
    return scores.scatter(1, input_ids, score)


def temperature(input_ids, scores, t):
    return scores / t


def top_k(input_ids, scores, k, min_tokens_to_keep=1, filter_value=-float("inf")):
    k = min(max(k, min_tokens_to_keep), scores.size(-1))
    indices_to_remove = scores < torch.topk(scores, k)[0][..., -1, None]
    return scores.masked_fill(indices_to_remove, filter_value)


def top_p(input_ids, scores, p, min_tokens_to_keep=1, filter_value=-float("inf")):
    sorted_logits, sorted_indices = torch.sort(scores, descending=False, stable=True)
    cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    sorted_indices_to_remove = cumulative_probs <= (1 - p)
    sorted_indices_to_remove[..., -min_tokens_to_keep:] = 0
    indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices, sorted_indices_to_remove)
    return scores.masked_fill(indices_to_remove, filter_value)


def top_p_margin(scores, p):
    """Smallest |cumulative prob - (1 - p)| (float32, as the comparison), the last (always kept) column aside."""
    s, _ = torch.sort(scores, descending=False, stable=True)
    cum = s.softmax(-1).cumsum(-1)[..., :-1]
    return (cum - torch.tensor(1 - p, dtype=torch.float32)).abs().min().item()


g = torch.Generator().manual_seed(1234)
cases = []


def randn(*shape, scale=2.0):
    return (torch.randn(*shape, generator=g) * scale).float()


def ids(B, T, V):
    return torch.randint(0, V, (B, T), generator=g)


def add(name, chain, input_ids, scores):
    out = scores
    for kind, arg in chain:
        out = {"repetition_penalty": repetition_penalty, "temperature": temperature, "top_k": top_k, "top_p": top_p}[kind](input_ids, out, arg)
    cases.append({"name": name, "chain": [[k, a] for k, a in chain], "input_ids": arr(input_ids), "scores": arr(scores), "expected": arr(out),
                  "probs": arr(out.softmax(-1))})


# repetition penalty: duplicates in input_ids, positive and negative scores, penalty above and below 1
for pen in (1.3, 0.7, 2.0):
    x = randn(3, 11)
    add(f"repetition_penalty {pen}", [("repetition_penalty", pen)], ids(3, 9, 11), x)
for t in (0.7, 1.5):
    add(f"temperature {t}", [("temperature", t)], ids(2, 3, 9), randn(2, 9))
# top_k: plain, k = V, k > V, and ties at the k-th value (rounded scores)
add("top_k 3", [("top_k", 3)], ids(2, 2, 10), randn(2, 10))
add("top_k 4 with ties (scores rounded to halves)", [("top_k", 4)], ids(3, 2, 12), (randn(3, 12) * 2).round() / 2)
add("top_k = V", [("top_k", 8)], ids(1, 2, 8), randn(1, 8))
add("top_k > V", [("top_k", 20)], ids(1, 2, 8), randn(1, 8))


def nucleus_case(name, chain, B, V, p):
    for _ in range(200):
        x = randn(B, V)
        s = x
        for kind, arg in chain[:-1]:
            s = {"repetition_penalty": repetition_penalty, "temperature": temperature, "top_k": top_k}[kind](None, s, arg) if kind != "repetition_penalty" else s
        if top_p_margin(s, p) > 1e-4:
            add(name, chain, ids(B, 4, V), x)
            return
    raise RuntimeError("no case far enough from the boundary")


for p in (0.3, 0.8, 0.95):
    nucleus_case(f"top_p {p}", [("top_p", p)], 3, 16, p)
nucleus_case("top_p 1e-9 keeps the most likely token", [("top_p", 1e-9)], 2, 16, 1e-9)
# the whole chain in HF's order (the penalty changes scores before top_p: drawn until the final margin holds)
for _ in range(200):
    x, inp = randn(2, 20), ids(2, 6, 20)
    s = top_k(None, temperature(None, repetition_penalty(inp, x, 1.2), 0.8), 6)
    if top_p_margin(s, 0.9) > 1e-4:
        add("chain: repetition_penalty 1.2, temperature 0.8, top_k 6, top_p 0.9", [("repetition_penalty", 1.2), ("temperature", 0.8), ("top_k", 6), ("top_p", 0.9)], inp, x)
        break
else:
    raise RuntimeError("no chain case")

# ties in top_p: uniform scores, what torch's (unstable) sort gives, for the record
u = torch.zeros(1, 4)
tie = {"p=0.5": [[fnum(v) for v in r] for r in top_p(None, u, 0.5).tolist()], "torch_unstable_sort_indices": torch.sort(u, descending=False)[1].tolist()}

out = {"torch_version": torch.__version__, "cases": cases, "ties": tie}
with open(os.path.join(HERE, "generate_goldens.json"), "w") as f:
    json.dump(out, f, separators=(",", ":"), allow_nan=False)
    f.write("\n")
print(f"{len(cases)} cases; ties {tie}")
