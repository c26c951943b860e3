"""Every committed fixture through torchport.load(framework="torch") against
this torch's own torch.load of the same file.

The reference is torch.load(weights_only=True). Where this torch's
weights_only loader refuses a file that torchport.scan calls clean (every
global it names is on the allow-list: numpy arrays under torch 1.13, say),
torch.load(weights_only=False) is the reference: it can import nothing but
those globals. Files scan does not call clean are never given to
torch.load without weights_only. Then:
- both read it: the objects are equal (compare.equal);
- both refuse it: fine;
- torch reads it and torchport refuses: a failure, unless listed in
  TORCHPORT_REFUSES with the reason;
- torchport reads what this torch refuses: only for formats torch.load does
  not read (safetensors, sharded, distributed and export archives), or
  files this torch is too old for (TORCH_TOO_OLD).
Plain pickles (format "pickle") have pickle.load as their reference, on
files scan calls clean only.
"""

import json
import os
import pickle
import warnings

import pytest

import torchport
from compare import equal
from conftest import FIXTURES, ROOT

torch = pytest.importorskip("torch")

FOLDERS = [
    FIXTURES,
    os.path.join(ROOT, "tests", "formats", "fixtures"),
    os.path.join(ROOT, "tests", "record", "fixtures"),
    os.path.join(ROOT, "tests", "nn", "fixtures"),
]
SKIP_SUFFIXES = (".py", ".json", ".hpp", ".cpp", ".md", ".txt")


def fixture_files():
    out = []
    for folder in FOLDERS:
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames.sort()
            if os.path.exists(os.path.join(dirpath, ".metadata")):
                out.append(dirpath)  # a distributed checkpoint: the folder is the checkpoint
                dirnames[:] = []
                continue
            for name in sorted(filenames):
                if name.endswith(SKIP_SUFFIXES) and not name.endswith(".index.json"):
                    continue
                out.append(os.path.join(dirpath, name))
    return out


FILES = fixture_files()
# Formats torch.load does not read; their reference is their own reader.
NOT_TORCH_LOAD = {"safetensors", "sharded-safetensors", "sharded-pytorch", "dcp", "torch-export"}

# Refusals the core makes by design (named in the fixtures' own records):
# damaged files (tests/fixtures/bad/, torch2/bad_*, torch26/bad_*) and the
# pickles tests/fixtures/pickle_semantics/bad.json lists. A torch may read
# some of them (it skips a CRC, it trusts a declared size): the core does not.
with open(os.path.join(FIXTURES, "pickle_semantics", "bad.json")) as _f:
    DELIBERATE = {os.path.join(FIXTURES, "pickle_semantics", e["file"]) for e in json.load(_f)}


def deliberately_refused(path):
    name = os.path.basename(path)
    return path in DELIBERATE or f"{os.sep}bad{os.sep}" in path or name.startswith("bad_")


# torch reads it, torchport.load refuses it, and why.
TORCHPORT_REFUSES = {
    **{f"arrays_protocol{n}.pkl": "a numpy array of object dtype: its elements are objects the "
       "pickle builds, kept inert; load() refuses them" for n in (2, 3, 4, 5)},
    "nested.pt": "nested tensors: torchport.open() lists their components; load() does not build them",
    "torchscript.pt": "TorchScript: torch.load gives a ScriptModule, whose code runs",
    "torchscript_frozen.pt": "TorchScript: torch.load gives a ScriptModule, whose code runs",
    "quint4x2.pt": "4-bit quantized values are given unpacked only (get_raw)",
    "quint4x2_legacy.pt": "4-bit quantized values are given unpacked only (get_raw)",
    "skip_data.pt": "torch.serialization.skip_data() wrote no tensor bytes: torch reads whatever lies "
    "there, torchport refuses the bytes by name",
    "uint4_shell.pt": "a sub-byte shell dtype torch cannot save (a hand-made file): refused by name",
}


def rel(path):
    return os.path.relpath(path, ROOT)


