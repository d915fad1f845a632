#!/usr/bin/python3
"""Goldens from PyTorch's own OpInfo database for every op Loom has.

Run:  /usr/bin/python3 tests/opinfo/gen_opinfo_goldens.py   (rewrites tests/opinfo/goldens/*.json)
      /usr/bin/python3 tests/opinfo/gen_opinfo_goldens.py flip roll   (rewrites only those entries)

Source: torch.testing._internal.common_methods_invocations.op_db (Debian python3-torch 1.13).
For each OpInfo entry in LOOM_OPS and each dtype Loom has (float64, float32, int64, int32, bool;
complex and float16 are not generated), the samples of `sample_inputs`, then `reference_inputs`
(duplicates dropped), then `error_inputs`, are run on CPU and written with their results.
Generation is deterministic: torch and `random` are seeded with crc32 of "<op>/<dtype>" before
each entry's samples are drawn, and every input value is stored in the JSON.

JSON format (one file per OpInfo entry, tests/opinfo/goldens/<name>.json)
----------------------------------------------------------------------------------------------
{"op": "div.floor_rounding", "torch_version": str, "samples": [sample, ...]}
sample = {
  "id": "<op>/<dtype>/<s|r|e><k>"   unique and stable (s: sample_inputs, r: reference_inputs,
                                     e: error_inputs; k counts within that group)
  "dtype": the dtype the sample was drawn for,
  "tensors": [tensor, ...]          every distinct tensor of the call (an aliased one once)
  "input": value, "args": [value, ...], "kwargs": {name: value}   the call op(input, *args, **kwargs)
  "outs": [tensor, ...]             the result (a tuple/list result gives several); absent for "e"
  "cots": [tensor | null, ...]      a fixed random cotangent per float output (null: none)
  "grads": [tensor | null, ...]     d sum(outs[i] * cots[i]) / d tensors[j], for each tensor that
                                     requires grad (null: not differentiable or not reached)
  "error": str                      only "e" samples: the error torch raises (type: message regex)
}
tensor = {"shape": [int], "dtype": str, "data": [flat row-major numbers], "rg": 1 if it requires grad}
  float data: numbers, or the strings "nan", "inf", "-inf"; float32 written as the shortest decimal
  that rounds to the same float32; bool data 0/1.
value (in input/args/kwargs):
  {"t": j}            tensors[j]
  number              a Python int, or a non-integral finite Python float
  {"f": x}            a Python float that is integral or non-finite (x: number or "nan"/"inf"/"-inf"),
                      so a JS reader can tell 2.0 from 2 where type promotion depends on it
  true/false, null, "str", [value, ...] (list, tuple, torch.Size)
  {"dtype": name}     a torch.dtype;  {"py": repr}  any other Python object (memory_format, ...)
"""
import json
import math
import os
import random
import sys
import types
import unittest
import zlib

# common_utils imports expecttest (not packaged in Debian) for TestCase and reads ACCEPT
sys.modules["expecttest"] = types.SimpleNamespace(TestCase=unittest.TestCase, ACCEPT=False)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402

# torch 1.13's sample_inputs_cross_entropy calls random.sample on a set, which Python 3.11 rejects
_sample = random.sample
random.sample = lambda pop, k, **kw: _sample(sorted(pop) if isinstance(pop, (set, frozenset)) else pop, k, **kw)

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "goldens")

