"""torchport.open / load / convert and the package: views, slices, errors,
lifetime after close, copy-on-write torch tensors, the console script."""

import gc
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import torchport
from conftest import FIXTURES, ROOT, tool

SLICES = os.path.join(ROOT, "tests", "formats", "fixtures", "slices")
CHECKPOINT = os.path.join(FIXTURES, "checkpoint.pt")
DTYPES = os.path.join(FIXTURES, "dtypes.pt")


def test_catalogue_like_safe_open():
    with torchport.open(CHECKPOINT) as f:
        keys = f.keys()
        assert keys[0] == "model_state_dict.blocks.0.gain" and len(keys) == len(f) == 26
        assert f.format == "pytorch-zip" and "model_state_dict.fc.weight" in f
        w = f.get("model_state_dict.blocks.0.conv.weight")
        assert isinstance(w, np.ndarray) and w.shape == (3, 2, 3, 3) and w.dtype == np.float32
        assert f.shape("model_state_dict.blocks.0.conv.weight") == [3, 2, 3, 3]
        assert f.dtype("model_state_dict.blocks.0.conv.weight") == "F32"
        assert np.array_equal(f.get_tensor("model_state_dict.fc.bias"), f.get("model_state_dict.fc.bias"))
    st = os.path.join(SLICES, "slices.safetensors")
    with torchport.open(st) as f:
        assert isinstance(f.metadata, dict)


def test_views_are_zero_copy_and_read_only():
    with torchport.open(os.path.join(SLICES, "slices.safetensors")) as f:
        name = f.keys()[0]
        a, b = f.get(name), f.get(name)
        assert not a.flags.writeable and not a.flags.owndata
        assert a.ctypes.data == b.ctypes.data  # both views of the one mapping
        with pytest.raises(ValueError):
            a.flat[0] = 1


def test_views_stay_valid_after_close():
    f = torchport.open(CHECKPOINT)
    w = f.get("model_state_dict.fc.weight")
    copy = np.array(w)
    s = f.get_slice("model_state_dict.fc.weight")
    f.close()
    assert f.closed
    del f
    gc.collect()
    assert np.array_equal(w, copy)  # the mapping lives as long as the view
    assert np.array_equal(s[0], copy[0])  # and as long as a slice object
    g = torchport.open(CHECKPOINT)
    g.close()
    with pytest.raises(torchport.TorchportError) as e:
        g.keys()
    assert e.value.code == "invalid_argument" and "closed" in str(e.value)


def test_get_slice_like_safetensors():
    with torchport.open(os.path.join(SLICES, "slices.safetensors")) as f:
        for name in f.keys():
            if f.dtype(name) not in ("F16", "F32", "F64", "I8", "I16", "I32", "I64", "U8", "BOOL"):
                continue
            whole = f.get(name)
            sl = f.get_slice(name)
            assert sl.get_shape() == list(whole.shape)
            if whole.ndim == 0:
                continue
            assert np.array_equal(sl[1:3], whole[1:3])
            assert np.array_equal(sl[...], whole)
            assert np.array_equal(sl[-1], whole[-1])
            if whole.ndim >= 2:
                assert np.array_equal(sl[:, 1::2], whole[:, 1::2])
                assert np.array_equal(sl[0, ...], whole[0, ...])
            with pytest.raises(torchport.TorchportError):
                sl[::-1]
            with pytest.raises(torchport.TorchportError):
                sl[(0,) * (whole.ndim + 1)]


def test_dtypes_numpy_and_raw():
    with torchport.open(DTYPES) as f:
        for name in f.keys():
            dt = f.dtype(name)
            raw, dname = f.get_raw(name)
            assert dname == dt and raw.shape == tuple(f.shape(name))
            if dt in ("BF16", "F8_E4M3", "F8_E5M2", "C32"):
                with pytest.raises(torchport.TorchportError) as e:
                    f.get(name)
                assert e.value.code == "unsupported" and e.value.key == name
                assert raw.dtype.kind == "u"
            else:
                assert np.array_equal(f.get(name), raw)


def test_torch_tensors_zero_copy_and_copy_on_write():
    torch = pytest.importorskip("torch")
    path = os.path.join(SLICES, "slices.safetensors")
    before = open(path, "rb").read()
    with torchport.open(path, framework="torch") as f:
        name = f.keys()[0]
        t = f.get(name)
        assert isinstance(t, torch.Tensor)
        n = torchport.open(path).get(name)
        assert t.data_ptr() != 0 and t.shape == torch.Size(n.shape)
        t.add_(1)  # torch has no read-only tensors: the pages are private copies
    assert open(path, "rb").read() == before


def test_load_owned_and_mmap():
    owned = torchport.load(CHECKPOINT)
    mapped = torchport.load(CHECKPOINT, mmap=True)
    assert owned["epoch"] == mapped["epoch"]
    w = owned["model_state_dict"]["fc.weight"] if "fc.weight" in owned["model_state_dict"] else None
    arrays = [v for v in owned["model_state_dict"].values() if isinstance(v, np.ndarray)]
    assert arrays and all(a.flags.writeable for a in arrays)
    marr = [v for v in mapped["model_state_dict"].values() if isinstance(v, np.ndarray)]
    assert marr and not any(a.flags.writeable for a in marr)
    del w


