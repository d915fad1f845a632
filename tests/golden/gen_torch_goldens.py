#!/usr/bin/python3
"""Reference values for Loom's op tests, computed with real PyTorch (Debian python3-torch 1.13).

Run:  /usr/bin/python3 tests/golden/gen_torch_goldens.py   (writes tests/golden/ops.json)

Every case is deterministic: its inputs come from a torch.Generator seeded with crc32(case name)
and are stored in the JSON, so Loom never has to reproduce torch's RNG.

JSON format
-----------
{"torch_version": str, "cases": [case, ...]}
case = {
  "name": unique str,
  "op": op id (below),
  "inputs": [{"shape", "dtype", "data" (flat, row-major), "requires_grad"}],
  "args": {keyword: json value}          # PyTorch keyword names verbatim
  "op_inputs": n                         # optional: the op takes inputs[0:n]; the rest feed "then"
  "then": [{"op", "args", "inputs": [k]}]  # optional: applied in order to the running result r,
                                         #   each as op(r, *inputs[k]...) with the same op ids
  "out": {"shape", "dtype", "data"}      # single-output ops (result after "then")
  "outs": [{...}, ...]                   # multi-output ops: max/min with dim, split, chunk
  "grad_output": {"shape", "dtype", "data"}   # only when grads are given
  "grads": [{"shape", "dtype", "data"} | null per input]
  "note": str                            # optional: how torch 1.13 computed an op it lacks
}
grads[i] = d/d inputs[i] of sum(out * grad_output); for multi-output ops, of outs[0] only.
Dtypes: float64 | float32 | int64 | int32 | bool. Bool data are JSON true/false.
Non-finite floats (in data and in args) are the strings "nan", "inf", "-inf". float32 data are written as the shortest
decimal that rounds to the same float32.

A scalar in args is a JSON number: JS cannot tell 2.0 from 2, so integer tensors are only combined with
non-integral float scalars (2.5) or with int scalars (2); JSON true/false are Python bools.

Op ids and args (a scalar operand is given in args under its torch keyword instead of an input)
-----------------------------------------------------------------------------------------------
add, sub, mul, div       inputs [input, other] | [input] + {"other": number}
                         div also: {"rounding_mode": "trunc"|"floor"}
floor_divide, remainder  inputs [input, other]                      (Python // and % on ints)
pow                      inputs [input, exponent] | [input] + {"exponent": number}
maximum, minimum         inputs [input, other]
eq, ne, lt, le, gt, ge   inputs [input, other] | [input] + {"other": number}; output bool
neg, abs, exp, log, sqrt, rsqrt, tanh, sigmoid, relu, silu        inputs [input], args {}
gelu                     {"approximate": "none"|"tanh"}
clamp                    {"min": number|absent, "max": number|absent}
where                    inputs [condition(bool), input, other]
masked_fill              inputs [input, mask(bool)], {"value": number}
sum, mean                {"dim": int|[int]|absent, "keepdim": bool|absent}
max, min                 {} -> out (0-dim) | {"dim": int, "keepdim": bool} -> outs [values, indices]
amax, amin               {"dim": int|[int], "keepdim": bool}
argmax, argmin           {"dim": int|absent, "keepdim": bool|absent}   (no dim: flat index)
var, std                 {"dim": int|[int]|absent, "unbiased": bool, "keepdim": bool|absent}
logsumexp                {"dim": int|[int], "keepdim": bool}
cumsum                   {"dim": int}
matmul                   inputs [input, other]
softmax, log_softmax     {"dim": int}
layer_norm               inputs [input] | [input, weight] | [input, weight, bias],
                         {"normalized_shape": [int], "eps": number}
rms_norm                 inputs [input] | [input, weight], {"normalized_shape": [int], "eps": number}
                         (torch >= 2.4 F.rms_norm; here computed as
                          x * rsqrt(mean(x^2, last dims, keepdim) + eps) * weight)
embedding                inputs [input(int64 indices), weight], {"padding_idx": int|absent}
cross_entropy            inputs [input [N,C] or [N,C,d], target] | [input, target, weight [C]];
                         target int64 [N] / [N,d] class indices, or float probabilities shaped like input;
                         {"reduction": "mean"|"sum"|"none", "ignore_index": int,
                          "label_smoothing": number|absent}
scaled_dot_product_attention   inputs [query, key, value] | [query, key, value, attn_mask],
                         {"is_causal": bool, "scale": number|absent (default 1/sqrt(E))};
                         attn_mask bool (True = attend) or additive float.
                         (torch >= 2.0 F.scaled_dot_product_attention; here written out as
                          softmax(q k^T / sqrt(E) + mask) v)
cat, stack               inputs [tensors...], {"dim": int}
split                    {"split_size_or_sections": int|[int], "dim": int} -> outs
chunk                    {"chunks": int, "dim": int} -> outs
tril, triu               {"diagonal": int}
gather                   inputs [input, index(int64)], {"dim": int}
one_hot                  inputs [tensor(int64)], {"num_classes": int}; output int64
transpose                {"dim0": int, "dim1": int}
permute                  {"dims": [int]}
expand                   {"size": [int]}   (-1 keeps a dim)
narrow                   {"dim": int, "start": int, "length": int}
reshape                  {"shape": [int]}  (-1 infers a dim)
getitem                  {"index": [entry per leading dim]}: entry null = full slice ":" (NOT newaxis),
                         int = select (dim removed), {"start","stop","step"} (any may be null) = slice
"""
import json
import math
import os
import zlib

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float32)  # torch's default; Python-float scalars promote ints to it

# ---- the op table: op id -> torch call (inputs list, args dict) ------------------------------


def _layer_norm(xs, a):
    w = xs[1] if len(xs) > 1 else None
    b = xs[2] if len(xs) > 2 else None
    return F.layer_norm(xs[0], a["normalized_shape"], w, b, a["eps"])


def _rms_norm(xs, a):
    x = xs[0]
    dims = list(range(-len(a["normalized_shape"]), 0))
    y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + a["eps"])
    return y * xs[1] if len(xs) > 1 else y


def _sdpa(xs, a):
    q, k, v = xs[:3]
    scale = a.get("scale") or 1 / math.sqrt(q.shape[-1])
    scores = q @ k.transpose(-2, -1) * scale  # [..., L, S]
    L, S = q.shape[-2], k.shape[-2]
    if a.get("is_causal"):
        keep = torch.ones(L, S, dtype=torch.bool).tril(0)  # top-left aligned, as torch 2.x
        scores = scores.masked_fill(~keep, float("-inf"))
    if len(xs) > 3:
        m = xs[3]
        scores = scores.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else scores + m
    return torch.softmax(scores, dim=-1) @ v


