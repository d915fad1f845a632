"""write_safetensors, shared by the fixture generators (tests/models/gen_llama_goldens.py,
tests/models/fixtures/gen_gpt2_fixtures.py): a float32 .safetensors file as Hugging Face's
safetensors writes it (8-byte little-endian header length, compact JSON header padded with spaces
to a multiple of 8, then the tensors' bytes in order). Only torch tensors are read (no safetensors
package needed).
"""
import json
import struct

import torch


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, torch tensor), written as float32 in the given order; metadata: the
    optional "__metadata__" dict (string -> string), first in the header."""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    blobs = []
    off = 0
    for name, t in tensors:
        b = t.detach().contiguous().to(torch.float32).numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
