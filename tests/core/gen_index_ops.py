"""
Goldens for tests/core/index_ops.test.ts: gather, index_select, scatter_add and index_add with
0-d operands (0-d self, index or src; dim 0 and -1), forward and gradients, from PyTorch.
Run with /usr/bin/python3 (torch 1.13): writes tests/core/index_ops.json.
The upstream gradient of each output is 1, 2, ..., numel (row-major), so every output element
is weighted differently. Values are small integers, exact in float32.
"""
import json
import os

import torch

T = torch.tensor
F = torch.float32

# name: (op, x, index, src or None, dim)
CASES = {
    "gather 0-d self, 0-d index, dim 0": ("gather", T(5.0), T(0), None, 0),
    "gather 0-d self, 0-d index, dim -1": ("gather", T(5.0), T(0), None, -1),
    "gather 0-d self, 1-d index": ("gather", T(5.0), T([0, 0, 0]), None, -1),
    "gather 1-d self, 0-d index": ("gather", T([1.0, 2.0, 3.0]), T(2), None, 0),
    "gather 1-d self, 0-d index, dim -1": ("gather", T([1.0, 2.0, 3.0]), T(1), None, -1),
    "index_select 0-d self, 0-d index": ("index_select", T(5.0), T(0), None, 0),
    "index_select 0-d self, [1] index, dim -1": ("index_select", T(5.0), T([0]), None, -1),
    "index_select 1-d self, 0-d index": ("index_select", T([1.0, 2.0, 3.0]), T(2), None, 0),
    "index_select 2-d self, 0-d index, dim -1": ("index_select", torch.arange(6.0).reshape(2, 3), T(2), None, -1),
    "index_select 2-d self, 0-d index, dim 0": ("index_select", torch.arange(6.0).reshape(2, 3), T(1), None, 0),
    "scatter_add all 0-d": ("scatter_add", T(5.0), T(0), T(2.0), 0),
    "scatter_add all 0-d, dim -1": ("scatter_add", T(5.0), T(0), T(2.0), -1),
    "scatter_add 0-d self, 1-d index and src": ("scatter_add", T(5.0), T([0, 0]), T([2.0, 3.0]), 0),
    "scatter_add 1-d self, 0-d index and src": ("scatter_add", T([1.0, 2.0, 3.0]), T(2), T(10.0), -1),
    "index_add all 0-d": ("index_add", T(5.0), T(0), T(2.0), 0),
    "index_add all 0-d, dim -1": ("index_add", T(5.0), T(0), T(2.0), -1),
    "index_add 0-d self, 1-d index and source": ("index_add", T(5.0), T([0, 0]), T([2.0, 3.0]), 0),
    "index_add 0-d self, [1] index, 0-d source": ("index_add", T(5.0), T([0]), T(2.0), 0),
    "index_add 0-d self, 0-d index, [1] source": ("index_add", T(5.0), T(0), T([2.0]), 0),
    "index_add 1-d self, 0-d index, [1] source": ("index_add", T([1.0, 2.0, 3.0]), T(2), T([10.0]), 0),
    "index_add 1-d self, 0-d index and source": ("index_add", T([1.0, 2.0, 3.0]), T(2), T(10.0), 0),
    "index_add 1-d self, [1] index, 0-d source": ("index_add", T([1.0, 2.0, 3.0]), T([2]), T(10.0), -1),
    "index_add 2-d self, 0-d index, dim 1": ("index_add", torch.zeros(2, 3), T(2), T([[1.0], [2.0]]), 1),
}


def run(op, x, index, src, dim):
    x = x.to(F).requires_grad_(True)
    s = src.to(F).requires_grad_(True) if src is not None else None
    if op == "gather":
        out = torch.gather(x, dim, index)
    elif op == "index_select":
        out = torch.index_select(x, dim, index)
    elif op == "scatter_add":
        out = torch.scatter_add(x, dim, index, s)
    else:
        out = torch.index_add(x, dim, index, s)
    g = torch.arange(1.0, out.numel() + 1).reshape(out.shape)
    out.backward(g)
    rec = lambda t: {"shape": list(t.shape), "data": t.detach().reshape(-1).tolist()}
    return {
        "op": op, "dim": dim, "x": rec(x), "index": rec(index), "src": rec(s) if s is not None else None,
        "out": rec(out), "grad_x": rec(x.grad), "grad_src": rec(s.grad) if s is not None else None,
    }


out = {name: run(*c) for name, c in CASES.items()}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "index_ops.json")
with open(path, "w") as f:
    json.dump({"torch": torch.__version__, "cases": out}, f, indent=1)
    f.write("\n")
print(f"wrote {len(out)} cases to {path}")
