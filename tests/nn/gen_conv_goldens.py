"""Golden values for tests/nn/conv_pool_norm.test.ts from PyTorch (run with torch 1.13:
/usr/bin/python3 tests/nn/gen_conv_goldens.py).

Writes conv_goldens.json next to this file. Inputs are not stored: every input, weight, bias
and grad_output is `pattern(shape, seed, scale)`, element i = ((i*37 + seed*101) % 113 - 56) / scale,
which the test rebuilds bit for bit (dyadic values, exact in float32; convolution sums of them are
exact too, so conv outputs do not depend on the summation order). Floats are written with 9
significant digits (float32 round trip).
- "conv": F.conv1d / F.conv2d (padding_mode cases: torch's module path, F.pad then conv with
  padding 0): output and the gradients of sum(out * grad_output) w.r.t. input, weight, bias.
- "pool": max/avg/adaptive pooling, unfold and fold: output, input gradient, indices.
- "batchnorm": BatchNorm1d/2d modules with pattern weight/bias, trained on `steps` inputs
  (seeds 0..), then evaluated on seed 10: step-0 output and gradients, running stats after every
  step, num_batches_tracked, eval output.
- "groupnorm": F.group_norm output and gradients.
"""
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


def pattern(shape, seed, scale=64.0):
    n = 1
    for s in shape:
        n *= s
    vals = [((i * 37 + seed * 101) % 113 - 56) / scale for i in range(n)]
    return torch.tensor(vals, dtype=torch.float32).reshape(shape)


def arr(t):
    t = t.detach()
    if t.is_floating_point():
        data = [float(f"{v:.9g}") for v in t.flatten().tolist()]
    else:
        data = [int(v) for v in t.flatten().tolist()]
    return {"shape": list(t.shape), "data": data}


def with_grads(fn, tensors, gseed=7):
    leaves = [t.clone().requires_grad_(True) if t is not None else None for t in tensors]
    out = fn(*leaves)
    values = out[0] if isinstance(out, tuple) else out
    gout = pattern(list(values.shape), gseed)
    (values * gout).sum().backward()
    return out, [l.grad if l is not None else None for l in leaves]


conv_cases = []


def conv(name, fn, x_shape, w_shape, bias=True, mode="zeros", **opts):
    x = pattern(x_shape, 1)
    w = pattern(w_shape, 2, 128.0)
    b = pattern([w_shape[0]], 3) if bias else None
    n = len(w_shape) - 2
    f = getattr(F, fn)

    def run(x, w, b):
        if mode == "zeros":
            return f(x, w, b, **opts)
        # torch's _ConvNd._conv_forward for padding_mode != "zeros"
        p = opts.get("padding", 0)
        p = [p] * n if isinstance(p, int) else list(p)
        rev = [v for v in reversed(p) for _ in range(2)]
        rest = {k: v for k, v in opts.items() if k != "padding"}
        return f(F.pad(x, rev, mode=mode), w, b, padding=0, **rest)

    out, (gx, gw, gb) = with_grads(run, [x, w, b])
    case = {"name": name, "fn": fn, "x": x_shape, "w": w_shape, "bias": bias, "options": dict(opts),
            "output": arr(out), "input_grad": arr(gx), "weight_grad": arr(gw)}
    if mode != "zeros":
        case["options"]["padding_mode"] = mode
    if bias:
        case["bias_grad"] = arr(gb)
    conv_cases.append(case)


