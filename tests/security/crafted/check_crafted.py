#!/usr/bin/python3
"""Checks the crafted corpus without running any of it:

  /usr/bin/python3 tests/security/crafted/check_crafted.py

- every expected.json entry exists, and the global an `unsafe` entry names
  appears (module and name) in the bytes a loader would unpickle: the file,
  its zip and tar members, its decompressed streams, a folder's files
  (symlinks followed);
- each construct of make_crafted.VM_REFUSES names no global outside
  builtins / collections / _codecs, and CPython's pickle.loads and
  pickle._loads accept it (only those harmless bytes are ever unpickled,
  built in memory from the generator's table, never read from a file);
- numpy's own header reader parses every crafted .npy (and .npz member)
  header to a dtype with hasobject, without reading the data;
- the Zstandard member decodes (by /usr/bin/zstd, when installed) to the
  .npy it stands for.

Nothing here imports the modules the payloads name or unpickles a payload.
"""

import bz2
import gzip
import io
import json
import lzma
import os
import pickle
import pickletools
import shutil
import subprocess
import sys
import tarfile
import zipfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_crafted  # noqa: E402  (builds the cases in memory; writes nothing)


def decompressions(data):
    out = []
    for f in (gzip.decompress, zlib.decompress, bz2.decompress, lzma.decompress):
        try:
            out.append(f(data))
        except Exception:
            pass
    if not out and data[:2] == b"\x1f\x8b":  # a damaged gzip stream: what inflates
        try:
            out.append(zlib.decompressobj(31).decompress(data))
        except Exception:
            pass
    return out


def blobs(data, depth=0):
    """The byte strings a loader could unpickle from `data`, recursively."""
    yield data
    if depth > 3:
        return
    for d in decompressions(data):
        yield from blobs(d, depth + 1)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for info in z.infolist():
                try:
                    yield from blobs(z.read(info), depth + 1)
                except Exception:  # a refused member: its stored bytes
                    pass
    except Exception:
        pass
    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as t:
            for m in t.getmembers():
                if m.isfile():
                    yield from blobs(t.extractfile(m).read(), depth + 1)
    except Exception:
        pass


def path_blobs(path):
    if os.path.isdir(path):
        for root, _, files in os.walk(path, followlinks=False):
            for f in files:
                with open(os.path.join(root, f), "rb") as fh:  # follows symlinks
                    yield from blobs(fh.read())
    else:
        with open(path, "rb") as fh:
            yield from blobs(fh.read())


def names_in(module, name, data):
    # GLOBAL writes "module\nname\n"; STACK_GLOBAL pushes the two strings.
    return module.encode() in data and name.split(".")[-1].encode() in data


def split_global(g):
    # Where the module ends is not written in expected.json: accept any split.
    parts = g.split(".")
    return [(".".join(parts[:i]), ".".join(parts[i:])) for i in range(1, len(parts))]


# Python-2 names the files spell differently from what Python imports.
WRITTEN = {"builtins.eval": ("__builtin__", "eval"), "subprocess.getoutput": ("commands", "getoutput"),
           "io.open": ("cStringIO", "open")}


def check_entries(problems):
    for e in json.load(open(os.path.join(HERE, "expected.json"))):
        path = os.path.join(HERE, e["file"])
        if not os.path.lexists(path):
            problems.append(f"{e['file']}: missing")
            continue
        for k in ("file", "verdict", "global", "reason", "known_dangerous", "source"):
            if k not in e:
                problems.append(f"{e['file']}: no '{k}'")
        learnt = e["verdict"] == "clean" and e["file"].startswith("vm_refuses/") and not e["global"]
        if e["verdict"] not in ("unsafe", "unscannable", "truncated", "malformed") and not learnt:
            problems.append(f"{e['file']}: verdict {e['verdict']}")
        if e["verdict"] == "unsafe" and e["global"]:
            splits = split_global(e["global"]) + ([WRITTEN[e["global"]]] if e["global"] in WRITTEN else [])
            if not any(names_in(m, n, b) for b in path_blobs(path) for m, n in splits):
                problems.append(f"{e['file']}: '{e['global']}' not found in what a loader reads")


def check_constructs(problems):
    allowed = ("builtins ", "collections ", "_codecs ")
    for name, proto, body, value, what in make_crafted.VM_REFUSES:
        data = proto + body + b"."
        try:
            for op, arg, _ in pickletools.genops(io.BytesIO(data)):
                if op.name in ("GLOBAL", "INST") and not str(arg).startswith(allowed):
                    problems.append(f"{name}: names {arg}")
                if op.name in ("STACK_GLOBAL", "EXT1", "EXT2", "EXT4", "PERSID", "BINPERSID"):
                    problems.append(f"{name}: {op.name}")
        except Exception as e:
            problems.append(f"{name}: genops: {e}")
            continue
        with open(os.path.join(HERE, "vm_refuses", name + ".pkl"), "rb") as f:
            if f.read() != data:
                problems.append(f"{name}: the file differs from the table")
        for loads in (pickle.loads, pickle._loads):
            try:
                loads(data)
            except Exception as e:
                problems.append(f"{name}: CPython ({loads.__module__}.{loads.__name__}) refuses it: {e}")


def check_numpy(problems):
    import numpy as np

    def header(data, where):
        f = io.BytesIO(data)
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            _, _, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            _, _, dtype = np.lib.format.read_array_header_2_0(f)
        if not dtype.hasobject and not where.endswith("w.npy"):
            problems.append(f"{where}: dtype {dtype} holds no object")

    for e in json.load(open(os.path.join(HERE, "expected.json"))):
        path = os.path.join(HERE, e["file"])
        if e["file"].endswith(".npy"):
            with open(path, "rb") as f:
                header(f.read(), e["file"])
        elif e["file"].endswith(".npz") and "zstd" not in e["file"]:
            with zipfile.ZipFile(path) as z:
                for n in z.namelist():
                    header(z.read(n), e["file"] + ":" + n)


def check_zstd(problems):
    if not shutil.which("zstd"):
        print("zstd not installed: the Zstandard member is not checked")
        return
    with open(os.path.join(HERE, "numpy", "npz_zstd_member.npz"), "rb") as f:
        data = f.read()
    start = data.index(b"\x28\xb5\x2f\xfd")
    end = data.index(b"PK\x01\x02")
    out = subprocess.run(["zstd", "-dc"], input=data[start:end], capture_output=True).stdout
    if out != make_crafted.OBJ_NPY:
        problems.append("npz_zstd_member.npz: the frame does not decode to the .npy")


def main():
    problems = []
    check_entries(problems)
    check_constructs(problems)
    check_numpy(problems)
    check_zstd(problems)
    for p in problems:
        print("FAIL", p)
    n = len(json.load(open(os.path.join(HERE, "expected.json"))))
    print(f"{n} entries checked, {len(problems)} problem(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
