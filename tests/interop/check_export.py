"""torchport against the current torch's own torch.export.load, on torch.export
archives (.pt2).

    python3 check_export.py TORCHPORT FIXTURES_DIR

Run with the current torch (ctest: check_export_torch_current, label
torch_current). For the committed archives (torch 2.14's, torch 2.6's and the
spec-made ones) and for archives this script makes now with torch.export.save
and package_pt2:

  * `torchport convert x.pt2 out.pt` and `out.safetensors` hold, bit for bit,
    what torch.export.load(x) (load_pt2 for several models, named
    `<model>.<fqn>`) gives: the state dict's tensors, then the constants';
    out.pt also keeps the dtypes, shapes, strides, storage offsets, storage
    sizes and which tensors share a storage.
  * `torchport scan` says clean for them.
  * Hostile variants of a fresh archive, each a pickle in one place torch's
    loader unpickles (the sample inputs, a use_pickle weight, an opaque
    object, a torchbind object), whose payload touches a file under /tmp:
    torchport scan says unsafe and names posix.system (os.system, as pickled
    on Linux); torch.export.load is then
    run on it in a child process, and the file it touches shows where torch
    really runs the pickle (the torchbind object's TorchScript unpickler does
    not import os.system: it refuses the pickle).
  * An AOTInductor package with its shared object (aoti_compile_and_package,
    on CPU with the host's compiler): scan says unsafe, listing the .so and
    the C++ as compiled code; torchport refuses to read it.

Prints `N passed, M failed` and exits non-zero on a failure.
"""

import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import warnings
import zipfile

import torch
from safetensors.torch import load_file
from torch.export.pt2_archive._package import load_pt2, package_pt2

warnings.simplefilter("ignore")
TOOL, FIXTURES = sys.argv[1], sys.argv[2]
EXPORT = os.path.join(FIXTURES, "export")
passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, flush=True)


def run(*args):
    return subprocess.run([TOOL, *args], capture_output=True, text=True)


def raw(t):
    t = t.detach().contiguous().reshape(-1)
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def torch_tensors(path):
    """[(name, tensor)] as torch's loader gives them."""
    with zipfile.ZipFile(path) as z:
        pt2 = any(n.endswith("/archive_format") for n in z.namelist())
    if pt2:
        programs = load_pt2(path).exported_programs
        if list(programs) == ["model"]:
            programs = {"model": torch.export.load(path)}
    else:
        programs = {"model": torch.export.load(path)}
    single = len(programs) == 1
    out = []
    for model, ep in programs.items():
        for table in (ep.state_dict, ep.constants):
            for fqn, t in table.items():
                out.append((fqn if single else f"{model}.{fqn}", t))
    return out


def flatten(obj, prefix=""):
    if isinstance(obj, dict):
        out = []
        for k, v in obj.items():
            out.extend(flatten(v, f"{prefix}{k}."))
        return out
    return [(prefix[:-1], obj)]


def compare(path, tmp):
    name = os.path.basename(path)
    want = torch_tensors(path)
    pt, st = os.path.join(tmp, "out.pt"), os.path.join(tmp, "out.safetensors")
    for out in (pt, st):
        r = run("convert", "-q", "--force", path, out)
        check(r.returncode == 0, f"{name}: convert to {out}: {r.stderr.strip()}")
        if r.returncode:
            return
    got_pt = flatten(torch.load(pt, weights_only=True))
    got_st = load_file(st)
    check([n for n, _ in got_pt] == [n for n, _ in want], f"{name}: .pt names/order")
    check(list(got_st) == [n for n, _ in want] or set(got_st) == {n for n, _ in want},
          f"{name}: safetensors names")
    ours = dict(got_pt)
    storage_of, theirs_of = {}, {}
    for n, t in want:
        o = ours.get(n)
        if o is None:
            check(False, f"{name}: {n} missing")
            continue
        same = (o.dtype == t.dtype and o.shape == t.shape and o.stride() == t.stride()
                and o.storage_offset() == t.storage_offset()
                and o.untyped_storage().nbytes() == t.untyped_storage().nbytes()
                and raw(o) == raw(t))
        check(same, f"{name}: {n} in .pt differs from torch.export.load's")
        s = got_st.get(n)
        check(s is not None and s.dtype == t.dtype and s.shape == t.shape and raw(s) == raw(t),
              f"{name}: {n} in .safetensors differs from torch.export.load's")
        # Tensors sharing a storage in torch's result share one in ours.
        storage_of[n] = o.untyped_storage().data_ptr()
        theirs_of[n] = t.untyped_storage().data_ptr()
    names = list(storage_of)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            check((storage_of[a] == storage_of[b]) == (theirs_of[a] == theirs_of[b]),
                  f"{name}: {a} and {b} share a storage in one result only")
    r = run("scan", path)
    check(r.returncode == 0, f"{name}: scan is not clean: {r.stdout[-400:]}")


