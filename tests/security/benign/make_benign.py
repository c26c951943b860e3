#!/usr/bin/python3
"""Writes the benign files of the same shapes as the crafted ones (issue 26):
what `torchport scan` must call clean, or not a model file, and never
unsafe. Each is listed in expected.json (verdict "clean",
"not-a-model-file" or, for the truncated checkpoints, "truncated").

    /usr/bin/python3 tests/security/benign/make_benign.py

Needs Debian's python3-torch (1.13) and python3-numpy. The tar checkpoint
and the crafted files come from the same builders (crafted/make_crafted.py),
so a crafted file differs from its benign twin only by its payload. Every
file written here is loaded back with torch.load, np.load or pickle.loads
and compared with what was saved (they are our own harmless files). The
output is the same bytes on every run.
"""

import bz2
import collections
import gzip
import hashlib
import io
import json
import lzma
import os
import pickle
import pickletools
import shutil
import struct
import sys
import tempfile
import zipfile
import zlib

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "crafted"))
import make_crafted as mc  # noqa: E402  (its builders; it writes nothing on import)

GROUPS = ("tar", "numpy", "compressed", "stacked", "model_folder", "hf_snapshot", "truncated", "weights_only")
CASES = []  # expected.json entries
FILES = []  # (path, bytes | mc.Link)


def entry(name, verdict="clean", source="", data=None):
    CASES.append({"file": name, "verdict": verdict, "global": "", "reason": "", "known_dangerous": False,
                  "source": source})
    if data is not None:
        FILES.append((name, data))


def torch_bytes(obj, legacy=False):
    """torch.save to memory (torch 1.13), loaded back and compared."""
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=not legacy)
    data = buf.getvalue()
    if legacy:
        data = stable_legacy_keys(data)
    back = torch.load(io.BytesIO(data))
    assert same(back, obj), (back, obj)
    return data


def stable_legacy_keys(data):
    """The legacy format names storages by their address (str(_cdata)): each
    key, a BINUNICODE in the object pickle and in the storage-key list (the
    fifth pickle; protocol 2 has no frames), becomes its index, so that the
    bytes are the same on every run."""
    f = io.BytesIO(data)
    for _ in range(4):
        for _op in pickletools.genops(f):
            if _op[0].name == "STOP":
                break
    keys = [arg for op, arg, _ in pickletools.genops(f) if op.name.endswith("UNICODE")]
    assert len(keys) == 1, keys  # more would be stored in the order of their addresses
    for i, k in enumerate(keys):
        was = b"X" + struct.pack("<I", len(k)) + k.encode()
        assert data.count(was) >= 2, k  # the object pickle's persistent ids and the key list
        data = data.replace(was, b"X" + struct.pack("<I", len(str(i))) + str(i).encode())
    return data


def load_file(data):
    """torch.load from a real file: torch reads the tar format only from one."""
    with tempfile.NamedTemporaryFile(suffix=".pt") as f:
        f.write(data)
        f.flush()
        return torch.load(f.name)


def same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def state_dict():
    g = torch.Generator().manual_seed(26)
    return collections.OrderedDict([
        ("embed.weight", torch.randn(4, 3, generator=g)),
        ("norm.weight", torch.ones(3)),
        ("head.bias", torch.arange(4, dtype=torch.int64)),
    ])


def one_storage_state_dict():
    """Views of one storage: the legacy format orders storages by address,
    so one storage keeps its bytes the same on every run."""
    flat = torch.arange(19, dtype=torch.float32) / 4
    return collections.OrderedDict([("embed.weight", flat[:12].view(4, 3)), ("norm.weight", flat[12:15]),
                                    ("head.bias", flat[15:])])


CHECKPOINT = torch_bytes(state_dict())
LEGACY = torch_bytes(one_storage_state_dict(), legacy=True)

# --- the tar format: the crafted builder without a payload -------------------
TAR = mc.tar_checkpoint()
got = load_file(TAR)
assert same(got, {"w": torch.tensor([1.0, 2.0])}), got
entry("tar/checkpoint_tar.pt", source="the crafted tar/ files without their payloads; torch.load reads it",
      data=TAR)
