"""Checks torchport's output against torch. Exits non-zero with a message
on the first difference.

  check.py torch  REFERENCE OUT [--key K] [--cast DTYPE] [--exclude RE]
      OUT loads with torch.load(weights_only=True) and holds REFERENCE's
      tensors (its K sub-dict), bit-exact, in order; with --cast, floating
      tensors are compared with REFERENCE's cast by torch (round to nearest
      even; any NaN matches any NaN there, because torch 1.13's CPU cast to
      bfloat16 makes NaN 0xFFFF while its scalar c10::BFloat16 makes 0x7FC0).
      Storages shared in REFERENCE are shared in OUT. --exclude RE drops
      matching names from REFERENCE (what convert --exclude dropped).
  check.py safetensors REFERENCE OUT [--key K] [--cast DTYPE] [--exclude RE]
      OUT read by safetensors_reader.py holds the same tensors (any order).
  check.py shards REFERENCE INDEX
      each shard of a sharded checkpoint loads with torch and together they
      hold REFERENCE's tensors; the index's weight_map and total_size agree.
  check.py zip FILE [ALIGN]
      Python's zipfile reads FILE, every CRC matches, data aligned to ALIGN.
"""

import json
import os
import re
import sys
import zipfile

import torch

import safetensors_reader


def fail(msg):
    print("check.py: " + msg)
    sys.exit(1)


def raw(t):
    t = t.contiguous().reshape(-1)
    return t.view(torch.uint8) if t.numel() else t


def same_bits(name, want, got, any_nan=False):
    if want.dtype != got.dtype or want.shape != got.shape:
        fail(f"{name}: {want.dtype}{list(want.shape)} vs {got.dtype}{list(got.shape)}")
    if any_nan and want.is_floating_point():
        nan_w, nan_g = torch.isnan(want), torch.isnan(got)
        if not torch.equal(nan_w, nan_g):
            fail(f"{name}: NaNs at different places")
        want, got = want[~nan_w], got[~nan_g]
    if not torch.equal(raw(want), raw(got)):
        fail(f"{name}: values differ")


def reference(path, key, cast, exclude=None):
    ref = torch.load(path, weights_only=False)  # the reference: trusted, may be a module
    if isinstance(ref, torch.nn.Module):
        ref = ref.state_dict()
    if key:
        ref = ref[key]
    if exclude:
        ref = {k: v for k, v in ref.items() if not re.search(exclude, k)}
    if cast:
        dtype = getattr(torch, cast)
        ref = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in ref.items()}
    return ref


def args(argv):
    opts = {"--key": None, "--cast": None, "--exclude": None}
    rest = []
    i = 0
    while i < len(argv):
        if argv[i] in opts:
            opts[argv[i]] = argv[i + 1]
            i += 2
        else:
            rest.append(argv[i])
            i += 1
    return rest, opts


def check_torch(ref_path, out_path, key, cast, exclude):
    ref = reference(ref_path, key, cast, exclude)
    got = torch.load(out_path, weights_only=True)
    if list(got) != list(ref):
        fail(f"names {list(got)} != {list(ref)}")
    for name in ref:
        same_bits(name, ref[name], got[name], any_nan=bool(cast))
    if not cast:
        orig = reference(ref_path, key, None, exclude)
        for a in orig:
            for b in orig:
                shared = orig[a].storage().data_ptr() == orig[b].storage().data_ptr()
                if shared and got[a].storage().data_ptr() != got[b].storage().data_ptr():
                    fail(f"{a} and {b} share a storage in the reference but not in the output")


