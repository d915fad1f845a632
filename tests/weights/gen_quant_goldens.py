"""Golden quantizer outputs for tests/weights (run: /usr/bin/python3 gen_quant_goldens.py).

Writes quant_goldens.json next to this file. Each case is a float32 weight W [N, K] and, per
format, the packed bytes / scales the reference quantizer produces and the dequantized weight as
float32 bit patterns (uint32, so -0.0 and the exact float32 value are checked).

The formulas are the reference implementations, written here in numpy float32 arithmetic:

- GGML Q8_0, ggml/src/ggml-quants.c quantize_row_q8_0_ref:
      amax = max |x|;  d = amax / ((1 << 7) - 1);  id = d ? 1.0f/d : 0.0f;
      y.d = GGML_FP32_TO_FP16(d);  y.qs[j] = roundf(x[j]*id)            (roundf: half away from 0)
  dequantize_row_q8_0: y = x.qs[j] * GGML_FP16_TO_FP32(x.d)
- GGML Q4_0, quantize_row_q4_0_ref:
      max = first x of largest |x| (`if (amax < fabsf(v)) { amax = fabsf(v); max = v; }`)
      d = max / -8;  id = d ? 1.0f/d : 0.0f;  y.d = GGML_FP32_TO_FP16(d)
      xi0 = MIN(15, (int8_t)(x[j]*id + 8.5f));  xi1 = same for x[j + 16]
      y.qs[j] = xi0 | (xi1 << 4)
  dequantize_row_q4_0: y[j] = ((qs[j] & 0x0F) - 8) * d;  y[j + 16] = ((qs[j] >> 4) - 8) * d
- bitsandbytes NF4, csrc/kernels.cu kQuantizeBlockwise<T, 64, 2, 0, NF4> (blocks of 64 over the
  flattened tensor):
      absmax = fmaxf over |x|;  smem_absmax_value = 1.0f / absmax
      qvals[j]  = dQuantizeNF4(x[2j] * (1/absmax)) << 4;  qvals[j] |= dQuantizeNF4(x[2j+1] * (1/absmax))
  dQuantizeNF4 is a binary tree of `x > threshold` tests (thresholds below, copied from the
  source); its result is the number of thresholds strictly below x (NaN -> 0).
  kDequantizeBlockwise NF4: y = dDequantizeNF4(q) * absmax (nf4_dequantization_lut).
- per-channel int8 (symmetric, zero point 0): scale = amax / 127 per output row (float32);
  q = nearbyint(x * (1.0f / scale)) clamped to [-127, 127], as torch's quantize_per_channel
  computes it (aten/src/ATen/native/quantized/AffineQuantizerBase.cpp quantize_val); checked
  below against torch.quantize_per_channel for every row with a nonzero scale. An all-zero row
  gets scale 0 and q 0.
"""
import json
import os

import numpy as np
import torch

f32 = np.float32

NF4_CODE = np.array([
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0], dtype=f32)
NF4_THRESHOLDS = np.array([
    -0.8480964004993439, -0.6106329262256622, -0.4599952697753906, -0.33967943489551544,
    -0.23460740596055984, -0.13791173323988914, -0.045525018125772476, 0.03979014977812767,
    0.1202552504837513, 0.2035212516784668, 0.2920137718319893, 0.3893125355243683,
    0.5016634166240692, 0.6427869200706482, 0.8614784181118011], dtype=f32)


def fp16_bytes(d):
    h = np.array([d], dtype=f32).astype(np.float16).view(np.uint16)[0]  # round to nearest even
    return [int(h & 0xFF), int(h >> 8)]


def fp16_value(d):
    return f32(np.array([d], dtype=f32).astype(np.float16)[0])


def roundf(v):
    v = float(v)
    return -np.floor(-v + 0.5) if v < 0 else np.floor(v + 0.5)


