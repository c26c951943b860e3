"""Byte-level writers for the containers the differential suite mutates:
zip archives (entries as given: duplicates, any order, any offsets),
tar archives (V7, ustar, GNU, pax headers; either checksum kind), the torch
tar checkpoint members, legacy checkpoints and safetensors files."""

import json
import struct
import zlib

# ---------------------------------------------------------------- zip


def zip_build(entries, base=0, comment=b"", align=64):
    """entries: dicts with name (bytes/str), data (bytes), and optionally
    method (0 stored, 8 deflate), local_name (a different name in the local
    header). Offsets in the directory are relative to `base` (the archive's
    first byte in the final file). Returns the archive's bytes."""
    out = bytearray()
    central = bytearray()
    for e in entries:
        name = e["name"].encode() if isinstance(e["name"], str) else e["name"]
        local_name = e.get("local_name", name)
        if isinstance(local_name, str):
            local_name = local_name.encode()
        data = e["data"]
        method = e.get("method", 0)
        payload = data
        if method == 8:
            c = zlib.compressobj(6, zlib.DEFLATED, -15)
            payload = c.compress(data) + c.flush()
        crc = zlib.crc32(data) & 0xFFFFFFFF
        offset = base + len(out)
        extra = b""
        if method == 0 and align:
            start = offset + 30 + len(local_name)
            pad = (-(start + 4)) % align
            extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(payload), len(data),
                           len(local_name), len(extra))
        out += local_name + extra + payload
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x031E, 20, 0, method, 0, 0x21, crc, len(payload),
                               len(data), len(name), 0, 0, 0, 0, 0o644 << 16, offset)
        central += name
    cd_offset = base + len(out)
    out += central
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(central), cd_offset,
                       len(comment))
    out += comment
    return bytes(out)


def torch_zip_entries(prefix, pickle_bytes, storages, byteorder=True, version=True):
    """The records torch.save writes: prefix/data.pkl, data/<key>, version."""
    entries = [{"name": f"{prefix}/data.pkl", "data": pickle_bytes}]
    if byteorder:
        entries.append({"name": f"{prefix}/byteorder", "data": b"little"})
    for key, data in storages:
        entries.append({"name": f"{prefix}/data/{key}", "data": data})
    if version:
        entries.append({"name": f"{prefix}/version", "data": b"3\n"})
    return entries


# ---------------------------------------------------------------- tar

V7, USTAR, GNU, PAX = "v7", "ustar", "gnu", "pax"


def _octal(n, width):
    return (b"%0*o" % (width - 1, n)) + b"\0"


def _checksum(buf, signed):
    if signed:
        return sum(struct.unpack("512b", bytes(buf)))
    return sum(buf)


def tar_header(name, size, typeflag=b"0", fmt=USTAR, signed=False, linkname=b"", high_byte=False,
               base256=False, chk_form=0):
    if isinstance(name, str):
        name = name.encode()
    buf = bytearray(512)
    buf[0:len(name[:100])] = name[:100]
    buf[100:108] = _octal(0o644, 8)
    buf[108:116] = _octal(0, 8)
    buf[116:124] = _octal(0, 8)
    if base256:
        buf[124:136] = b"\x80" + size.to_bytes(11, "big")
    else:
        buf[124:136] = _octal(size, 12)
    buf[136:148] = _octal(0o14000000000, 12)
    buf[148:156] = b" " * 8
    buf[156:157] = typeflag
    buf[157:157 + len(linkname)] = linkname
    if fmt in (USTAR, PAX):
        buf[257:265] = b"ustar\x0000"
    elif fmt == GNU:
        buf[257:265] = b"ustar  \x00"
    if fmt != V7:
        uname = b"ren\xe9" if high_byte else b"root"
        buf[265:265 + len(uname)] = uname
        buf[297:301] = b"root"
    elif high_byte:
        buf[157 + len(linkname) + 1:157 + len(linkname) + 2] = b"\xe9"  # in linkname's unused tail
    s = _checksum(buf, signed)
    if chk_form == 0:
        buf[148:156] = b"%06o\x00 " % (s & 0o777777) if s >= 0 else b"%07o\x00" % (s & 0o7777777)
    else:
        buf[148:156] = b"%07o " % (s & 0o7777777) if s >= 0 else b"%07o\x00" % (s & 0o7777777)
    return bytes(buf)


def _pad(data):
    return data + b"\0" * ((-len(data)) % 512)


def pax_record(key, value):
    body = b" " + key + b"=" + value + b"\n"
    n = len(body) + 1
    while len(str(n).encode()) + len(body) != n:
        n = len(str(n).encode()) + len(body)
    return str(n).encode() + body


def tar_member(name, data, fmt=USTAR, signed=False, typeflag=b"0", linkname=b"", high_byte=False,
               base256=False, long_name=False, chk_form=0):
    """One member's blocks. long_name: the name goes in a GNU 'L' record
    (fmt gnu) or a pax 'path' record (fmt pax), the header holding a stub."""
    out = b""
    if isinstance(name, str):
        name = name.encode()
    header_name = name
    if long_name and fmt == GNU:
        ln = name + b"\0"
        out += tar_header(b"././@LongLink", len(ln), b"L", GNU, signed, high_byte=high_byte) + _pad(ln)
        header_name = b"stub-" + name[:20]
    elif fmt == PAX or (long_name and fmt == PAX):
        recs = pax_record(b"path", name)
        if long_name:
            header_name = b"stub-" + name[:20]
        out += tar_header(b"PaxHeaders/" + name[:80], len(recs), b"x", PAX, signed, high_byte=high_byte) + _pad(recs)
    out += tar_header(header_name, len(data) if typeflag in (b"0", b"\0", b"7") else 0, typeflag, fmt, signed,
                      linkname, high_byte, base256, chk_form)
    if typeflag in (b"0", b"\0", b"7"):
        out += _pad(data)
    return out


def tar_end(blocks=2):
    return b"\0" * (512 * blocks)


# ---------------------------------------------------------------- safetensors

ST_DTYPE = {
    "float32": "F32", "float64": "F64", "float16": "F16", "bfloat16": "BF16", "int8": "I8", "uint8": "U8",
    "int16": "I16", "int32": "I32", "int64": "I64", "bool": "BOOL", "complex64": "C64",
}


def safetensors_build(tensors, metadata=None, header_pad_to=8, header_prefix=None):
    """tensors: list of (name, dtype torch name, shape, bytes)."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    data = b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": ST_DTYPE[dtype], "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-(8 + len(h))) % header_pad_to)
    return struct.pack("<Q", len(h)) + h + data