def _index(entries):
    out = []
    for e in entries:
        if e is None:
            out.append(slice(None))
        elif isinstance(e, int):
            out.append(e)
        else:
            out.append(slice(e.get("start"), e.get("stop"), e.get("step")))
    return tuple(out)


OPS = {
    "floor_divide": lambda xs, a: torch.floor_divide(*xs),
    "gelu": lambda xs, a: F.gelu(xs[0], **a),
    "relu": lambda xs, a: F.relu(xs[0]),
    "silu": lambda xs, a: F.silu(xs[0]),
    "softmax": lambda xs, a: F.softmax(xs[0], **a),
    "log_softmax": lambda xs, a: F.log_softmax(xs[0], **a),
    "layer_norm": _layer_norm,
    "rms_norm": _rms_norm,
    "embedding": lambda xs, a: F.embedding(xs[0], xs[1], **a),
    "cross_entropy": lambda xs, a: F.cross_entropy(*xs, **a),
    "scaled_dot_product_attention": _sdpa,
    "cat": lambda xs, a: torch.cat(xs, **a),
    "stack": lambda xs, a: torch.stack(xs, **a),
    "gather": lambda xs, a: torch.gather(xs[0], a["dim"], xs[1]),
    "one_hot": lambda xs, a: F.one_hot(xs[0], **a),
    "expand": lambda xs, a: xs[0].expand(*a["size"]),
    "getitem": lambda xs, a: xs[0][_index(a["index"])],
}


def run_op(op, xs, args):
    if op in OPS:
        return OPS[op](xs, args)
    return getattr(torch, op)(*xs, **args)  # e.g. torch.sum(x, dim=[0, -1], keepdim=True)


# ---- inputs ------------------------------------------------------------------------------------


class Rng:
    """Random inputs for one case. Floats are rounded to 4 decimals so the JSON stays short."""

    def __init__(self, name):
        self.g = torch.Generator().manual_seed(zlib.crc32(name.encode()))

    def _round(self, t, dtype):
        return (t * 1e4).round().div(1e4).to(dtype)

    def randn(self, *shape, dtype=torch.float64):
        return self._round(torch.randn(shape, generator=self.g, dtype=torch.float64), dtype)

    def uniform(self, lo, hi, *shape, dtype=torch.float64):
        u = torch.rand(shape, generator=self.g, dtype=torch.float64)
        return self._round(lo + (hi - lo) * u, dtype)

    def ints(self, lo, hi, *shape, dtype=torch.int64):
        return torch.randint(lo, hi, shape, generator=self.g).to(dtype)

    def mask(self, *shape, p=0.5):
        return torch.rand(shape, generator=self.g) < p


# ---- encoding ----------------------------------------------------------------------------------

DTYPE_NAMES = {torch.float64: "float64", torch.float32: "float32", torch.int64: "int64",
               torch.int32: "int32", torch.bool: "bool"}