def torch_reference(path):
    """(object, None) from this torch, or (None, error)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return torch.load(path, map_location="cpu", weights_only=True), None
        except Exception as e:  # noqa: BLE001 - any refusal is a refusal
            first = e
        try:
            report = torchport.scan(path)
        except torchport.TorchportError:
            return None, first
        if report.verdict != "clean":
            return None, first
        try:
            return torch.load(path, map_location="cpu", weights_only=False), None
        except Exception as e:  # noqa: BLE001
            return None, e


def pickle_reference(path):
    """pickle.load of a plain pickle that scan calls clean (only allowed globals)."""
    try:
        if torchport.scan(path).verdict != "clean":
            return None, RuntimeError("not clean: never unpickled here")
        with open(path, "rb") as f:
            return pickle.load(f), None
    except Exception as e:  # noqa: BLE001
        return None, e


torch_major = int(torch.__version__.split(".")[0])
# Files this torch reads differently from the torch torchport follows.
TORCH_READS_DIFFERENTLY = {
    1: {
        "big_endian.pt": "torch 1.13 ignores the byteorder record (torch 2.0 added it) and reads "
        "big-endian bytes as little-endian; torchport swaps them, as torch 2 does",
        "torch2_big.pt": "big-endian, written by torch 2: torch 1.13 ignores the byteorder record",
        "parameter_with_state.pt": "written by torch 2 (_rebuild_parameter_with_state, which 1.13 lacks)",
        "parameter_with_slots.pt": "written by torch 2 (_rebuild_parameter_with_state, which 1.13 lacks)",
        "conj.pt": "written by torch 2.6 (_rebuild_tensor_v2 with the metadata argument 1.13 lacks)",
        "numpy2_arrays.pt": "names numpy 2's numpy._core, which the numpy beside torch 1.13 (1.24) "
        "lacks; torch 2.14 with numpy 2 reads it as torchport does",
    },
    2: {
        "sparse_csr.pt": "written by torch 1.13 (_rebuild_sparse_csr_tensor, gone from torch 2); "
        "torchport reads it as 1.13 did",
        "sparse.pt": "written by torch 1.13 (_rebuild_sparse_csr_tensor, gone from torch 2); "
        "torchport reads it as 1.13 did",
    },
}


def safetensors_reference(path, fmt):
    st = pytest.importorskip("safetensors.torch")
    if fmt == "safetensors":
        return st.load_file(path)
    import json

    index = path if path.endswith(".json") else None
    with open(index) as f:
        weight_map = json.load(f)["weight_map"]
    out = {}
    # The shards in name order, each in its own order (load_file's): how
    # torchport lists a sharded checkpoint.
    for shard in sorted(set(weight_map.values())):
        out.update(st.load_file(os.path.join(os.path.dirname(index), shard)))
    assert set(out) == set(weight_map)
    return out


@pytest.mark.parametrize("path", FILES, ids=[rel(p) for p in FILES])
def test_fixture_loads_as_torch_does(path):
    try:
        mine, mine_error = torchport.load(path, framework="torch"), None
    except torchport.TorchportError as e:
        mine, mine_error = None, e
    try:
        fmt = torchport.open(path).format
    except torchport.TorchportError:
        fmt = ""
    if fmt in NOT_TORCH_LOAD:
        if fmt in ("safetensors", "sharded-safetensors"):
            assert mine_error is None, str(mine_error)
            ref = safetensors_reference(path, fmt)
            mine = dict(mine)
            if any(t.numel() == 0 for t in ref.values()):
                # Empty tensors share one data offset, where load_file's order
                # is its hash map's: only the names are compared, not their order.
                mine, ref = dict(sorted(mine.items())), dict(sorted(ref.items()))
            equal(mine, ref)
            return
        pytest.skip(f"{fmt}: not a torch.load format (checked by the C++ and interop suites)")
    if fmt == "pickle":
        ref, ref_error = pickle_reference(path)
    else:
        ref, ref_error = torch_reference(path)
    name = os.path.basename(path)
    if ref_error is None and mine_error is None:
        if name in TORCH_READS_DIFFERENTLY.get(torch_major, {}):
            pytest.skip(TORCH_READS_DIFFERENTLY[torch_major][name])
        try:
            equal(mine, ref)
        except NotImplementedError as e:  # torch cannot read its own values (conj of bcomplex32)
            pytest.skip(f"torch {torch.__version__} cannot compare them: {e}")
    elif ref_error is None:
        if deliberately_refused(path):
            return
        if name in TORCH_READS_DIFFERENTLY.get(torch_major, {}):
            pytest.skip(TORCH_READS_DIFFERENTLY[torch_major][name])
        assert name in TORCHPORT_REFUSES, f"torch {torch.__version__} reads it, torchport refuses: {mine_error}"
    elif mine_error is None:
        if name in TORCH_READS_DIFFERENTLY.get(torch_major, {}):
            pytest.skip(TORCH_READS_DIFFERENTLY[torch_major][name])
        pytest.fail(f"torchport reads what torch {torch.__version__} refuses ({ref_error!r:.200})")
    else:
        assert mine_error.code, mine_error  # both refuse: a named refusal
