"""Golden values for tests/optim from PyTorch (run with torch 1.13: /usr/bin/python3 gen_optim_goldens.py).

Writes optim_goldens.json next to this file:
- "optimizers": per case, the optimizer class and its param groups (hyperparameters), the initial
  parameters, and for each step the gradients fed in (null = the parameter has no grad that step)
  and the parameters after optimizer.step(), plus the final per-parameter state. Gradients are
  given, not computed, so only the optimizer's arithmetic is compared.
- "schedulers": per case, the learning rates of every group after construction and after each
  scheduler.step() (the lr schedule torch produces), for an SGD optimizer.
Tensors are {"shape", "dtype", "data"}; float32 values are written as exact doubles.
"""
import json
import math
import os

import torch

torch.manual_seed(4321)


def arr(t):
    t = t.detach()
    return {"shape": list(t.shape), "dtype": "float32", "data": [float(v) for v in t.flatten().tolist()]}


SHAPES = [(3, 2), (3,)]
STEPS = 6


def make_grads():
    """Per step, one gradient per parameter; magnitudes vary so amsgrad's max matters; the
    second parameter has no gradient at step 2."""
    out = []
    for s in range(STEPS):
        scale = [2.0, 0.5, 1.0, 0.1, 3.0, 0.2][s]
        gs = [torch.randn(shape) * scale for shape in SHAPES]
        if s == 2:
            gs[1] = None
        out.append(gs)
    return out


def run_opt(name, cls, groups_hyper, group_of_param=None):
    """groups_hyper: list of hyperparameter dicts; group_of_param[i] = group index of param i."""
    init = [torch.randn(shape) for shape in SHAPES]
    params = [torch.nn.Parameter(p.clone()) for p in init]
    group_of_param = group_of_param or [0] * len(params)
    groups = [{"params": [p for p, g in zip(params, group_of_param) if g == gi], **h} for gi, h in enumerate(groups_hyper)]
    opt = cls(groups)
    steps = []
    for gs in make_grads():
        for p, g in zip(params, gs):
            p.grad = None if g is None else g.clone()
        opt.step()
        steps.append({"grads": [None if g is None else arr(g) for g in gs], "params": [arr(p) for p in params]})
    state = {}
    for i, p in enumerate(params):
        st = opt.state[p]
        state[str(i)] = {k: (float(v) if k == "step" else (None if v is None else arr(v))) for k, v in st.items()}
    hyper = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in h.items()} for h in groups_hyper]
    return {"name": name, "optimizer": cls.__name__, "groups": hyper, "group_of_param": group_of_param,
            "init": [arr(p) for p in init], "steps": steps, "state": state}


optimizers = [
    run_opt("sgd_plain", torch.optim.SGD, [{"lr": 0.1}]),
    run_opt("sgd_momentum", torch.optim.SGD, [{"lr": 0.1, "momentum": 0.9}]),
    run_opt("sgd_dampening_wd", torch.optim.SGD, [{"lr": 0.05, "momentum": 0.8, "dampening": 0.3, "weight_decay": 0.01}]),
    run_opt("sgd_nesterov_wd", torch.optim.SGD, [{"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1}]),
    run_opt("sgd_maximize", torch.optim.SGD, [{"lr": 0.1, "momentum": 0.5, "maximize": True}]),
    run_opt("sgd_two_groups", torch.optim.SGD, [{"lr": 0.1, "momentum": 0.9}, {"lr": 0.01, "momentum": 0.0}], [0, 1]),
    run_opt("adam", torch.optim.Adam, [{"lr": 0.01}]),
    run_opt("adam_wd", torch.optim.Adam, [{"lr": 0.01, "weight_decay": 0.1}]),
    run_opt("adam_amsgrad_betas", torch.optim.Adam, [{"lr": 0.02, "betas": (0.8, 0.9), "amsgrad": True, "eps": 1e-6}]),
    run_opt("adam_maximize", torch.optim.Adam, [{"lr": 0.01, "maximize": True}]),
    run_opt("adamw_default_wd", torch.optim.AdamW, [{"lr": 0.01}]),
    run_opt("adamw_wd_amsgrad", torch.optim.AdamW, [{"lr": 0.01, "weight_decay": 0.1, "amsgrad": True}]),
    run_opt("adamw_gpt", torch.optim.AdamW, [{"lr": 3e-3, "betas": (0.9, 0.95), "eps": 1e-6, "weight_decay": 0.5}]),
    run_opt("adamw_two_groups", torch.optim.AdamW, [{"lr": 0.01, "weight_decay": 0.1}, {"lr": 0.02, "weight_decay": 0.0}], [0, 1]),
]


def run_sched(name, make, steps, lrs=(0.1, 0.02)):
    ps = [torch.nn.Parameter(torch.zeros(1)) for _ in lrs]
    opt = torch.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(ps, lrs)], lr=lrs[0])
    sched = make(opt)
    out = [list(sched.get_last_lr())]
    for _ in range(steps):
        opt.step()
        sched.step()
        out.append(list(sched.get_last_lr()))
    return {"name": name, "base_lrs": list(lrs), "lrs": out}


def hf_cosine(num_warmup_steps, num_training_steps, num_cycles=0.5):
    """transformers.get_cosine_schedule_with_warmup's lambda (verbatim formula)."""
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        progress = float(current_step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress)))
    return lr_lambda


S = torch.optim.lr_scheduler
schedulers = [
    run_sched("lambda_exp", lambda o: S.LambdaLR(o, lambda e: 0.95 ** e), 6),
    run_sched("lambda_per_group", lambda o: S.LambdaLR(o, [lambda e: 1.0 / (e + 1), lambda e: 0.5 ** e]), 5),
    run_sched("step", lambda o: S.StepLR(o, step_size=3, gamma=0.5), 10),
    run_sched("cosine", lambda o: S.CosineAnnealingLR(o, T_max=5, eta_min=0.001), 16),
    run_sched("linear", lambda o: S.LinearLR(o, start_factor=0.25, total_iters=4), 8),
    run_sched("linear_default", lambda o: S.LinearLR(o), 7),
    run_sched("sequential_warmup_cosine", lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=3), S.CosineAnnealingLR(o, T_max=6)], milestones=[3]), 12),
    run_sched("sequential_three", lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.5, total_iters=2), S.StepLR(o, step_size=2, gamma=0.5), S.CosineAnnealingLR(o, T_max=4, eta_min=0.005)], milestones=[2, 6]), 12),
    run_sched("hf_cosine_warmup", lambda o: S.LambdaLR(o, hf_cosine(3, 10)), 12),
    run_sched("hf_cosine_warmup_cycles", lambda o: S.LambdaLR(o, hf_cosine(2, 8, 1.0)), 10),
]

if __name__ == "__main__":  # gen_optim_goldens_2.py imports the helpers above
    goldens = {"torch_version": torch.__version__, "optimizers": optimizers, "schedulers": schedulers}
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optim_goldens.json")
    with open(out, "w") as f:
        json.dump(goldens, f)
    print(f"wrote {out}: {len(optimizers)} optimizer cases, {len(schedulers)} scheduler cases")