def _num(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def enc_args(a):
    if isinstance(a, dict):
        return {k: enc_args(v) for k, v in a.items()}
    if isinstance(a, list):
        return [enc_args(v) for v in a]
    return _num(a)


def enc(t, requires_grad=None):
    t = t.detach().contiguous()
    if t.dtype == torch.float32:  # shortest decimal that round-trips through float32
        data = [float(str(v)) for v in t.numpy().ravel()]
    else:
        data = t.reshape(-1).tolist()
    d = {"shape": list(t.shape), "dtype": DTYPE_NAMES[t.dtype], "data": [_num(v) for v in data]}
    if requires_grad is not None:
        d["requires_grad"] = requires_grad
    return d


# ---- cases ---------------------------------------------------------------------------------------

CASES = []


def first_of(res):
    return res[0] if isinstance(res, (tuple, list)) else res


def case(name, op, make_inputs, args=None, grad=True, no_grad=(), then=None, op_inputs=None,
         note=None):
    """make_inputs(rng) -> list of tensors. Floating inputs require grad unless in no_grad."""
    assert all(c["name"] != name for c in CASES), name
    args = args or {}
    r = Rng(name)
    xs = [x.clone() for x in make_inputs(r)]
    for i, x in enumerate(xs):
        if grad and x.is_floating_point() and i not in no_grad:
            x.requires_grad_(True)
    n = len(xs) if op_inputs is None else op_inputs
    res = run_op(op, xs[:n], args)
    for step in then or []:
        res = run_op(step["op"], [res] + [xs[k] for k in step.get("inputs", [])], step.get("args", {}))
    if not (any(x.requires_grad for x in xs) and first_of(res).requires_grad):
        for x in xs:  # nothing differentiable: record the case as a forward-only one
            x.requires_grad_(False)
    c = {"name": name, "op": op, "inputs": [enc(x, x.requires_grad) for x in xs],
         "args": enc_args(args)}
    if op_inputs is not None:
        c["op_inputs"] = op_inputs
    if then:
        c["then"] = [{"op": s["op"], "args": s.get("args", {}), "inputs": s.get("inputs", [])}
                     for s in then]
    if note:
        c["note"] = note
    multi = isinstance(res, (tuple, list))
    if multi:
        c["outs"] = [enc(o) for o in res]
    else:
        c["out"] = enc(res)
    first = first_of(res)
    wrt = [x for x in xs if x.requires_grad]
    if wrt and first.requires_grad:
        go = r.randn(*first.shape, dtype=first.dtype)
        gs = torch.autograd.grad((first * go).sum(), wrt, allow_unused=True)
        gs = iter(gs)
        grads = []
        for x in xs:
            if not x.requires_grad:
                grads.append(None)
                continue
            gx = next(gs)
            grads.append(enc(torch.zeros_like(x) if gx is None else gx))
        c["grad_output"] = enc(go)
        c["grads"] = grads
    CASES.append(c)


def pos(r, *shape, dtype=torch.float64):
    return r.uniform(0.5, 2.0, *shape, dtype=dtype)


F32 = torch.float32

# Elementwise binary, with broadcasting.
for op in ["add", "sub", "mul", "div"]:
    case(f"{op}_same", op, lambda r: [r.randn(2, 3), r.randn(2, 3)])
    case(f"{op}_bcast_row", op, lambda r: [r.randn(3, 4), r.randn(4)])
    case(f"{op}_bcast_both", op, lambda r: [r.randn(2, 1, 4), r.randn(3, 1)])
    case(f"{op}_scalar", op, lambda r: [r.randn(2, 3)], {"other": 1.5})
    case(f"{op}_f32", op, lambda r: [r.randn(2, 3, dtype=F32), r.randn(3, dtype=F32)])
case("div_bcast_pos", "div", lambda r: [r.randn(4, 1), pos(r, 1, 5)])
case("pow_tensor_tensor", "pow", lambda r: [pos(r, 2, 3), r.randn(2, 3)])
case("pow_tensor_tensor_bcast", "pow", lambda r: [pos(r, 3, 1), r.randn(1, 4)])
case("pow_scalar_2", "pow", lambda r: [r.randn(2, 3)], {"exponent": 2.0})
case("pow_scalar_3", "pow", lambda r: [r.randn(5)], {"exponent": 3.0})
case("pow_scalar_frac", "pow", lambda r: [pos(r, 2, 3)], {"exponent": 0.5})
case("pow_scalar_neg", "pow", lambda r: [pos(r, 4)], {"exponent": -1.5})
case("pow_f32", "pow", lambda r: [pos(r, 6, dtype=F32)], {"exponent": 2.5})
for op in ["maximum", "minimum"]:
    case(f"{op}_same", op, lambda r: [r.randn(2, 3), r.randn(2, 3)])
    case(f"{op}_bcast", op, lambda r: [r.randn(3, 1), r.randn(1, 4)])

# Elementwise unary.
for op in ["neg", "abs", "exp", "tanh", "sigmoid", "relu", "silu"]:
    case(f"{op}_2d", op, lambda r: [r.randn(3, 4)])
    case(f"{op}_3d", op, lambda r: [r.randn(2, 2, 3)])
    case(f"{op}_f32", op, lambda r: [r.randn(7, dtype=F32)])
for op in ["log", "sqrt", "rsqrt"]:
    case(f"{op}_2d", op, lambda r: [r.uniform(0.1, 3.0, 3, 4)])
    case(f"{op}_f32", op, lambda r: [r.uniform(0.1, 3.0, 7, dtype=F32)])
case("exp_large", "exp", lambda r: [torch.tensor([-800.0, -1.0, 0.0, 1.0, 20.0, 800.0],
                                                dtype=torch.float64)])
case("log_special", "log", lambda r: [torch.tensor([0.0, -1.0, 1.0, 1e-300], dtype=torch.float64)],
     grad=False)
case("sqrt_special", "sqrt", lambda r: [torch.tensor([0.0, -4.0, 4.0, float("inf")])], grad=False)
case("sigmoid_extreme", "sigmoid", lambda r: [torch.tensor([-800.0, -30.0, 0.0, 30.0, 800.0],
                                                          dtype=torch.float64)])
case("tanh_extreme", "tanh", lambda r: [torch.tensor([-400.0, -20.0, 0.0, 20.0, 400.0],
                                                    dtype=torch.float64)])
for approx in ["none", "tanh"]:
    case(f"gelu_{approx}_2d", "gelu", lambda r: [r.randn(3, 4)], {"approximate": approx})
    case(f"gelu_{approx}_wide", "gelu", lambda r: [r.uniform(-6, 6, 10)], {"approximate": approx})
    case(f"gelu_{approx}_f32", "gelu", lambda r: [r.randn(8, dtype=F32)], {"approximate": approx})
case("clamp_min_max", "clamp", lambda r: [r.randn(3, 4)], {"min": -0.5, "max": 0.7})
case("clamp_min", "clamp", lambda r: [r.randn(3, 4)], {"min": 0.1})
case("clamp_max", "clamp", lambda r: [r.randn(2, 5)], {"max": -0.2})
case("clamp_f32", "clamp", lambda r: [r.randn(6, dtype=F32)], {"min": -1.0, "max": 1.0})

# Selection.
case("where_same", "where", lambda r: [r.mask(2, 3), r.randn(2, 3), r.randn(2, 3)])
case("where_bcast", "where", lambda r: [r.mask(3, 1), r.randn(1, 4), r.randn(3, 4)])
case("where_bcast_cond", "where", lambda r: [r.mask(4), r.randn(2, 4), r.randn(2, 1)])
case("masked_fill_same", "masked_fill", lambda r: [r.randn(2, 3), r.mask(2, 3)], {"value": -2.5})
case("masked_fill_bcast", "masked_fill", lambda r: [r.randn(2, 3, 4), r.mask(3, 1)], {"value": 0.0})
case("masked_fill_neg_inf", "masked_fill", lambda r: [r.randn(3, 3), torch.eye(3) < 0.5],
     {"value": float("-inf")}, grad=False)

# Comparisons (no grads).
for op in ["eq", "ne", "lt", "le", "gt", "ge"]:
    def with_ties(r):  # half of the entries equal, so eq/le/ge are exercised
        a = r.ints(-2, 3, 3, 4).double()
        b = torch.where(r.mask(3, 4), a, r.ints(-2, 3, 3, 4).double())
        return [a, b]
    case(f"{op}_same", op, with_ties, grad=False)
    case(f"{op}_bcast", op, lambda r: [r.ints(-2, 3, 3, 1).double(), r.ints(-2, 3, 4).double()],
         grad=False)
    case(f"{op}_scalar", op, lambda r: [r.ints(-2, 3, 2, 3).double()], {"other": 0.0}, grad=False)
    case(f"{op}_int64", op, lambda r: [r.ints(-2, 3, 6), r.ints(-2, 3, 6)])
case("eq_nan", "eq", lambda r: [torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.0])],
     grad=False)

# Reductions.
for op in ["sum", "mean"]:
    case(f"{op}_all", op, lambda r: [r.randn(3, 4)])
    case(f"{op}_dim0", op, lambda r: [r.randn(3, 4)], {"dim": 0})
    case(f"{op}_dim_neg1_keepdim", op, lambda r: [r.randn(2, 3, 4)], {"dim": -1, "keepdim": True})
    case(f"{op}_dims_list_keepdim", op, lambda r: [r.randn(2, 3, 4)], {"dim": [0, -1], "keepdim": True})
    case(f"{op}_dims_list", op, lambda r: [r.randn(2, 3, 4)], {"dim": [0, 2], "keepdim": False})
    case(f"{op}_dim1_3d", op, lambda r: [r.randn(2, 3, 4)], {"dim": 1})
    case(f"{op}_f32", op, lambda r: [r.randn(4, 5, dtype=F32)], {"dim": 1})
