"""A small pickle assembler: writes an object description with every form
of every opcode CPython's unpickler reads (protocols 0 to 5), chosen by a
seeded random generator, so one object becomes many byte-different pickles
that Python reads as the same object.

Values are described with plain Python data plus the classes below:
Global (a reference), Call (REDUCE and its siblings), Tensor (torch's
_rebuild_tensor_v2 form), Persid (a persistent id), Build (BUILD on a value),
SetItem (SETITEM on a value), Raw (bytes emitted as they are).
"""

import struct


class Global:
    def __init__(self, module, name):
        self.module, self.name = module, name


class Call:
    """func(*args); `func` is a Global or any value."""

    def __init__(self, func, args, form=None):
        self.func, self.args, self.form = func, tuple(args), form


class Persid:
    def __init__(self, pid, text=False):
        self.pid, self.text = pid, text


class Build:
    """BUILD: `obj` then `state`, giving obj after setstate."""

    def __init__(self, obj, state):
        self.obj, self.state = obj, state


class SetItem:
    """SETITEM on `obj` (a tensor, say): obj[key] = value."""

    def __init__(self, obj, key, value):
        self.obj, self.key, self.value = obj, key, value


class Raw:
    def __init__(self, data):
        self.data = data


class ODict:
    """collections.OrderedDict() then SETITEM(S)."""

    def __init__(self, items):
        self.items = list(items)


def storage_pid(cls_name, key, numel, location="cpu", legacy=False, view=None):
    t = ("storage", Global("torch", cls_name), key, location, numel)
    if legacy:
        t = t + (view,)
    return Persid(t)


def tensor(pid, offset, size, stride, requires_grad=False, fn="_rebuild_tensor_v2", form=None):
    if fn == "_rebuild_tensor":
        args = (pid, offset, tuple(size), tuple(stride))
    else:
        args = (pid, offset, tuple(size), tuple(stride), requires_grad, ODict([]))
    return Call(Global("torch._utils", fn), args, form=form)


def parameter(t, requires_grad=True):
    return Call(Global("torch._utils", "_rebuild_parameter"), (t, requires_grad, ODict([])))


