"""Golden values for RMSprop, Adagrad and the schedulers of issue 16 from PyTorch
(run with torch 1.13: /usr/bin/python3 gen_optim_goldens_2.py).

Writes optim_goldens_2.json next to this file, in the layout of gen_optim_goldens.py (whose
helpers it imports):
- "optimizers": RMSprop and Adagrad cases; per case the param groups, initial parameters, the
  gradients fed in at each of 6 steps (the second parameter has none at step 2), the parameters
  after each optimizer.step() and the final per-parameter state.
- "schedulers": per case the optimizer (class and hyperparameters), the lr of every group after
  construction and after each scheduler.step(), the cycled momentum (SGD/RMSprop `momentum`,
  Adam `betas[0]`) when the scheduler moves it, and for ReduceLROnPlateau the metrics fed in and
  (best, num_bad_epochs, cooldown_counter) after each step.
"""
import json
import os

import torch

from gen_optim_goldens import run_opt

torch.manual_seed(16)

R, A = torch.optim.RMSprop, torch.optim.Adagrad


def with_defaults(name, cls, groups_hyper, defaults, group_of_param=None):
    """A case whose optimizer also gets constructor arguments (recorded as "defaults"): torch's
    Adagrad fills its accumulators from the constructor's initial_accumulator_value, not the group's."""
    def make(groups):
        return cls(groups, **defaults)
    make.__name__ = cls.__name__
    return {**run_opt(name, make, groups_hyper, group_of_param), "defaults": defaults}


optimizers = [
    run_opt("rmsprop_default", R, [{"lr": 0.01}]),
    run_opt("rmsprop_centered", R, [{"lr": 0.01, "centered": True}]),
    run_opt("rmsprop_momentum", R, [{"lr": 0.01, "momentum": 0.9}]),
    run_opt("rmsprop_centered_momentum_wd", R, [{"lr": 0.005, "centered": True, "momentum": 0.5, "weight_decay": 0.1}]),
    run_opt("rmsprop_maximize_alpha_eps", R, [{"lr": 0.02, "alpha": 0.9, "eps": 1e-4, "maximize": True}]),
    run_opt("rmsprop_two_groups", R, [{"lr": 0.01, "centered": True}, {"lr": 0.03, "momentum": 0.8, "weight_decay": 0.01}], [0, 1]),
    run_opt("adagrad_default", A, [{"lr": 0.1}]),
    run_opt("adagrad_lr_decay", A, [{"lr": 0.1, "lr_decay": 0.5}]),
    with_defaults("adagrad_wd_initial_accumulator", A, [{"lr": 0.05, "weight_decay": 0.1}], {"initial_accumulator_value": 0.5}),
    run_opt("adagrad_maximize_eps", A, [{"lr": 0.1, "eps": 1e-3, "maximize": True, "lr_decay": 0.1}]),
    # group 0's own initial_accumulator_value is ignored (the accumulators start at 0.3)
    with_defaults("adagrad_two_groups", A, [{"lr": 0.1, "initial_accumulator_value": 0.1}, {"lr": 0.2, "lr_decay": 0.2}], {"initial_accumulator_value": 0.3}, [0, 1]),
]

OPTS = {"SGD": torch.optim.SGD, "Adam": torch.optim.Adam, "RMSprop": torch.optim.RMSprop, "Adagrad": torch.optim.Adagrad}


def momentum_of(group):
    return group["betas"][0] if "betas" in group else group.get("momentum")


def run_sched(name, optimizer, hyper, make, steps, lrs=(0.1, 0.02), metrics=None, momentum=False):
    """make(opt) builds the scheduler; metrics, if given, are fed to step() (ReduceLROnPlateau)."""
    ps = [torch.nn.Parameter(torch.zeros(1)) for _ in lrs]
    opt = OPTS[optimizer]([{"params": [p], "lr": lr} for p, lr in zip(ps, lrs)], **hyper)
    sched = make(opt)
    out = {"name": name, "optimizer": optimizer, "hyper": hyper, "base_lrs": list(lrs), "lrs": [[g["lr"] for g in opt.param_groups]]}
    if momentum:
        out["momentum"] = [[momentum_of(g) for g in opt.param_groups]]
    if metrics is not None:
        out["metrics"] = metrics
        out["plateau"] = []
    for k in range(steps):
        opt.step()
        if metrics is None:
            sched.step()
        else:
            sched.step(metrics[k])
            out["plateau"].append([sched.best, sched.num_bad_epochs, sched.cooldown_counter])
        out["lrs"].append([g["lr"] for g in opt.param_groups])
        if momentum:
            out["momentum"].append([momentum_of(g) for g in opt.param_groups])
    return out