two = mc.tar_checkpoint(
    storages_count=mc.P(2).i(2).stop(),
    storage_data=struct.pack("<q", 2) + struct.pack("<2f", 1.0, 2.0)
    + mc.in_tuple(bytes(mc.P(2).i(2).b[2:]), mc.CPU, bytes(mc.P(2).glob("torch", "LongStorage").b[2:]))
    + struct.pack("<q", 3) + struct.pack("<3q", 7, 8, 9),
    views=mc.P(2).val([(3, 2, 1, 2)]).stop(),
    tensors_count=mc.P(2).i(2).stop(),
    tensor_data=struct.pack("<ii", 1, 0) + struct.pack("<qqq", 2, 1, 0)
    + mc.in_tuple(bytes(mc.P(2).i(11).b[2:]), bytes(mc.P(2).i(3).b[2:]), bytes(mc.P(2).glob("torch", "LongTensor").b[2:]))
    + struct.pack("<ii", 1, 0) + struct.pack("<qqq", 2, 1, 0),
    pickle=mc.P(2).raw(b"}(").s("w").raw(b"P10\n").s("tail").raw(b"P11\n").s("step").i(3).raw(b"u").stop())
got = load_file(two)
assert same(got, {"w": torch.tensor([1.0, 2.0]), "tail": torch.tensor([8, 9]), "step": 3}), got
entry("tar/checkpoint_tar_view.pt", source="two storages, a storage view and two tensors (torch.load reads it)",
      data=two)

# --- numpy: numeric arrays, numeric structured dtypes, npz of every method ---

def npy_bytes(arr, version=None):
    buf = io.BytesIO()
    if version is None:
        np.save(buf, arr, allow_pickle=False)
    else:
        np.lib.format.write_array(buf, arr, version=version, allow_pickle=False)
    data = buf.getvalue()
    back = np.load(io.BytesIO(data), allow_pickle=False)
    assert back.dtype == arr.dtype and np.array_equal(back, arr), (back, arr)
    return data


F32 = np.arange(6, dtype="<f4").reshape(2, 3)
I64 = np.array([[1, -2], [3, 4]], dtype="<i8", order="F")
STRUCT = np.array([(1.5, 2), (3.5, 4)], dtype=[("a", "<f4"), ("b", "<i8")])
SUB = np.zeros(2, dtype=[("v", "<f4", (3,))])
entry("numpy/float32.npy", source="np.save of a float32 array", data=npy_bytes(F32))
entry("numpy/int64_fortran.npy", source="fortran_order True", data=npy_bytes(np.asfortranarray(I64)))
entry("numpy/structured_numeric.npy", source="a structured dtype without objects",
      data=npy_bytes(STRUCT))
entry("numpy/subarray_numeric.npy", source="a subarray field without objects", data=npy_bytes(SUB))
entry("numpy/float32_header_v2.npy", source="format version 2.0", data=npy_bytes(F32, version=(2, 0)))
entry("numpy/unicode_strings.npy", source="a '<U5' array: text, not objects",
      data=npy_bytes(np.array(["alpha", "beta"])))
obj = np.array([1, "two", 3.0, None], dtype=object)
buf = io.BytesIO()
np.save(buf, obj, allow_pickle=True)
OBJ = buf.getvalue()
assert list(np.load(io.BytesIO(OBJ), allow_pickle=True)) == list(obj)
entry("numpy/object_plain_data.npy",
      source="np.save of an object array of plain data: numpy's reconstructors only, on the allow-list",
      data=OBJ)


def npz(members, method):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in members:
            z.writestr(mc.stamp(name, method), data)
    data = out.getvalue()
    with np.load(io.BytesIO(data), allow_pickle=False) as f:
        for name, raw in members:
            ref = np.load(io.BytesIO(raw), allow_pickle=False)
            assert np.array_equal(f[name[:-4]], ref)
    return data


