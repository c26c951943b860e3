"""Makes the differential suite's inputs: real checkpoints of every format
torch writes (made here with torch 1.13) and seeded structured mutations of
them. Writes OUT/<id>.<ext> and OUT/manifest.jsonl (one line per file: id,
path, base, family, mutation, and for native formats the expected reading).

Usage: generate.py OUT --seed S --count N [--cli build/bin/torchport]
"""

import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import containers as C  # noqa: E402
import pickles as P  # noqa: E402

import torch  # noqa: E402

MAGIC = 0x1950A86A20F9469CFC6C
STORAGE_CLASS = {
    "float32": "FloatStorage", "float64": "DoubleStorage", "float16": "HalfStorage", "bfloat16": "BFloat16Storage",
    "int8": "CharStorage", "uint8": "ByteStorage", "int16": "ShortStorage", "int32": "IntStorage",
    "int64": "LongStorage", "bool": "BoolStorage", "complex64": "ComplexFloatStorage",
    "complex128": "ComplexDoubleStorage",
}
TENSOR_CLASS = {"float32": "FloatTensor", "float64": "DoubleTensor", "int64": "LongTensor", "int32": "IntTensor",
                "uint8": "ByteTensor", "float16": "HalfTensor", "int8": "CharTensor", "int16": "ShortTensor",
                "bool": "BoolTensor", "bfloat16": "BFloat16Tensor"}
ELEM = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1, "int16": 2, "int32": 4,
        "int64": 8, "bool": 1, "complex64": 8, "complex128": 16}
DTYPES = list(STORAGE_CLASS)


def floating(dtype):
    return dtype in ("float32", "float64", "float16", "bfloat16", "complex64", "complex128")


def tdtype(name):
    return getattr(torch, name)


def storage_bytes(dtype, numel, salt):
    g = torch.Generator().manual_seed(salt)
    if dtype == "bool":
        t = torch.rand(numel, generator=g) > 0.5
    elif dtype in ("complex64", "complex128"):
        t = torch.complex(torch.randn(numel, generator=g), torch.randn(numel, generator=g)).to(tdtype(dtype))
    elif dtype in ("int8", "uint8", "int16", "int32", "int64"):
        t = torch.randint(0, 100, (numel,), generator=g).to(tdtype(dtype))
    else:
        t = torch.randn(numel, generator=g).to(tdtype(dtype))
    return t.view(-1).view(torch.uint8).numpy().tobytes() if numel else b""


# ---------------------------------------------------------------- the abstract model
# A model is storages {key: (dtype, numel, bytes)} and an ordered list of
# (name, tensor spec) where a spec is (key, offset, size, stride, param).


def make_model(rng, n_tensors=None, dtypes=None):
    storages = {}
    items = []
    n = n_tensors or rng.randint(2, 6)
    for i in range(n):
        dtype = rng.choice(dtypes or DTYPES)
        kind = rng.choice(["contig", "contig", "view", "transpose", "scalar", "empty", "shared"])
        if kind == "shared" and items:
            name0, spec0 = rng.choice(items)
            items.append((f"tied.{i}", spec0))
            continue
        key = str(len(storages))
        if kind == "scalar":
            storages[key] = (dtype, 1, storage_bytes(dtype, 1, i))
            items.append((f"s{i}", (key, 0, (), (), False)))
        elif kind == "empty":
            storages[key] = (dtype, 0, b"")
            items.append((f"e{i}", (key, 0, (0, 3), (3, 1), False)))
        elif kind == "transpose":
            r, c = rng.randint(1, 4), rng.randint(1, 4)
            storages[key] = (dtype, r * c, storage_bytes(dtype, r * c, i))
            items.append((f"layer{i}.weight", (key, 0, (c, r), (1, c), floating(dtype) and rng.random() < 0.5)))
        elif kind == "view":
            numel = rng.randint(4, 12)
            storages[key] = (dtype, numel, storage_bytes(dtype, numel, i))
            off = rng.randint(0, numel - 2)
            items.append((f"v{i}", (key, off, (numel - off,), (1,), False)))
            items.append((f"v{i}_base", (key, 0, (numel,), (1,), False)))
        else:
            shape = tuple(rng.randint(1, 3) for _ in range(rng.randint(1, 3)))
            numel = 1
            for s in shape:
                numel *= s
            storages[key] = (dtype, numel, storage_bytes(dtype, numel, i))
            stride = []
            acc = 1
            for s in reversed(shape):
                stride.insert(0, acc)
                acc *= s
            items.append((f"layer{i}.bias" if len(shape) == 1 else f"conv{i}.weight",
                          (key, 0, shape, tuple(stride), floating(dtype) and rng.random() < 0.3)))
    return {"storages": storages, "items": items}


def spec_value(model, spec, legacy=False, fn="_rebuild_tensor_v2", cls_override=None):
    key, off, size, stride, param = spec
    dtype, numel, _ = model["storages"][key]
    cls = cls_override or STORAGE_CLASS[dtype]
    pid = P.storage_pid(cls, key, numel, legacy=legacy)
    t = P.tensor(pid, off, size, stride, fn=fn)
    return P.parameter(t) if param else t


def model_object(model, legacy=False):
    return P.ODict([(name, spec_value(model, spec, legacy)) for name, spec in model["items"]])


