"""Golden values for tests/nn/losses.test.ts from PyTorch (run with torch 1.13:
/usr/bin/python3 tests/nn/gen_loss_goldens.py).

Writes loss_goldens.json next to this file:
- "losses": per case, the torch.nn.functional loss name, its keyword options (tensor options such
  as weight / pos_weight as arrays), input, target, the output, a cotangent grad_output, and the
  gradients of sum(out * grad_output) w.r.t. input (and target where it is floating and
  "target_grad" is recorded). "values_only" cases record no gradients (torch's hand-written BCE
  backward divides by max(x(1-x), 1e-12) at x in {0, 1}, where the composite's gradient is the
  true derivative).
- "modules": the small modules (LeakyReLU, Softmax, LogSoftmax, Flatten, Unflatten): constructor
  arguments, input, output, grad_output, input gradient and str(module).
Tensors are {"shape", "dtype", "data"} with data flattened row-major; float32 values are written
as the exact doubles of the float32 numbers.
"""
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(1616)


def arr(t):
    t = t.detach()
    dtype = {torch.float32: "float32", torch.int64: "int64", torch.float64: "float64"}[t.dtype]
    data = [float(v) if t.is_floating_point() else int(v) for v in t.flatten().tolist()]
    # JSON has no NaN/inf: write them as strings the test decodes
    data = [v if not (isinstance(v, float) and not math.isfinite(v)) else str(v) for v in data]
    return {"shape": list(t.shape), "dtype": dtype, "data": data}


def loss_case(name, fn, x, y, target_grad=True, values_only=False, **kwargs):
    xin = x.clone().requires_grad_(not values_only)
    yin = y.clone().requires_grad_(target_grad and y.is_floating_point() and not values_only)
    out = getattr(F, fn)(xin, yin, **kwargs)
    case = {"name": name, "fn": fn, "options": {k: (arr(v) if torch.is_tensor(v) else v) for k, v in kwargs.items()},
            "input": arr(x), "target": arr(y), "output": arr(out)}
    if not values_only:
        gout = torch.randn(out.shape)
        (out * gout).sum().backward()
        case["grad_output"] = arr(gout)
        case["input_grad"] = arr(xin.grad)
        if yin.requires_grad:
            case["target_grad"] = arr(yin.grad)
    return case


R3 = ["none", "mean", "sum"]
cases = []

# elementwise regression losses; a tie x == y (gradient sign(0) = 0) and both sides of the kink
x = torch.randn(3, 4) * 2
y = torch.randn(3, 4)
x[0, 0] = y[0, 0]
for r in R3:
    cases.append(loss_case(f"mse_{r}", "mse_loss", x, y, reduction=r))
    cases.append(loss_case(f"l1_{r}", "l1_loss", x, y, reduction=r))
    cases.append(loss_case(f"huber_{r}", "huber_loss", x, y, reduction=r))
    cases.append(loss_case(f"smooth_l1_{r}", "smooth_l1_loss", x, y, reduction=r))
cases.append(loss_case("mse_1d", "mse_loss", torch.randn(5), torch.randn(5)))
cases.append(loss_case("huber_delta_0.5", "huber_loss", x, y, reduction="mean", delta=0.5))
cases.append(loss_case("huber_delta_2.5_none", "huber_loss", x, y, reduction="none", delta=2.5))
cases.append(loss_case("smooth_l1_beta_0.5", "smooth_l1_loss", x, y, reduction="sum", beta=0.5))
# beta 0 is l1_loss; at a tie x == y torch's smooth_l1 kernel picks the subgradient +1 (x >= beta)
# where its l1_loss (and Loom) picks sign(0) = 0, so this case has no tie
cases.append(loss_case("smooth_l1_beta_0", "smooth_l1_loss", x + 0.125, y, reduction="mean", beta=0.0))

# KL divergence: log-probability input, probability (or log-probability) target
lp = F.log_softmax(torch.randn(4, 5), dim=1)
pt = F.softmax(torch.randn(4, 5), dim=1)
for r in R3 + ["batchmean"]:
    cases.append(loss_case(f"kl_div_{r}", "kl_div", lp, pt, reduction=r))
    cases.append(loss_case(f"kl_div_log_target_{r}", "kl_div", lp, pt.log(), reduction=r, log_target=True))
pz = pt.clone()
pz[1, 2] = 0.0
# xlogy(0, 0) = 0; torch's target gradient at 0 is NaN, so only the input's is compared
cases.append(loss_case("kl_div_zero_target", "kl_div", lp, pz, target_grad=False, reduction="sum"))

# binary cross entropy on probabilities in (0, 1), targets in [0, 1]
p = torch.rand(3, 4) * 0.98 + 0.01
t = torch.rand(3, 4)
t[0] = torch.tensor([0.0, 1.0, 1.0, 0.0])
wb = torch.rand(4) + 0.5
for r in R3:
    cases.append(loss_case(f"bce_{r}", "binary_cross_entropy", p, t, reduction=r))
cases.append(loss_case("bce_weight_mean", "binary_cross_entropy", p, t, weight=wb))
cases.append(loss_case("bce_weight_full_none", "binary_cross_entropy", p, t, weight=torch.rand(3, 4), reduction="none"))
# log clamped to -100 at 0 and 1
cases.append(loss_case("bce_edges", "binary_cross_entropy", torch.tensor([0.0, 1.0, 0.0, 1.0, 1e-30]), torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0]),
                       values_only=True, reduction="none"))

