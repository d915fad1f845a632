"""Goldens for tests/core/amp.test.ts: a small MLP under torch.autocast("cpu", bfloat16) (PyTorch 1.13).

Linear(8, 16) -> ReLU -> Linear(16, 3) on x [5, 8]; the logits (bfloat16 under autocast), the
cross-entropy loss (float32: cross_entropy is on torch's fp32 list) and the float32 gradients of
the float32 master weights. Run: /usr/bin/python3 tests/core/gen_amp_goldens.py
"""
import json
import os

import torch
import torch.nn.functional as F

torch.manual_seed(0)


def arr(t):
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""), "data": t.detach().double().flatten().tolist()}


x = torch.randn(5, 8)
w1 = (torch.randn(16, 8) * 0.5).requires_grad_()
b1 = (torch.randn(16) * 0.1).requires_grad_()
w2 = (torch.randn(3, 16) * 0.5).requires_grad_()
b2 = (torch.randn(3) * 0.1).requires_grad_()
target = torch.tensor([0, 2, 1, 1, 0])
with torch.autocast("cpu", dtype=torch.bfloat16):
    h = F.relu(F.linear(x, w1, b1))
    logits = F.linear(h, w2, b2)
    loss = F.cross_entropy(logits, target)
assert logits.dtype == torch.bfloat16 and h.dtype == torch.bfloat16 and loss.dtype == torch.float32
loss.backward()
out = {
    "x": arr(x), "w1": arr(w1), "b1": arr(b1), "w2": arr(w2), "b2": arr(b2), "target": arr(target),
    "hidden": arr(h), "logits": arr(logits), "loss": arr(loss),
    "grads": {"w1": arr(w1.grad), "b1": arr(b1.grad), "w2": arr(w2.grad), "b2": arr(b2.grad)},
}
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "amp_goldens.json"), "w") as f:
    json.dump(out, f)
