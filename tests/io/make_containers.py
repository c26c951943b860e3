#!/usr/bin/python3
"""Writes small tar and zip archives into OUTDIR, one per container rule,
and OUTDIR/manifest.json with what torch's own readers make of each:
Python's tarfile (as torch.load's legacy_load opens it: mode 'r:') for the
tars, torch._C.PyTorchFileReader (miniz) for the zips. The interop test
(test_containers_interop) reads the same files with torchport and compares.

Usage: make_containers.py OUTDIR
"""
import io
import json
import os
import struct
import sys
import tarfile
import zipfile

import torch

BLOCK = 512


def octal(n, width):
    return ("%0*o" % (width - 1, n)).encode() + b"\0"


def header(name, size=0, type_=b"0", magic=b"ustar\x0000", prefix=b"", signed=False,
           size_field=None, linkname=b""):
    h = bytearray(BLOCK)
    h[0:len(name)] = name
    h[100:108] = octal(0o644, 8)
    h[108:116] = octal(0, 8)
    h[116:124] = octal(0, 8)
    h[124:136] = size_field if size_field is not None else octal(size, 12)
    h[136:148] = octal(0, 12)
    h[156:157] = type_
    h[157:157 + len(linkname)] = linkname
    h[257:257 + len(magic)] = magic
    h[345:345 + len(prefix)] = prefix
    h[148:156] = b" " * 8
    total = sum(struct.unpack("512b" if signed else "512B", bytes(h)))
    h[148:156] = ("%06o" % total).encode() + b"\0 "
    return bytes(h)


def member(name, data=b"", **kw):
    size = kw.pop("size", len(data))
    out = header(name, size=size, **kw) + data
    return out + b"\0" * (-len(out) % BLOCK)


def pax(records):
    body = b""
    for k, v in records:
        rec = b" " + k + b"=" + v + b"\n"
        n = len(rec) + 1
        while len(str(n)) + len(rec) != n:
            n += 1
        body += str(n).encode() + rec
    return body


END = b"\0" * 1024


def tar_cases():
    torch_members = [(b"sys_info", b"S"), (b"storages", b"STORAGES"), (b"tensors", b"T"), (b"pickle", b"P")]
    cases = {}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in torch_members:
            info = tarfile.TarInfo(name.decode())
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    cases["ustar_by_tarfile"] = buf.getvalue()
    for fmt, label in ((tarfile.GNU_FORMAT, "gnu_longname"), (tarfile.PAX_FORMAT, "pax_longname")):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
            info = tarfile.TarInfo("d/" + "n" * 150)
            info.size = 3
            t.addfile(info, io.BytesIO(b"abc"))
            info = tarfile.TarInfo("pickle")
            info.size = 1
            t.addfile(info, io.BytesIO(b"p"))
        cases[label] = buf.getvalue()
    cases["v7"] = member(b"storages", b"v7", magic=b"") + END
    cases["v7_directory"] = member(b"storages/", type_=b"\0", magic=b"") + END
    cases["signed_checksum"] = member("st\u00e9".encode(), b"d", signed=True) + END
    cases["unsigned_checksum"] = member("st\u00e9".encode(), b"d") + END
    cases["file_then_dir"] = member(b"storages", b"data") + member(b"storages", type_=b"5") + END
    cases["dir_then_file"] = member(b"storages", type_=b"5") + member(b"storages", b"data") + END
    cases["two_files"] = member(b"pickle", b"old") + member(b"pickle", b"new!") + END
    cases["symlink_last"] = member(b"pickle", b"x") + member(b"pickle", type_=b"2", linkname=b"/etc/passwd") + END
    cases["unknown_type"] = member(b"pickle", b"zz", type_=b"Z") + END
    cases["pax_path_size"] = (member(b"PaxHeader", pax([(b"path", b"tensors"), (b"size", b"3")]), type_=b"x")
                              + member(b"other", b"abc", size=100) + END)
    cases["pax_global_path"] = (member(b"g", pax([(b"path", b"pickle")]), type_=b"g")
                                + member(b"a", b"first") + member(b"b", b"second") + END)
    cases["ustar_prefix"] = member(b"pickle", b"p", prefix=b"dir") + END
    cases["base256_size"] = member(b"x", b"12345", size_field=b"\x80" + b"\0" * 10 + b"\x05") + END
    cases["octal_0o_size"] = member(b"x", b"12345", size_field=b"0o5".ljust(12, b"\0")) + END
    cases["octal_spaces_size"] = member(b"x", b"12345", size_field=b"   5 ".ljust(12, b"\0")) + END
    cases["bad_octal_size"] = member(b"x", b"12345", size_field=b"9".ljust(12, b"\0")) + END
    cases["no_end_blocks"] = member(b"a", b"x")
    cases["data_past_end"] = member(b"a", b"x", size=4096)[:1024]
    cases["longname_then_garbage"] = member(b"././@LongLink", b"name", type_=b"L") + b"!" * 512
    cases["hidden_after_zero_block"] = member(b"a", b"x") + END + member(b"pickle", b"hidden")
    cases["zero_first_block"] = b"\0" * 1024
    return cases


