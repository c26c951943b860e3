"""torch's reading of many files, one process (run by run.py inside
`unshare -n` as an unprivileged user). Reads JSON lines {"path", "mode"}
from stdin; mode "load" is torch.load(path, map_location="cpu") (with
weights_only=True on torch >= 2.6, its default there), "jit" is
torch.jit.load. Prints one JSON line per file: ok, error, and per tensor
name, dtype, shape, strides, offset, storage (index of the first tensor on
the same storage, -1 for an empty one), storage_nbytes, sha256 of the
elements in C order.

torch.load runs with a pickle module whose find_class refuses every global
outside ALLOWED (torch's weights_only allow-list plus a few builtins that
run no code of the file's choosing), so even a mutant the pre-scan misjudged
runs nothing: it fails with "blocked global".
"""

import hashlib
import json
import pickle
import resource
import signal
import sys
import types
import warnings

warnings.simplefilter("ignore")
import torch  # noqa: E402
import torch._weights_only_unpickler as wou  # noqa: E402

# torch >= 2.6 is read as its users read it: torch.load's default,
# weights_only=True, with its own allow-list (the pre-scan gate uses the
# same list). torch 1.13 defaults to the full unpickler, so there the guard
# below stands in for an allow-list, widened by the few globals its
# weights_only list lacks that newer releases write.
WEIGHTS_ONLY = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 6)
if WEIGHTS_ONLY:
    ALLOWED = set(wou._get_allowed_globals().keys())
else:
    ALLOWED = set(wou._get_allowed_globals().keys()) | {
        "builtins.set", "builtins.frozenset", "builtins.complex", "builtins.bytearray", "_codecs.encode",
        "torch._utils._rebuild_tensor_v3", "torch._utils._rebuild_parameter_with_state",
        "torch._tensor._rebuild_from_type_v2", "torch.device",
    }


# torch >= 2.13 reads a path ending in .safetensors with the safetensors
# library (serialization.py, torch.load).
SAFETENSORS_BY_NAME = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 13)


class Blocked(Exception):
    pass


def mapped_name(module, name):
    """module.name as Python resolves it (protocol < 3 names mapped as
    _compat_pickle maps them; a py2 name is never a py3 module, so mapping
    at every protocol decides the same), with torch's own renaming."""
    import _compat_pickle

    if (module, name) in _compat_pickle.NAME_MAPPING:
        module, name = _compat_pickle.NAME_MAPPING[(module, name)]
    elif module in _compat_pickle.IMPORT_MAPPING:
        module = _compat_pickle.IMPORT_MAPPING[module]
    if module == "torch.tensor":
        module = "torch._tensor"
    return f"{module}.{name}"


class GuardedUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        full = mapped_name(module, name)
        if full not in ALLOWED:
            raise Blocked(f"blocked global {full}")
        return super().find_class(module, name)


guarded = types.ModuleType("guarded_pickle")
guarded.Unpickler = GuardedUnpickler
guarded.load = lambda f, **kw: GuardedUnpickler(f, **kw).load()
guarded.loads = pickle.loads
guarded.__name__ = "guarded_pickle"


def seg(name, k):
    if isinstance(k, bool):
        s = "True" if k else "False"
    elif isinstance(k, (str, int)):
        s = str(k)
    elif isinstance(k, bytes):
        s = k.decode("latin-1")
    else:
        s = repr(k)
    return s if not name else name + "." + s


def flatten(obj):
    out = []
    seen = set()

    def walk(v, name, depth):
        if depth > 200:
            return
        if isinstance(v, torch.Tensor):
            out.append((name, v))
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(x, seg(name, k), depth + 1)
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                walk(x, seg(name, i), depth + 1)
        elif isinstance(v, torch.nn.Module):
            for k, t in v.state_dict(keep_vars=True).items():
                out.append((seg(name, k), t))
        elif hasattr(v, "__dict__") and not isinstance(v, type) and id(v) not in seen:
            seen.add(id(v))
            walk(vars(v), name, depth + 1)

    walk(obj, "", 0)
    return out