case("sum_1d", "sum", lambda r: [r.randn(7)])
case("sum_0d", "sum", lambda r: [torch.tensor(2.5, dtype=torch.float64)])
for op in ["max", "min"]:
    case(f"{op}_all", op, lambda r: [r.randn(3, 4)])
    case(f"{op}_dim1", op, lambda r: [r.randn(3, 4)], {"dim": 1, "keepdim": False})
    case(f"{op}_dim_neg1_keepdim", op, lambda r: [r.randn(2, 3, 4)], {"dim": -1, "keepdim": True})
    case(f"{op}_dim0", op, lambda r: [r.randn(2, 3, 4)], {"dim": 0, "keepdim": False})
    case(f"{op}_int64_dim", op, lambda r: [r.ints(-50, 50, 3, 4)], {"dim": 1, "keepdim": False})
for op in ["amax", "amin"]:
    case(f"{op}_dim1", op, lambda r: [r.randn(3, 4)], {"dim": 1, "keepdim": False})
    case(f"{op}_dim_neg1_keepdim", op, lambda r: [r.randn(2, 3, 4)], {"dim": -1, "keepdim": True})
    case(f"{op}_dims_list", op, lambda r: [r.randn(2, 3, 4)], {"dim": [0, -1], "keepdim": False})
for op in ["argmax", "argmin"]:
    case(f"{op}_all", op, lambda r: [r.randn(3, 4)])
    case(f"{op}_dim1", op, lambda r: [r.randn(3, 4)], {"dim": 1})
    case(f"{op}_dim_neg1_keepdim", op, lambda r: [r.randn(2, 3, 4)], {"dim": -1, "keepdim": True})
    case(f"{op}_dim0", op, lambda r: [r.randn(2, 3, 4)], {"dim": 0, "keepdim": False})
    case(f"{op}_ties_first", op, lambda r: [torch.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])],
         {"dim": 1}, grad=False)
for op in ["var", "std"]:
    for unbiased in [True, False]:
        u = "unbiased" if unbiased else "biased"
        case(f"{op}_all_{u}", op, lambda r: [r.randn(3, 4)], {"unbiased": unbiased})
        case(f"{op}_dim1_{u}", op, lambda r: [r.randn(3, 4)], {"dim": 1, "unbiased": unbiased, "keepdim": False})
        case(f"{op}_dim_neg1_keepdim_{u}", op, lambda r: [r.randn(2, 3, 4)],
             {"dim": -1, "unbiased": unbiased, "keepdim": True})
        case(f"{op}_dims_list_{u}", op, lambda r: [r.randn(2, 3, 4)],
             {"dim": [0, 2], "unbiased": unbiased, "keepdim": False})
    case(f"{op}_f32", op, lambda r: [r.randn(3, 5, dtype=F32)], {"dim": 1, "unbiased": True, "keepdim": False})
case("logsumexp_dim1", "logsumexp", lambda r: [r.randn(3, 4)], {"dim": 1, "keepdim": False})
case("logsumexp_dim_neg1_keepdim", "logsumexp", lambda r: [r.randn(2, 3, 4)], {"dim": -1, "keepdim": True})
case("logsumexp_dims_list", "logsumexp", lambda r: [r.randn(2, 3, 4)], {"dim": [0, 2], "keepdim": False})
case("logsumexp_large", "logsumexp", lambda r: [r.randn(2, 4) * 300], {"dim": 1, "keepdim": False})
case("logsumexp_f32", "logsumexp", lambda r: [r.randn(3, 6, dtype=F32)], {"dim": -1, "keepdim": False})
case("cumsum_1d", "cumsum", lambda r: [r.randn(6)], {"dim": 0})
case("cumsum_dim1", "cumsum", lambda r: [r.randn(3, 4)], {"dim": 1})
case("cumsum_dim_neg1_3d", "cumsum", lambda r: [r.randn(2, 3, 4)], {"dim": -1})
case("cumsum_dim0_3d", "cumsum", lambda r: [r.randn(2, 3, 4)], {"dim": 0})
case("cumsum_int32_to_int64", "cumsum", lambda r: [r.ints(-5, 5, 2, 4, dtype=torch.int32)], {"dim": 1})

# Matmul in every rank combination.
case("matmul_1d_1d", "matmul", lambda r: [r.randn(4), r.randn(4)])
case("matmul_2d_1d", "matmul", lambda r: [r.randn(3, 4), r.randn(4)])
case("matmul_1d_2d", "matmul", lambda r: [r.randn(4), r.randn(4, 5)])
case("matmul_2d_2d", "matmul", lambda r: [r.randn(3, 4), r.randn(4, 5)])
case("matmul_3d_3d", "matmul", lambda r: [r.randn(2, 3, 4), r.randn(2, 4, 2)])
case("matmul_4d_3d_bcast", "matmul", lambda r: [r.randn(2, 1, 3, 4), r.randn(3, 4, 2)])
case("matmul_3d_2d", "matmul", lambda r: [r.randn(2, 3, 4), r.randn(4, 3)])
case("matmul_3d_1d", "matmul", lambda r: [r.randn(2, 3, 4), r.randn(4)])
case("matmul_1d_3d", "matmul", lambda r: [r.randn(3), r.randn(2, 3, 4)])
case("matmul_f32", "matmul", lambda r: [r.randn(4, 6, dtype=F32), r.randn(6, 3, dtype=F32)])
case("matmul_int64", "matmul", lambda r: [r.ints(-5, 5, 2, 3), r.ints(-5, 5, 3, 2)])

# Softmax family and norms.
for op in ["softmax", "log_softmax"]:
    case(f"{op}_dim_neg1", op, lambda r: [r.randn(3, 5)], {"dim": -1})
    case(f"{op}_dim0", op, lambda r: [r.randn(3, 5)], {"dim": 0})
    case(f"{op}_dim1_3d", op, lambda r: [r.randn(2, 3, 4)], {"dim": 1})
    case(f"{op}_large", op, lambda r: [r.randn(2, 4) * 500], {"dim": -1})
    case(f"{op}_neg_inf", op, lambda r: [torch.tensor([[0.5, float("-inf"), 1.0],
                                                      [float("-inf"), 2.0, -1.0]], dtype=torch.float64)],
         {"dim": -1}, grad=False)
    case(f"{op}_f32", op, lambda r: [r.randn(3, 7, dtype=F32)], {"dim": -1})
