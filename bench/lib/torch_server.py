"""The line-protocol server loop of the PyTorch references that bench/lib/rounds.ts drives
(bench/ref_torch_rope.py, bench/ref_torch_w12.py): one JSON line when ready, then for each stdin
line `<command> <iters> [threads]` one JSON line {"ms": <ms per call over iters calls>, ...};
`quit` (or end of input) stops it.
"""
import json
import sys
import time

import torch


def serve(commands, extras=None, thread_arg=False):
    """Answer stdin commands until `quit`.

    commands: name -> a function of no arguments, called `iters` times per command (default 10).
    extras: name -> a function of the measured ms returning more fields for the answer.
    thread_arg: a command's second argument sets torch.set_num_threads (default 2) before it runs.
    An unknown command answers {"error": ...}.
    """
    extras = extras or {}
    print(json.dumps({"ready": True, "torch": torch.__version__, "threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        cmd, *rest = line.split()
        if cmd == "quit":
            break
        iters = int(rest[0]) if rest else 10
        if thread_arg:
            torch.set_num_threads(int(rest[1]) if len(rest) > 1 else 2)
        fn = commands.get(cmd)
        if fn is None:
            print(json.dumps({"error": f"unknown command {cmd}"}), flush=True)
            continue
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        ms = (time.perf_counter() - t0) * 1e3 / iters
        print(json.dumps({"ms": ms, **(extras[cmd](ms) if cmd in extras else {})}), flush=True)