MEMBERS = [("w.npy", npy_bytes(F32)), ("b.npy", npy_bytes(np.arange(3, dtype="<i8")))]
for tag, method in (("stored", zipfile.ZIP_STORED), ("deflate", zipfile.ZIP_DEFLATED),
                    ("lzma", zipfile.ZIP_LZMA), ("bzip2", zipfile.ZIP_BZIP2)):
    entry(f"numpy/arrays_{tag}.npz", source=f"numeric .npz members compressed with {tag}",
          data=npz(MEMBERS, method))
buf = io.BytesIO()
np.savez_compressed(buf, w=F32, b=np.arange(3))
# np.savez_compressed stamps the members with the current time: rewritten
# with fixed dates, same bytes otherwise.
entry("numpy/savez_compressed.npz", source="np.savez_compressed's own output (dates fixed)",
      data=npz([(i.filename, zipfile.ZipFile(buf).read(i)) for i in zipfile.ZipFile(buf).infolist()],
               zipfile.ZIP_DEFLATED))

# --- pickles compressed whole: plain data, allow-listed globals -------------
PLAIN = {"a": [1, 2, 3], "b": {"c": 1.5, "d": None}, "e": "text", "f": (True, False)}
ORDERED = collections.OrderedDict([("step", 10), ("lr", [0.1, 0.01])])
for tag, ext, comp, decomp in (("gzip", ".pkl.gz", mc.gz, gzip.decompress),
                               ("zlib", ".pkl.z", lambda d: zlib.compress(d, 3), zlib.decompress),
                               ("bz2", ".pkl.bz2", lambda d: bz2.compress(d, 9), bz2.decompress),
                               ("xz", ".pkl.xz", lambda d: lzma.compress(d, format=lzma.FORMAT_XZ,
                                                                          check=lzma.CHECK_CRC64), lzma.decompress),
                               ("lzma", ".pkl.lzma", lambda d: lzma.compress(d, format=lzma.FORMAT_ALONE),
                                lzma.decompress)):
    for what, obj, proto in (("plain", PLAIN, 4), ("ordereddict", ORDERED, 2)):
        data = comp(pickle.dumps(obj, protocol=proto))
        assert pickle.loads(decomp(data)) == obj
        entry(f"compressed/{what}{ext}", source=f"pickle.dumps of {what} data (protocol {proto}), {tag}", data=data)
# Tensors through torch._utils._rebuild_tensor_v2: a legacy torch.save,
# gzipped (torch.load(gzip.open(f)) reads it).
LEGACY_GZ = mc.gz(LEGACY)
assert same(torch.load(io.BytesIO(gzip.decompress(LEGACY_GZ))), one_storage_state_dict())
entry("compressed/legacy_checkpoint.pt.gz",
      source="a legacy-format torch.save (tensors by _rebuild_tensor_v2), gzipped: its raw storage bytes follow "
             "the pickles", data=LEGACY_GZ)
entry("compressed/checkpoint_zip.pt.gz", source="a torch.save zip, gzipped", data=mc.gz(CHECKPOINT))
data = mc.gz(b"".join(pickle.dumps({"step": i, "loss": [1, 2]}, protocol=2) for i in range(64)))
entry("compressed/stacked_64.pkl.gz", source="64 stacked plain pickles, gzipped", data=data)

# --- stacked pickles -------------------------------------------------------
STACK = [{"step": i, "loss": [1, 2]} for i in range(300)]
for n in (64, 300):
    data = b"".join(pickle.dumps(x, protocol=2) for x in STACK[:n])
    f = io.BytesIO(data)
    assert [pickle.load(f) for _ in range(n)] == STACK[:n] and f.read() == b""
    entry(f"stacked/stacked_{n}.pkl", source=f"{n} stacked plain pickles (pickle.load in a loop)", data=data)
data = b"".join(pickle.dumps(collections.OrderedDict(step=i), protocol=0) for i in range(64))
entry("stacked/stacked_64_protocol0.pkl", source="64 stacked protocol-0 OrderedDict pickles", data=data)

