"""Golden values for tests/core/shape_ops.test.ts from PyTorch (torch 1.13):
    /usr/bin/python3 tests/core/gen_shape_ops_goldens.py

Writes shape_ops_goldens.json next to this file: per case the op name and its arguments, the
inputs, the output and, for floating outputs, the gradients of sum(out * grad_output) with
respect to every floating input. Tensors are {"shape", "dtype", "data"} (row-major; float32
values as the exact doubles of the float32 numbers; non-finite values as "inf", "-inf", "nan").
Inputs are small and seeded.
"""
import json
import os

import torch
import torch.nn.functional as F

from golden_json import arr  # this folder is on sys.path when run as a script

torch.manual_seed(16)


def randn(*shape):
    return torch.randn(*shape)


cases = []


def case(name, op, inputs, fn, **args):
    """fn(*inputs) with the floating inputs requiring grad; records output and gradients."""
    ins = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    out = fn(*ins)
    c = {"name": name, "op": op, "args": args, "inputs": [arr(x) for x in inputs], "output": arr(out)}
    if out.is_floating_point() and out.requires_grad:
        g = torch.randn(out.shape)
        (out * g).sum().backward()
        c["grad_output"] = arr(g)
        c["grads"] = [arr(x.grad) if x.grad is not None else (arr(torch.zeros_like(x)) if x.is_floating_point() else None) for x in ins]
    cases.append(c)


x23, x234 = randn(2, 3), randn(2, 3, 4)
case("repeat", "repeat", [x23], lambda x: x.repeat(2, 1, 2), sizes=[2, 1, 2])
case("repeat_same_rank", "repeat", [x23], lambda x: x.repeat(3, 2), sizes=[3, 2])
case("tile_short", "tile", [x234], lambda x: x.tile((2,)), dims=[2])
case("tile_long", "tile", [x23], lambda x: x.tile((2, 1, 2)), dims=[2, 1, 2])
case("repeat_interleave_int", "repeat_interleave", [x23], lambda x: x.repeat_interleave(2, dim=1), repeats=2, dim=1)
case("repeat_interleave_flat", "repeat_interleave", [x23], lambda x: x.repeat_interleave(3), repeats=3, dim=None)
case("repeat_interleave_tensor", "repeat_interleave", [x23], lambda x: x.repeat_interleave(torch.tensor([1, 0, 2]), dim=1), repeats=[1, 0, 2], dim=1)
case("flip", "flip", [x234], lambda x: x.flip([0, 2]), dims=[0, 2])
case("flip_neg", "flip", [x234], lambda x: x.flip(-2), dims=[-2])
case("fliplr", "fliplr", [x234], lambda x: x.fliplr())
case("flipud", "flipud", [x234], lambda x: x.flipud())
case("roll_flat", "roll", [x23], lambda x: x.roll(2), shifts=2, dims=None)
case("roll_dims", "roll", [x234], lambda x: x.roll((1, -5), (0, 2)), shifts=[1, -5], dims=[0, 2])
case("select", "select", [x234], lambda x: x.select(1, -1), dim=1, index=-1)
case("outer", "outer", [randn(3), randn(4)], lambda a, b: torch.outer(a, b))
v3 = randn(3)
for k in (0, 1, -2):
    case(f"diag_1d_{k}", "diag", [v3], lambda x, k=k: torch.diag(x, k), diagonal=k)
m34 = randn(3, 4)
for k in (0, 1, -1, 3):
    case(f"diag_2d_{k}", "diag", [m34], lambda x, k=k: torch.diag(x, k), diagonal=k)
case("diagonal_3d", "diagonal", [x234], lambda x: torch.diagonal(x, 1, 2, 0), offset=1, dim1=2, dim2=0)
case("diagonal_neg", "diagonal", [x234], lambda x: torch.diagonal(x, -1, 1, 2), offset=-1, dim1=1, dim2=2)
case("masked_select", "masked_select", [x23, torch.tensor([True, False, True])], lambda x, m: x.masked_select(m))
zs = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
case("nonzero", "nonzero", [zs], lambda x: torch.nonzero(x))

# scatter: duplicate-free index for the gradient (torch's rule and Loom's agree there)
x34 = randn(3, 4)
idx_perm = torch.tensor([[2, 0, 1, 1], [0, 2, 0, 2]])
case("scatter_src", "scatter", [x34, randn(2, 4)], lambda x, s: x.scatter(0, idx_perm, s), dim=0, index=arr(idx_perm))
case("scatter_value", "scatter_value", [x34], lambda x: x.scatter(1, torch.tensor([[3], [0], [1]]), 2.5), dim=1, index=arr(torch.tensor([[3], [0], [1]])), value=2.5)
idx_dup = torch.tensor([[0, 1, 0, 2], [0, 1, 2, 2], [1, 1, 0, 2]])
src34 = randn(3, 4)
for red in ("sum", "prod", "mean", "amax", "amin"):
    for inc in (True, False):
        case(f"scatter_reduce_{red}_{inc}", "scatter_reduce", [randn(3, 4), src34], lambda x, s, r=red, i=inc: x.scatter_reduce(0, idx_dup, s, r, include_self=i),
             dim=0, index=arr(idx_dup), reduce=red, include_self=inc)