class Fresh(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 2, 3)
        self.bn = torch.nn.BatchNorm2d(2)
        self.fc = torch.nn.Linear(2, 3)
        self.tied = torch.nn.Linear(2, 3, bias=False)
        self.tied.weight = self.fc.weight
        base = torch.arange(12, dtype=torch.float32)
        self.register_buffer("base", base)
        self.register_buffer("tail", base[5:])
        self.register_buffer("ints", torch.tensor([7, -9], dtype=torch.int64))
        self.register_buffer("b16", torch.tensor([0.5, 2.0], dtype=torch.bfloat16))
        self.register_buffer("temp", torch.tensor([1.0, 2.0]), persistent=False)
        self.k = torch.tensor([0.5, 0.25, 2.0])

    def forward(self, x):
        y = self.bn(self.conv(x)).mean(dim=(2, 3))
        y = self.fc(y) + self.tied(y) + self.k + torch.tensor([1.0, 2.0, 3.0])
        return y + self.tail.sum() + self.base[0] + self.ints.sum() + self.b16.float().sum() \
            + self.temp.sum()


EVIL_MARK = "/tmp/torchport-export-interop-{}"


class Touch:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, ("touch " + self.path,))


def rewrite(src, dst, replace=None, add=None):
    """Copies the zip `src` to `dst` (stored, in order), with records replaced
    or added (by name under the archive's folder)."""
    replace, add = replace or {}, add or {}
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as w:
        root = z.namelist()[0].split("/")[0] + "/"
        for n in z.namelist():
            rel = n[len(root):]
            w.writestr(n, replace[rel] if rel in replace else z.read(n))
        for rel, data in add.items():
            w.writestr(root + rel, data)


