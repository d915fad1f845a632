"""
Goldens for tests/core/free_functions.test.ts, from PyTorch 1.13 (run with /usr/bin/python3):
- free_functions_goldens.json: the calls whose Loom form is not just a method call: a scalar
  first operand (torch wraps the Python scalar), where() with two scalars, round(decimals),
  keyword forms (var(x, False), norm(x, 'fro', dim=1), add(..., alpha=)...). Each case stores
  the torch call (name, positional args with {"t": i} for input tensor i, kwargs), the inputs,
  the output and, for float inputs that require grad, d(sum(out * w))/d(input) with
  w = 1, 2, ..., numel (row-major), so each output element is weighted differently.
  Python scalars are chosen so that JSON keeps their kind: floats are non-integral (2.5, not
  2.0: a JS number 2.0 is the integer 2).
- torch_top_level.json: the callable top-level names of torch (dir(torch), no leading "_",
  no classes), which the coverage test intersects with the Tensor methods.
"""
import inspect
import json
import os

import torch

T = torch.tensor
D = torch.float64
HERE = os.path.dirname(os.path.abspath(__file__))

x64 = lambda: T([[1.5, -2.25, 0.5], [3.0, 0.75, -1.0]], dtype=D)
pos64 = lambda: T([[0.5, 1.25, 2.0], [1.5, 0.25, 3.0]], dtype=D)
i64 = lambda: T([[1, -2, 3], [4, 5, -6]])
f32 = lambda: T([1.5, -2.5, 3.25])
cond = lambda: T([[True, False, True], [False, True, True]])

# name: (torch function, inputs, args (ints index inputs via {"t": i}), kwargs)
CASES = {
    "add scalar first, int tensor": ("add", [i64()], [2, {"t": 0}], {}),
    "add float scalar first, int tensor": ("add", [i64()], [2.5, {"t": 0}], {}),
    "add scalar first, alpha": ("add", [x64()], [1.5, {"t": 0}], {"alpha": 2.5}),
    "add tensors, alpha": ("add", [x64(), pos64()], [{"t": 0}, {"t": 1}], {"alpha": -0.5}),
    "add int tensors, int alpha": ("add", [i64(), i64()], [{"t": 0}, {"t": 1}], {"alpha": 3}),
    "sub scalar first": ("sub", [x64()], [2.5, {"t": 0}], {}),
    "sub scalar first, alpha, int": ("sub", [i64()], [7, {"t": 0}], {"alpha": 2}),
    "sub tensor, scalar, alpha": ("sub", [x64()], [{"t": 0}, 1.5], {"alpha": 0.5}),
    "rsub tensor, scalar, alpha": ("rsub", [x64()], [{"t": 0}, 1.5], {"alpha": 2.5}),
    "mul scalar first, int": ("mul", [i64()], [3, {"t": 0}], {}),
    "mul float scalar first, int": ("mul", [i64()], [0.5, {"t": 0}], {}),
    "mul scalar first, float32": ("mul", [f32()], [-1.5, {"t": 0}], {}),
    "div scalar first": ("div", [pos64()], [3.5, {"t": 0}], {}),
    "div int scalar first, int": ("div", [i64()], [7, {"t": 0}], {}),
    "div scalar first, floor": ("div", [i64()], [7, {"t": 0}], {"rounding_mode": "floor"}),
    "div scalar first, trunc": ("div", [i64()], [-7, {"t": 0}], {"rounding_mode": "trunc"}),
    "floor_divide scalar first": ("floor_divide", [i64()], [7, {"t": 0}], {}),
    "remainder scalar first, int": ("remainder", [i64()], [7, {"t": 0}], {}),
    "remainder scalar first, float": ("remainder", [pos64()], [2.5, {"t": 0}], {}),
    "pow scalar first, int": ("pow", [T([0, 1, 2, 5])], [2, {"t": 0}], {}),
    "pow scalar first, float": ("pow", [x64()], [2.5, {"t": 0}], {}),
    "pow float scalar first, int exponent": ("pow", [T([0, 1, 2, 5])], [1.5, {"t": 0}], {}),
    "pow scalar first, float32": ("pow", [f32()], [0.5, {"t": 0}], {}),
    "where two int scalars": ("where", [cond()], [{"t": 0}, 3, -1], {}),
    "where float and int scalar": ("where", [cond()], [{"t": 0}, 1.5, 0], {}),
    "where two bool scalars": ("where", [cond()], [{"t": 0}, True, False], {}),
    "where scalar first": ("where", [cond(), x64()], [{"t": 0}, 0.5, {"t": 1}], {}),
    "round decimals 2": ("round", [T([[1.2345, -15.5], [0.125, 2.675]], dtype=D)], [{"t": 0}], {"decimals": 2}),
    "round decimals -1": ("round", [T([[1.2345, -15.5], [25.0, 35.0]], dtype=D)], [{"t": 0}], {"decimals": -1}),
    "round decimals 1 float32": ("round", [T([0.25, -0.35, 12.05])], [{"t": 0}], {"decimals": 1}),
    "var unbiased positional": ("var", [x64()], [{"t": 0}, False], {}),
    "var dim unbiased keepdim": ("var", [x64()], [{"t": 0}, 1, False, True], {}),
    "var correction keyword": ("var", [x64()], [{"t": 0}], {"dim": 0, "correction": 0}),
    "std dim keyword": ("std", [x64()], [{"t": 0}], {"dim": 1, "keepdim": True}),
    "norm fro dim": ("norm", [x64()], [{"t": 0}, "fro"], {"dim": 1}),
    "norm default": ("norm", [x64()], [{"t": 0}], {}),
    "norm p=1 keepdim": ("norm", [x64()], [{"t": 0}], {"p": 1, "dim": 0, "keepdim": True}),
    "sum keyword dim dtype": ("sum", [i64()], [{"t": 0}], {"dim": 1, "dtype": torch.float32}),
    "mean keyword dims": ("mean", [x64()], [{"t": 0}], {"dim": [0, 1], "keepdim": True}),
    "clamp keyword max": ("clamp", [x64()], [{"t": 0}], {"max": 0.5}),
    "clamp keyword min": ("clamp", [x64()], [{"t": 0}], {"min": -1.0 + 0.5}),
    "index_add alpha": ("index_add", [T([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]], dtype=D), T([2, 0]), T([[1.0, 2.0], [3.0, 4.0]], dtype=D)],
                        [{"t": 0}, 0, {"t": 1}, {"t": 2}], {"alpha": 2.5}),
    "cumsum keyword dim": ("cumsum", [x64()], [{"t": 0}], {"dim": 1}),
    "max keyword dim": ("max", [x64()], [{"t": 0}], {"dim": 1, "keepdim": True}),
    "argmin keyword dim": ("argmin", [x64()], [{"t": 0}], {"dim": 0}),
    "logsumexp keyword": ("logsumexp", [x64()], [{"t": 0}], {"dim": 1}),
    "split keyword dim": ("split", [x64()], [{"t": 0}, 2], {"dim": 1}),
    "chunk keyword dim": ("chunk", [x64()], [{"t": 0}, 2], {"dim": 1}),
    "flatten keyword": ("flatten", [x64().reshape(2, 3, 1)], [{"t": 0}], {"start_dim": 1}),
    "squeeze keyword": ("squeeze", [x64().reshape(2, 1, 3)], [{"t": 0}], {"dim": 1}),
}