conv("c1_basic", "conv1d", [2, 4, 9], [6, 4, 3])
conv("c1_stride_pad", "conv1d", [2, 4, 9], [6, 4, 3], stride=2, padding=1)
conv("c1_dilation", "conv1d", [2, 3, 10], [4, 3, 3], dilation=2, padding=2)
conv("c1_groups", "conv1d", [2, 4, 8], [6, 2, 3], groups=2, padding=1)
conv("c1_depthwise", "conv1d", [2, 4, 8], [8, 1, 3], groups=4, padding=1, stride=2)
conv("c1_same_even", "conv1d", [2, 3, 7], [5, 3, 4], bias=False, padding="same")
conv("c1_same_dilated", "conv1d", [1, 2, 9], [3, 2, 3], padding="same", dilation=2)
conv("c1_valid", "conv1d", [2, 3, 8], [2, 3, 5], padding="valid")
conv("c1_unbatched", "conv1d", [4, 9], [3, 4, 2], stride=3)
conv("c1_reflect", "conv1d", [2, 3, 6], [4, 3, 3], mode="reflect", padding=2)
conv("c1_replicate", "conv1d", [2, 3, 6], [4, 3, 3], mode="replicate", padding=2)
conv("c1_circular", "conv1d", [2, 3, 6], [4, 3, 3], mode="circular", padding=1)
conv("c2_basic", "conv2d", [2, 3, 6, 5], [4, 3, 3, 3], padding=1)
conv("c2_stride_tuple", "conv2d", [2, 3, 7, 6], [4, 3, 3, 2], stride=(2, 1), padding=(1, 0))
conv("c2_dilation", "conv2d", [1, 2, 7, 7], [3, 2, 3, 3], dilation=(2, 1), padding=(2, 1), stride=(1, 2))
conv("c2_groups", "conv2d", [1, 6, 5, 5], [6, 2, 3, 3], groups=3)
conv("c2_depthwise", "conv2d", [2, 4, 5, 6], [8, 1, 3, 3], groups=4, stride=2, padding=1)
conv("c2_same", "conv2d", [1, 3, 5, 6], [2, 3, 4, 3], padding="same", bias=False)
conv("c2_1x1", "conv2d", [2, 5, 3, 4], [3, 5, 1, 1])
conv("c2_unbatched", "conv2d", [3, 5, 5], [2, 3, 2, 2], stride=2)
conv("c2_reflect", "conv2d", [1, 2, 5, 4], [3, 2, 3, 3], mode="reflect", padding=1)
conv("c2_circular", "conv2d", [1, 2, 5, 4], [3, 2, 3, 3], mode="circular", padding=(1, 2))

pool_cases = []


def pool(name, fn, x_shape, args, coarse=False, indices=False, **opts):
    x = pattern(x_shape, 4)
    if coarse:  # many ties: which element of a window gets the gradient is torch's first maximum
        x = torch.round(x * 2) / 2
    f = getattr(F, fn)
    out, (gx,) = with_grads(lambda x: f(x, *args, **opts), [x])
    case = {"name": name, "fn": fn, "x": x_shape, "coarse": coarse, "args": list(args), "options": dict(opts),
            "output": arr(out[0] if isinstance(out, tuple) else out), "input_grad": arr(gx)}
    if indices:
        case["indices"] = arr(out[1])
    pool_cases.append(case)


pool("max1d_k3s2p1", "max_pool1d", [2, 3, 9], [3], stride=2, padding=1)
pool("max1d_default_stride", "max_pool1d", [2, 2, 8], [2])
pool("max1d_dilation_ceil", "max_pool1d", [1, 2, 10], [3], stride=2, dilation=2, ceil_mode=True, padding=1)
pool("max1d_indices", "max_pool1d", [2, 2, 7], [3], indices=True, stride=2, padding=1, return_indices=True)
pool("max1d_unbatched", "max_pool1d", [3, 8], [2], stride=3, ceil_mode=True)
pool("max2d_tuple", "max_pool2d", [2, 2, 6, 5], [(3, 2)], stride=(2, 1), padding=(1, 0))
pool("max2d_ceil", "max_pool2d", [1, 3, 7, 6], [3], stride=2, ceil_mode=True)
pool("max2d_dilation", "max_pool2d", [1, 2, 8, 7], [2], stride=1, dilation=(2, 3), padding=1)
pool("max2d_indices", "max_pool2d", [2, 2, 5, 5], [3], indices=True, stride=2, padding=1, return_indices=True)
pool("max2d_ties", "max_pool2d", [1, 2, 6, 6], [3], coarse=True, stride=1)
pool("avg1d_pad", "avg_pool1d", [2, 3, 9], [3], stride=2, padding=1)
pool("avg1d_no_count_pad", "avg_pool1d", [2, 3, 9], [3], stride=2, padding=1, count_include_pad=False)
pool("avg1d_ceil", "avg_pool1d", [1, 2, 8], [3], stride=2, padding=1, ceil_mode=True)
pool("avg1d_ceil_no_count", "avg_pool1d", [1, 2, 8], [3], stride=2, padding=1, ceil_mode=True, count_include_pad=False)
pool("avg2d_pad", "avg_pool2d", [2, 2, 6, 5], [3], stride=2, padding=1)
pool("avg2d_ceil_no_count", "avg_pool2d", [1, 3, 7, 6], [(3, 2)], stride=(2, 2), padding=(1, 1), ceil_mode=True, count_include_pad=False)
pool("avg2d_ceil_count", "avg_pool2d", [1, 2, 7, 7], [3], stride=2, padding=1, ceil_mode=True)
pool("avg2d_divisor", "avg_pool2d", [1, 2, 5, 5], [2], divisor_override=3)
pool("avg2d_unbatched", "avg_pool2d", [2, 5, 4], [2], stride=1)
pool("aavg1d_7to3", "adaptive_avg_pool1d", [2, 3, 7], [3])
pool("aavg1d_5to5", "adaptive_avg_pool1d", [1, 2, 5], [5])
pool("aavg1d_4to6", "adaptive_avg_pool1d", [1, 2, 4], [6])
pool("aavg2d_7x5to3x2", "adaptive_avg_pool2d", [2, 2, 7, 5], [(3, 2)])
pool("aavg2d_none", "adaptive_avg_pool2d", [1, 2, 5, 6], [(None, 4)])
pool("aavg2d_1", "adaptive_avg_pool2d", [2, 3, 4, 5], [1])
pool("amax1d_7to3", "adaptive_max_pool1d", [2, 2, 7], [3], indices=True, return_indices=True)
pool("amax2d_7x5to3x2", "adaptive_max_pool2d", [1, 2, 7, 5], [(3, 2)], indices=True, return_indices=True)
pool("unfold", "unfold", [2, 2, 5, 4], [(2, 3)], stride=(2, 1), padding=1, dilation=(1, 1))
pool("unfold_dilated", "unfold", [1, 3, 6, 6], [2], dilation=2, stride=2)
pool("fold", "fold", [2, 12, 12], [(5, 4), (2, 3)], stride=(2, 1), padding=1)