def hostile(tmp):
    src = os.path.join(tmp, "fresh.pt2")
    with zipfile.ZipFile(src) as z:
        root = z.namelist()[0].split("/")[0] + "/"
        wcfg = json.loads(z.read(root + "data/weights/model_weights_config.json"))
        ccfg = json.loads(z.read(root + "data/constants/model_constants_config.json"))
    variants = {}
    mark = {k: EVIL_MARK.format(k) for k in ("inputs", "use_pickle", "opaque", "custom")}
    # The sample inputs: torch.load(weights_only=True), then weights_only=False.
    variants["inputs"] = {"replace": {"data/sample_inputs/model.pt":
                                      pickle.dumps(Touch(mark["inputs"]), protocol=2)}}
    # A weight marked use_pickle: torch.load(weights_only=False).
    first = next(iter(wcfg["config"]))
    cfg = json.loads(json.dumps(wcfg))
    cfg["config"][first]["use_pickle"] = True
    blob = cfg["config"][first]["path_name"]
    # (every name of the blob is marked pickled, as torch's writer would)
    for meta in cfg["config"].values():
        if meta["path_name"] == blob:
            meta["use_pickle"] = True
    variants["use_pickle"] = {"replace": {
        "data/weights/model_weights_config.json": json.dumps(cfg).encode(),
        "data/weights/" + blob: pickle.dumps(Touch(mark["use_pickle"]), protocol=2)}}
    # An opaque object among the constants: pickle.loads.
    cfg = json.loads(json.dumps(ccfg))
    cfg["config"]["evil"] = {"path_name": "opaque_obj_0", "is_param": False, "use_pickle": True,
                             "tensor_meta": None}
    variants["opaque"] = {
        "replace": {"data/constants/model_constants_config.json": json.dumps(cfg).encode()},
        "add": {"data/constants/opaque_obj_0": pickle.dumps(Touch(mark["opaque"]), protocol=2)}}
    # A torchbind object among the constants: torch._C._pickle_load_obj.
    cfg = json.loads(json.dumps(ccfg))
    cfg["config"]["evil"] = {"path_name": "custom_obj_0", "is_param": False, "use_pickle": True,
                             "tensor_meta": None}
    variants["custom"] = {
        "replace": {"data/constants/model_constants_config.json": json.dumps(cfg).encode()},
        "add": {"data/constants/custom_obj_0": pickle.dumps(Touch(mark["custom"]), protocol=2)}}
    # Where torch 2.14's loader really runs the pickle.
    runs = {"inputs": True, "use_pickle": True, "opaque": True, "custom": False}
    for name, v in variants.items():
        path = os.path.join(tmp, f"hostile_{name}.pt2")
        rewrite(src, path, v.get("replace"), v.get("add"))
        if os.path.exists(mark[name]):
            os.remove(mark[name])
        r = run("scan", path)
        check(r.returncode == 1 and "posix.system" in r.stdout,
              f"hostile {name}: scan exit {r.returncode}, not unsafe naming posix.system: "
              f"{r.stdout[-600:]}")
        check(not os.path.exists(mark[name]), f"hostile {name}: the scan ran the pickle")
        subprocess.run([sys.executable, "-c", "import sys, torch; torch.export.load(sys.argv[1])",
                        path], capture_output=True)
        check(os.path.exists(mark[name]) == runs[name],
              f"hostile {name}: torch.export.load {'did not run' if runs[name] else 'ran'} "
              "the pickle")
        if os.path.exists(mark[name]):
            os.remove(mark[name])


def aoti(tmp):
    import torch._inductor

    class Small(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3)

        def forward(self, x):
            return torch.relu(self.fc(x))

    path = os.path.join(tmp, "aoti.pt2")
    ep = torch.export.export(Small().eval(), (torch.randn(2, 4),))
    try:
        torch._inductor.aoti_compile_and_package(ep, package_path=path)
    except Exception as e:  # no compiler: say so, and check nothing
        print("skip: AOTInductor cannot build here:", type(e).__name__, str(e)[:300])
        return
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
    so = [n for n in names if n.endswith(".so")]
    check(bool(so), f"aoti: no shared object in {names}")
    r = run("scan", path)
    check(r.returncode == 1 and "compiled-code" in r.stdout + r.stderr
          and all(n in r.stdout for n in so), f"aoti: scan: {r.stdout[-600:]}")
    r = run("inspect", path)
    check(r.returncode == 1 and "AOTInductor" in r.stderr, f"aoti: inspect: {r.stderr}")


def main():
    tmp = tempfile.mkdtemp(prefix="torchport-export-")
    try:
        for f in ("net214", "multi214", "archive", "two_models", "conv_linear", "buffers"):
            compare(os.path.join(EXPORT, f + ".pt2"), tmp)
        torch.manual_seed(7)
        fresh = Fresh().eval()
        ep = torch.export.export(fresh, (torch.randn(1, 1, 4, 4),))
        torch.export.save(ep, os.path.join(tmp, "fresh.pt2"))
        compare(os.path.join(tmp, "fresh.pt2"), tmp)
        torch.manual_seed(8)
        other = torch.export.export(torch.nn.Linear(3, 2), (torch.randn(1, 3),))
        package_pt2(os.path.join(tmp, "pair.pt2"), exported_programs={"a": ep, "b": other})
        compare(os.path.join(tmp, "pair.pt2"), tmp)
        hostile(tmp)
        aoti(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