# OpInfo "name.variant" entries whose ops Loom has (src/lazy/surface.ts, functional.ts, creation.ts).
LOOM_OPS = """
add sub mul rsub div.no_rounding_mode div.floor_rounding div.trunc_rounding floor_divide remainder
pow square neg abs sign exp log log1p sqrt rsqrt reciprocal sin cos tanh sigmoid
nn.functional.relu nn.functional.gelu nn.functional.silu erf floor ceil round clamp
maximum minimum where masked_fill eq ne lt le gt ge logical_and logical_or logical_not isnan
sum mean amax amin max.reduction_with_dim max.reduction_no_dim max.binary
min.reduction_with_dim min.reduction_no_dim min.binary argmax argmin var std logsumexp cumsum
any all norm norm.fro norm.inf matmul mm bmm softmax log_softmax
nn.functional.layer_norm nn.functional.embedding nn.functional.cross_entropy nn.functional.mse_loss
nn.functional.linear nn.functional.one_hot cat stack split split.list_args chunk tril triu gather
scatter_add index_select index_add reshape reshape_as view view_as permute transpose t mT expand
expand_as squeeze unsqueeze flatten unflatten narrow contiguous clone sum_to_size
arange linspace zeros ones zeros_like ones_like full_like eye
repeat tile repeat_interleave flip fliplr flipud roll select outer diag diagonal masked_select nonzero
scatter scatter_reduce.sum scatter_reduce.prod scatter_reduce.mean scatter_reduce.amax scatter_reduce.amin
round.decimals_0 round.decimals_3 round.decimals_neg_3 einsum
nn.functional.pad.constant nn.functional.pad.reflect nn.functional.pad.replicate nn.functional.pad.circular
sort argsort msort topk kthvalue
nn.functional.leaky_relu nn.functional.conv1d nn.functional.conv2d nn.functional.unfold
nn.functional.max_pool1d nn.functional.max_pool2d nn.functional.avg_pool1d nn.functional.avg_pool2d
nn.functional.adaptive_avg_pool1d nn.functional.adaptive_avg_pool2d
nn.functional.adaptive_max_pool1d nn.functional.adaptive_max_pool2d
nn.functional.batch_norm nn.functional.group_norm
nn.functional.nll_loss nn.functional.l1_loss nn.functional.huber_loss nn.functional.smooth_l1_loss
nn.functional.kl_div nn.functional.binary_cross_entropy nn.functional.binary_cross_entropy_with_logits
""".split()

DTYPES = {torch.float64: "float64", torch.float32: "float32", torch.int64: "int64",
          torch.int32: "int32", torch.bool: "bool"}
# samples kept per (op, dtype) from each of sample_inputs and reference_inputs; error samples per op
CAP = {torch.float64: 8, torch.float32: 4, torch.int64: 4, torch.int32: 2, torch.bool: 3}
ERROR_CAP = 6
MAX_ELEMENTS = 1024  # a sample whose tensors hold more is skipped (keeps the files small)
SMALL = 64  # sample_inputs whose median sample has at most this many elements keep 3 CAP of them


def _f32(v):
    """Shortest decimal that rounds back to the same float32."""
    return float(np.format_float_positional(np.float32(v), unique=True, trim="-"))


def enc_num(v, f32=False):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if f32:
        return _f32(v)
    if v == 0 and math.copysign(1, v) < 0:
        return -0.0  # JSON -0.0; JS JSON.parse keeps the sign (reciprocal(-0) = -inf)
    return int(v) if v == int(v) and abs(v) < 2**53 else v


def enc_tensor(t):
    t = t.detach()
    name = DTYPES.get(t.dtype)
    if name is None:
        raise Unsupported(f"dtype {t.dtype}")
    flat = t.contiguous().reshape(-1).tolist()
    if name == "bool":
        data = [1 if x else 0 for x in flat]
    elif name.startswith("float"):
        data = [enc_num(x, name == "float32") for x in flat]
    else:
        data = flat
    return {"shape": list(t.shape), "dtype": name, "data": data}


class Unsupported(Exception):
    pass


class Encoder:
    """Encodes one call's values, collecting its tensors (by identity) into a table."""

    def __init__(self):
        self.tensors = []  # torch tensors in first-seen order
        self.ids = {}

    def value(self, v):
        if isinstance(v, torch.Tensor):
            if id(v) not in self.ids:
                self.ids[id(v)] = len(self.tensors)
                self.tensors.append(v)
            return {"t": self.ids[id(v)]}
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        if isinstance(v, int):
            return v
        if isinstance(v, float):
            if math.isfinite(v) and v != int(v):
                return v
            return {"f": enc_num(v)}
        if isinstance(v, (list, tuple, torch.Size)):
            return [self.value(x) for x in v]
        if isinstance(v, torch.dtype):
            return {"dtype": DTYPES.get(v, str(v).replace("torch.", ""))}
        if isinstance(v, complex):
            return {"py": repr(v)}
        return {"py": repr(v)}


def out_list(o):
    if isinstance(o, torch.Tensor):
        return [o]
    if isinstance(o, (tuple, list)):
        return [x for x in o]
    raise Unsupported(f"output of type {type(o).__name__}")