LN = {"normalized_shape": [4], "eps": 1e-5}
case("layer_norm_plain", "layer_norm", lambda r: [r.randn(3, 4)], LN)
case("layer_norm_weight", "layer_norm", lambda r: [r.randn(3, 4), r.randn(4)], LN)
case("layer_norm_weight_bias", "layer_norm", lambda r: [r.randn(3, 4), r.randn(4), r.randn(4)], LN)
case("layer_norm_3d_weight_bias", "layer_norm", lambda r: [r.randn(2, 3, 4), r.randn(4), r.randn(4)], LN)
case("layer_norm_2d_shape", "layer_norm", lambda r: [r.randn(2, 3, 4), r.randn(3, 4), r.randn(3, 4)],
     {"normalized_shape": [3, 4], "eps": 1e-5})
case("layer_norm_big_eps", "layer_norm", lambda r: [r.randn(3, 4) * 0.01], {"normalized_shape": [4], "eps": 0.1})
case("layer_norm_f32", "layer_norm", lambda r: [r.randn(3, 8, dtype=F32), r.randn(8, dtype=F32),
                                                r.randn(8, dtype=F32)], {"normalized_shape": [8], "eps": 1e-5})
RMS_NOTE = "torch 1.13 has no rms_norm: computed as x * rsqrt(mean(x^2, last dims, keepdim) + eps) * weight"
case("rms_norm_plain", "rms_norm", lambda r: [r.randn(3, 4)], {"normalized_shape": [4], "eps": 1e-6},
     note=RMS_NOTE)
case("rms_norm_weight", "rms_norm", lambda r: [r.randn(3, 4), r.randn(4)],
     {"normalized_shape": [4], "eps": 1e-6}, note=RMS_NOTE)
case("rms_norm_3d_weight", "rms_norm", lambda r: [r.randn(2, 3, 5), r.randn(5)],
     {"normalized_shape": [5], "eps": 1e-5}, note=RMS_NOTE)
case("rms_norm_f32", "rms_norm", lambda r: [r.randn(2, 8, dtype=F32), r.randn(8, dtype=F32)],
     {"normalized_shape": [8], "eps": 1e-6}, note=RMS_NOTE)

# Embedding and cross-entropy.
case("embedding_1d", "embedding", lambda r: [torch.tensor([1, 3, 1, 0]), r.randn(5, 3)])
case("embedding_2d", "embedding", lambda r: [r.ints(0, 4, 2, 3), r.randn(4, 2)])
case("embedding_f32", "embedding", lambda r: [torch.tensor([2, 2, 0]), r.randn(3, 4, dtype=F32)])
for red in ["mean", "sum", "none"]:
    CE = {"reduction": red, "ignore_index": -100}
    case(f"cross_entropy_2d_{red}", "cross_entropy", lambda r: [r.randn(4, 5), r.ints(0, 5, 4)], CE)
    case(f"cross_entropy_2d_ignore_{red}", "cross_entropy",
         lambda r: [r.randn(5, 3), torch.tensor([2, -100, 0, 1, -100])], CE)
    case(f"cross_entropy_3d_{red}", "cross_entropy",
         lambda r: [r.randn(2, 4, 3), torch.tensor([[0, 3, -100], [1, 1, 2]])], CE)
case("cross_entropy_custom_ignore", "cross_entropy",
     lambda r: [r.randn(4, 3), torch.tensor([0, 2, 1, 2])], {"reduction": "mean", "ignore_index": 2})
case("cross_entropy_large_logits", "cross_entropy",
     lambda r: [r.randn(3, 4) * 200, r.ints(0, 4, 3)], {"reduction": "mean", "ignore_index": -100})
case("cross_entropy_f32", "cross_entropy",
     lambda r: [r.randn(4, 6, dtype=F32), r.ints(0, 6, 4)], {"reduction": "mean", "ignore_index": -100})

# Attention (q [B,H,L,E], k [B,H,S,E], v [B,H,S,Ev]).
SDPA_NOTE = "torch 1.13 has no scaled_dot_product_attention: computed as softmax(q k^T / sqrt(E) + mask) v"
case("sdpa_plain", "scaled_dot_product_attention",
     lambda r: [r.randn(1, 2, 3, 4), r.randn(1, 2, 5, 4), r.randn(1, 2, 5, 3)], {"is_causal": False},
     note=SDPA_NOTE)
case("sdpa_causal", "scaled_dot_product_attention",
     lambda r: [r.randn(2, 1, 4, 4), r.randn(2, 1, 4, 4), r.randn(2, 1, 4, 4)], {"is_causal": True},
     note=SDPA_NOTE)
case("sdpa_causal_3d", "scaled_dot_product_attention",
     lambda r: [r.randn(2, 3, 2), r.randn(2, 3, 2), r.randn(2, 3, 2)], {"is_causal": True}, note=SDPA_NOTE)


def bool_mask(r):  # [L,S] with the diagonal always attended, so no row is fully masked
    return [r.randn(1, 2, 4, 3), r.randn(1, 2, 4, 3), r.randn(1, 2, 4, 3), r.mask(4, 4) | torch.eye(4).bool()]


case("sdpa_bool_mask", "scaled_dot_product_attention", bool_mask, {"is_causal": False}, note=SDPA_NOTE)
case("sdpa_float_mask", "scaled_dot_product_attention",
     lambda r: [r.randn(2, 1, 3, 4), r.randn(2, 1, 5, 4), r.randn(2, 1, 5, 4), r.randn(2, 1, 3, 5)],
     {"is_causal": False}, no_grad=(3,), note=SDPA_NOTE)
case("sdpa_f32", "scaled_dot_product_attention",
     lambda r: [r.randn(1, 1, 4, 8, dtype=F32), r.randn(1, 1, 4, 8, dtype=F32), r.randn(1, 1, 4, 8, dtype=F32)],
     {"is_causal": True}, note=SDPA_NOTE)

