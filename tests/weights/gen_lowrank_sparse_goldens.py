"""Goldens for tests/weights/{lowrank,sparse}.test.ts, from torch 1.13:
- lowrank: the rank-r truncation U_r diag(S_r) Vh_r of torch.linalg.svd (unique for distinct singular
  values, whatever the signs), y = F.linear(x, W_r, b) and d(sum(y * g))/dx;
- sparse: torch.nn.utils.prune.l1_unstructured's mask for each sparsity (amount), the pruned weight's
  to_sparse_csr() / to_sparse_coo() pieces, y = F.linear(x, W_pruned, b) and dx as above.
Run: /usr/bin/python3 tests/weights/gen_lowrank_sparse_goldens.py
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.utils import prune

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "core"))
from golden_json import arr  # noqa: E402

torch.manual_seed(1212)
N, K, M = 6, 8, 3
W = torch.randn(N, K)
b = torch.randn(N)
x = torch.randn(M, K)
g = torch.randn(M, N)


def lin(Wd):
    xx = x.clone().requires_grad_(True)
    y = F.linear(xx, Wd, b)
    (y * g).sum().backward()
    return y, xx.grad


out = {"W": arr(W), "b": arr(b), "x": arr(x), "g": arr(g), "lowrank": {}, "sparse": {}}
U, S, Vh = torch.linalg.svd(W.double(), full_matrices=False)
for r in [1, 3, 6]:
    Wr = ((U[:, :r] * S[:r]) @ Vh[:r]).float()
    y, dx = lin(Wr)
    err = torch.linalg.norm(W.double() - (U[:, :r] * S[:r]) @ Vh[:r]) / torch.linalg.norm(W.double())
    out["lowrank"][str(r)] = {"W_r": arr(Wr), "y": arr(y), "dx": arr(dx), "rel_error": float(err)}

for s in [0.0, 0.5, 0.75]:
    lin_mod = torch.nn.Linear(K, N)
    with torch.no_grad():
        lin_mod.weight.copy_(W)
    prune.l1_unstructured(lin_mod, "weight", amount=s)
    Wp = lin_mod.weight.detach().clone()
    csr = Wp.to_sparse_csr()
    coo = Wp.to_sparse().coalesce()
    y, dx = lin(Wp)
    out["sparse"][str(s)] = {
        "mask": arr(lin_mod.weight_mask), "crow_indices": arr(csr.crow_indices()), "col_indices": arr(csr.col_indices()),
        "values": arr(csr.values()), "coo_indices": arr(coo.indices()), "y": arr(y), "dx": arr(dx),
    }
with open(os.path.join(os.path.dirname(__file__), "lowrank_sparse_goldens.json"), "w") as f:
    json.dump(out, f)
print("wrote lowrank_sparse_goldens.json")
