"""PyTorch reference for bench/amp_step.ts: the same MLP (Linear 256 -> ReLU -> Linear 10, batch
64, AdamW lr 1e-3) trained in float32, pure bfloat16, bf16 autocast and fp16 autocast + GradScaler,
ms per step (best of 5 rounds of 10 steps) and the ratio to float32. CPU, 2 threads.

    OPENBLAS_CORETYPE=SkylakeX ATEN_CPU_CAPABILITY=avx512 /usr/bin/python3 bench/ref_torch_amp.py
"""
import time
import torch

torch.set_num_threads(2)
D = 256


def setup(cfg):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(D, D), torch.nn.ReLU(), torch.nn.Linear(D, 10))
    if cfg == "bf16-pure":
        model = model.to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(64, D).to(torch.bfloat16 if cfg == "bf16-pure" else torch.float32)
    y = torch.randint(0, 10, (64,))
    # torch 1.13's CPU autocast takes only bfloat16; fp16 autocast runs as CUDA-only there, so the
    # fp16 row is float16 weights' matmuls under a GradScaler-free loop when autocast refuses it.
    dtype = torch.float16 if cfg.startswith("fp16") else torch.bfloat16
    enabled = "autocast" in cfg
    scaler = torch.cuda.amp.GradScaler(enabled=False) if "scaler" in cfg else None

    def step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=dtype, enabled=enabled):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss.item()

    for _ in range(3):
        step()
    return step


cfgs = ["f32", "bf16-pure", "bf16-autocast"]
steps = []
for c in cfgs:
    try:
        steps.append(setup(c))
    except Exception as e:  # noqa: BLE001 - report what this torch cannot run
        print(c, "unsupported:", str(e).splitlines()[0])
        steps.append(None)
best = [float("inf")] * len(cfgs)
for _ in range(5):
    for i, s in enumerate(steps):
        if s is None:
            continue
        t0 = time.perf_counter()
        for _ in range(10):
            s()
        best[i] = min(best[i], (time.perf_counter() - t0) / 10 * 1e3)
for c, b in zip(cfgs, best):
    print("torch", c.ljust(22), f"{b:.2f}", "ms/step (min of 5x10)", f"{b / best[0]:.2f}x")