# Joining and splitting.
case("cat_dim0", "cat", lambda r: [r.randn(2, 3), r.randn(1, 3), r.randn(3, 3)], {"dim": 0})
case("cat_dim_neg1", "cat", lambda r: [r.randn(2, 3), r.randn(2, 1)], {"dim": -1})
case("cat_3d_dim1", "cat", lambda r: [r.randn(2, 1, 2), r.randn(2, 3, 2)], {"dim": 1})
case("stack_dim0", "stack", lambda r: [r.randn(2, 3), r.randn(2, 3)], {"dim": 0})
case("stack_dim_neg1", "stack", lambda r: [r.randn(2, 3), r.randn(2, 3), r.randn(2, 3)], {"dim": -1})
case("stack_dim1", "stack", lambda r: [r.randn(4), r.randn(4)], {"dim": 1})
case("split_size", "split", lambda r: [r.randn(5, 2)], {"split_size_or_sections": 2, "dim": 0})
case("split_sections", "split", lambda r: [r.randn(2, 6)], {"split_size_or_sections": [1, 3, 2], "dim": -1})
case("split_dim1_3d", "split", lambda r: [r.randn(2, 4, 3)], {"split_size_or_sections": 3, "dim": 1})
case("chunk_even", "chunk", lambda r: [r.randn(6, 2)], {"chunks": 3, "dim": 0})
case("chunk_uneven", "chunk", lambda r: [r.randn(2, 5)], {"chunks": 2, "dim": -1})
case("chunk_fewer", "chunk", lambda r: [r.randn(2, 6)], {"chunks": 4, "dim": 1})  # torch gives 3 of size 2

# Triangles, gather, one_hot.
for op in ["tril", "triu"]:
    for k in [0, 1, -1]:
        case(f"{op}_diag{k}", op, lambda r: [r.randn(3, 4)], {"diagonal": k})
    case(f"{op}_batched", op, lambda r: [r.randn(2, 3, 3)], {"diagonal": 0})
case("gather_dim1", "gather", lambda r: [r.randn(3, 4), r.ints(0, 4, 3, 2)], {"dim": 1})
case("gather_dim0", "gather", lambda r: [r.randn(3, 4), r.ints(0, 3, 2, 4)], {"dim": 0})
case("gather_dim_neg1_3d", "gather", lambda r: [r.randn(2, 3, 4), r.ints(0, 4, 2, 3, 1)], {"dim": -1})
case("one_hot_1d", "one_hot", lambda r: [torch.tensor([0, 2, 1, 2])], {"num_classes": 4})
case("one_hot_2d", "one_hot", lambda r: [r.ints(0, 3, 2, 3)], {"num_classes": 3})

# Views followed by ops, so gradients flow back through strided views.
case("transpose_then_mul", "transpose", lambda r: [r.randn(2, 3), r.randn(3, 2)], {"dim0": 0, "dim1": 1},
     op_inputs=1, then=[{"op": "mul", "inputs": [1]}])
case("transpose_neg_then_matmul", "transpose", lambda r: [r.randn(2, 4, 3), r.randn(4, 2)],
     {"dim0": -1, "dim1": -2}, op_inputs=1, then=[{"op": "matmul", "inputs": [1]}])
case("permute_then_exp", "permute", lambda r: [r.randn(2, 3, 4)], {"dims": [2, 0, 1]},
     then=[{"op": "exp"}])
case("permute_neg_then_softmax", "permute", lambda r: [r.randn(2, 3, 4)], {"dims": [-1, 0, -2]},
     then=[{"op": "softmax", "args": {"dim": -1}}])
case("expand_then_mul", "expand", lambda r: [r.randn(3, 1), r.randn(2, 3, 4)], {"size": [2, 3, 4]},
     op_inputs=1, then=[{"op": "mul", "inputs": [1]}])
case("expand_neg1_then_sum", "expand", lambda r: [r.randn(1, 4)], {"size": [3, -1]},
     then=[{"op": "sum", "args": {"dim": 1}}])
case("narrow_then_tanh", "narrow", lambda r: [r.randn(3, 5)], {"dim": 1, "start": 1, "length": 3},
     then=[{"op": "tanh"}])
case("narrow_neg_dim_then_add", "narrow", lambda r: [r.randn(4, 3), r.randn(2, 3)],
     {"dim": -2, "start": 2, "length": 2}, op_inputs=1, then=[{"op": "add", "inputs": [1]}])
case("getitem_step_then_mul", "getitem", lambda r: [r.randn(6, 3)],
     {"index": [{"start": 0, "stop": 5, "step": 2}, None]}, then=[{"op": "mul", "args": {"other": 3.0}}])
case("getitem_int_and_slice", "getitem", lambda r: [r.randn(3, 4, 5)],
     {"index": [1, {"start": None, "stop": None, "step": 2}, {"start": -3, "stop": None, "step": None}]},
     then=[{"op": "exp"}])
case("getitem_2d_steps_then_matmul", "getitem", lambda r: [r.randn(5, 6), r.randn(3, 2)],
     {"index": [{"start": 1, "stop": None, "step": 2}, {"start": None, "stop": None, "step": 2}]},
     op_inputs=1, then=[{"op": "matmul", "inputs": [1]}])
case("getitem_neg_int", "getitem", lambda r: [r.randn(3, 4)], {"index": [-1]})
case("transpose_then_reshape", "transpose", lambda r: [r.randn(2, 3, 4)], {"dim0": 0, "dim1": 2},
     then=[{"op": "reshape", "args": {"shape": [4, -1]}}, {"op": "mul", "args": {"other": 2.0}}])
case("permute_then_reshape_then_sum", "permute", lambda r: [r.randn(2, 3, 4)], {"dims": [1, 2, 0]},
     then=[{"op": "reshape", "args": {"shape": [-1]}}, {"op": "cumsum", "args": {"dim": 0}}])
case("getitem_step_then_reshape", "getitem", lambda r: [r.randn(4, 6)],
     {"index": [None, {"start": 1, "stop": None, "step": 2}]},
     then=[{"op": "reshape", "args": {"shape": [3, 4]}}, {"op": "softmax", "args": {"dim": -1}}])
case("reshape_contiguous", "reshape", lambda r: [r.randn(2, 6)], {"shape": [3, 2, 2]})

# Type promotion (torch.result_type rules, incl. 0-dim tensors and Python scalars).
I32, I64 = torch.int32, torch.int64
case("promote_int64_plus_float_scalar", "add", lambda r: [r.ints(-5, 5, 4)], {"other": 2.5})
case("promote_int64_mul_float_scalar", "mul", lambda r: [r.ints(-5, 5, 2, 2)], {"other": 0.5})
case("promote_int64_plus_0d_float32", "add",
     lambda r: [r.ints(-5, 5, 3), torch.tensor(1.25, dtype=F32)], grad=False)
