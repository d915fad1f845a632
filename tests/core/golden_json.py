"""Tensors as the JSON the tests in this folder read (shared by the golden generators here):
{"shape", "dtype", "data"}, row-major; non-finite floats as "inf", "-inf", "nan" (JSON has none).
"""
import math

import torch

DT = {torch.float32: "float32", torch.float64: "float64", torch.int64: "int64", torch.int32: "int32", torch.bool: "bool"}


def fnum(v):
    """A float, or "inf" / "-inf" / "nan"."""
    v = float(v)
    return v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))


def arr(t):
    t = t.detach()
    conv = fnum if t.is_floating_point() else (bool if t.dtype == torch.bool else int)
    return {"shape": list(t.shape), "dtype": DT[t.dtype], "data": [conv(v) for v in t.flatten().tolist()]}