DT = {torch.float32: "float32", torch.float64: "float64", torch.int64: "int64", torch.bool: "bool"}


def arr(t):
    return {"dtype": DT[t.dtype], "shape": list(t.shape), "data": t.detach().flatten().tolist()}


def main():
    out = {"torch": torch.__version__, "cases": {}}
    for name, (fn, inputs, args, kwargs) in CASES.items():
        leaves = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
        call = [leaves[a["t"]] if isinstance(a, dict) else a for a in args]
        r = getattr(torch, fn)(*call, **kwargs)
        outs = list(r) if isinstance(r, (tuple, list)) else [r]
        loss = None
        for o in outs:
            if o.is_floating_point() and o.requires_grad:
                w = torch.arange(1, o.numel() + 1, dtype=o.dtype).reshape(o.shape)
                s = (o * w).sum()
                loss = s if loss is None else loss + s
        grads = [None] * len(leaves)
        if loss is not None:
            try:
                loss.backward()
                grads = [arr(l.grad) if l.grad is not None else None for l in leaves]
            except RuntimeError:  # remainder(scalar, t): torch has no derivative for the divisor
                grads = None
        kw = {k: (DT[v] if isinstance(v, torch.dtype) else v) for k, v in kwargs.items()}
        out["cases"][name] = {"fn": fn, "args": args, "kwargs": kw, "inputs": [arr(t) for t in inputs],
                              "outs": [arr(o) for o in outs], "grads": grads}
    with open(os.path.join(HERE, "free_functions_goldens.json"), "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"))
        f.write("\n")
    names = sorted(n for n in dir(torch) if not n.startswith("_")
                   and callable(getattr(torch, n)) and not inspect.isclass(getattr(torch, n)))
    with open(os.path.join(HERE, "torch_top_level.json"), "w") as f:
        json.dump({"torch": torch.__version__, "names": names}, f, indent=0)
        f.write("\n")


if __name__ == "__main__":
    main()