S = torch.optim.lr_scheduler
# a loss that improves, stalls (patience), improves by less than the threshold, stalls again
LOSS = [1.0, 0.9, 0.9, 0.95, 0.91, 0.9, 0.85, 0.8499, 0.86, 0.87, 0.88, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
ACC = [0.1, 0.2, 0.25, 0.26, 0.3, 0.3, 0.31, 0.5, 0.52, 0.52, 0.52, 0.52, 0.6, 0.6, 0.6, 0.6]
schedulers = [
    run_sched("exponential", "SGD", {}, lambda o: S.ExponentialLR(o, gamma=0.8), 10),
    run_sched("multistep", "SGD", {}, lambda o: S.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.5), 12),
    run_sched("multistep_unsorted", "SGD", {}, lambda o: S.MultiStepLR(o, milestones=[6, 1], gamma=0.3), 8),
    run_sched("onecycle_cos_sgd", "SGD", {"momentum": 0.9}, lambda o: S.OneCycleLR(o, max_lr=[1.0, 0.2], total_steps=20), 20, momentum=True),
    run_sched("onecycle_linear_three_phase_adam", "Adam", {"betas": (0.9, 0.99)},
              lambda o: S.OneCycleLR(o, max_lr=0.5, epochs=4, steps_per_epoch=5, pct_start=0.25, anneal_strategy="linear",
                                     div_factor=10.0, final_div_factor=100.0, three_phase=True), 20, momentum=True),
    run_sched("onecycle_cos_three_phase_adam_lists", "Adam", {},
              lambda o: S.OneCycleLR(o, max_lr=[0.3, 0.1], total_steps=17, pct_start=0.4, three_phase=True,
                                     base_momentum=[0.8, 0.7], max_momentum=[0.9, 0.95]), 17, momentum=True),
    run_sched("onecycle_linear_rmsprop", "RMSprop", {"momentum": 0.5},
              lambda o: S.OneCycleLR(o, max_lr=0.05, total_steps=12, anneal_strategy="linear", pct_start=0.5), 12, momentum=True),
    run_sched("onecycle_no_momentum_adagrad", "Adagrad", {},
              lambda o: S.OneCycleLR(o, max_lr=0.2, total_steps=10, cycle_momentum=False), 10),
    run_sched("plateau_min_rel", "SGD", {}, lambda o: S.ReduceLROnPlateau(o, patience=2, factor=0.5, cooldown=1, min_lr=[0.01, 0.005]),
              len(LOSS), metrics=LOSS),
    run_sched("plateau_min_abs", "SGD", {}, lambda o: S.ReduceLROnPlateau(o, threshold_mode="abs", threshold=0.02, patience=1, factor=0.3),
              len(LOSS), metrics=LOSS),
    run_sched("plateau_max_abs_cooldown", "SGD", {}, lambda o: S.ReduceLROnPlateau(o, mode="max", threshold_mode="abs", threshold=0.05, patience=1, cooldown=2, factor=0.2),
              len(ACC), metrics=ACC),
    run_sched("plateau_max_rel_eps", "SGD", {}, lambda o: S.ReduceLROnPlateau(o, mode="max", threshold=0.1, patience=0, factor=0.9, eps=0.005),
              len(ACC), metrics=ACC),
]

goldens = {"torch_version": torch.__version__, "optimizers": optimizers, "schedulers": schedulers}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optim_goldens_2.json")
with open(out, "w") as f:
    json.dump(goldens, f, allow_nan=False)
print(f"wrote {out}: {len(optimizers)} optimizer cases, {len(schedulers)} scheduler cases")