# --- a model folder: text a scanner must not parse as pickles ---------------
# Each text starts with a byte that is a pickle opcode ('i' INST, 'c' GLOBAL,
# '(' MARK, 'I' INT, 'V' UNICODE), as real files do.
MODELING = b'''import torch
from torch import nn


class TinyModel(nn.Module):
    """A tiny model: what a repository's modeling_x.py holds."""

    def __init__(self, hidden=3):
        super().__init__()
        self.embed = nn.Embedding(4, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, 4)

    def forward(self, ids):
        return self.head(self.norm(self.embed(ids)))
'''
NOTES = b"""cuda kernels
need compute capability 7.0 or newer.
(training ran for 3 epochs)
Initial lr 1e-3, then cosine.
"""
README = b"""(draft) TinyModel
=================

A tiny model for tests. `config.json` has its shape; `tokenizer.json` its
vocabulary; `data.zip` the evaluation data (TSV).
"""
CONFIG = json.dumps({"architectures": ["TinyModel"], "model_type": "tiny", "hidden_size": 3,
                     "auto_map": {"AutoModel": "modeling_x.TinyModel"}}, indent=2).encode() + b"\n"
TOKENIZER = json.dumps({"version": "1.0", "model": {"type": "WordLevel",
                                                    "vocab": {"[UNK]": 0, "a": 1, "b": 2, "c": 3}}},
                       indent=2).encode() + b"\n"
TSV = {"train.tsv": b"id\ttext\tlabel\n1\ta b\t0\n2\tb c\t1\n", "dev.tsv": b"id\ttext\tlabel\n3\tc a\t1\n",
       "vocab.tsv": b"Vocabulary\tcount\na\t2\nb\t2\nc\t2\n"}
DATA_ZIP = mc.zip_members([(n, d, zipfile.ZIP_DEFLATED) for n, d in TSV.items()])
MODEL = [("modeling_x.py", MODELING, "not-a-model-file", "Python source, starting 'import' (the INST opcode)"),
         ("notes.txt", NOTES, "not-a-model-file", "text starting 'c' (the GLOBAL opcode)"),
         ("README.md", README, "not-a-model-file", "Markdown starting '(' (MARK)"),
         ("config.json", CONFIG, "not-a-model-file", "JSON"),
         ("tokenizer.json", TOKENIZER, "not-a-model-file", "JSON"),
         ("data.zip", DATA_ZIP, "clean", "a zip of .tsv files: no member is a pickle"),
         ("pytorch_model.bin", CHECKPOINT, "clean", "a torch.save checkpoint (torch 1.13)")]
for name, data, verdict, why in MODEL:
    entry(f"model_folder/{name}", verdict=verdict, source=why, data=data)
entry("model_folder", source="a model repository: source, text, JSON, a data zip and a checkpoint")

# --- a Hugging Face snapshot of a real checkpoint ----------------------------
SAFETENSORS_HEADER = json.dumps({"norm.weight": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}},
                                separators=(",", ":")).encode()
SAFETENSORS_HEADER += b" " * (-len(SAFETENSORS_HEADER) % 8)
SAFETENSORS = struct.pack("<Q", len(SAFETENSORS_HEADER)) + SAFETENSORS_HEADER + struct.pack("<3f", 1, 1, 1)
mc.TREES.clear()
snap, repo = mc.hf_repo("hf_snapshot", "org/tiny",
                        [("config.json", CONFIG), ("pytorch_model.bin", CHECKPOINT),
                         ("model.safetensors", SAFETENSORS), ("tokenizer.json", TOKENIZER),
                         ("README.md", README)])
entry(snap, source="a hub snapshot: symlinks into ../../blobs of a torch.save checkpoint, safetensors, JSON")
entry(repo, source="the hub cache repository folder (blobs, refs, snapshots)")
HF_TREE = mc.TREES.pop()