case("promote_float32_plus_0d_float64", "add",
     lambda r: [r.randn(3, dtype=F32), torch.tensor(0.5, dtype=torch.float64)])
case("promote_int32_plus_int64", "add", lambda r: [r.ints(-9, 9, 4, dtype=I32), r.ints(-9, 9, 4)])
case("promote_int32_plus_int_scalar", "add", lambda r: [r.ints(-9, 9, 4, dtype=I32)], {"other": 3})
case("promote_bool_plus_int64", "add", lambda r: [r.mask(4), r.ints(-3, 3, 4)])
case("promote_bool_plus_int_scalar", "add", lambda r: [r.mask(2, 3)], {"other": 2})
case("promote_float32_plus_float64", "add", lambda r: [r.randn(2, 3, dtype=F32), r.randn(2, 3)])
case("promote_int64_div_int64", "div", lambda r: [r.ints(-9, 9, 5), r.ints(1, 5, 5)])
case("promote_int32_div_int_scalar", "div", lambda r: [r.ints(-9, 9, 5, dtype=I32)], {"other": 4})
case("promote_float32_mul_int64", "mul", lambda r: [r.randn(4, dtype=F32), r.ints(-3, 3, 4)])
case("promote_where_f32_f64", "where", lambda r: [r.mask(3), r.randn(3, dtype=F32), r.randn(3)], grad=False)

# Integer arithmetic.
case("int64_add", "add", lambda r: [r.ints(-1000, 1000, 2, 3), r.ints(-1000, 1000, 3)])
case("int64_sub", "sub", lambda r: [r.ints(-1000, 1000, 5), r.ints(-1000, 1000, 5)])
case("int64_mul", "mul", lambda r: [r.ints(-1000, 1000, 5), r.ints(-1000, 1000, 5)])
case("int64_neg_abs", "abs", lambda r: [r.ints(-9, 9, 6)], then=[{"op": "neg"}])
NEG_DIV = [torch.tensor([-7, 7, -7, 7, -8, 0, 5, -1]), torch.tensor([2, -2, -2, 2, 4, 3, -3, 5])]
case("floor_divide_neg_ints", "floor_divide", lambda r: [t.clone() for t in NEG_DIV])
case("remainder_neg_ints", "remainder", lambda r: [t.clone() for t in NEG_DIV])
case("div_trunc_neg_ints", "div", lambda r: [t.clone() for t in NEG_DIV], {"rounding_mode": "trunc"})
case("div_floor_neg_ints", "div", lambda r: [t.clone() for t in NEG_DIV], {"rounding_mode": "floor"})
case("div_floor_float", "div", lambda r: [torch.tensor([-7.5, 7.5, -1.0, 3.0]), torch.tensor([2.0, -2.0, 3.0, 2.0])],
     {"rounding_mode": "floor"}, grad=False)
case("sum_int32_to_int64", "sum", lambda r: [r.ints(-100, 100, 3, 4, dtype=I32)])
case("sum_int32_dim_to_int64", "sum", lambda r: [r.ints(-100, 100, 3, 4, dtype=I32)], {"dim": 1})
case("sum_bool_to_int64", "sum", lambda r: [r.mask(3, 4)])
case("sum_int64_dims_keepdim", "sum", lambda r: [r.ints(-100, 100, 2, 3, 2)], {"dim": [0, 2], "keepdim": True})

# Edge cases: NaN propagation, ties, boundaries, special values (torch 1.13 semantics).
NAN, INF = float("nan"), float("inf")
f64 = lambda *v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
case("relu_nan", "relu", lambda r: [f64(-1.0, NAN, 2.0)], grad=False)
case("clamp_nan", "clamp", lambda r: [f64(-2.0, NAN, 0.3, 2.0)], {"min": -1.0, "max": 1.0}, grad=False)
case("clamp_min_gt_max", "clamp", lambda r: [f64(-1.0, 0.5, 2.0)], {"min": 1.0, "max": 0.0})
case("clamp_at_bounds", "clamp", lambda r: [f64(-0.5, 0.7, 0.0, -0.9, 1.2)], {"min": -0.5, "max": 0.7})
case("maximum_nan", "maximum", lambda r: [f64(NAN, 1.0, 2.0), f64(0.0, NAN, 1.0)], grad=False)
case("minimum_nan", "minimum", lambda r: [f64(NAN, 1.0, 2.0), f64(0.0, NAN, 1.0)], grad=False)
case("maximum_ties", "maximum", lambda r: [f64(1.0, 2.0, 2.0), f64(0.0, 2.0, 3.0)])
case("minimum_ties", "minimum", lambda r: [f64(1.0, 2.0, 2.0), f64(0.0, 2.0, 3.0)])
case("amax_nan", "amax", lambda r: [f64(1.0, NAN, 3.0, 0.0).reshape(2, 2)], {"dim": 1, "keepdim": False}, grad=False)
case("max_all_nan", "max", lambda r: [f64(1.0, NAN, 3.0)], grad=False)
case("max_dim_nan", "max", lambda r: [f64(1.0, NAN, 3.0, 4.0, 0.0, 2.0).reshape(2, 3)], {"dim": 1, "keepdim": False},
     grad=False)
case("argmax_nan", "argmax", lambda r: [f64(1.0, 5.0, NAN, 3.0)], grad=False)
case("argmin_nan", "argmin", lambda r: [f64(1.0, -5.0, NAN, 3.0)], grad=False)
case("max_all_ties", "max", lambda r: [f64(1.0, 3.0, 3.0, 0.5)])  # grad split evenly between ties
case("amax_ties", "amax", lambda r: [f64(1.0, 3.0, 3.0, 2.0, 2.0, 0.0).reshape(2, 3)], {"dim": 1, "keepdim": False})
case("max_dim_ties", "max", lambda r: [f64(1.0, 3.0, 3.0, 2.0, 2.0, 0.0).reshape(2, 3)], {"dim": 1, "keepdim": False})
case("relu_at_zero", "relu", lambda r: [f64(-1.0, 0.0, 1.0)])
case("abs_at_zero", "abs", lambda r: [f64(-1.0, 0.0, 1.0)])
case("pow_zero_exponent_at_zero", "pow", lambda r: [f64(0.0, 1.5, -2.0)], {"exponent": 0.0})
case("pow_neg_base_int_exponent", "pow", lambda r: [f64(-2.0, -0.5, 1.5)], {"exponent": 3.0})
case("pow_neg_base_frac_exponent", "pow", lambda r: [f64(-2.0, 4.0)], {"exponent": 0.5}, grad=False)
case("pow_int64_scalar", "pow", lambda r: [r.ints(-4, 5, 5)], {"exponent": 2})
case("div_by_zero", "div", lambda r: [f64(1.0, -1.0, 0.0, 2.0), f64(0.0, 0.0, 0.0, -0.0)], grad=False)
case("floor_divide_float", "floor_divide", lambda r: [f64(-7.5, 7.5, -1.0, 3.0), f64(2.0, -2.0, 3.0, 2.0)], grad=False)
case("remainder_float", "remainder", lambda r: [f64(-7.5, 7.5, -1.0, 3.25), f64(2.0, -2.0, 3.0, 2.0)])
case("std_single_unbiased", "std", lambda r: [f64(1.5)], {"unbiased": True}, grad=False)
case("var_f32_offset", "var", lambda r: [1000 + r.randn(8, dtype=F32) * 0.01], {"dim": 0, "unbiased": True,
                                                                              "keepdim": False})