class Writer:
    """Emits one pickle. `proto` is the PROTO header (None: no header, as
    protocols 0 and 1 write); `rng` picks forms; `forms` restricts them:
    'text' (protocol 0 forms only where one exists), 'bin' (protocol 1-3),
    'torch' (only the forms torch's weights_only unpickler reads, as
    torch.save writes them), 'mixed' (any form of any protocol, as the
    unpickler reads them all)."""

    def __init__(self, rng, proto=2, forms="mixed", memo=True, frame=False):
        self.rng = rng
        self.proto = proto
        self.forms = forms
        self.use_memo = memo
        self.frame = frame
        self.out = bytearray()
        self.memo_next = 0
        self.global_memo = {}

    # -- choice helpers
    def pick(self, *options):
        return self.rng.choice(options)

    def text_only(self):
        return self.forms == "text"

    def allow(self, proto):
        if self.forms == "text":
            return proto == 0
        if self.forms == "bin":
            return proto <= 3
        if self.forms == "torch":
            return 1 <= proto <= 2
        return True

    def torch_only(self):
        return self.forms == "torch"

    # -- memo
    def memoize(self):
        if not self.use_memo or self.rng.random() < 0.3:
            return None
        i = self.memo_next
        self.memo_next += 1
        opts = [] if self.torch_only() else ["PUT"]
        if self.allow(1):
            opts += ["BINPUT", "LONG_BINPUT"] if i < 256 else ["LONG_BINPUT"]
        if self.allow(4):
            opts += ["MEMOIZE"]
        op = self.rng.choice(opts)
        if op == "PUT":
            self.out += b"p%d\n" % i
        elif op == "BINPUT":
            self.out += b"q" + bytes([i])
        elif op == "LONG_BINPUT":
            self.out += b"r" + struct.pack("<I", i)
        else:
            self.out += b"\x94"
        return i

    def get(self, i):
        opts = [] if self.torch_only() else ["GET"]
        if self.allow(1):
            opts += ["BINGET", "LONG_BINGET"] if i < 256 else ["LONG_BINGET"]
        op = self.rng.choice(opts)
        if op == "GET":
            self.out += b"g%d\n" % i
        elif op == "BINGET":
            self.out += b"h" + bytes([i])
        else:
            self.out += b"j" + struct.pack("<I", i)

    # -- scalars
    def w_int(self, v):
        opts = [] if self.torch_only() else ["INT", "LONG"]
        if self.allow(1) and -(2**31) <= v < 2**31:
            opts += ["BININT"]
            if 0 <= v < 256:
                opts += ["BININT1"]
            if 0 <= v < 65536:
                opts += ["BININT2"]
        if self.allow(2):
            opts += ["LONG1"] if self.torch_only() else ["LONG1", "LONG4"]
        op = self.rng.choice(opts)
        if op == "INT":
            if -(2**31) <= v < 2**31 or self.rng.random() < 0.5:
                self.out += b"I%d\n" % v
            else:
                self.out += b"L%dL\n" % v
        elif op == "LONG":
            self.out += b"L%dL\n" % v if self.rng.random() < 0.7 else b"L%d\n" % v
        elif op == "BININT":
            self.out += b"J" + struct.pack("<i", v)
        elif op == "BININT1":
            self.out += b"K" + bytes([v])
        elif op == "BININT2":
            self.out += b"M" + struct.pack("<H", v)
        else:
            n = (v.bit_length() + 8) // 8 if v else 0
            data = v.to_bytes(n, "little", signed=True) if n else b""
            if op == "LONG1" and n < 256:
                self.out += b"\x8a" + bytes([n]) + data
            else:
                self.out += b"\x8b" + struct.pack("<i", n) + data

    def w_bool(self, v):
        if self.allow(2) and (self.torch_only() or self.rng.random() < 0.6):
            self.out += b"\x88" if v else b"\x89"
        else:
            self.out += b"I01\n" if v else b"I00\n"

    def w_none(self):
        self.out += b"N"

    def w_float(self, v):
        if self.allow(1) and (self.torch_only() or self.rng.random() < 0.6):
            self.out += b"G" + struct.pack(">d", v)
        else:
            self.out += b"F" + repr(v).encode() + b"\n"

    def w_str(self, s, memo=True):
        b = s.encode("utf-8")
        opts = ["UNICODE"]
        if self.torch_only():
            opts = []
        if s.isascii() and "\\" not in s and "\n" not in s and not self.torch_only():
            opts += ["STRING"]  # a py2 str; torch.load decodes it as utf-8
        if self.allow(1):
            opts += ["BINUNICODE"]
            if s.isascii() and not self.torch_only():
                opts += ["BINSTRING"]
        if self.allow(3) and s.isascii() and len(b) < 256:
            opts += ["SHORT_BINSTRING"]
        if self.allow(4):
            opts += ["BINUNICODE8"]
            if len(b) < 256:
                opts += ["SHORT_BINUNICODE"]
        op = self.rng.choice(opts)
        if op == "UNICODE":
            self.out += b"V" + s.encode("raw-unicode-escape") + b"\n"
        elif op == "STRING":
            self.out += b"S'" + b + b"'\n"
        elif op == "BINSTRING":
            self.out += b"T" + struct.pack("<i", len(b)) + b
        elif op == "SHORT_BINSTRING":
            self.out += b"U" + bytes([len(b)]) + b
        elif op == "BINUNICODE":
            self.out += b"X" + struct.pack("<I", len(b)) + b
        elif op == "BINUNICODE8":
            self.out += b"\x8d" + struct.pack("<Q", len(b)) + b
        else:
            self.out += b"\x8c" + bytes([len(b)]) + b
        if memo:
            self.memoize()

    # -- containers
    def w_tuple(self, items):
        n = len(items)
        if self.allow(2) and n <= 3 and self.rng.random() < 0.6:
            for x in items:
                self.w(x)
            self.out += [b")", b"\x85", b"\x86", b"\x87"][n]
        elif self.allow(1) and n == 0 and self.rng.random() < 0.5:
            self.out += b")"
        else:
            self.out += b"("
            for x in items:
                self.w(x)
            self.out += b"t"
        self.memoize()

    def w_list(self, items):
        if self.allow(1) and (self.torch_only() or self.rng.random() < 0.6):
            self.out += b"]"
            self.memoize()
            if items and self.rng.random() < 0.5:
                self.out += b"("
                for x in items:
                    self.w(x)
                self.out += b"e"
            else:
                for x in items:
                    self.w(x)
                    self.out += b"a"
        else:
            self.out += b"("
            for x in items:
                self.w(x)
            self.out += b"l"
            self.memoize()

    def w_setitems(self, items):
        if items and self.allow(1) and self.rng.random() < 0.6:
            self.out += b"("
            for k, v in items:
                self.w(k)
                self.w(v)
            self.out += b"u"
        else:
            for k, v in items:
                self.w(k)
                self.w(v)
                self.out += b"s"

    def w_dict(self, items):
        if self.allow(1) and (self.torch_only() or self.rng.random() < 0.6):
            self.out += b"}"
            self.memoize()
            self.w_setitems(items)
        else:
            self.out += b"("
            for k, v in items:
                self.w(k)
                self.w(v)
            self.out += b"d"
            self.memoize()

    def w_global(self, g):
        key = (g.module, g.name)
        if key in self.global_memo and self.rng.random() < 0.7:
            self.get(self.global_memo[key])
            return
        if self.allow(4) and self.rng.random() < 0.5:
            self.w_str(g.module)
            self.w_str(g.name)
            self.out += b"\x93"
        else:
            self.out += b"c" + g.module.encode() + b"\n" + g.name.encode() + b"\n"
        i = self.memoize()
        if i is not None:
            self.global_memo[key] = i

    def w_call(self, c):
        form = c.form
        if form is None:
            form = "REDUCE"
            if isinstance(c.func, Global) and not self.torch_only() and self.rng.random() < 0.15:
                form = self.pick("INST", "OBJ")
        if form == "INST" and isinstance(c.func, Global):
            self.out += b"("
            for a in c.args:
                self.w(a)
            self.out += b"i" + c.func.module.encode() + b"\n" + c.func.name.encode() + b"\n"
        elif form == "OBJ":
            self.out += b"("
            self.w(c.func)
            for a in c.args:
                self.w(a)
            self.out += b"o"
        elif form == "NEWOBJ":
            self.w(c.func)
            self.w_tuple(list(c.args))
            self.out += b"\x81"
        else:
            self.w(c.func)
            self.w_tuple(list(c.args))
            self.out += b"R"
        self.memoize()

    def w_persid(self, p):
        if p.text:
            self.out += b"P" + str(p.pid).encode() + b"\n"
        else:
            self.w(p.pid)
            self.out += b"Q"

    def w(self, v):
        if isinstance(v, bool):
            self.w_bool(v)
        elif isinstance(v, int):
            self.w_int(v)
        elif isinstance(v, float):
            self.w_float(v)
        elif v is None:
            self.w_none()
        elif isinstance(v, str):
            self.w_str(v)
        elif isinstance(v, tuple):
            self.w_tuple(list(v))
        elif isinstance(v, list):
            self.w_list(v)
        elif isinstance(v, ODict):
            self.w_call(Call(Global("collections", "OrderedDict"), ()))
            self.w_setitems(v.items)
        elif isinstance(v, dict):
            self.w_dict(list(v.items()))
        elif isinstance(v, Global):
            self.w_global(v)
        elif isinstance(v, Call):
            self.w_call(v)
        elif isinstance(v, Persid):
            self.w_persid(v)
        elif isinstance(v, Build):
            self.w(v.obj)
            self.w(v.state)
            self.out += b"b"
        elif isinstance(v, SetItem):
            self.w(v.obj)
            self.w(v.key)
            self.w(v.value)
            self.out += b"s"
        elif isinstance(v, Raw):
            self.out += v.data
        else:
            raise TypeError(type(v))

    def dump(self, v):
        body_start = len(self.out)
        self.w(v)
        self.out += b"."
        body = bytes(self.out[body_start:])
        head = b""
        if self.proto is not None:
            head = b"\x80" + bytes([self.proto])
        if self.frame and self.proto is not None and self.proto >= 4:
            head += b"\x95" + struct.pack("<Q", len(body))
        return head + body


def dumps(value, rng, proto=2, forms="mixed", memo=True, frame=False):
    return Writer(rng, proto, forms, memo, frame).dump(value)


def plain(value, proto):
    """A pickle as CPython's pickler writes it (for simple values)."""
    import pickle

    return pickle.dumps(value, protocol=proto)


__all__ = [
    "Global", "Call", "Persid", "Build", "SetItem", "Raw", "ODict", "storage_pid", "tensor",
    "parameter", "Writer", "dumps", "plain",
]
