#!/usr/bin/python3
"""PyTorch reference values for advanced indexing (tests/core/advanced_indexing.test.ts).

Run:  /usr/bin/python3 tests/core/gen_indexing_goldens.py   (writes tests/core/indexing_goldens.json)

x = arange(numel) * 0.25 - 1 reshaped to the case's shape (float32; every value, product and small
sum below is exact in float32, so Loom must match bit for bit). The upstream gradient of a result r
is g[i] = ((7 i) % 11 - 5) * 0.25 over r's row-major elements; grads are d/d input of sum(r * g).

Index items (JSON), as the TypeScript side spells them:
  {"i": n}                      integer                    x.index(n)
  {"s": [start, stop, step]}    slice (nulls allowed)      {start, stop, step}
  {"str": "1:"}                 slice as a string          "1:"
  {"none": 1}                   None / new axis            null
  {"e": 1}                      Ellipsis                   "..."
  {"l": nested}                 list (ints or bools)       nested JS array
  {"t": nested, "dtype": d}     index tensor (int64, int32, bool, uint8)
torch 1.13 rejects int32 index tensors (newer PyTorch accepts them with int64's meaning), so the
reference for an int32 tensor is computed with the same values as int64.

Cases
  get: r = x[items]; out + grad of x.
  put: r = x.index_put(indices, values, accumulate) (out of place); out + grads of x and values.
       indices entries are tensors, or {"none": 1} for a whole dim (Loom's null, C++ PyTorch's
       undefined tensor; the reference for (None, idx) uses arange(shape[0])[:, None] for it).
  set: y = x.clone(); y[items] = values; out only.
"""
import json
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def base(shape):
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n, dtype=torch.float32) * 0.25 - 1).reshape(shape)


def upstream(shape):
    n = 1
    for s in shape:
        n *= s
    return torch.tensor([((7 * i) % 11 - 5) * 0.25 for i in range(n)], dtype=torch.float32).reshape(shape)


DT = {"int64": torch.int64, "int32": torch.int64, "bool": torch.bool, "uint8": torch.uint8}


def to_torch(it):
    if "i" in it:
        return it["i"]
    if "s" in it:
        return slice(*it["s"])
    if "str" in it:
        parts = [int(p) if p.strip() else None for p in it["str"].split(":")]
        return slice(*parts)
    if "none" in it:
        return None
    if "e" in it:
        return Ellipsis
    if "l" in it:
        return it["l"]
    if "t" in it:
        return torch.tensor(it["t"], dtype=DT[it["dtype"]])
    raise ValueError(it)


def enc(t):
    return {"shape": list(t.shape), "data": t.detach().reshape(-1).tolist()}


def get_case(name, shape, items):
    x = base(shape).requires_grad_(True)
    r = x[tuple(to_torch(i) for i in items)]
    (r * upstream(r.shape)).sum().backward()
    return {"kind": "get", "name": name, "shape": shape, "items": items, "out": enc(r), "grad": enc(x.grad)}


def put_case(name, shape, indices, vshape, accumulate):
    x = base(shape).requires_grad_(True)
    v = (upstream(vshape) * 2 + 0.5).requires_grad_(True)
    # a leading null (whole dim 0) before one 1-D index is arange(shape[0])[:, None]: same result
    # shape and order (torch's Python index_put takes no None)
    idx = [torch.arange(shape[0]).reshape(-1, 1) if "none" in i else to_torch(i) for i in indices]
    r = x.index_put(tuple(idx), v, accumulate=accumulate)
    (r * upstream(r.shape)).sum().backward()
    return {"kind": "put", "name": name, "shape": shape, "items": indices, "vshape": vshape, "values": enc(v),
            "accumulate": accumulate, "out": enc(r), "grad": enc(x.grad), "vgrad": enc(v.grad)}


def set_case(name, shape, items, vshape):
    y = base(shape).clone()
    v = upstream(vshape) * 2 + 0.5
    y[tuple(to_torch(i) for i in items)] = v
    return {"kind": "set", "name": name, "shape": shape, "items": items, "vshape": vshape, "values": enc(v), "out": enc(y)}


L = lambda v: {"l": v}  # noqa: E731
T = lambda v, d="int64": {"t": v, "dtype": d}  # noqa: E731
S = lambda a=None, b=None, c=None: {"s": [a, b, c]}  # noqa: E731
N = {"none": 1}
E = {"e": 1}
I = lambda n: {"i": n}  # noqa: E731
STR = lambda s: {"str": s}  # noqa: E731
MASK23 = [[True, False, True], [False, False, True]]

