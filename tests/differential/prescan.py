"""Which pickles torch.load would run on a file, and which globals they
name, found without importing or calling anything the file names.

torch.load's dispatch (torch 1.13, serialization.py): a file starting with
PK\\x03\\x04 is a zip read by torch._C.PyTorchFileReader (a TorchScript
archive, one holding constants.pkl, goes to torch.jit.load, whose C++
unpickler runs no Python); else Python's tarfile is tried (the tar format:
members storages, tensors, pickle), and on tarfile.TarError the legacy
stream (magic, protocol, sys_info, object, storage keys).

Each pickle runs through a stub unpickler: find_class records the name and
returns an inert class, persistent ids become inert objects; pickletools
lists the opcodes. A global is "code" when it is outside the allow-list
(torch's weights_only list and a few builtins); torch's own find_class
turns any name containing a known storage class name into a dtype, in the
pickles its wrapper reads (zip data.pkl, the legacy object, tar `pickle`).
"""

import io
import pickle
import pickletools
import struct
import tarfile

MAGIC = 0x1950A86A20F9469CFC6C
ELEM = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Char": 1, "Byte": 1, "Short": 2, "Int": 4, "Long": 8,
        "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16, "QUInt8": 1, "QInt8": 1, "QInt32": 4, "QUInt4x2": 1,
        "QUInt2x4": 1, "Untyped": 1}


def storage_elem(name):
    if isinstance(name, str) and name.endswith("Storage"):
        return ELEM.get(name[: -len("Storage")])
    return None


class StubBase:
    def __new__(cls, *a, **k):
        return object.__new__(cls)

    def __init__(self, *a, **k):
        pass

    def __setstate__(self, state):
        pass

    def __setitem__(self, k, v):
        pass

    def append(self, x):
        pass

    def extend(self, xs):
        pass

    def add(self, x):
        pass


class StubUnpickler(pickle.Unpickler):
    def __init__(self, f, names, wrapped):
        super().__init__(f, encoding="utf-8")
        self.names = names
        self.wrapped = wrapped

    def find_class(self, module, name):
        self.names.append((module, name, self.wrapped))
        return type("Stub", (StubBase,), {"_global": (module, name)})

    def persistent_load(self, pid):
        return StubBase()


def run_pickle(f, names, wrapped, opcodes):
    """Runs one pickle from file object f; returns (ok, value)."""
    start = f.tell()
    try:
        for op, arg, pos in pickletools.genops(f):
            opcodes[op.name] = opcodes.get(op.name, 0) + 1
            if op.name == "STOP":
                break
    except Exception:
        pass
    f.seek(start)
    try:
        return True, StubUnpickler(f, names, wrapped).load()
    except Exception as e:
        return False, e


def prescan(path, allowed, mapped_name):
    names = []
    opcodes = {}
    mode = "load"
    route = None
    legacy_magic = False
    with open(path, "rb") as fh:
        head = fh.read(4)
    if head == b"PK\x03\x04":
        route = "zip"
        import torch

        try:
            reader = torch._C.PyTorchFileReader(path)
            records = reader.get_all_records()
            if "constants.pkl" in records:
                mode = "jit"
                route = "torchscript"
            else:
                data = reader.get_record("data.pkl")
                run_pickle(io.BytesIO(data), names, True, opcodes)
        except Exception as e:
            route = f"zip-unreadable: {str(e)[:80]}"
    else:
        tar_ok = False
        with open(path, "rb") as fh:
            try:
                tar = tarfile.open(fileobj=fh, mode="r:", format=tarfile.PAX_FORMAT)
                tar_ok = True
            except tarfile.TarError:
                pass
            except Exception as e:
                route = f"tar-error: {e}"
            if tar_ok:
                route = "tar"
                try:
                    scan_tar(tar, names, opcodes)
                except Exception as e:
                    route = f"tar: stopped: {str(e)[:80]}"
        if not tar_ok and route is None:
            route = "legacy"
            with open(path, "rb") as fh:
                ok, v = run_pickle(fh, names, False, opcodes)
                if ok and isinstance(v, int) and v == MAGIC:
                    legacy_magic = True
                    ok, v = run_pickle(fh, names, False, opcodes)
                    if ok and v == 1001:
                        ok, v = run_pickle(fh, names, False, opcodes)
                        if ok:
                            ok, v = run_pickle(fh, names, True, opcodes)
                            if ok:
                                run_pickle(fh, names, False, opcodes)
    globals_ = []
    code = []
    for module, name, wrapped in names:
        if not isinstance(module, str) or not isinstance(name, str):
            full = repr((module, name))
            code.append(full)
            globals_.append(full)
            continue
        full = mapped_name(module, name)
        globals_.append(full)
        if wrapped and "Storage" in name and storage_elem(name) is not None:
            continue  # torch's find_class returns StorageType(name): a dtype
        if full not in allowed:
            code.append(full)
    return {"route": route, "mode": mode, "globals": sorted(set(globals_)), "code_globals": sorted(set(code)),
            "runs_code": bool(code), "opcodes": opcodes, "legacy_magic": legacy_magic}


def scan_tar(tar, names, opcodes):
    f = tar.extractfile("storages")
    if f is None:
        return
    f = io.BytesIO(f.read())
    ok, n = run_pickle(f, names, False, opcodes)
    if not ok or not isinstance(n, int):
        return
    for _ in range(n):
        ok, args = run_pickle(f, names, False, opcodes)
        if not ok:
            return
        try:
            cls = args[2]
            elem = storage_elem(cls._global[1])
        except Exception:
            return
        if elem is None:
            return
        (numel,) = struct.unpack("<q", f.read(8))
        f.seek(numel * elem, 1)
    ok, _ = run_pickle(f, names, False, opcodes)
    if not ok:
        return
    f = tar.extractfile("tensors")
    if f is None:
        return
    f = io.BytesIO(f.read())
    ok, n = run_pickle(f, names, False, opcodes)
    if not ok or not isinstance(n, int):
        return
    for _ in range(n):
        ok, args = run_pickle(f, names, False, opcodes)
        if not ok:
            return
        (ndim,) = struct.unpack("<i", f.read(4))
        f.seek(4 + 16 * ndim + 8, 1)
    f = tar.extractfile("pickle")
    if f is None:
        return
    run_pickle(io.BytesIO(f.read()), names, True, opcodes)