def model_zip(model, pickle_bytes, prefix="archive", **kw):
    st = [(k, v[2]) for k, v in model["storages"].items()]
    return C.torch_zip_entries(prefix, pickle_bytes, st, **kw)


def legacy_bytes(model, obj_pickle, rng, proto=2, forms="mixed", keys=None, canonical_header=False, header_proto=2):
    """A legacy checkpoint. canonical_header: the magic, protocol and sys_info
    pickles exactly as torch's writer makes them (protocol 2), so a mutant of
    the object pickle tests that and not the header's forms."""
    out = b""
    sys_info = {"protocol_version": 1001, "little_endian": True, "type_sizes": {"short": 2, "int": 4, "long": 4}}
    if canonical_header:
        out += P.plain(MAGIC, header_proto) + P.plain(1001, header_proto) + P.plain(sys_info, header_proto)
    else:
        out += P.dumps(MAGIC, rng, proto, forms)
        out += P.dumps(1001, rng, proto, forms)
        out += P.dumps(sys_info, rng, proto, forms)
    out += obj_pickle
    keys = list(model["storages"]) if keys is None else keys
    out += P.dumps(keys, rng, proto, forms)
    for k in keys:
        dtype, numel, data = model["storages"][k]
        out += struct.pack("<q", numel) + data
    return out


def tar_checkpoint_members(model, rng, forms="mixed"):
    """The members of the first torch releases' tar format, for `model`."""
    sys_info = P.dumps({"protocol_version": 1001, "little_endian": True,
                        "type_sizes": {"short": 2, "int": 4, "long": 4}}, rng, 2, forms)
    keys = list(model["storages"])
    st = P.dumps(len(keys), rng, 2, forms)
    for i, k in enumerate(keys):
        dtype, numel, data = model["storages"][k]
        st += P.dumps((i, "cpu", P.Global("torch", STORAGE_CLASS[dtype])), rng, 2, forms)
        st += struct.pack("<q", numel) + data
    st += P.dumps([], rng, 2, forms)
    tens = P.dumps(len(model["items"]), rng, 2, forms)
    obj_items = []
    for j, (name, (key, off, size, stride, param)) in enumerate(model["items"]):
        dtype = model["storages"][key][0]
        tcls = TENSOR_CLASS.get(dtype, "FloatTensor")
        tens += P.dumps((1000 + j, keys.index(key), P.Global("torch", tcls)), rng, 2, forms)
        tens += struct.pack("<i", len(size)) + b"\0\0\0\0"
        tens += struct.pack(f"<{len(size)}q", *size) + struct.pack(f"<{len(size)}q", *stride)
        tens += struct.pack("<q", off)
        obj_items.append((name, P.Persid(str(1000 + j), text=rng.random() < 0.5)))
    obj = P.dumps(P.ODict(obj_items), rng, 2, forms)
    return [("sys_info", sys_info), ("storages", st), ("tensors", tens), ("pickle", obj)]


def tar_bytes(members, fmt=C.USTAR, signed=False, high_byte=False, end=2, **kw):
    out = b""
    for name, data in members:
        out += C.tar_member(name, data, fmt, signed, high_byte=high_byte, **kw)
    return out + C.tar_end(end)


def torch_tensor(model, spec):
    key, off, size, stride, param = spec
    dtype, numel, data = model["storages"][key]
    base = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)
    base = base.view(tdtype(dtype)) if data else torch.empty(0, dtype=tdtype(dtype))
    return base.as_strided(size, stride, off)


def tensor_raw(t):
    t = t.detach().contiguous().reshape(-1)
    if t.numel() == 0:
        return b""
    return t.view(torch.uint8).numpy().tobytes()


def model_state_dict(model):
    sd = {}
    storages = {}
    for name, (key, off, size, stride, param) in model["items"]:
        if key not in storages:
            dtype, numel, data = model["storages"][key]
            base = torch.frombuffer(bytearray(data), dtype=torch.uint8).view(tdtype(dtype)) if data else \
                torch.empty(0, dtype=tdtype(dtype))
            storages[key] = base
        sd[name] = storages[key].as_strided(size, stride, off)
    return sd


# ---------------------------------------------------------------- families