def q8_0(W):
    N, K = W.shape
    out, deq = [], np.zeros_like(W)
    for r in range(N):
        for b in range(K // 32):
            x = W[r, b * 32:(b + 1) * 32]
            amax = f32(np.max(np.abs(x)))
            d = f32(amax / f32(127))
            idv = f32(f32(1) / d) if d != 0 else f32(0)
            qs = [int(roundf(f32(v * idv))) for v in x]
            out += fp16_bytes(d) + [q & 0xFF for q in qs]
            dd = fp16_value(d)
            deq[r, b * 32:(b + 1) * 32] = np.array([f32(f32(q) * dd) for q in qs], dtype=f32)
    return {"qweight": out, "scales": None, "dequant": deq}


def q4_0(W):
    N, K = W.shape
    out, deq = [], np.zeros_like(W)
    for r in range(N):
        for b in range(K // 32):
            x = W[r, b * 32:(b + 1) * 32]
            amax, mx = f32(0), f32(0)
            for v in x:
                if amax < abs(v):
                    amax, mx = f32(abs(v)), v
            d = f32(mx / f32(-8))
            idv = f32(f32(1) / d) if d != 0 else f32(0)
            q = [min(15, int(np.trunc(f32(f32(v * idv) + f32(8.5))))) for v in x]
            out += fp16_bytes(d) + [q[j] | (q[j + 16] << 4) for j in range(16)]
            dd = fp16_value(d)
            deq[r, b * 32:(b + 1) * 32] = np.array([f32(f32(qq - 8) * dd) for qq in q], dtype=f32)
    return {"qweight": out, "scales": None, "dequant": deq}


def nf4_index(x):
    return int(np.sum(f32(x) > NF4_THRESHOLDS))  # NaN compares false everywhere -> 0


def nf4(W):
    flat = W.reshape(-1)
    out, absmax, deq = [], [], np.zeros_like(flat)
    for b in range(flat.size // 64):
        x = flat[b * 64:(b + 1) * 64]
        am = f32(np.max(np.abs(x)))
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = f32(f32(1) / am)
            q = [nf4_index(f32(v * inv)) for v in x]
        out += [(q[2 * j] << 4) | q[2 * j + 1] for j in range(32)]
        absmax.append(float(am))
        deq[b * 64:(b + 1) * 64] = np.array([f32(NF4_CODE[qq] * am) for qq in q], dtype=f32)
        if am != 0:  # off ties, the tree is the nearest code
            near = np.argmin(np.abs(f32(x * inv)[:, None] - NF4_CODE[None, :]), axis=1)
            tie = np.isin(f32(x * inv), NF4_THRESHOLDS)
            assert all(int(a) == bb for a, bb, t in zip(near, q, tie) if not t), "tree != nearest code"
    return {"qweight": out, "scales": absmax, "dequant": deq.reshape(W.shape)}


def int8(W):
    N, K = W.shape
    out, scales, deq = [], [], np.zeros_like(W)
    for r in range(N):
        x = W[r]
        s = f32(f32(np.max(np.abs(x))) / f32(127))
        inv = f32(f32(1) / s) if s != 0 else f32(0)
        q = [int(np.clip(np.rint(f32(v * inv)), -127, 127)) for v in x]  # rint: half to even
        if s != 0:
            tq = torch.quantize_per_channel(torch.from_numpy(x[None, :].copy()), torch.tensor([float(s)], dtype=torch.float64),
                                            torch.tensor([0]), 0, torch.qint8).int_repr()[0].tolist()
            assert tq == q, (r, tq, q)
        out += [qq for qq in q]
        scales.append(float(s))
        deq[r] = np.array([f32(f32(qq) * s) for qq in q], dtype=f32)
    return {"qweight": out, "scales": scales, "dequant": deq}


def cases():
    rng = np.random.default_rng(12)
    yield "randn_4x128", rng.standard_normal((4, 128)).astype(f32)
    W = np.zeros((6, 128), dtype=f32)
    W[0, :] = 0  # all zero row: d = 0, id = 0; NF4 scales 0*inf = NaN -> code 0 -> -0.0
    W[1, :] = f32(0.3)  # all-equal blocks
    # ties: amax 127 -> Q8_0 d = 1, id = 1: roundf(±2.5) = ±3; int8 scale 1: rint(2.5) = 2, rint(3.5) = 4
    W[2, :32] = np.array([127, -2.5, 2.5, 3.5, -3.5, 0.5, -0.5, 1.5] + [0] * 24, dtype=f32)
    W[2, 32:64] = np.linspace(-1, 1, 32, dtype=f32)
    W[2, 64:] = rng.standard_normal(64).astype(f32) * f32(1e-6)  # fp16 subnormal scales
    # Q4_0: max = -8 (d = 1, id = 1): x + 8.5 at integer boundaries; +8 and -8 together: the first wins
    W[3, :32] = np.array([-8, 8, -0.5, 0.5, 7.5, -7.5, 7.49, 0, 1, -1] + [0.25] * 22, dtype=f32)
    W[3, 32:64] = np.array([8, -8, 4, -4] + [0.1] * 28, dtype=f32)
    W[3, 64:] = rng.uniform(-3, 3, 64).astype(f32)
    # NF4: absmax 1 -> scale 1: values exactly at the thresholds tie to the lower code; codes themselves
    W[4, :64] = np.concatenate([NF4_THRESHOLDS, NF4_CODE, [1.0, -1.0], rng.uniform(-1, 1, 64 - 33)]).astype(f32)
    W[4, 64:] = -np.abs(rng.standard_normal(64)).astype(f32) * f32(1000)  # large, negative max
    W[5, :] = rng.standard_normal(128).astype(f32) * f32(0.02)  # typical weight scale
    yield "edges_6x128", W


def main():
    out = {"cases": []}
    for name, W in cases():
        case = {"name": name, "shape": list(W.shape), "input": [float(v) for v in W.reshape(-1)], "formats": {}}
        for fmt, fn in [("q8_0", q8_0), ("q4_0", q4_0), ("nf4", nf4), ("int8", int8)]:
            r = fn(W)
            case["formats"][fmt] = {
                "qweight": r["qweight"],
                "scales": r["scales"],
                "dequant_bits": [int(b) for b in r["dequant"].astype(f32).reshape(-1).view(np.uint32)],
            }
        out["cases"].append(case)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "quant_goldens.json")
    with open(path, "w") as fh:
        json.dump(out, fh, separators=(",", ":"))
    print("wrote", path)


if __name__ == "__main__":
    main()