def n_elements(sample):
    n = 0
    for v in [sample.input, *sample.args, *sample.kwargs.values()]:
        for t in (v if isinstance(v, (list, tuple)) else [v]):
            if isinstance(t, torch.Tensor):
                n += t.numel()
    return n


def complex_free(sample):
    def ok(v):
        if isinstance(v, torch.Tensor):
            return not v.is_complex() and v.dtype in DTYPES
        if isinstance(v, (list, tuple)):
            return all(ok(x) for x in v)
        if isinstance(v, dict):
            return all(ok(x) for x in v.values())
        return not isinstance(v, complex)
    return ok(sample.input) and ok(list(sample.args)) and ok(sample.kwargs)


def fresh_leaves(sample):
    """The sample with every grad-requiring leaf *view* replaced by a fresh leaf of equal values.

    OpInfo makes some noncontiguous inputs as views of a base that does not require grad; torch
    1.13's autograd then never reaches them (clone's gradient comes back None), which is not the
    math the goldens describe. Aliases stay aliases.
    """
    seen = {}

    def fix(v):
        if isinstance(v, torch.Tensor):
            if v.requires_grad and v.is_leaf and v._base is not None:
                if id(v) not in seen:
                    seen[id(v)] = v.detach().clone().requires_grad_(True)
                return seen[id(v)]
            return v
        if isinstance(v, (list, tuple)) and not isinstance(v, torch.Size):
            return type(v)(fix(x) for x in v) if isinstance(v, list) else tuple(fix(x) for x in v)
        return v
    return fix(sample.input), fix(list(sample.args)), {k: fix(v) for k, v in sample.kwargs.items()}


def record(op, sample, dtype, sid, gen):
    enc = Encoder()
    inp, args, kwargs = fresh_leaves(sample)
    sample = types.SimpleNamespace(input=inp, args=args, kwargs=kwargs)
    rec = {"id": sid, "dtype": DTYPES[dtype],
           "input": enc.value(sample.input),
           "args": [enc.value(a) for a in sample.args],
           "kwargs": {k: enc.value(v) for k, v in sample.kwargs.items()}}
    # the inputs as they were before the call (batch_norm in training updates running_mean/var)
    before = [dict(enc_tensor(t), **({"rg": 1} if t.requires_grad else {})) for t in enc.tensors]
    out = op(sample.input, *sample.args, **sample.kwargs)
    outs = out_list(out)
    if not all(isinstance(o, torch.Tensor) for o in outs):
        raise Unsupported("non-tensor output")
    rec["outs"] = [enc_tensor(o) for o in outs]
    leaves = [t for t in enc.tensors if t.requires_grad]
    diff = [o for o in outs if o.requires_grad and o.dtype.is_floating_point]
    diff_ids = {id(o) for o in diff}
    cots = [torch.randn(o.shape, dtype=o.dtype, generator=gen) if id(o) in diff_ids else None for o in outs]
    if leaves and diff:
        grads = torch.autograd.grad([o for o in diff], leaves, [c for c in cots if c is not None],
                                    allow_unused=True)
        gmap = {id(t): g for t, g in zip(leaves, grads)}
        rec["cots"] = [enc_tensor(c) if c is not None else None for c in cots]
        rec["grads"] = [enc_tensor(gmap[id(t)]) if id(t) in gmap and gmap[id(t)] is not None else None
                        for t in enc.tensors]
    rec["tensors"] = before
    return rec


def samples_for(op, dtype):
    rg = op.supports_autograd and dtype.is_floating_point
    seen = set()
    for kind, make in (("s", op.sample_inputs), ("r", op.reference_inputs)):
        it = iter(make("cpu", dtype, requires_grad=rg))
        while True:
            try:
                s = next(it)
            except StopIteration:
                break
            except Exception as e:  # a few reference_inputs funcs break for some dtypes in 1.13
                print(f"  {op.name} {dtype}: {kind} generator stopped: {e}", file=sys.stderr)
                break
            if not complex_free(s) or n_elements(s) > MAX_ELEMENTS:
                continue
            key = repr((s.input, s.args, s.kwargs))
            if key in seen:
                continue
            seen.add(key)
            yield kind, s


def skip_error(ei):
    """Error inputs that test torch's Python binding or its limits, not the op's semantics."""
    if ei.error_regex == "":
        return True  # e.g. torch.eq(2, 3): no overload for two Python scalars; asserts no message
    if "up to 64 dims" in ei.error_regex:
        return True  # torch's TensorIterator dimension limit; Loom has none
    return False