case("logsumexp_all_neg_inf", "logsumexp", lambda r: [f64(-INF, -INF, 1.0, 2.0).reshape(2, 2)],
     {"dim": 1, "keepdim": False}, grad=False)
case("softmax_all_neg_inf_row", "softmax", lambda r: [f64(-INF, -INF, 1.0, 2.0).reshape(2, 2)], {"dim": 1}, grad=False)
case("exp_f32_overflow", "exp", lambda r: [torch.tensor([100.0, -200.0, 88.0])], grad=False)
# int64 0 negated is still 0: through a float op it must give rsqrt(+0) = +inf, not rsqrt(-0) = -inf.
case("int64_neg_zero_then_rsqrt", "neg", lambda r: [torch.tensor([0, -2, -4])],
     then=[{"op": "mul", "args": {"other": 0.5}}, {"op": "rsqrt"}])
case("int64_mul_neg_zero_then_rsqrt", "mul", lambda r: [torch.tensor([0, 3])], {"other": -1},
     then=[{"op": "mul", "args": {"other": 0.5}}, {"op": "rsqrt"}])
case("sqrt_int64", "sqrt", lambda r: [torch.tensor([0, 1, 4, 7])])
case("log_int64", "log", lambda r: [torch.tensor([1, 2, 10])])
case("exp_bool", "exp", lambda r: [torch.tensor([True, False])])
case("promote_int64_plus_bool_scalar", "add", lambda r: [r.ints(-3, 3, 4)], {"other": True})
case("bool_plus_bool", "add", lambda r: [torch.tensor([True, False, False]), torch.tensor([True, True, False])])
case("bool_mul_bool", "mul", lambda r: [torch.tensor([True, False, True]), torch.tensor([True, True, False])])
case("cumsum_bool_to_int64", "cumsum", lambda r: [r.mask(6)], {"dim": 0})
case("one_hot_infer_classes", "one_hot", lambda r: [torch.tensor([0, 3, 1])], {"num_classes": -1})
case("split_size_gt_dim", "split", lambda r: [r.randn(3, 2)], {"split_size_or_sections": 5, "dim": 0})
case("chunk_5_into_3", "chunk", lambda r: [r.randn(5)], {"chunks": 3, "dim": 0})
case("getitem_out_of_range_slice", "getitem", lambda r: [r.randn(4, 3)],
     {"index": [{"start": -10, "stop": 100, "step": 3}, {"start": 1, "stop": None, "step": None}]})
case("narrow_neg_start", "narrow", lambda r: [r.randn(5, 2)], {"dim": 0, "start": -3, "length": 2})
case("embedding_padding_idx", "embedding", lambda r: [torch.tensor([0, 2, 0, 1]), r.randn(3, 2)], {"padding_idx": 0})
case("cross_entropy_weight_mean_ignore", "cross_entropy",
     lambda r: [r.randn(5, 3), torch.tensor([2, -100, 0, 1, 2]), pos(r, 3)], {"reduction": "mean", "ignore_index": -100},
     no_grad=(2,))
case("cross_entropy_weight_none", "cross_entropy",
     lambda r: [r.randn(4, 3), torch.tensor([2, 1, 0, 1]), pos(r, 3)], {"reduction": "none", "ignore_index": -100},
     no_grad=(2,))
for red in ["mean", "sum", "none"]:
    case(f"cross_entropy_label_smoothing_{red}", "cross_entropy",
         lambda r: [r.randn(4, 5), torch.tensor([1, -100, 4, 0])],
         {"reduction": red, "ignore_index": -100, "label_smoothing": 0.1})
case("cross_entropy_3d_label_smoothing", "cross_entropy",
     lambda r: [r.randn(2, 4, 3), torch.tensor([[0, 3, -100], [1, 1, 2]])],
     {"reduction": "mean", "ignore_index": -100, "label_smoothing": 0.2})
case("cross_entropy_prob_target", "cross_entropy",
     lambda r: [r.randn(3, 4), torch.softmax(r.randn(3, 4), dim=-1)], {"reduction": "mean", "ignore_index": -100},
     no_grad=(1,))
case("cross_entropy_all_ignored_mean", "cross_entropy",
     lambda r: [r.randn(2, 3), torch.tensor([-100, -100])], {"reduction": "mean", "ignore_index": -100}, grad=False)
case("sdpa_scale", "scaled_dot_product_attention",
     lambda r: [r.randn(1, 2, 3, 4), r.randn(1, 2, 3, 4), r.randn(1, 2, 3, 4)], {"is_causal": False, "scale": 0.3},
     note=SDPA_NOTE)
case("sdpa_causal_L_lt_S", "scaled_dot_product_attention",
     lambda r: [r.randn(1, 1, 2, 4), r.randn(1, 1, 4, 4), r.randn(1, 1, 4, 2)], {"is_causal": True},
     note=SDPA_NOTE + "; causal mask top-left aligned: torch.ones(L, S).tril(0), as torch 2.x")


def write(path):
    lines = [json.dumps(c, separators=(",", ":"), allow_nan=False) for c in CASES]
    with open(path, "w") as f:
        f.write('{"torch_version":' + json.dumps(torch.__version__) + ',"cases":[\n')
        f.write(",\n".join(lines))
        f.write("\n]}\n")
    print(f"wrote {len(CASES)} cases, {os.path.getsize(path)} bytes to {path}")


if __name__ == "__main__":
    write(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops.json"))