bn_cases = []


def batchnorm(name, cls, C, shape, steps=3, **opts):
    torch.manual_seed(0)
    m = getattr(nn, cls)(C, **opts)
    if m.affine:
        with torch.no_grad():
            m.weight.copy_(pattern([C], 5, 32.0) + 1)
            m.bias.copy_(pattern([C], 6))
    m.train()
    case = {"name": name, "cls": cls, "C": C, "shape": shape, "steps": steps, "options": dict(opts), "running": []}
    for s in range(steps):
        x = pattern(shape, s).requires_grad_(True)
        y = m(x)
        if s == 0:
            (y * pattern(shape, 7)).sum().backward()
            case["output"] = arr(y)
            case["input_grad"] = arr(x.grad)
            if m.affine:
                case["weight_grad"] = arr(m.weight.grad)
                case["bias_grad"] = arr(m.bias.grad)
        if m.track_running_stats:
            case["running"].append({"mean": arr(m.running_mean), "var": arr(m.running_var), "n": int(m.num_batches_tracked)})
    m.eval()
    case["eval_output"] = arr(m(pattern(shape, 10)))
    bn_cases.append(case)


batchnorm("bn1d_2d", "BatchNorm1d", 4, [5, 4])
batchnorm("bn1d_3d", "BatchNorm1d", 3, [4, 3, 5], momentum=0.3, eps=1e-3)
batchnorm("bn1d_cumulative", "BatchNorm1d", 3, [6, 3], momentum=None)
batchnorm("bn2d", "BatchNorm2d", 3, [2, 3, 4, 3])
batchnorm("bn2d_cumulative", "BatchNorm2d", 2, [3, 2, 3, 3], momentum=None, steps=4)
batchnorm("bn2d_no_affine", "BatchNorm2d", 2, [2, 2, 3, 4], affine=False)
batchnorm("bn1d_no_stats", "BatchNorm1d", 3, [4, 3, 2], track_running_stats=False, steps=1)

gn_cases = []


def groupnorm(name, G, shape, affine=True, eps=1e-5):
    C = shape[1]
    x = pattern(shape, 8)
    w = pattern([C], 5, 32.0) + 1 if affine else None
    b = pattern([C], 6) if affine else None
    out, (gx, gw, gb) = with_grads(lambda x, w, b: F.group_norm(x, G, w, b, eps), [x, w, b])
    case = {"name": name, "G": G, "shape": shape, "affine": affine, "eps": eps, "output": arr(out), "input_grad": arr(gx)}
    if affine:
        case["weight_grad"] = arr(gw)
        case["bias_grad"] = arr(gb)
    gn_cases.append(case)


groupnorm("gn_3d", 3, [2, 6, 5])
groupnorm("gn_4d", 2, [2, 4, 3, 3])
groupnorm("gn_one_group", 1, [3, 4, 2], eps=1e-3)
groupnorm("gn_instance", 4, [2, 4, 5], affine=False)

out = {"conv": conv_cases, "pool": pool_cases, "batchnorm": bn_cases, "groupnorm": gn_cases}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conv_goldens.json")
with open(path, "w") as f:
    json.dump(out, f, separators=(",", ":"))
print(f"wrote {path}: {len(conv_cases)} conv, {len(pool_cases)} pool, {len(bn_cases)} batchnorm, {len(gn_cases)} groupnorm cases")