idx_d1 = torch.tensor([[0, 0, 2], [1, 1, 1]])
case("scatter_reduce_dim1", "scatter_reduce", [randn(2, 4), randn(2, 3)], lambda x, s: x.scatter_reduce(1, idx_d1, s, "amax"), dim=1, index=arr(idx_d1), reduce="amax", include_self=True)
src_zero = torch.tensor([[0.5, 0.0, 2.0, 1.0], [3.0, 2.0, 0.0, -1.0], [0.0, 1.5, 2.0, 0.0]])
case("scatter_reduce_prod_zero", "scatter_reduce", [randn(3, 4), src_zero], lambda x, s: x.scatter_reduce(0, idx_dup, s, "prod"), dim=0, index=arr(idx_dup), reduce="prod", include_self=True)
ties = torch.tensor([[1.0, 2.0, 3.0, 4.0], [1.0, 5.0, 0.0, 4.0], [0.0, 5.0, 3.0, 4.0]])
case("scatter_reduce_amax_ties", "scatter_reduce", [torch.tensor([[1.0, 0.0, 3.0, 4.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]), ties],
     lambda x, s: x.scatter_reduce(0, idx_dup, s, "amax"), dim=0, index=arr(idx_dup), reduce="amax", include_self=True)

# a group of -inf only (no identity padding can tie with it) and integer dtypes (mean floor-divides)
ninf = torch.tensor([-float("inf"), -float("inf"), 1.0])
case("scatter_reduce_amax_neg_inf", "scatter_reduce", [torch.zeros(2), ninf], lambda x, s: x.scatter_reduce(0, torch.tensor([0, 0, 1]), s, "amax", include_self=False),
     dim=0, index=arr(torch.tensor([0, 0, 1])), reduce="amax", include_self=False)
ix = torch.tensor([[0, 1, 0, 2], [0, 1, 2, 2], [1, 1, 0, 2]])
for red in ("mean", "amin", "prod"):
    case(f"scatter_reduce_int_{red}", "scatter_reduce", [torch.randint(-9, 9, (3, 4)), torch.randint(-9, 9, (3, 4))], lambda x, s, r=red: x.scatter_reduce(0, ix, s, r, include_self=False),
         dim=0, index=arr(ix), reduce=red, include_self=False)

r = randn(2, 5) * 100
case("round_2", "round", [r], lambda x: torch.round(x, decimals=2), decimals=2)
case("round_m1", "round", [r], lambda x: torch.round(x, decimals=-1), decimals=-1)
case("rsub", "rsub", [x23, randn(2, 3)], lambda a, b: torch.rsub(a, b, alpha=2), alpha=2)

E = [
    ("matmul", "ij,jk->ik", [(2, 3), (3, 4)]),
    ("batch_matmul", "bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
    ("outer", "i,j->ij", [(3,), (4,)]),
    ("trace", "ii", [(3, 3)]),
    ("diagonal", "ii->i", [(3, 3)]),
    ("transpose", "ij->ji", [(2, 3)]),
    ("sum_index", "ij->i", [(2, 3)]),
    ("sum_all", "ijk->", [(2, 3, 4)]),
    ("dot", "i,i->", [(4,)] * 2),
    ("implicit", "ij,jk", [(2, 3), (3, 4)]),
    ("implicit_order", "ba", [(2, 3)]),
    ("ellipsis", "...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("ellipsis_implicit", "...ij->...ji", [(2, 3, 4)]),
    ("ellipsis_sum", "i...->i", [(3, 2, 2)]),
    ("three", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("bilinear", "bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("repeated_batch", "bii->bi", [(2, 3, 3)]),
    ("broadcast_one", "ij,ij->ij", [(1, 3), (2, 3)]),
    ("attention", "bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
]
for name, eq, shapes in E:
    ops = [randn(*s) for s in shapes]
    case(f"einsum_{name}", "einsum", ops, lambda *xs, eq=eq: torch.einsum(eq, *xs), equation=eq)

P = [
    ("constant", (2, 3, 5), [1, 2], "constant", 0.5),
    ("constant_2d_crop", (2, 3, 5), [-1, 2, 1, 0], "constant", 0.0),
    ("constant_3dims", (2, 3, 4), [1, 0, 0, 1, 2, 1], "constant", -1.0),
    ("reflect", (2, 3, 5), [2, 1], "reflect", None),
    ("reflect_2d", (1, 2, 4, 5), [1, 1, 2, 0], "reflect", None),
    ("replicate", (1, 2, 4, 3), [2, 3, 1, 0], "replicate", None),
    ("replicate_1d", (2, 3, 2), [0, 3], "replicate", None),
    ("circular", (1, 2, 3, 4), [1, 2, 2, 1], "circular", None),
    ("circular_full", (2, 2, 3), [3, 3], "circular", None),
]
for name, shape, pad, mode, value in P:
    kw = {"mode": mode}
    if value is not None:
        kw["value"] = value
    case(f"pad_{name}", "pad", [randn(*shape)], lambda x, pad=pad, kw=kw: F.pad(x, pad, **kw), pad=pad, **kw)

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "shape_ops_goldens.json"), "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases}, f, separators=(",", ":"))
print(len(cases), "cases")
