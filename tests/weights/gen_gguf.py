"""A small GGUF file for tests/weights/gguf.test.ts (run: /usr/bin/python3 gen_gguf.py).

Writes tiny.gguf and gguf_expected.json next to this file. The file is written by hand per the
GGUF spec (ggml/docs/gguf.md, version 3, little endian):

    magic "GGUF" | uint32 version = 3 | uint64 tensor_count | uint64 metadata_kv_count
    metadata kv: gguf_string key | uint32 value_type | value
        (gguf_string = uint64 length + UTF-8 bytes; arrays = uint32 item type, uint64 count, items)
    tensor infos: gguf_string name | uint32 n_dims | uint64 ne[n_dims] | uint32 ggml_type | uint64 offset
    padding to general.alignment (32 by default), then the tensor data; each tensor's offset is
    relative to the start of the data and a multiple of the alignment.

ne[0] is the fastest-varying dimension (the row length): a weight [N, K] is stored with
ne = [K, N]. Q8_0 / Q4_0 rows are K/32 blocks each (block_q8_0: fp16 d + 32 int8; block_q4_0:
fp16 d + 16 bytes), quantized with the reference formulas of gen_quant_goldens.py (ggml's
quantize_row_q8_0_ref / quantize_row_q4_0_ref). The expected values are the dequantized weights
(float32 bit patterns), the F16 tensor as float32, and the F32 tensors as they are.
"""
import json
import os
import struct

import numpy as np

from gen_quant_goldens import q4_0, q8_0

HERE = os.path.dirname(os.path.abspath(__file__))
ALIGN = 32
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0 = 0, 1, 2, 8
T_UINT32, T_FLOAT32, T_STRING, T_ARRAY, T_UINT64 = 4, 6, 8, 9, 10


def gstr(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return gstr(key) + struct.pack("<I", vtype) + payload


def main():
    rng = np.random.default_rng(1212)
    tensors = []  # (name, shape [rows..., K] as torch order, ggml type, raw bytes, expected float32)
    w = rng.standard_normal((4, 64)).astype(np.float32)
    r = q8_0(w)
    tensors.append(("blk.0.attn_q.weight", [4, 64], GGML_Q8_0, bytes(r["qweight"]), r["dequant"]))
    w = rng.standard_normal((3, 96)).astype(np.float32)
    r = q4_0(w)
    tensors.append(("blk.0.ffn_down.weight", [3, 96], GGML_Q4_0, bytes(r["qweight"]), r["dequant"]))
    e = rng.standard_normal((5, 8)).astype(np.float16)
    tensors.append(("token_embd.weight", [5, 8], GGML_F16, e.tobytes(), e.astype(np.float32)))
    n = rng.standard_normal(8).astype(np.float32)
    tensors.append(("output_norm.weight", [8], GGML_F32, n.tobytes(), n))
    m = rng.standard_normal((2, 3, 4)).astype(np.float32)
    tensors.append(("blk.0.extra", [2, 3, 4], GGML_F32, m.tobytes(), m))

    meta = [
        kv("general.architecture", T_STRING, gstr("llama")),
        kv("general.alignment", T_UINT32, struct.pack("<I", ALIGN)),
        kv("general.name", T_STRING, gstr("loom tiny")),
        kv("llama.rope.freq_base", T_FLOAT32, struct.pack("<f", 10000.0)),
        kv("tokenizer.ggml.tokens", T_ARRAY, struct.pack("<IQ", T_STRING, 3) + gstr("a") + gstr("b") + gstr("<s>")),
        kv("general.parameter_count", T_UINT64, struct.pack("<Q", 12345)),
    ]
    infos, data, offset = [], b"", 0
    for name, shape, gtype, raw, _ in tensors:
        ne = list(reversed(shape))  # ne[0] = row length
        infos.append(gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne) + struct.pack("<IQ", gtype, offset))
        pad = (-len(raw)) % ALIGN
        data += raw + b"\0" * pad
        offset += len(raw) + pad
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)) + b"".join(meta) + b"".join(infos)
    head += b"\0" * ((-len(head)) % ALIGN)
    with open(os.path.join(HERE, "tiny.gguf"), "wb") as fh:
        fh.write(head + data)
    expected = {
        "metadata": {"general.architecture": "llama", "general.alignment": ALIGN, "general.name": "loom tiny",
                     "llama.rope.freq_base": 10000.0, "tokenizer.ggml.tokens": ["a", "b", "<s>"], "general.parameter_count": 12345},
        "data_offset": len(head),
        "tensors": [{"name": name, "shape": shape, "type": {0: "F32", 1: "F16", 2: "Q4_0", 8: "Q8_0"}[gtype],
                     "bits": [int(b) for b in np.asarray(vals, dtype=np.float32).reshape(-1).view(np.uint32)]}
                    for name, shape, gtype, _, vals in tensors],
    }
    with open(os.path.join(HERE, "gguf_expected.json"), "w") as fh:
        json.dump(expected, fh, separators=(",", ":"))
    print("wrote tiny.gguf", len(head) + len(data), "bytes")


if __name__ == "__main__":
    main()