class Gen:
    def __init__(self, out, seed, cli):
        self.out = out
        self.seed = seed
        self.cli = cli
        self.rng = random.Random(seed)
        self.manifest = []
        self.n = 0
        self.bases = {}

    def emit(self, data, base, family, mutation, ext="pt", expect=None, **extra):
        fid = f"{self.n:05d}-{family}-{mutation}"[:80].replace("/", "_")
        path = os.path.join(self.out, fid + "." + ext)
        with open(path, "wb") as f:
            f.write(data)
        rec = {"id": fid, "path": path, "base": base, "family": family, "mutation": mutation}
        if expect is not None:
            rec["expect_native"] = expect
        rec.update(extra)
        self.manifest.append(rec)
        self.n += 1
        return path

    # -- real checkpoints written by torch itself
    def real_bases(self):
        rng = random.Random(self.seed * 7 + 1)
        model = make_model(rng, 8)
        sd = model_state_dict(model)
        sd["scalar_bf16"] = torch.tensor(1.5, dtype=torch.bfloat16)
        sd["param"] = torch.nn.Parameter(torch.randn(3, 2, generator=torch.Generator().manual_seed(3)))
        sd["expanded"] = torch.arange(3.0).expand(2, 3)
        reals = {}
        with tempfile.TemporaryDirectory() as tmp:
            def save(name, obj, **kw):
                p = os.path.join(tmp, name)
                try:
                    torch.save(obj, p, **kw)
                except Exception as e:  # a protocol torch cannot write
                    reals[name] = None
                    print(f"note: torch.save {name} {kw}: {e}", file=sys.stderr)
                    return
                with open(p, "rb") as f:
                    reals[name] = f.read()

            for proto in (1, 2, 3, 4, 5):
                save(f"zip_p{proto}", sd, pickle_protocol=proto)
                save(f"legacy_p{proto}", sd, pickle_protocol=proto, _use_new_zipfile_serialization=False)
            save("legacy_p0", sd, pickle_protocol=0, _use_new_zipfile_serialization=False)
            save("zip_bare", torch.arange(6.0).view(2, 3))
            save("legacy_bare", torch.arange(6.0).view(2, 3), _use_new_zipfile_serialization=False)
            save("zip_checkpoint", {"epoch": 3, "model": sd, "optimizer": {"state": {0: {"step": torch.tensor(2.0)}},
                                                                           "param_groups": [{"lr": 0.1}]}})
            net = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
            save("zip_module", net)
            save("legacy_module", net, _use_new_zipfile_serialization=False)
            save("zip_sparse", {"sp": torch.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2))})
            save("zip_big", {"w": torch.randn(300, 300, generator=torch.Generator().manual_seed(5))})
            p = os.path.join(tmp, "ts.pt")
            torch.jit.script(net.eval()).save(p)
            with open(p, "rb") as f:
                reals["torchscript"] = f.read()
            # our records, from a zip torch wrote
            if self.cli:
                flat = {k: v.contiguous() for k, v in sd.items()}
                p = os.path.join(tmp, "flat.pt")
                torch.save(flat, p)
                for ext in ("mpk", "json", "tpb"):
                    q = os.path.join(tmp, "rec." + ext)
                    r = subprocess.run([self.cli, "convert", p, q], capture_output=True)
                    if r.returncode == 0:
                        with open(q, "rb") as f:
                            reals["record_" + ext] = f.read()
                    else:
                        print(f"note: convert to {ext}: {r.stderr.decode()[:200]}", file=sys.stderr)
        return reals, model

    def run(self, count):
        reals, model0 = self.real_bases()
        for name, data in reals.items():
            if data is None:
                continue
            ext = name.split("_")[1] if name.startswith("record_") else "pt"
            self.emit(data, name, "real", name, ext=ext)
        zip_reals = [k for k, v in reals.items() if v and (k.startswith("zip_") or k == "torchscript")]
        legacy_reals = [k for k, v in reals.items() if v and k.startswith("legacy_")]
        families = [
            (self.f_forms_zip, 14), (self.f_forms_legacy, 10), (self.f_zip_container, 16), (self.f_real_zip, 8),
            (self.f_real_legacy, 5), (self.f_tar, 14), (self.f_build, 7), (self.f_setitem, 3), (self.f_dtype_reuse, 5),
            (self.f_memo, 4), (self.f_globals, 7), (self.f_views, 4), (self.f_polyglot, 6), (self.f_safetensors, 3),
        ]
        total_w = sum(w for _, w in families)
        self.reals = reals
        self.zip_reals = zip_reals
        self.legacy_reals = legacy_reals
        while self.n < count:
            r = self.rng.random() * total_w
            for fn, w in families:
                r -= w
                if r <= 0:
                    break
            fn(random.Random(self.rng.getrandbits(64)))
        with open(os.path.join(self.out, "manifest.jsonl"), "w") as f:
            for rec in self.manifest:
                f.write(json.dumps(rec) + "\n")

    # ---------------------------------------------------------------- pickle forms
    def f_forms_zip(self, rng):
        model = make_model(rng)
        proto = rng.choice([None, 1, 2, 3, 4, 5])
        forms = rng.choice(["mixed", "mixed", "bin", "text"])
        pk = P.dumps(model_object(model), rng, proto, forms, frame=proto in (4, 5) and rng.random() < 0.5)
        fn = rng.choice(["_rebuild_tensor_v2", "_rebuild_tensor"])
        if fn != "_rebuild_tensor_v2":
            obj = P.ODict([(n, spec_value(model, s, fn=fn)) for n, s in model["items"] if not s[4]])
            pk = P.dumps(obj, rng, proto, forms)
        self.emit(C.zip_build(model_zip(model, pk)), "synthetic-zip", "forms", f"p{proto}-{forms}-{fn[-2:]}")

    def f_forms_legacy(self, rng):
        model = make_model(rng)
        proto = rng.choice([None, None, 1, 2, 3, 4, 5])
        forms = rng.choice(["mixed", "bin", "text"])
        pk = P.dumps(model_object(model, legacy=True), rng, proto, forms)
        data = legacy_bytes(model, pk, rng, proto, forms)
        tail = rng.choice(["", "", "junk", "zip"])
        if tail == "junk":
            data += bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 600)))
        elif tail == "zip":
            m2 = make_model(rng)
            data += C.zip_build(model_zip(m2, P.dumps(model_object(m2), rng)), base=len(data))
        self.emit(data, "synthetic-legacy", "forms", f"p{proto}-{forms}-{tail or 'none'}")

    # ---------------------------------------------------------------- zip container
    def f_zip_container(self, rng):
        model = make_model(rng)
        pk = P.dumps(model_object(model), rng)
        entries = model_zip(model, pk)
        other = make_model(random.Random(rng.getrandbits(32)))
        # the shadow: another object over the same storage keys where possible
        shadow_items = [("shadow." + n, s) for n, s in model["items"]]
        shadow = {"storages": model["storages"], "items": list(reversed(shadow_items))}
        pk2 = P.dumps(model_object(shadow), rng)
        m = rng.choice(["dup_pkl_after", "dup_pkl_before", "case_pkl", "case_pkl_only", "case_record",
                        "dup_record", "second_eocd", "second_eocd_comment", "second_eocd_bad_comment", "prepend", "append", "append_zip",
                        "deflate", "reorder", "mixed_prefix", "no_version", "no_byteorder", "name_mismatch",
                        "eocd_in_comment", "upper_prefix"])
        base = 0
        data = None
        if m == "dup_pkl_after":
            entries.append({"name": "archive/data.pkl", "data": pk2})
        elif m == "dup_pkl_before":
            entries.insert(0, {"name": "archive/data.pkl", "data": pk2})
        elif m == "case_pkl":
            entries.insert(rng.randint(0, len(entries)), {"name": rng.choice(["archive/DATA.PKL", "archive/Data.pkl",
                                                                               "archive/data.PKL"]), "data": pk2})
        elif m == "case_pkl_only":
            entries[0]["name"] = rng.choice(["archive/DATA.PKL", "archive/Data.pkl"])
        elif m in ("case_record", "dup_record"):
            keys = [k for k, v in model["storages"].items() if v[1] > 0]
            if not keys:
                return
            k = rng.choice(keys)
            raw = model["storages"][k][2]
            alt = bytes((b + 1) & 0xFF for b in raw)
            name = f"archive/DATA/{k}" if m == "case_record" else f"archive/data/{k}"
            entries.insert(rng.randint(1, len(entries)), {"name": name, "data": alt})
        elif m.startswith("second_eocd"):
            first = C.zip_build(entries)
            e2 = model_zip(shadow, pk2)
            if m == "second_eocd_bad_comment":
                # the last EOCD's comment length runs past the end of the file
                second = C.zip_build(e2, base=len(first))
                data = first + second[:-2] + struct.pack("<H", 100)
            elif m == "second_eocd_comment":
                # the second directory hides in the first's comment
                inner = C.zip_build(e2, base=len(first) - 2 + 2)
                first = first[:-2] + struct.pack("<H", len(inner))
                data = first + C.zip_build(e2, base=len(first))
            else:
                data = first + C.zip_build(e2, base=len(first))
        elif m == "prepend":
            pre = rng.choice([b"\0" * rng.randint(1, 100), os.urandom(0) + bytes(rng.getrandbits(8) for _ in range(64)),
                              P.dumps({"x": 1}, rng)])
            base = len(pre)
            data = pre + C.zip_build(entries, base=base)
        elif m == "append":
            data = C.zip_build(entries) + bytes(rng.getrandbits(8) for _ in range(rng.choice([1, 22, 100, 70000])))
        elif m == "append_zip":
            first = C.zip_build(entries)
            data = first + C.zip_build(model_zip(other, P.dumps(model_object(other), rng)), base=len(first))
        elif m == "deflate":
            for e in entries:
                if rng.random() < 0.6:
                    e["method"] = 8
        elif m == "reorder":
            rng.shuffle(entries)
        elif m == "mixed_prefix":
            i = rng.randint(1, len(entries) - 1)
            entries[i]["name"] = "other/" + entries[i]["name"].split("/", 1)[1]
        elif m == "no_version":
            entries = [e for e in entries if not e["name"].endswith("/version")]
        elif m == "no_byteorder":
            entries = [e for e in entries if not e["name"].endswith("/byteorder")]
        elif m == "name_mismatch":
            entries[0]["local_name"] = "archive/data.pkx"
        elif m == "eocd_in_comment":
            fake = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, 46, 0, 0)
            data = C.zip_build(entries, comment=fake)
        elif m == "upper_prefix":
            for e in entries[1:]:
                e["name"] = e["name"].replace("archive/", "ARCHIVE/", 1)
        if data is None:
            data = C.zip_build(entries, base=base)
        self.emit(data, "synthetic-zip", "zip", m)

    def f_real_zip(self, rng):
        name = rng.choice(self.zip_reals)
        data = self.reals[name]
        m = rng.choice(["prepend", "append", "truncate", "second_copy", "flip"])
        if m == "prepend":
            data = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64))) + data
        elif m == "append":
            data = data + bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 2000)))
        elif m == "truncate":
            data = data[:rng.randint(len(data) // 2, len(data) - 1)]
        elif m == "second_copy":
            data = data + data
        elif m == "flip":
            b = bytearray(data)
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
            data = bytes(b)
        self.emit(data, name, "realzip", m)

    def f_real_legacy(self, rng):
        name = rng.choice(self.legacy_reals)
        data = self.reals[name]
        m = rng.choice(["append", "truncate", "flip", "prepend_tar"])
        if m == "append":
            data = data + bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 700)))
        elif m == "truncate":
            data = data[:rng.randint(len(data) // 2, len(data) - 1)]
        elif m == "flip":
            b = bytearray(data)
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
            data = bytes(b)
        elif m == "prepend_tar":
            mt = make_model(rng)
            data = tar_bytes(tar_checkpoint_members(mt, rng)) + data
        self.emit(data, name, "reallegacy", m)

    # ---------------------------------------------------------------- tar
    def f_tar(self, rng):
        model = make_model(rng, dtypes=["float32", "float64", "int64", "uint8", "int32"])
        members = tar_checkpoint_members(model, rng)
        fmt = rng.choice([C.V7, C.USTAR, C.GNU, C.PAX])
        signed = rng.random() < 0.4
        high = signed or rng.random() < 0.3
        m = rng.choice(["plain", "plain", "dup_pickle", "dir_shadow", "symlink_pickle", "long_names", "no_end",
                        "extra_member", "reorder", "base256", "areg", "trailing", "chk_form"])
        kw = {}
        if m == "base256":
            kw["base256"] = True
        if m == "chk_form":
            kw["chk_form"] = 1
        if m == "long_names" and fmt in (C.GNU, C.PAX):
            kw["long_name"] = True
        if m == "reorder":
            rng.shuffle(members)
        if m == "areg":
            kw["typeflag"] = b"\0"
        out = b""
        for name, data in members:
            out += C.tar_member(name, data, fmt, signed, high_byte=high, **kw)
        if m == "dup_pickle":
            shadow = {"storages": model["storages"], "items": [("shadow." + n, s) for n, s in model["items"]]}
            obj_members = tar_checkpoint_members(shadow, rng)
            out += C.tar_member("pickle", obj_members[3][1], fmt, signed, high_byte=high)
        elif m == "dir_shadow":
            out += C.tar_member("pickle", b"", fmt, signed, typeflag=b"5", high_byte=high)
        elif m == "symlink_pickle":
            out += C.tar_member("pickle2", members[3][1], fmt, signed, high_byte=high)
            out += C.tar_member("pickle", b"", fmt, signed, typeflag=b"2", linkname=b"pickle2", high_byte=high)
        elif m == "extra_member":
            out += C.tar_member("README", b"hello\n", fmt, signed, high_byte=high)
        if m == "no_end":
            pass
        elif m == "trailing":
            out += C.tar_end() + bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 900)))
        else:
            out += C.tar_end()
        self.emit(out, "synthetic-tar", "tar", f"{fmt}-{'signed' if signed else 'unsigned'}-{m}")

    # ---------------------------------------------------------------- pickle semantics
    def zip_or_legacy(self, rng, model, obj, tag, family, legacy, header_proto=2):
        if legacy:
            data = legacy_bytes(model, P.dumps(obj, rng, 2), rng, canonical_header=True, header_proto=header_proto)
        else:
            data = C.zip_build(model_zip(model, P.dumps(obj, rng, rng.choice([2, 2, 3, 4]))))
        self.emit(data, "synthetic-legacy" if legacy else "synthetic-zip", family, tag)

    def f_build(self, rng):
        legacy = rng.random() < 0.35
        model = make_model(rng, rng.randint(2, 4), dtypes=["float32", "float64", "int64"])
        items = []
        m = rng.choice(["set4_same", "set4_other", "set4_beyond", "state3", "state_dict", "param_build",
                        "state5"])
        target = rng.randrange(len(model["items"]))
        for i, (name, spec) in enumerate(model["items"]):
            v = spec_value(model, spec, legacy)
            if i == target:
                key, off, size, stride, param = spec
                dtype, numel, _ = model["storages"][key]
                pid = P.storage_pid(STORAGE_CLASS[dtype], key, numel, legacy=legacy)
                if m == "set4_same":
                    n2 = max(1, numel // 2)
                    state = (pid, numel - n2, (n2,), (1,))
                elif m == "set4_other":
                    other = [k for k, s in model["storages"].items() if k != key and s[1] > 0] or [key]
                    k2 = rng.choice(other)
                    d2, nn2, _ = model["storages"][k2]
                    state = (P.storage_pid(STORAGE_CLASS[d2], k2, nn2, legacy=legacy), 0, (nn2,), (1,))
                elif m == "set4_beyond":
                    state = (pid, 0, (numel + 5,), (1,))
                elif m == "state3":
                    state = (True, None, P.ODict([]))
                elif m == "state5":
                    state = (v, False, None, None, P.ODict([]))
                elif m == "param_build":
                    v = P.parameter(spec_value(model, (key, off, size, stride, False), legacy))
                    state = (pid, 0, (numel,), (1,)) if rng.random() < 0.5 else {"x": 1}
                else:
                    state = {"a": 1, "b": 2, "c": 3, "d": 4}
                v = P.Build(v, state)
            items.append((name, v))
        self.zip_or_legacy(rng, model, P.ODict(items), m, "build", legacy)

    def f_setitem(self, rng):
        legacy = rng.random() < 0.35
        model = make_model(rng, rng.randint(2, 4), dtypes=["float32", "int64"])
        items = []
        target = rng.randrange(len(model["items"]))
        m = rng.choice(["index0", "slice_like", "append", "list_item"])
        legacy = legacy and m != "list_item"  # a zip, below
        for i, (name, spec) in enumerate(model["items"]):
            v = spec_value(model, spec, legacy)
            if i == target and m == "index0":
                v = P.SetItem(v, 0, 7)
            elif i == target and m == "slice_like":
                v = P.SetItem(v, -1, 3.5)
            elif i == target and m == "list_item":
                # SETITEM on a list holding the tensor: every reader sets the
                # item, torch >= 2.10's weights_only refuses it.
                v = P.SetItem([v, 1], 1, 7)
            items.append((name, v))
        obj = P.ODict(items)
        if m == "append":
            # OrderedDict(...) built, then APPEND of 1 on the first tensor value
            w = P.Writer(rng, 2)
            w.w(spec_value(model, model["items"][0][1], legacy))
            w.w(1)
            w.out += b"a"
            raw = bytes(w.out)
            obj = P.ODict([("t", P.Raw(raw))] + items[1:])
        if m == "list_item":
            # In the opcodes torch's weights_only unpickler reads, so that
            # its SETITEM rule (not an opcode it lacks) decides there.
            data = C.zip_build(model_zip(model, P.dumps(obj, rng, 2, forms="torch")))
            self.emit(data, "synthetic-zip", "setitem", m)
            return
        self.zip_or_legacy(rng, model, obj, m, "setitem", legacy)

    def f_dtype_reuse(self, rng):
        legacy = rng.random() < 0.35
        model = make_model(rng, 2, dtypes=["float32"])
        key = next(iter(model["storages"]))
        dtype, numel, data = model["storages"][key]
        if numel == 0:
            return
        m = rng.choice(["double", "int32", "uint8", "half", "long"])
        other = {"double": "float64", "int32": "int32", "uint8": "uint8", "half": "float16", "long": "int64"}[m]
        numel2 = max(1, len(data) // ELEM[other])
        pid2 = P.storage_pid(STORAGE_CLASS[other], key, numel2, legacy=legacy)
        t2 = P.tensor(pid2, 0, (numel2,), (1,))
        items = [(n, spec_value(model, s, legacy)) for n, s in model["items"]]
        pos = rng.choice(["after", "before"])
        if pos == "after":
            items.append(("reused", t2))
        else:
            items.insert(0, ("reused", t2))
        self.zip_or_legacy(rng, model, P.ODict(items), f"{m}-{pos}", "dtype_reuse", legacy)

    def f_memo(self, rng):
        model = make_model(rng, 3, dtypes=["float32", "int64"])
        # a tensor memoized, then the same memo index overwritten, then read
        w = P.Writer(rng, 2, memo=False)
        w.out += b"\x80\x02"
        w.w(P.Call(P.Global("collections", "OrderedDict"), ()))
        specs = [s for _, s in model["items"]]
        m = rng.choice(["overwrite", "reuse_tensor", "dup_pop", "pop_mark"])
        w.out += b"("
        w.w_str("a", memo=False)
        w.w(spec_value(model, specs[0]))
        w.out += b"q\x63"  # BINPUT 99
        if m == "overwrite":
            w.w_str("b", memo=False)
            w.w(spec_value(model, specs[1]))
            w.out += b"q\x63"  # overwrite 99
            w.w_str("c", memo=False)
            w.out += b"h\x63"  # the second tensor again
        elif m == "reuse_tensor":
            w.w_str("b", memo=False)
            w.out += b"h\x63"  # the same tensor object under two names
        elif m == "dup_pop":
            w.w_str("b", memo=False)
            w.w(spec_value(model, specs[1]))
            w.out += b"2"  # DUP
            w.out += b"0"  # POP
        else:
            w.w_str("b", memo=False)
            w.out += b"("
            w.w(spec_value(model, specs[2]))
            w.out += b"1"  # POP_MARK drops it
            w.w(spec_value(model, specs[1]))
        w.out += b"u."
        pk = bytes(w.out)
        self.emit(C.zip_build(model_zip(model, pk)), "synthetic-zip", "memo", m)

    def f_globals(self, rng):
        legacy = rng.random() < 0.35
        model = make_model(rng, 2, dtypes=["float32"])
        items = [(n, spec_value(model, s, legacy)) for n, s in model["items"]]
        m = rng.choice(["os_system", "posix_system", "builtins_eval", "builtin_eval_compat", "stack_global",
                        "inst_os", "getattr_chain", "load_from_bytes", "unknown_class", "storage_named",
                        "get_layout", "torch_tensor_module", "codecs_encode", "nested_rebuild_attr",
                        "os_system_p1_header"])
        g = None
        header_proto = 2
        if m == "os_system":
            g = P.Call(P.Global("os", "system"), ("true",))
        elif m == "os_system_p1_header":
            # a legacy file whose header pickles are protocol 1, as torch writes them at pickle_protocol=1
            g = P.Call(P.Global("os", "system"), ("true",))
            legacy, header_proto = True, 1
        elif m == "posix_system":
            g = P.Call(P.Global("posix", "system"), ("true",))
        elif m == "builtins_eval":
            g = P.Call(P.Global("builtins", "eval"), ("1+1",))
        elif m == "builtin_eval_compat":
            g = P.Call(P.Global("__builtin__", "eval"), ("1+1",))
        elif m == "stack_global":
            g = P.Raw(b"\x8c\x02os\x94\x8c\x06system\x94\x93\x8c\x04true\x85R")
        elif m == "inst_os":
            g = P.Call(P.Global("os", "system"), ("true",), form="INST")
        elif m == "getattr_chain":
            g = P.Raw(b"\x8c\x08builtins\x8c\x0fgetattr.__doc__\x93")
        elif m == "load_from_bytes":
            g = P.Call(P.Global("torch.storage", "_load_from_bytes"), (b"x".decode(),))
        elif m == "unknown_class":
            g = P.Call(P.Global("mymodel.layers", "Block"), ())
        elif m == "storage_named":
            # torch resolves any name containing a storage class name to a dtype
            key, off, size, stride, param = model["items"][0][1]
            dtype, numel, _ = model["storages"][key]
            pid = P.Persid(("storage", P.Global("evil", "FloatStorage"), key, "cpu", numel) + ((None,) if legacy else ()))
            items[0] = (items[0][0], P.tensor(pid, off, size, stride))
        elif m == "get_layout":
            g = P.Call(P.Global("torch.serialization", "_get_layout"), ("torch.strided",))
        elif m == "torch_tensor_module":
            key, off, size, stride, param = model["items"][0][1]
            dtype, numel, _ = model["storages"][key]
            items[0] = (items[0][0], P.Call(P.Global("torch._tensor", "_rebuild_from_type_v2"),
                                            (P.Global("torch._utils", "_rebuild_tensor_v2"), P.Global("torch", "Tensor"),
                                             (P.storage_pid(STORAGE_CLASS[dtype], key, numel, legacy=legacy), off, size, stride,
                                              False, P.ODict([])), {})))
        elif m == "codecs_encode":
            g = P.Call(P.Global("_codecs", "encode"), ("abc", "latin1"))
        elif m == "nested_rebuild_attr":
            key, off, size, stride, param = model["items"][0][1]
            dtype, numel, _ = model["storages"][key]
            pid = P.storage_pid(STORAGE_CLASS[dtype], key, numel, legacy=legacy)
            items[0] = (items[0][0], P.Call(P.Global("torch", "_utils._rebuild_tensor_v2"),
                                            (pid, off, size, stride, False, P.ODict([]))))
        if g is not None:
            items.insert(rng.randint(0, len(items)), ("extra", g))
        self.zip_or_legacy(rng, model, P.ODict(items), m, "globals", legacy, header_proto)

    def f_views(self, rng):
        legacy = rng.random() < 0.35
        model = make_model(rng, 2, dtypes=["float32", "int64"])
        key, off, size, stride, param = model["items"][0][1]
        dtype, numel, _ = model["storages"][key]
        m = rng.choice(["beyond", "negative_stride", "huge_offset", "numel_larger", "numel_smaller", "cuda",
                        "zero_stride", "location_other", "int_param"])
        items = [(n, spec_value(model, s, legacy)) for n, s in model["items"]]
        pid = P.storage_pid(STORAGE_CLASS[dtype], key, numel, legacy=legacy)
        if m == "beyond":
            t = P.tensor(pid, 0, (numel + 3,), (1,))
        elif m == "negative_stride":
            t = P.tensor(pid, max(0, numel - 1), (numel,), (-1,))
        elif m == "huge_offset":
            t = P.tensor(pid, 2**40, (1,), (1,))
        elif m == "numel_larger":
            t = P.tensor(P.storage_pid(STORAGE_CLASS[dtype], key, numel + 4, legacy=legacy), 0, (numel,), (1,))
        elif m == "numel_smaller":
            t = P.tensor(P.storage_pid(STORAGE_CLASS[dtype], key, max(0, numel - 1), legacy=legacy), 0, (max(0, numel - 1),), (1,))
        elif m == "cuda":
            t = P.tensor(P.storage_pid(STORAGE_CLASS[dtype], key, numel, location="cuda:0", legacy=legacy), off, size, stride)
        elif m == "int_param":
            # a Parameter with requires_grad=True over an integer storage: torch refuses it
            ik = str(len(model["storages"]))
            model["storages"][ik] = ("int64", 3, storage_bytes("int64", 3, 9))
            t = P.parameter(P.tensor(P.storage_pid("LongStorage", ik, 3, legacy=legacy), 0, (3,), (1,)))
        elif m == "zero_stride":
            t = P.tensor(pid, 0, (4, max(1, numel)), (0, 1))
        else:
            t = P.tensor(P.storage_pid(STORAGE_CLASS[dtype], key, numel, location="mps", legacy=legacy), off, size, stride)
        items[0] = (items[0][0], t)
        self.zip_or_legacy(rng, model, P.ODict(items), m, "views", legacy)

    # ---------------------------------------------------------------- polyglots
    def f_polyglot(self, rng):
        m = rng.choice(["safetensors_tar", "legacy_tar", "pickle_tar", "tar_then_zip", "zip_then_tar"])
        model = make_model(rng, 3, dtypes=["float32", "int64"])
        inner = make_model(random.Random(rng.getrandbits(32)), 2, dtypes=["float64"])
        inner["items"] = [("hidden." + n, s) for n, s in inner["items"]]
        tar_inner = b""
        for name, data in tar_checkpoint_members(inner, rng):
            tar_inner += C.tar_member(name, data, C.USTAR)
        tar_inner += C.tar_end()
        if m == "safetensors_tar":
            data = self.safetensors_tar(model, tar_inner)
            ext = "safetensors"
        elif m in ("legacy_tar", "pickle_tar"):
            data = self.pickle_tar(model, tar_inner, rng, legacy=(m == "legacy_tar"))
            ext = "pt"
        elif m == "tar_then_zip":
            data = tar_inner + C.zip_build(model_zip(model, P.dumps(model_object(model), rng)), base=len(tar_inner))
            ext = "pt"
        else:
            z = C.zip_build(model_zip(model, P.dumps(model_object(model), rng)))
            data = z + tar_inner
            ext = "pt"
        if data is not None:
            self.emit(data, "synthetic-polyglot", "polyglot", m, ext=ext)

    def safetensors_tar(self, model, tar_inner):
        """A safetensors file whose first 512 bytes are also a V7 tar header
        (every field printable: JSON string text), whose one member spans
        the rest of the header so that the next tar header is the first byte
        of the last tensor, a U8 blob holding a torch tar checkpoint."""
        sd = model_state_dict(model)
        tensors = [(n, str(t.dtype)[6:], list(t.shape), tensor_raw(t)) for n, t in sd.items()]
        blob_len = len(tar_inner)
        # header text: {"__metadata__":{"p":"<filler>"},<tensors>,"zblob":...}
        hdr_tail = {}
        off = 0
        for n, d, s, raw in tensors:
            hdr_tail[n] = {"dtype": C.ST_DTYPE[d], "shape": s, "data_offsets": [off, off + len(raw)]}
            off += len(raw)
        # pad the data so the blob starts at a multiple of 512 in the file
        tail = json.dumps(hdr_tail, separators=(",", ":"))[1:-1]
        for total in range(1024, 1 << 16, 512):
            # total = 8 + N + data_before_blob ; data_before_blob = off + padlen
            # choose N so that 8 + N = total - off - padlen with a padding tensor of padlen bytes
            padlen = (-(off)) % 8 + 8
            n_len = total - off - padlen - 8
            head = '{"__metadata__":{"p":"'
            # the string covers bytes 8 + len(head) .. 512 of the file, where the tar fields go
            filler_len = 512 - 8 - len(head)
            rest = ('"},' + tail + ',"zpad":{"dtype":"U8","shape":[%d],"data_offsets":[%d,%d]}' % (
                padlen, off, off + padlen) + ',"zzblob":{"dtype":"U8","shape":[%d],"data_offsets":[%d,%d]}}' % (
                blob_len, off + padlen, off + padlen + blob_len))
            if len(head) + filler_len + len(rest) <= n_len:
                break
        header = bytearray(b" " * n_len)
        body = head.encode() + b" " * filler_len + rest.encode()
        header[:len(body)] = body
        header = bytes(header)
        file = bytearray(struct.pack("<Q", n_len) + header)
        # tar fields inside the string (bytes 100..512 of the file are spaces now)
        file[100:108] = b"0000644 "
        file[108:116] = b"0000000 "
        file[116:124] = b"0000000 "
        size = (8 + n_len + off + padlen) - 512
        file[124:136] = b"%011o " % size
        file[136:148] = b"00000000000 "
        file[148:156] = b" " * 8
        file[156:157] = b"0"
        s = sum(file[:512])
        file[148:156] = b"%07o " % s
        assert file[8:9] == b"{"
        data = bytes(file)
        for n, d, s_, raw in tensors:
            data += raw
        data += b"\0" * padlen + tar_inner
        assert (8 + n_len + off + padlen) % 512 == 0
        return data

    def pickle_tar(self, model, tar_inner, rng, legacy):
        """A pickle (legacy checkpoint or plain) whose first pickle begins
        with a 512-byte string that is a V7 tar header; the tar's first
        member spans the rest of the pickle stream, then a torch tar
        checkpoint follows (torch.load reads the tar first)."""
        # PROTO 2, BINUNICODE of L bytes, POP, then the real first pickle's body
        if legacy:
            body = legacy_bytes(model, P.dumps(model_object(model, legacy=True), rng, 2), rng)
        else:
            body = P.dumps({"epoch": 3, "note": "plain"}, rng, 2)
        assert body[:2] == b"\x80\x02"
        slen = 512 - 7
        head = bytearray(b"\x80\x02X" + struct.pack("<I", slen) + b" " * slen)
        head[100:108] = b"0000644 "
        head[108:116] = b"0000000 "
        head[116:124] = b"0000000 "
        head[136:148] = b"00000000000 "
        head[156:157] = b"0"
        rest = b"0" + body[2:]  # POP the string, then the original first pickle's opcodes
        rest += b"\0" * ((-(len(rest))) % 512)
        head[124:136] = b"%011o " % len(rest)
        head[148:156] = b" " * 8
        head[148:156] = b"%07o " % sum(head)
        return bytes(head) + rest + tar_inner

    def f_safetensors(self, rng):
        model = make_model(rng, 3, dtypes=["float32", "int64", "float16", "bfloat16", "uint8", "bool"])
        sd = model_state_dict(model)
        tensors = [(n, str(t.dtype)[6:], list(t.shape), tensor_raw(t)) for n, t in sd.items()]
        m = rng.choice(["plain", "metadata", "unpadded"])
        data = C.safetensors_build(tensors, metadata={"format": "pt"} if m == "metadata" else None,
                                   header_pad_to=1 if m == "unpadded" else 8)
        expect = [{"name": n, "dtype": d, "shape": s, "sha256": __import__("hashlib").sha256(raw).hexdigest()}
                  for n, d, s, raw in tensors]
        self.emit(data, "synthetic-safetensors", "safetensors", m, ext="safetensors", expect=expect)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--cli", default="")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for f in os.listdir(a.out):
        os.unlink(os.path.join(a.out, f))
    g = Gen(a.out, a.seed, a.cli)
    g.run(a.count)
    print(f"generated {g.n} files in {a.out}")


if __name__ == "__main__":
    main()
