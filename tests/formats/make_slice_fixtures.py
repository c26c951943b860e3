#!/usr/bin/env python3
"""Writes the fixtures of tests/formats/test_slice.cpp (run with Debian's
torch: /usr/bin/python3 tests/formats/make_slice_fixtures.py).

The same small tensors (every dtype, views, storages shared between tensors)
are saved as a torch.save zip, a legacy (pre-1.6) file, a safetensors file
and a two-shard Hugging Face safetensors checkpoint; the tar fixture of
tests/fixtures is used as it is. slices.expected.json holds the SHA-256 of
torch's `t.narrow(dim, start, length)` for several ranges of every dimension
of every tensor: a slice read by torchport must hash the same."""

import collections
import hashlib
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "slices")
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
import safetensors_writer  # noqa: E402


def sha(t):
    t = t.detach().contiguous().reshape(-1)
    return hashlib.sha256(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"").hexdigest()


def tensors():
    g = torch.Generator().manual_seed(19)
    d = collections.OrderedDict()
    d["f16"] = torch.randn(4, 6, generator=g).half()
    d["bf16"] = torch.randn(4, 6, generator=g).bfloat16()
    d["f32"] = torch.randn(2, 3, 4, generator=g)
    d["f64"] = torch.randn(4, 6, generator=g).double()
    d["u8"] = torch.randint(0, 255, (4, 6), generator=g, dtype=torch.uint8)
    d["i8"] = torch.randint(-128, 127, (4, 6), generator=g, dtype=torch.int8)
    d["i16"] = torch.randint(-30000, 30000, (4, 6), generator=g, dtype=torch.int16)
    d["i32"] = torch.randint(-2**31, 2**31 - 1, (4, 6), generator=g, dtype=torch.int32)
    d["i64"] = torch.randint(-2**62, 2**62, (4, 6), generator=g, dtype=torch.int64)
    d["bool"] = torch.randint(0, 2, (4, 6), generator=g).bool()
    d["c64"] = torch.randn(4, 6, generator=g, dtype=torch.complex64)
    d["c128"] = torch.randn(3, 4, generator=g, dtype=torch.complex128)
    d["vector"] = torch.randn(10, generator=g)
    d["wide"] = torch.randn(8, 16, generator=g).bfloat16()
    # Five bytes shift every later record off its alignment in the legacy
    # and safetensors files: those are read in place (deferred copies).
    d["odd_u8"] = torch.arange(5, dtype=torch.uint8)
    d["after_odd"] = torch.randn(3, 4, generator=g)
    d["after_odd_i64"] = torch.randint(-1000, 1000, (2, 3), generator=g, dtype=torch.int64)
    return d


def views():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    d = collections.OrderedDict()
    d["base"] = base
    d["transposed"] = base.t()
    d["row"] = base[2]
    d["column"] = base[:, 2]
    d["block"] = base[1:3, 2:5]
    d["expanded"] = torch.arange(3, dtype=torch.int64).reshape(3, 1).expand(3, 4)
    d["stepped"] = torch.arange(20, dtype=torch.int16)[::3]
    tied = torch.randn(5, 2, generator=torch.Generator().manual_seed(1))
    d["tied_a"] = tied
    d["tied_b"] = tied
    d["permuted"] = torch.arange(24, dtype=torch.int32).reshape(2, 3, 4).permute(2, 0, 1)
    return d


def ranges(n):
    """Ranges of a dimension of size n: halves, the middle, all, none."""
    out = {(0, n), (0, n // 2), (n // 2, n - n // 2), (0, 0)}
    if n > 2:
        out.add((1, n - 2))
    return sorted(out)


def expectations(ts):
    exp = {}
    for name, t in ts.items():
        rows = []
        for dim in range(t.dim()):
            for start, length in ranges(t.shape[dim]):
                rows.append([dim, start, length, sha(t.narrow(dim, start, length))])
        exp[name] = rows
    return exp


def main():
    os.makedirs(OUT, exist_ok=True)
    every = collections.OrderedDict(list(tensors().items()) + list(views().items()))
    torch.save(every, os.path.join(OUT, "slices.pt"))
    torch.save(every, os.path.join(OUT, "slices_legacy.pt"), _use_new_zipfile_serialization=False)
    for f in ("slices.pt", "slices_legacy.pt"):
        back = torch.load(os.path.join(OUT, f))
        assert all(torch.equal(back[k], v) for k, v in every.items())
    # safetensors holds contiguous tensors of the dtypes it names.
    plain = collections.OrderedDict((k, v) for k, v in tensors().items() if v.dtype in safetensors_writer.NAMES)
    safetensors_writer.save(plain, os.path.join(OUT, "slices.safetensors"))
    shard_dir = os.path.join(OUT, "sharded")
    os.makedirs(shard_dir, exist_ok=True)
    names = list(plain)
    halves = (names[: len(names) // 2], names[len(names) // 2:])
    weight_map = {}
    for i, part in enumerate(halves):
        file = f"model-{i + 1:05d}-of-00002.safetensors"
        safetensors_writer.save(collections.OrderedDict((k, plain[k]) for k in part), os.path.join(shard_dir, file))
        weight_map.update({k: file for k in part})
    with open(os.path.join(shard_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(v.numel() * v.element_size() for v in plain.values())},
                   "weight_map": weight_map}, f, indent=1)
    tar = torch.load(os.path.join(ROOT, "tests", "fixtures", "tar.pt"))
    tar_tensors = collections.OrderedDict((k, v) for k, v in tar.items() if isinstance(v, torch.Tensor))
    expected = {
        "tensors": expectations(every),
        "files": {"slices.pt": list(every), "slices_legacy.pt": list(every), "slices.safetensors": list(plain),
                  "sharded": list(plain)},
        "tar": expectations(tar_tensors),
    }
    with open(os.path.join(OUT, "slices.expected.json"), "w") as f:
        json.dump(expected, f, indent=0)
        f.write("\n")


if __name__ == "__main__":
    main()
