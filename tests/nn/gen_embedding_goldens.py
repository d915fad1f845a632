# Goldens for tests/nn/embedding_options.test.ts (torch 1.13): F.embedding with max_norm / norm_type /
# scale_grad_by_freq / padding_idx: output, weight gradient of sum(y * sin(arange)), weight after the call.
# Run: /usr/bin/python3 tests/nn/gen_embedding_goldens.py > tests/nn/embedding_goldens.json
import torch, json
torch.manual_seed(0)
out = {}
def case(name, idx, W, **kw):
    W = W.clone().requires_grad_(True)
    idx_t = torch.tensor(idx)
    y = torch.nn.functional.embedding(idx_t, W, **kw)
    gy = torch.arange(y.numel(), dtype=torch.float32).reshape(y.shape).sin()
    (y * gy).sum().backward()
    out[name] = dict(idx=idx, idx_shape=list(idx_t.shape), opts={k: ("inf" if v == float("inf") else v) for k, v in kw.items()},
                     y=y.detach().flatten().tolist(), y_shape=list(y.shape),
                     grad=W.grad.flatten().tolist(), weight_after=W.detach().flatten().tolist())
W0 = torch.randn(6, 4) * 2
out["W0"] = W0.flatten().tolist()
out["W0_shape"] = list(W0.shape)
case("max_norm", [[0, 2, 2], [5, 1, 0]], W0, max_norm=1.5)
case("max_norm_p1", [1, 3, 3, 4], W0, max_norm=2.0, norm_type=1.0)
case("max_norm_inf", [2, 4], W0, max_norm=1.0, norm_type=float("inf"))
case("max_norm_p3", [0, 5, 3], W0, max_norm=1.0, norm_type=3.0)
case("freq", [[0, 2, 2], [5, 2, 0]], W0, scale_grad_by_freq=True)
case("freq_pad_max", [[0, 2, 2], [5, 2, 3]], W0, scale_grad_by_freq=True, padding_idx=2, max_norm=2.5)
print(json.dumps(out))
