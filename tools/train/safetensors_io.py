"""Reads and writes safetensors files (F32 and BF16) with no library beyond torch: an 8-byte
little-endian header length, a JSON header of {name: {dtype, shape, data_offsets}}, the data."""

import json
import struct

import torch

_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16}


def save(path, tensors, dtype="F32"):
    """Writes {name: tensor} with every tensor cast to `dtype`, sorted by name."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to(_DTYPES[dtype]).contiguous().cpu()
        raw = t.view(torch.int16 if dtype == "BF16" else torch.int32).numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def load(path):
    """{name: float32 tensor}."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = bytearray(data[8 + n + begin:8 + n + end])
        dtype = _DTYPES[info["dtype"]]
        carrier = torch.int16 if dtype == torch.bfloat16 else torch.int32
        t = torch.frombuffer(raw, dtype=carrier).view(dtype).reshape(info["shape"])
        out[name] = t.float()
    return out
