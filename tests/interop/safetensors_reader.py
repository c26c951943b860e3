"""A small pure-Python safetensors reader (the `safetensors` package is not
in Debian), strict enough to check what torchport writes: the header must
be JSON without duplicate keys, padded with spaces to a multiple of 8, and
the tensors must tile the data region (in any order; their data need not
be aligned, as the safetensors package does not require it)."""

import json
import struct

import torch

DTYPES = {
    "BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16,
    "I32": torch.int32, "I64": torch.int64, "F16": torch.float16, "BF16": torch.bfloat16,
    "F32": torch.float32, "F64": torch.float64, "C64": torch.complex64,
}


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError(f"duplicate keys in {keys}")
    return dict(pairs)


def load(path):
    """Returns (tensors in header order, metadata)."""
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    raw = data[8:8 + n]
    if n % 8 != 0:
        raise ValueError(f"header length {n} is not a multiple of 8")
    text = raw.decode("utf-8")
    if text.rstrip(" ") != text.rstrip() or not text.startswith("{"):
        raise ValueError("header padding is not spaces")
    header = json.loads(text, object_pairs_hook=_no_duplicates)
    metadata = header.pop("__metadata__", {})
    start = 8 + n
    spans = sorted((info["data_offsets"][0], info["data_offsets"][1], name) for name, info in header.items())
    pos = 0
    for b, e, name in spans:
        if b != pos:
            raise ValueError(f"{name}: data at {b}, expected {pos}")
        pos = e
    if start + pos != len(data):
        raise ValueError(f"{len(data) - start - pos} trailing bytes")
    out = {}
    for name, info in header.items():
        dtype = DTYPES[info["dtype"]]
        b, e = info["data_offsets"]
        size = torch.tensor([], dtype=dtype).element_size()
        count = 1
        for s in info["shape"]:
            count *= s
        if e - b != count * size:
            raise ValueError(f"{name}: {e - b} bytes for shape {info['shape']}")
        buf = bytearray(data[start + b:start + e])
        flat = torch.frombuffer(buf, dtype=torch.uint8) if buf else torch.empty(0, dtype=torch.uint8)
        out[name] = flat.view(dtype).reshape(info["shape"])
    return out, metadata
