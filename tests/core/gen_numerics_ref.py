"""
Reference values for tests/core/numerics.test.ts, computed with PyTorch (CPU, float32 unless noted).
Run: /usr/bin/python3 tests/core/gen_numerics_ref.py  (writes tests/core/numerics_ref.json)
"""
import json
import math
import os

import torch

out = {"torch": torch.__version__}

# log_softmax at large logits: torch subtracts the max first, then log(sum(exp)).
logits = torch.tensor([
    [120.0, 119.37, -120.0, 0.1, 118.9],
    [1.0e4, 9999.37, -1.0e4, 9998.9, 0.0],
    [-1.0e4, -9999.37, -1.0e4 + 0.5, -9998.9, -1.0e4 + 3.3],
], dtype=torch.float32)
out["log_softmax"] = {"x": logits.tolist(), "y": torch.log_softmax(logits, 1).tolist()}

# layer_norm of constant rows (12345.678 in float32) and of a shifted random row set.
g = torch.Generator().manual_seed(0)
const = torch.full((3, 16), 12345.678, dtype=torch.float32)
w = torch.linspace(0.5, 2.0, 16)
b = torch.linspace(-1.0, 1.0, 16)
out["layer_norm_const"] = {
    "y": torch.nn.functional.layer_norm(const, [16]).tolist(),
    "y_affine": torch.nn.functional.layer_norm(const, [16], w, b).tolist(),
    "w": w.tolist(), "b": b.tolist(),
}
xr = (torch.randn(4, 64, generator=g) + 1.0e4).float()
w64, b64 = torch.linspace(0.5, 2.0, 64), torch.linspace(-1.0, 1.0, 64)
# the float32 inputs normalized in float64: torch's own float32 result is ~1e-3 off here (its
# x·rstd - mean·rstd form rounds x·rstd ≈ 1e4 to ulp 1e-3)
y64 = torch.nn.functional.layer_norm(xr.double(), [64], w64.double(), b64.double())
out["layer_norm_shifted"] = {"x": xr.tolist(), "w": w64.tolist(), "b": b64.tolist(), "y": y64.tolist()}

def grad_of(f, *xs):
    xs = [x.clone().requires_grad_() for x in xs]
    f(*xs).sum().backward()
    return [x.grad.tolist() if x.grad is not None else None for x in xs]

nanx = torch.tensor([float("nan"), -2.0, 0.0, 3.0, -0.0])
out["nan"] = {
    "sign": torch.sign(nanx).tolist(),
    "abs_grad": grad_of(torch.abs, nanx)[0],
    "relu_grad": grad_of(torch.relu, nanx)[0],
    "clamp_grad": grad_of(lambda x: x.clamp(-1, 1), nanx)[0],
    "clamp_min_grad": grad_of(lambda x: x.clamp(min=-1), nanx)[0],
    "clamp": nanx.clamp(-1, 1).tolist(),
    "logical_not": torch.logical_not(torch.tensor([float("nan"), 0.0, 1.0])).tolist(),
    "logical_and": torch.logical_and(torch.tensor([float("nan"), float("nan"), 0.0]), torch.tensor([1.0, 0.0, float("nan")])).tolist(),
    "logical_or": torch.logical_or(torch.tensor([float("nan"), 0.0, 0.0]), torch.tensor([0.0, 0.0, float("nan")])).tolist(),
}
pa, pb = torch.tensor([0.0, 0.0, 0.0, 2.0]), torch.tensor([2.0, 0.0, -1.0, 3.0])
ga, gb = grad_of(torch.pow, pa, pb)
out["pow_grad"] = {"a": pa.tolist(), "b": pb.tolist(), "ga": ga, "gb": gb}
nx = torch.tensor([1.0, 0.0, -3.0, 0.5, 2.0])
out["norm"] = {
    "x": nx.tolist(),
    "p0": torch.linalg.vector_norm(nx, 0).item(),
    "pninf": torch.linalg.vector_norm(nx, -math.inf).item(),
    "pninf_grad": grad_of(lambda x: torch.linalg.vector_norm(x, -math.inf), nx)[0],
    "p0_grad": grad_of(lambda x: torch.linalg.vector_norm(x, 0), nx)[0],
    "pinf_empty": torch.zeros(0).norm(math.inf).item(),
}
dx, dy = torch.tensor([1.0, 5.0, -3.0, -7.5]), torch.tensor([2.0, 2.0, 2.0, -2.0])
out["div"] = {
    "x": dx.tolist(), "y": dy.tolist(),
    "floor": torch.div(dx, dy, rounding_mode="floor").tolist(),
    "trunc": torch.div(dx, dy, rounding_mode="trunc").tolist(),
    "floor_grad": grad_of(lambda a, c: torch.div(a, c, rounding_mode="floor"), dx, dy),
    "trunc_grad": grad_of(lambda a, c: torch.div(a, c, rounding_mode="trunc"), dx, dy),
    "int_trunc": torch.div(torch.tensor([7, -7, 7, -7, 6]), torch.tensor([2, 2, -2, -2, 3]), rounding_mode="trunc").tolist(),
}
ar = {}
for dt in ["int64", "int32"]:
    for args in [(0, 3.1), (0.5, 3.7, 1.5), (0, 3.9, 1.9), (0, 10, 3), (5, -1.5, -2)]:
        ar[f"{dt} {args}"] = torch.arange(*args, dtype=getattr(torch, dt)).tolist()
out["arange"] = ar
out["empty"] = {
    "any": torch.tensor([]).any().item(), "all": torch.tensor([]).all().item(),
    "logsumexp": torch.logsumexp(torch.zeros(0), 0).item(),
}

def finite_json(v):
    """JSON has no NaN/Infinity: non-finite floats become the strings "nan", "inf", "-inf"."""
    if isinstance(v, dict):
        return {k: finite_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [finite_json(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


out = finite_json(out)
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "numerics_ref.json")
with open(path, "w") as f:
    json.dump(out, f, allow_nan=False)
    f.write("\n")
print("wrote", path)
