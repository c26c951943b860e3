"""A small pure-Python safetensors writer (the `safetensors` package is not
in Debian), the counterpart of safetensors_reader.py: a little-endian u64
header length, a JSON header padded with spaces to a multiple of 8, then the
tensors' bytes back to back in the header's order."""

import json
import struct

import torch

NAMES = {
    torch.bool: "BOOL", torch.uint8: "U8", torch.int8: "I8", torch.int16: "I16",
    torch.int32: "I32", torch.int64: "I64", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.float32: "F32", torch.float64: "F64", torch.complex64: "C64",
}


def save(tensors, path, metadata=None):
    """Writes `tensors` (a dict name -> tensor, in order) to `path`."""
    header = {}
    blobs = []
    pos = 0
    for name, t in tensors.items():
        flat = t.detach().contiguous().reshape(-1)
        raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [pos, pos + len(raw)]}
        blobs.append(raw)
        pos += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)