cases = [
    get_case("x[[0,2]]", [3, 4], [L([0, 2])]),
    get_case("x[[0,2], 1:]", [3, 4], [L([0, 2]), STR("1:")]),
    get_case("x[:, [1,0,1]]", [3, 4], [S(), L([1, 0, 1])]),
    get_case("x[idx_tensor_2d]", [3, 4], [T([[0, 2], [1, 0]])]),
    get_case("x[[0,1],[1,2]]", [3, 4], [L([0, 1]), L([1, 2])]),
    get_case("x[:, [0,1], [1,2]] (adjacent: in place)", [2, 3, 4], [S(), L([0, 1]), L([1, 2])]),
    get_case("x[[0,1], :, [1,2]] (separated: first)", [2, 3, 4], [L([0, 1]), S(), L([1, 2])]),
    get_case("x[mask]", [2, 3], [T(MASK23, "bool")]),
    get_case("x[mask] of a 3-d x", [2, 3, 4], [T(MASK23, "bool")]),
    get_case("x[mask_row]", [3, 4], [L([True, False, True])]),
    get_case("x[:, mask_2d]", [2, 3, 4], [S(), T([[True, False, False, True], [False, True, False, False], [True, True, False, False]], "bool")]),
    get_case("x[mask all false]", [3, 4], [L([False, False, False])]),
    get_case("x[..., [0]]", [2, 3, 4], [E, L([0])]),
    get_case("x[None, [1]]", [3, 4], [N, L([1])]),
    get_case("x[[1,1,0,1]] (duplicates)", [3, 2], [L([1, 1, 0, 1])]),
    get_case("x[[-1,0], -2] (negative wrap)", [3, 4], [L([-1, 0]), I(-2)]),
    get_case("x[:, int32 [[3],[-4]]]", [3, 4], [S(), T([[3], [-4]], "int32")]),
    get_case("x[:, uint8 mask]", [3, 4], [S(), T([1, 0, 1, 1], "uint8")]),
    get_case("x[mask_row, [0,1]] (mask broadcast with a list)", [3, 4], [L([True, False, True]), L([0, 1])]),
    get_case("x[0, :, [0,1]] (int applied first: in place)", [2, 3, 4], [I(0), S(), L([0, 1])]),
    get_case("x[[0,1], None, [1,2]] (None separates: first)", [2, 3, 4], [L([0, 1]), N, L([1, 2])]),
    get_case("x[[0,1], 0, [1,2]] (int between: in place)", [2, 3, 4], [L([0, 1]), I(0), L([1, 2])]),
    get_case("x[1:, [[0],[2]], [1,3]] (broadcast [2,1] x [2])", [2, 3, 4], [S(1), L([[0], [2]]), L([1, 3])]),
    get_case("x[::2, [2,0]] (step slice)", [3, 4], [S(None, None, 2), L([2, 0])]),
    get_case("x[[]] (empty)", [3, 4], [L([])]),
    get_case("x[0-d tensor 1]", [3, 4], [T(1)]),
    get_case("x[[[0,1],[1,2]], ...] (nested list)", [3, 2], [L([[0, 1], [1, 2]]), E]),
    get_case("x[[2,0], [[1],[0]], [1,1]] (three adjacent)", [3, 2, 2], [L([2, 0]), L([[1], [0]]), L([1, 1])]),

    put_case("index_put [0,2]", [3, 4], [T([0, 2])], [2, 4], False),
    put_case("index_put [0,0,2] accumulate (duplicates)", [3, 4], [T([0, 0, 2])], [4], True),
    put_case("index_put ([0,1,0],[1,2,1]) accumulate", [3, 4], [T([0, 1, 0]), T([1, 2, 1])], [3], True),
    put_case("index_put ([0,1],[1,2]) broadcast scalar", [3, 4], [T([0, 1]), T([1, 2])], [], False),
    put_case("index_put mask", [3, 4], [T([[True, False, False, True], [False, False, False, False], [False, True, True, False]], "bool")], [], False),
    put_case("index_put row mask accumulate", [3, 4], [T([True, False, True], "bool")], [2, 4], True),
    put_case("index_put (null, [3,0])", [3, 4], [N, T([3, 0])], [3, 2], False),
    put_case("index_put (null, [3,3]) accumulate", [3, 4], [N, T([3, 3])], [3, 2], True),

    set_case("x[[0,2], 1:] = v", [3, 4], [L([0, 2]), STR("1:")], [3]),
    set_case("x[1:, [2,0]] = v", [3, 4], [S(1), L([2, 0])], [2, 1]),
    set_case("x[mask] = v", [2, 3], [T(MASK23, "bool")], [3]),
    set_case("x[0, :, [0,1]] = v", [2, 3, 4], [I(0), S(), L([0, 1])], [3, 2]),
    set_case("x[[0,1], :, [1,2]] = v", [2, 3, 4], [L([0, 1]), S(), L([1, 2])], [2, 3]),
    set_case("x[..., 1] = v (basic only)", [2, 3], [E, I(1)], [2]),
    set_case("x[None, 1:, ::2] = v (basic only)", [3, 4], [N, S(1), S(None, None, 2)], [2, 1]),
    set_case("x[::2, [1,1]] = v (duplicates: last wins)", [3, 4], [S(None, None, 2), L([1, 1])], [2, 2]),
]

out = {"torch_version": torch.__version__, "cases": cases}
with open(os.path.join(HERE, "indexing_goldens.json"), "w") as f:
    json.dump(out, f, separators=(",", ":"))
print(f"wrote {len(cases)} cases")