# binary cross entropy on logits, including large ones (the stable form)
z = torch.randn(3, 4) * 3
z[2] = torch.tensor([-120.0, 80.0, 0.0, 40.0])
pw = torch.rand(4) * 3 + 0.2
for r in R3:
    cases.append(loss_case(f"bce_logits_{r}", "binary_cross_entropy_with_logits", z, t, reduction=r))
    cases.append(loss_case(f"bce_logits_pos_weight_{r}", "binary_cross_entropy_with_logits", z, t, pos_weight=pw, reduction=r))
cases.append(loss_case("bce_logits_weight_mean", "binary_cross_entropy_with_logits", z, t, weight=wb))
cases.append(loss_case("bce_logits_weight_pos_weight_sum", "binary_cross_entropy_with_logits", z, t, weight=torch.rand(3, 1), pos_weight=pw, reduction="sum"))

# negative log likelihood: [N, C], [C], [N, C, d1, d2]; weights and ignore_index
lpn = F.log_softmax(torch.randn(6, 4), dim=1)
tn = torch.tensor([0, 3, 1, -100, 2, 3])
wc = torch.tensor([0.5, 2.0, 1.0, 1.5])
for r in R3:
    cases.append(loss_case(f"nll_{r}", "nll_loss", lpn, tn, reduction=r))
    cases.append(loss_case(f"nll_weight_{r}", "nll_loss", lpn, tn, weight=wc, reduction=r))
cases.append(loss_case("nll_ignore_index_3", "nll_loss", lpn, torch.tensor([0, 3, 1, 2, 2, 3]), ignore_index=3, weight=wc))
cases.append(loss_case("nll_ignore_index_3_none", "nll_loss", lpn, torch.tensor([0, 3, 1, 2, 2, 3]), ignore_index=3, reduction="none"))
cases.append(loss_case("nll_1d", "nll_loss", lpn[0], torch.tensor(2), weight=wc))
lp4 = F.log_softmax(torch.randn(2, 3, 2, 3), dim=1)
t4 = torch.randint(0, 3, (2, 2, 3))
t4[0, 1, 2] = -100
for r in R3:
    cases.append(loss_case(f"nll_4d_weight_{r}", "nll_loss", lp4, t4, weight=torch.tensor([1.0, 0.25, 3.0]), reduction=r))
# every target ignored: "mean" is 0/0 = NaN
cases.append(loss_case("nll_all_ignored", "nll_loss", lpn[:2], torch.tensor([-100, -100]), values_only=True))

# cross entropy (moved next to nll_loss and sharing its class picking)
logits = torch.randn(6, 4) * 2
cases.append(loss_case("cross_entropy_mean", "cross_entropy", logits, tn))
cases.append(loss_case("cross_entropy_weight_smoothing", "cross_entropy", logits, tn, weight=wc, label_smoothing=0.2))
cases.append(loss_case("cross_entropy_smoothing_none", "cross_entropy", logits, tn, label_smoothing=0.1, reduction="none"))
cases.append(loss_case("cross_entropy_prob_target_sum", "cross_entropy", logits, F.softmax(torch.randn(6, 4), 1), label_smoothing=0.1, reduction="sum"))
cases.append(loss_case("cross_entropy_4d", "cross_entropy", torch.randn(2, 3, 2, 3), t4, weight=torch.tensor([1.0, 0.25, 3.0])))


def module_case(name, args, module, x):
    xin = x.clone().requires_grad_(True)
    out = module(xin)
    gout = torch.randn(out.shape)
    (out * gout).sum().backward()
    return {"name": name, "args": args, "input": arr(x), "output": arr(out), "grad_output": arr(gout),
            "input_grad": arr(xin.grad), "repr": str(module)}


xm = torch.randn(2, 3, 4)
xm[0, 0, 0] = 0.0  # leaky_relu's gradient at 0 is negative_slope
modules = [
    module_case("LeakyReLU", [], nn.LeakyReLU(), xm),
    module_case("LeakyReLU", [0.2], nn.LeakyReLU(0.2), xm),
    module_case("Softmax", [1], nn.Softmax(1), xm),
    module_case("Softmax", [-1], nn.Softmax(-1), xm),
    module_case("LogSoftmax", [1], nn.LogSoftmax(1), xm),
    module_case("LogSoftmax", [-1], nn.LogSoftmax(-1), xm),
    module_case("Flatten", [], nn.Flatten(), xm),
    module_case("Flatten", [0, 1], nn.Flatten(0, 1), xm),
    module_case("Unflatten", [2, [2, 2]], nn.Unflatten(2, (2, 2)), xm),
    module_case("Unflatten", [-1, [2, -1]], nn.Unflatten(-1, (2, -1)), xm),
]

out = {"torch_version": torch.__version__, "losses": cases, "modules": modules}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loss_goldens.json")
with open(path, "w") as f:
    json.dump(out, f, separators=(",", ":"))
print(f"wrote {len(cases)} loss cases and {len(modules)} module cases to {path}")
