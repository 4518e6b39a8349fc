"""Minimal safetensors reader for the peers (F64 tensors only)."""
import json
import struct


def read(path):
    """Returns (tensors, metadata): tensors maps name -> (shape, bytes offset, raw data)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, t in header.items():
        if t["dtype"] != "F64":
            raise ValueError(f"{path}: {name}: dtype {t['dtype']}, expected F64")
        lo, hi = t["data_offsets"]
        tensors[name] = (tuple(t["shape"]), data[base + lo:base + hi])
    return tensors, meta