def tensor_json(name, t, first):
    t = t.detach()
    j = {"name": name, "dtype": str(t.dtype)[6:], "shape": list(t.shape)}
    if t.layout != torch.strided:
        # Sparse: compared by layout and dense values.
        j["layout"] = str(t.layout)
        d = t.to_dense().contiguous().reshape(-1)
        raw = b"" if d.numel() == 0 else d.view(torch.uint8).numpy().tobytes()
        j["sha256"] = hashlib.sha256(raw).hexdigest()
        return j
    j["strides"] = list(t.stride())
    j["offset"] = t.storage_offset()
    st = t.storage()
    u = st._storage if hasattr(st, "_storage") else st
    nbytes = u.nbytes()
    j["storage_nbytes"] = nbytes
    j["storage"] = -1 if nbytes == 0 else None  # set by read()
    # A fresh 1-D buffer: contiguous() keeps the stride of a one-element
    # view (a size-1 dimension ignores it), and view(uint8) needs stride 1.
    c = torch.empty(t.numel(), dtype=t.dtype)
    c.copy_(t.reshape(-1))
    raw = b"" if c.numel() == 0 else c.view(torch.uint8).numpy().tobytes()
    j["sha256"] = hashlib.sha256(raw).hexdigest()
    return j


from prescan import prescan  # noqa: E402


def read(path, mode):
    if mode == "jit":
        m = torch.jit.load(path, map_location="cpu")
        obj = {k: v for k, v in m.state_dict().items()}
    else:
        wo_error = None
        obj = None
        if WEIGHTS_ONLY:
            try:
                obj = torch.load(path, map_location="cpu", weights_only=True)
            except (pickle.UnpicklingError, RuntimeError) as e:
                # weights_only refuses opcodes and formats its full loader
                # reads (text INT/LONG, the tar format...): say so, and read
                # it as weights_only=False does, under the guard.
                text = str(e)
                if "weights_only" not in text and "Weights only" not in text:
                    raise
                # torch 2.6 writes the reason after "WeightsUnpickler
                # error:" on its line; 2.14 on a line of its own below it.
                at = text.find("WeightsUnpickler error:")
                rest = text[at + len("WeightsUnpickler error:"):] if at >= 0 else text
                reason = next((line.strip() for line in rest.split("\n") if line.strip()), "")
                wo_error = ("WeightsUnpickler error: " + reason if at >= 0 else reason)[:200]
        if obj is None:
            obj = torch.load(path, map_location="cpu", pickle_module=guarded, weights_only=False)
    pairs = flatten(obj)
    tensors = []
    idents = {}
    for i, (n, t) in enumerate(pairs):
        j = tensor_json(n, t, {})
        if "storage" in j and j["storage"] != -1:
            st = t.storage()
            u = st._storage if hasattr(st, "_storage") else st
            key = (u.data_ptr(), u.nbytes())
            j["storage"] = idents.setdefault(key, i)
        tensors.append(j)
    res = {"ok": True, "type": type(obj).__name__, "tensors": tensors}
    if mode != "jit" and wo_error:
        res["weights_only_refuses"] = wo_error
    return res


class Timeout(Exception):
    pass


def on_alarm(signum, frame):
    raise Timeout("timeout")


def main():
    try:
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
    except (ValueError, OSError):
        pass
    signal.signal(signal.SIGALRM, on_alarm)
    for line in sys.stdin:
        req = json.loads(line)
        signal.alarm(10)
        scan = None
        try:
            scan = prescan(req["path"], ALLOWED, mapped_name)
            if SAFETENSORS_BY_NAME and req["path"].endswith(".safetensors"):
                # torch >= 2.13's torch.load hands a path named so to
                # safetensors.torch.load_file.
                scan["route"] = "safetensors"
            if scan["runs_code"]:
                res = {"ok": False, "skipped": True, "error": "not run: would run code"}
            else:
                res = read(req["path"], scan["mode"])
        except Blocked as e:
            res = {"ok": False, "error": str(e), "blocked": True}
        except Timeout:
            res = {"ok": False, "error": "timeout", "timeout": True}
        except BaseException as e:  # torch refuses: any exception is a refusal
            res = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"}
        finally:
            signal.alarm(0)
        res["path"] = req["path"]
        res["prescan"] = scan
        res["torch_version"] = torch.__version__
        sys.stdout.write(json.dumps(res) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