def read_tar(data):
    """What tarfile (as torch opens it) makes of `data`."""
    out = {"kind": "tar"}
    try:
        t = tarfile.open(fileobj=io.BytesIO(data), mode="r:", format=tarfile.PAX_FORMAT)
    except tarfile.TarError as e:
        out["opens"] = False
        out["error"] = str(e)
        return out
    out["opens"] = True
    try:
        members = t.getmembers()
    except tarfile.TarError as e:
        out["read_error"] = str(e)
        return out
    out["members"] = {}
    for name in sorted({m.name for m in members}):
        m = t.getmember(name)
        out["members"][name] = {"type": m.type.decode("latin-1"), "offset_data": m.offset_data, "size": m.size}
    return out


QUERIES = ["data.pkl", "DATA.PKL", "data/0", "Data/0", "version", "byteorder", "constants.pkl"]


def zip_cases():
    cases = {}
    buf = io.BytesIO()
    torch.save({"w": torch.arange(4, dtype=torch.float32)}, buf)
    cases["torch_save"] = buf.getvalue()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/DATA.PKL", b"\x80\x02}q\x00.")
        z.writestr("archive/DATA/0", b"0123")
        z.writestr("archive/Version", b"3\n")
    cases["upper_case_names"] = buf.getvalue()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", b"lower")
        z.writestr("archive/DATA.PKL", b"UPPER")
        z.writestr("archive/version", b"3\n")
    cases["case_colliding_names"] = buf.getvalue()
    # A second directory and end record appended: miniz reads the last.
    first = cases["upper_case_names"]
    z = zipfile.ZipFile(io.BytesIO(first))
    info = z.infolist()[0]
    cd2 = len(first)
    name = info.filename.encode()
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 0, info.CRC, info.compress_size,
                          info.file_size, len(name), 0, 0, 0, 0, 0, info.header_offset) + name
    cases["two_end_records"] = first + central + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central), cd2, 0)
    return cases


def read_zip(path):
    out = {"kind": "zip"}
    try:
        r = torch._C.PyTorchFileReader(path)
    except RuntimeError as e:
        out["reader_error"] = str(e)
        return out
    out["records"] = {}
    for q in QUERIES:
        try:
            out["records"][q] = r.get_record(q).hex()
        except RuntimeError:
            out["records"][q] = None
    return out


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    manifest = {}
    for name, data in tar_cases().items():
        path = os.path.join(outdir, name + ".tar")
        with open(path, "wb") as f:
            f.write(data)
        manifest[name + ".tar"] = read_tar(data)
    for name, data in zip_cases().items():
        path = os.path.join(outdir, name + ".zip")
        with open(path, "wb") as f:
            f.write(data)
        manifest[name + ".zip"] = read_zip(path)
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
