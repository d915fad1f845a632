"""Goldens for tests/linalg/svd.test.ts: torch 1.13 torch.linalg.svd / svdvals / norm(p="nuc")
and the gradient of the nuclear norm, on small fixed matrices (float64 inputs rounded to float32
so both sides start from the same float32 values). Run: /usr/bin/python3 tests/linalg/gen_svd_goldens.py
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "core"))
from golden_json import arr  # noqa: E402

torch.manual_seed(12)


def f32(t):
    return t.to(torch.float32)


cases = {}
# tall, wide, square
for name, shape in [("tall", (6, 4)), ("wide", (3, 5)), ("square", (4, 4))]:
    cases[name] = f32(torch.randn(*shape))
# rank-deficient: rank 2 in a 5x4 (outer products of integers: exact in float32)
a = torch.tensor([[1.0, 2.0], [0.0, 1.0], [3.0, -1.0], [2.0, 2.0], [-1.0, 0.5]])
b = torch.tensor([[1.0, 0.0, 2.0, -1.0], [0.5, 1.0, 0.0, 3.0]])
cases["rank2"] = a @ b
# batched [2, 3, 3]
cases["batched"] = f32(torch.randn(2, 3, 3))

out = {}
for name, A in cases.items():
    U, S, Vh = torch.linalg.svd(A, full_matrices=False)
    Uf, Sf, Vhf = torch.linalg.svd(A, full_matrices=True)
    # S in float64 (the exact singular values of the float32 matrix, to compare float32 LAPACK with)
    S64 = torch.linalg.svdvals(A.double())
    Ag = A.detach().double().clone().requires_grad_(True)
    nuc = torch.linalg.matrix_norm(Ag, "nuc").sum()
    nuc.backward()
    out[name] = {
        "A": arr(A), "U": arr(U), "S": arr(S), "Vh": arr(Vh), "U_full": arr(Uf), "Vh_full": arr(Vhf),
        "S64": arr(S64), "nuc": arr(torch.linalg.matrix_norm(A.double(), "nuc")), "nuc_grad": arr(Ag.grad),
    }
out["norm_nuc_2d"] = {"A": arr(cases["square"]), "value": arr(torch.norm(cases["square"].double(), p="nuc"))}
with open(os.path.join(os.path.dirname(__file__), "svd_goldens.json"), "w") as f:
    json.dump(out, f)
print("wrote svd_goldens.json")
