"""Goldens for DistributedSampler (torch 1.13): the non-shuffled split of every (n, replicas,
drop_last) case, per rank, plus len(). Shuffled orders use Loom's own randperm, so only the
split rules are compared with torch. Run: /usr/bin/python3 tests/data/gen_distributed_sampler_goldens.py"""
import json, os
from torch.utils.data.distributed import DistributedSampler

cases = []
for n in [0, 1, 5, 7, 8, 10]:
    for R in [1, 2, 3, 4]:
        for drop_last in [False, True]:
            ranks = []
            for r in range(R):
                s = DistributedSampler(list(range(n)), num_replicas=R, rank=r, shuffle=False, drop_last=drop_last)
                ranks.append({"len": len(s), "indices": list(s)})
            cases.append({"n": n, "num_replicas": R, "drop_last": drop_last, "ranks": ranks})
out = os.path.join(os.path.dirname(__file__), "distributed_sampler_goldens.json")
with open(out, "w") as f:
    json.dump(cases, f, separators=(",", ":"))
print(f"wrote {len(cases)} cases to {out}")
