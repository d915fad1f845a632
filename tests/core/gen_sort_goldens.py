"""Golden values for tests/core/sort_ops.test.ts from PyTorch (torch 1.13):
    /usr/bin/python3 tests/core/gen_sort_goldens.py

Writes sort_goldens.json next to this file: per case the op (sort, argsort, msort, topk,
kthvalue), its arguments, the input, the values and int64 indices and, for floating inputs, the
gradient of sum(values * grad_output) with respect to the input. Tensors are {"shape", "dtype",
"data"} (row-major; float32 values as the exact doubles of the float32 numbers; non-finite values
as "inf", "-inf", "nan"). topk/kthvalue inputs have no ties where the indices are compared
(torch's CPU topk leaves their order open); sort ties are compared with stable=True.
"""
import json
import os

import torch

from golden_json import arr  # this folder is on sys.path when run as a script

torch.manual_seed(13)


cases = []


def case(name, op, x, **args):
    x = x.clone()
    if x.is_floating_point():
        x.requires_grad_(True)
    if op == "sort":
        out = torch.sort(x, dim=args["dim"], descending=args["descending"], stable=True)
    elif op == "argsort":
        out = (None, torch.argsort(x, dim=args["dim"], descending=args["descending"]) if not args.get("ties") else
               torch.sort(x, dim=args["dim"], descending=args["descending"], stable=True).indices)
    elif op == "msort":
        out = (torch.msort(x), torch.sort(x, dim=0, stable=True).indices)
    elif op == "topk":
        out = torch.topk(x, args["k"], dim=args["dim"], largest=args["largest"], sorted=True)
    elif op == "kthvalue":
        out = torch.kthvalue(x, args["k"], dim=args["dim"], keepdim=args["keepdim"])
    values, indices = out
    c = {"name": name, "op": op, "args": args, "input": arr(x), "indices": arr(indices)}
    if values is not None:
        c["values"] = arr(values)
        if x.is_floating_point():
            g = torch.randn(values.shape, dtype=x.dtype)
            (gx,) = torch.autograd.grad((values * g).sum(), x)
            c["grad_output"] = arr(g)
            c["grad"] = arr(gx)
    cases.append(c)


r = torch.randn(4, 6)
ties = torch.tensor([[2.0, 1.0, 2.0, 0.5, 1.0, 2.0], [0.0, -0.0, 3.0, 3.0, -1.0, 0.0]])
nan = torch.tensor([[3.0, float("nan"), 1.0, float("nan"), 2.0], [float("-inf"), 0.5, float("nan"), float("inf"), -2.0]])
ints = torch.tensor([[5, -3, 5, 0, 7, -3], [1, 1, 1, 0, 0, 2]])
for dim in (-1, 0, 1):
    for desc in (False, True):
        case(f"sort dim={dim} desc={desc}", "sort", r, dim=dim, descending=desc)
        case(f"sort ties dim={dim} desc={desc}", "sort", ties, dim=dim, descending=desc)
for desc in (False, True):
    case(f"sort nan desc={desc}", "sort", nan, dim=-1, descending=desc)
    case(f"sort int64 desc={desc}", "sort", ints, dim=1, descending=desc)
    case(f"sort int32 dim0 desc={desc}", "sort", ints.to(torch.int32), dim=0, descending=desc)
    case(f"sort float64 3-d desc={desc}", "sort", torch.randn(2, 3, 4, dtype=torch.float64), dim=1, descending=desc)
    case(f"argsort desc={desc}", "argsort", r, dim=0, descending=desc)
    case(f"argsort ties desc={desc}", "argsort", ints, dim=-1, descending=desc, ties=True)
case("sort bool", "sort", torch.tensor([True, False, True, False]), dim=0, descending=False)
case("sort 0-d", "sort", torch.tensor(2.5), dim=0, descending=False)
case("msort", "msort", r)
for k in (1, 3, 6):
    for largest in (True, False):
        case(f"topk k={k} largest={largest}", "topk", r, k=k, dim=-1, largest=largest)
case("topk dim=0", "topk", r, k=2, dim=0, largest=True)
case("topk k=0", "topk", r, k=0, dim=1, largest=True)
case("topk nan", "topk", torch.tensor([3.0, float("nan"), 1.0, float("nan"), 2.0]), k=3, dim=0, largest=True)
case("topk nan smallest", "topk", torch.tensor([3.0, float("nan"), 1.0, float("nan"), 2.0]), k=4, dim=0, largest=False)
case("topk int64", "topk", torch.tensor([[4, -2, 9, 0], [3, 8, -5, 1]]), k=2, dim=1, largest=True)
case("topk float64 3-d", "topk", torch.randn(2, 5, 3, dtype=torch.float64), k=2, dim=1, largest=False)
case("topk 0-d", "topk", torch.tensor(1.5), k=1, dim=0, largest=True)
for keepdim in (False, True):
    case(f"kthvalue keepdim={keepdim}", "kthvalue", r, k=2, dim=1, keepdim=keepdim)
case("kthvalue dim=0", "kthvalue", r, k=4, dim=0, keepdim=False)

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "sort_goldens.json"), "w") as f:
    json.dump({"torch": torch.__version__, "cases": cases}, f, separators=(",", ":"))
print(len(cases), "cases")