# --- truncated real checkpoints ----------------------------------------------
entry("truncated/checkpoint_cut.pt", verdict="truncated",
      source="a torch.save zip cut to 60% (no central directory)", data=CHECKPOINT[:len(CHECKPOINT) * 6 // 10])
entry("truncated/legacy_cut.pt", verdict="truncated", source="a legacy torch.save cut inside its storage bytes",
      data=LEGACY[:len(LEGACY) - 20])
entry("truncated/float32_cut.npy", verdict="truncated", source="an .npy cut inside its data",
      data=npy_bytes(F32)[:-8])

# --- the twins of crafted/weights_only/: the same builders, no payload -------
# Each is checked by torch 1.13's torch.load where it reads it (1.13 has no
# sub-byte dtypes, no _rebuild_sparse_tensor for CSR, no 4-tuple COO); all
# are checked against torch 2.6 and the current torch by
# tests/interop/check_weights_only.py, which compares "torch_weights_only"
# (the answer for the current release, and the first release it holds
# from) with what each torch.load does.
T12 = torch.tensor([1.0, 2.0])
SPARSE = torch.sparse_coo_tensor(torch.tensor([[0, 1], [0, 1]]), torch.tensor([1.0, 2.0]), (2, 2))
WO_TWINS = [
    # (name, what torch 1.13 loads or None, loads in the current release, since, source)
    ("setitem_on_dict", {"w": T12, "step": 7.0}, True, "2.6", "SETITEM on the dict holding the tensor"),
    ("setitem_on_list", {"w": [7.0]}, False, "2.10",
     "SETITEM on a list: torch 2.6 to 2.9 load it, >= 2.10 refuse (only dict, OrderedDict, Counter)"),
    ("tensor", {"w": T12}, True, "2.6", "a storage whose record holds it exactly, viewed inside it"),
    ("append_to_list", {"w": [T12]}, True, "2.6", "APPEND of a tensor to a list"),
    ("sparse_coo", {"s": SPARSE}, True, "2.6", "a valid COO tensor, as torch 1.13 writes it"),
    ("sparse_coo_coalesced", None, True, "2.6", "a valid COO tensor saved as coalesced, as torch 2.x writes it"),
    ("sparse_csr", None, True, "2.6", "a valid CSR tensor, as torch 2.x writes it"),
    ("sparse_legacy_constructor", {"s": SPARSE}, True, "2.6", "torch.sparse.FloatTensor(indices, values, size)"),
    ("dtype_int4", None, True, "2.7", "torch.int4 as a value: on the default list from 2.7"),
    ("dtype_float4_e2m1fn_x2", None, True, "2.8", "torch.float4_e2m1fn_x2 as a value: on the default list from 2.8"),
    ("dtype_bcomplex32", None, True, "2.14", "torch.bcomplex32 as a value: on the default list from 2.14"),
]
for name, want, loads, since, source in WO_TWINS:
    data = mc.WEIGHTS_ONLY[name]()
    if want is not None:
        got = torch.load(io.BytesIO(data))
        dense = {k: v.to_dense() if isinstance(v, torch.Tensor) and v.is_sparse else v for k, v in got.items()}
        want = {k: v.to_dense() if isinstance(v, torch.Tensor) and v.is_sparse else v for k, v in want.items()}
        assert same(dense, want), (name, got)
    entry(f"weights_only/{name}.pt", source=source, data=data)
    CASES[-1]["torch_weights_only"] = {"loads": loads, "since": since}


def main():
    for g in GROUPS:
        shutil.rmtree(os.path.join(HERE, g), ignore_errors=True)
    for name, data in FILES:
        path = os.path.join(HERE, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    folder, tree = HF_TREE
    for rel, data in tree:
        path = os.path.join(HERE, folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if isinstance(data, mc.Link):
            os.symlink(data.target, path)
        else:
            with open(path, "wb") as f:
                f.write(data)
    names = [c["file"] for c in CASES]
    assert len(names) == len(set(names)), "duplicate names"
    for c in CASES:
        assert os.path.lexists(os.path.join(HERE, c["file"])), c["file"]
    # The snapshot's checkpoint, read through its symlink.
    assert same(torch.load(os.path.join(HERE, snap, "pytorch_model.bin")), state_dict())
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(CASES, f, indent=1)
        f.write("\n")
    print(f"{len(CASES)} benign files and folders in {HERE}")


if __name__ == "__main__":
    main()