def test_errors_carry_code_key_offset_file():
    bad = os.path.join(FIXTURES, "bad", "view_out_of_bounds.pt")
    with pytest.raises(torchport.TorchportError) as e:
        torchport.load(bad)
    err = e.value
    assert err.code == "corrupt" and err.file and err.key and isinstance(err.offset, int)
    assert str(err).startswith("[corrupt]") and err.message in str(err)
    with pytest.raises(torchport.TorchportError) as e:
        torchport.open(os.path.join(ROOT, "does-not-exist.pt"))
    assert e.value.code == "io"
    with pytest.raises(torchport.TorchportError) as e:
        torchport.open(CHECKPOINT).get("nope")
    assert e.value.code == "missing_key" and e.value.key == "nope"
    with pytest.raises(torchport.TorchportError) as e:
        torchport.open(CHECKPOINT, framework="jax")
    assert e.value.code == "invalid_argument"


def test_paths_and_urls():
    import pathlib

    assert torchport.open(pathlib.Path(CHECKPOINT)).keys()
    with pytest.raises(torchport.TorchportError) as e:
        torchport.open("https://example.invalid/model.safetensors")
    assert e.value.code == "unsupported" and e.value.file.startswith("https://")


def test_convert_matches_the_tool(tmp_path):
    for src in (CHECKPOINT, os.path.join(FIXTURES, "views.pt"), os.path.join(FIXTURES, "legacy.pt")):
        # (A record keeps the whole object, as a .pt does.)
        for suffix, extra in ((".safetensors", ["--tensors-only"]), (".pt", []), (".mpk", []),
                              (".tpb.gz", [])):
            (tmp_path / "a").mkdir(exist_ok=True)
            (tmp_path / "b").mkdir(exist_ok=True)
            mine = tmp_path / "a" / ("out" + suffix)  # a .pt's folder is named after the stem
            theirs = tmp_path / "b" / ("out" + suffix)
            kw = {"tensors_only": True} if extra else {}
            r = torchport.convert(src, mine, **kw)
            assert r["files"] == [str(mine)] or [str(p) for p in r["files"]] == [str(mine)]
            subprocess.run([tool(), "convert", src, str(theirs), "-q", "--force", *extra], check=True)
            assert mine.read_bytes() == theirs.read_bytes(), (src, suffix)
    with pytest.raises(torchport.TorchportError) as e:
        torchport.convert(CHECKPOINT, tmp_path / "x.safetensors")
    assert e.value.code == "invalid_argument" and "tensors_only" in str(e.value)
    r = torchport.convert(CHECKPOINT, tmp_path / "s.safetensors", tensors_only=True,
                          max_shard_size=200, dtype="bf16")
    assert r["index"] and len(r["files"]) > 1
    assert torchport.open(r["index"]).dtype("model_state_dict.fc.weight") == "BF16"


def test_convert_lays_a_module_record_out_as_the_tool_does(tmp_path):
    # A record of a module keeps torchport's layout (Linear weights [in,
    # out]). A .pt or safetensors output gets PyTorch's, as the tool gives
    # it; a record that does not say where the layouts differ is refused, as
    # the tool refuses it, rather than written in a layout torch would load
    # transposed. A record made from a torch file says it is PyTorch's.
    made = tmp_path / "made.json"
    subprocess.run([tool(), "convert", CHECKPOINT, str(made), "--tensors-only", "-q"], check=True)
    mine, theirs = tmp_path / "mine.safetensors", tmp_path / "theirs.safetensors"
    torchport.convert(made, mine)
    subprocess.run([tool(), "convert", str(made), str(theirs), "-q"], check=True)
    assert mine.read_bytes() == theirs.read_bytes()
    record = json.loads(made.read_text())
    record["type"] = "Net"
    del record["metadata"]["torchport.layout"]
    module = tmp_path / "module.json"
    module.write_text(json.dumps(record))
    out = tmp_path / "m.safetensors"
    with pytest.raises(torchport.TorchportError) as e:
        torchport.convert(module, out)
    assert e.value.code == "unsupported" and "layout" in str(e.value)
    assert not out.exists()
    theirs = subprocess.run([tool(), "convert", str(module), str(tmp_path / "t.safetensors")],
                            capture_output=True, text=True)
    assert theirs.returncode == 1 and str(e.value).split("] ", 1)[-1].split(": ", 1)[-1][:40] \
        in theirs.stdout + theirs.stderr
    r = torchport.convert(module, tmp_path / "again.mpk")  # a record keeps it as it is
    assert torchport.open(r["files"][0]).keys()


def test_convert_refuses_to_drop_numpy_arrays_as_the_tool_does(tmp_path):
    # A checkpoint whose values hold numpy arrays: a .pt keeps them in the
    # whole object; a tensor file cannot hold them, so convert refuses
    # without tensors_only (naming one) and writes nothing, as the tool does.
    src = os.path.join(FIXTURES, "numpy", "training_numpy.pt")
    r = torchport.convert(src, tmp_path / "whole.pt")
    with torchport.open(r["files"][0]) as f:
        assert f.keys()
    out = tmp_path / "t.safetensors"
    with pytest.raises(torchport.TorchportError) as e:
        torchport.convert(src, out)
    assert e.value.code == "invalid_argument" and "numpy array" in str(e.value)
    assert not out.exists()
    theirs = subprocess.run([tool(), "convert", src, str(tmp_path / "u.safetensors")],
                            capture_output=True, text=True)
    assert theirs.returncode == 1 and "numpy array" in theirs.stdout + theirs.stderr
    r = torchport.convert(src, out, tensors_only=True)
    assert torchport.open(out).keys()


def test_console_script_runs_the_tool():
    out = subprocess.run([sys.executable, "-m", "torchport", "scan", "--json", CHECKPOINT],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["verdict"] == "clean"