def check_safetensors(ref_path, out_path, key, cast, exclude):
    ref = reference(ref_path, key, cast, exclude)
    got, metadata = safetensors_reader.load(out_path)
    if metadata.get("format") != "pt":
        fail(f"metadata {metadata} lacks format=pt")
    if sorted(got) != sorted(ref):
        fail(f"names {sorted(got)} != {sorted(ref)}")
    for name in ref:
        same_bits(name, ref[name], got[name], any_nan=bool(cast))
    # The safetensors library itself, where installed (Debian 13's, beside
    # torch 2.6), for files of the dtypes it knows (0.4.5 lacks C64 and the
    # unsigned kinds, and refuses a whole file that holds one).
    try:
        import safetensors.torch as st
    except ImportError:
        return
    with open(out_path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    dtypes = {v["dtype"] for k, v in header.items() if k != "__metadata__"}
    if not dtypes <= set(st._TYPES):
        print(f"check.py: the safetensors library here lacks {sorted(dtypes - set(st._TYPES))}; "
              "its read is not checked")
        return
    lib = st.load_file(out_path)
    if sorted(lib) != sorted(ref):
        fail(f"safetensors.torch.load_file: names {sorted(lib)} != {sorted(ref)}")
    for name in ref:
        same_bits(name, ref[name], lib[name], any_nan=bool(cast))
    print("check.py: safetensors.torch.load_file reads it too")


def check_shards(ref_path, index_path):
    ref = torch.load(ref_path, weights_only=False)
    index = json.load(open(index_path))
    directory = os.path.dirname(index_path)
    seen = {}
    for file in sorted(set(index["weight_map"].values())):
        part = torch.load(os.path.join(directory, file), weights_only=True)
        for name, t in part.items():
            if index["weight_map"].get(name) != file:
                fail(f"{name} is in {file} but the index says {index['weight_map'].get(name)}")
            seen[name] = t
    if sorted(seen) != sorted(ref):
        fail(f"shards hold {sorted(seen)}, reference {sorted(ref)}")
    for name in ref:
        same_bits(name, ref[name], seen[name])
    total = sum(t.numel() * t.element_size() for t in ref.values())
    if index["metadata"]["total_size"] != total:
        fail(f"total_size {index['metadata']['total_size']} != {total}")


def check_zip(path, align):
    with zipfile.ZipFile(path) as z:
        bad = z.testzip()
        if bad is not None:
            fail(f"CRC mismatch in {bad}")
        with open(path, "rb") as f:
            for info in z.infolist():
                f.seek(info.header_offset + 26)
                n, m = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
                start = info.header_offset + 30 + n + m
                if start % align:
                    fail(f"{info.filename}: data at {start}, not aligned to {align}")
                z.read(info)


def same_tree(a, b, path="(root)"):
    # What torch.load gives for each: types (OrderedDict is not dict), keys
    # in order, values, and tensors bit for bit with their strides.
    if type(a) is not type(b):
        fail(f"{path}: {type(a).__name__} became {type(b).__name__}")
    if isinstance(a, torch.Tensor):
        if a.dtype != b.dtype or a.shape != b.shape or a.stride() != b.stride():
            fail(f"{path}: {a.dtype}{list(a.shape)} became {b.dtype}{list(b.shape)}")
        same_bits(path, a, b)
    elif isinstance(a, dict):
        if list(a) != list(b):
            fail(f"{path}: keys {list(a)} became {list(b)}")
        for k in a:
            same_tree(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        if len(a) != len(b):
            fail(f"{path}: {len(a)} items became {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            same_tree(x, y, f"{path}.{i}")
    elif a != b:
        fail(f"{path}: {a!r} became {b!r}")


def check_tree(ref_path, out_path):
    ref = torch.load(ref_path, weights_only=False)
    # As users load it: torch 2.6's default is weights_only=True; 1.13's is
    # False, and its weights_only loader knows no BINFLOAT (any float value:
    # it refuses torch.save's own checkpoints of an optimizer too).
    out = torch.load(out_path, weights_only=not torch.__version__.startswith("1."))
    same_tree(ref, out)
    if out["again"] is not out["args"]:
        fail("a shared reference became two objects")
    views = out["views"]
    if views[1].storage_offset() != 2 or views[0].data_ptr() + 8 != views[1].data_ptr():
        fail("views of one storage became copies")


def check_dcp(folder, out_path):
    # torch's own reassembly of a distributed checkpoint against our .pt.
    try:
        from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    except ImportError:
        print("skipped: this torch has no dcp_to_torch_save")
        return
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        ref_path = os.path.join(tmp, "ref.pt")
        try:
            dcp_to_torch_save(folder, ref_path)
        except BaseException as e:  # noqa: BLE001 - torch wraps it in CheckpointException, a BaseException
            # The fixtures' .metadata was pickled by torch 2.6 on Python 3.13,
            # which names pathlib._local: an older Python cannot unpickle it,
            # so this torch cannot reassemble them (the current torch's own
            # DCPs are checked by dcp_consolidation.py).
            import traceback

            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            causes = [e, *getattr(e, "failures", {}).values()]
            text = "".join("".join(traceback.format_exception(c)) if isinstance(c, BaseException) else str(c)
                           for c in causes)
            if "pathlib._local" not in text:
                raise
            print(f"skipped: Python {sys.version.split()[0]} cannot unpickle a .metadata written "
                  "on Python 3.13 (pathlib._local)")
            return
        ref = torch.load(ref_path, weights_only=False)
    out = torch.load(out_path, weights_only=False)
    same_tree(ref, out)


def main():
    rest, opts = args(sys.argv[1:])
    what = rest[0]
    if what == "torch":
        check_torch(rest[1], rest[2], opts["--key"], opts["--cast"], opts["--exclude"])
    elif what == "safetensors":
        check_safetensors(rest[1], rest[2], opts["--key"], opts["--cast"], opts["--exclude"])
    elif what == "shards":
        check_shards(rest[1], rest[2])
    elif what == "dcp":
        check_dcp(rest[1], rest[2])
    elif what == "tree":
        check_tree(rest[1], rest[2])
    elif what == "zip":
        check_zip(rest[1], int(rest[2]) if len(rest) > 2 else 64)
    else:
        fail("unknown check " + what)
    print("ok")


main()
