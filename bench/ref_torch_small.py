#!/usr/bin/python3
"""PyTorch reference for W10 of shared/bench/README.md: small-op latency (CPU eager, fp32).

  W10a  LoRA linear: x [8,64], W [64,64], A [8,64], B [64,8], scale 2: x W^T + ((x A^T) B^T) * 2
  W10b  softmax [8,64] over the last dim
  W10c  RMSNorm [8,64] with weight [64], eps 1e-5: x * rsqrt(mean(x^2, -1) + eps) * w

Run with /usr/bin/python3 in the environment of shared/bench/ref_torch.py (bench/lib/torch_ref.ts
sets it: OPENBLAS_CORETYPE=SkylakeX, ATEN_CPU_CAPABILITY=avx512, glibc malloc thresholds) and 2
threads. Timing is ref_torch.py's: warm-up, then each call timed with time.perf_counter() until
--min-reps calls and --min-time seconds; the median is reported in ms (and in µs as "us"). The
result of a CPU op is already in host memory, so a call is the op alone. One JSON line per
workload, as ref_torch.py prints them:

    /usr/bin/python3 bench/ref_torch_small.py [--only W10a] [--json-out FILE]
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F


def bench(fn, warmup=100, min_reps=200, min_time=2.0, max_time=30.0):
    for _ in range(warmup):
        fn()
    times = []
    t_start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        times.append(t1 - t0)
        if len(times) >= min_reps and t1 - t_start >= min_time:
            break
        if t1 - t_start >= max_time and len(times) >= 5:
            break
    times.sort()
    return {"ms": statistics.median(times) * 1e3, "min_ms": times[0] * 1e3, "reps": len(times)}


def w_lora():
    torch.manual_seed(0)
    x = torch.randn(8, 64)
    W = torch.randn(64, 64) * 0.1
    A = torch.randn(8, 64) * 0.1
    B = torch.randn(64, 8) * 0.1
    return lambda: F.linear(x, W) + F.linear(F.linear(x, A), B) * 2.0


def w_softmax():
    torch.manual_seed(0)
    x = torch.randn(8, 64)
    return lambda: torch.softmax(x, dim=-1)


def w_rmsnorm():
    torch.manual_seed(0)
    x = torch.randn(8, 64)
    w = torch.randn(64)
    return lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w


WORKLOADS = [
    ("W10a", "small_lora_linear", w_lora),
    ("W10b", "small_softmax", w_softmax),
    ("W10c", "small_rmsnorm", w_rmsnorm),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-reps", type=int, default=200)
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--only", default="", help="comma-separated workload id prefixes")
    ap.add_argument("--json-out", default="")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    out = open(args.json_out, "a") if args.json_out else None
    for wid, name, make in WORKLOADS:
        if only and not any(wid.startswith(o) for o in only):
            continue
        r = bench(make(), min_reps=args.min_reps, min_time=args.min_time)
        rec = {"id": wid, "workload": name, "ms": round(r["ms"], 6), "us": round(r["ms"] * 1e3, 3),
               "min_ms": round(r["min_ms"], 6), "reps": r["reps"], "torch": torch.__version__, "threads": args.threads}
        print(json.dumps(rec), flush=True)
        if out:
            out.write(json.dumps(rec) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