def gen_op(op):
    name = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
    recs = []
    supported = op.supported_dtypes("cpu")
    for dtype in DTYPES:
        if dtype not in supported:
            continue
        seed = zlib.crc32(f"{name}/{DTYPES[dtype]}".encode())
        torch.manual_seed(seed)
        random.seed(seed)
        gen = torch.Generator().manual_seed(seed)
        # every candidate gets its id from its position; CAP of each kind (sample_inputs: the
        # argument forms; reference_inputs: scalars, broadcasting, type promotion, extremal
        # values), evenly spread over that kind, are kept
        cands, counts = {"s": [], "r": []}, {"s": 0, "r": 0}
        for kind, s in samples_for(op, dtype):
            cands[kind].append((f"{name}/{DTYPES[dtype]}/{kind}{counts[kind]}", s))
            counts[kind] += 1
        picks = []
        for kind in ("s", "r"):
            n, cap = len(cands[kind]), CAP[dtype]
            sizes = sorted(n_elements(c[1]) for c in cands[kind])
            if kind == "s" and sizes and sizes[len(sizes) // 2] <= SMALL:
                cap *= 3  # small samples cost little: keep more of them
            ks = range(n) if n <= cap else sorted({round(i * (n - 1) / (cap - 1)) for i in range(cap)})
            picks += [cands[kind][k] for k in ks]
        for sid, s in picks:
            try:
                recs.append(record(op, s, dtype, sid, gen))
            except Unsupported as e:
                print(f"  skip {sid}: {e}", file=sys.stderr)
            except RuntimeError as e:  # torch 1.13 itself fails on a few samples (e.g. a backward)
                print(f"  skip {sid}: torch raises {str(e).splitlines()[0]}", file=sys.stderr)
    if op.error_inputs_func is not None:
        torch.manual_seed(zlib.crc32(f"{name}/error".encode()))
        k = 0
        for ei in op.error_inputs("cpu"):
            if k >= ERROR_CAP:
                break
            s = ei.sample_input
            if skip_error(ei):
                continue
            if not complex_free(s) or n_elements(s) > MAX_ELEMENTS:
                continue
            if isinstance(s.kwargs.get("out"), torch.Tensor):
                # out= tensors come from torch.empty: uninitialized, so zero them (deterministic)
                s = types.SimpleNamespace(input=s.input, args=s.args,
                                          kwargs=dict(s.kwargs, out=torch.zeros_like(s.kwargs["out"])))
            enc = Encoder()
            rec = {"id": f"{name}/error/e{k}", "dtype": "error",
                   "input": enc.value(s.input), "args": [enc.value(a) for a in s.args],
                   "kwargs": {kk: enc.value(v) for kk, v in s.kwargs.items()},
                   "error": f"{ei.error_type.__name__}: {ei.error_regex}"}
            try:
                rec["tensors"] = [enc_tensor(t) for t in enc.tensors]
            except Unsupported:
                continue
            recs.append(rec)
            k += 1
    return name, recs


def main():
    torch.set_default_dtype(torch.float32)
    by_name = {o.name + (f".{o.variant_test_name}" if o.variant_test_name else ""): o for o in op_db}
    missing = [n for n in LOOM_OPS if n not in by_name]
    if missing:
        sys.exit(f"not in this torch's op_db: {missing}")
    only = sys.argv[1:]
    unknown = [n for n in only if n not in LOOM_OPS]
    if unknown:
        sys.exit(f"not in LOOM_OPS: {unknown}")
    os.makedirs(OUT_DIR, exist_ok=True)
    if not only:
        for f in os.listdir(OUT_DIR):
            if f.endswith(".json"):
                os.remove(os.path.join(OUT_DIR, f))
    total = 0
    for n in only or LOOM_OPS:
        name, recs = gen_op(by_name[n])
        path = os.path.join(OUT_DIR, f"{name}.json")
        with open(path, "w") as f:
            json.dump({"op": name, "torch_version": torch.__version__, "samples": recs}, f,
                      separators=(",", ":"))
            f.write("\n")
        size = os.path.getsize(path)
        total += size
        print(f"{name}: {len(recs)} samples, {size // 1024} KiB")
    print(f"total {total / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()
