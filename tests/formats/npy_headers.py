""".npy headers read by numpy and by torchport, compared (run by the Python
whose numpy is the reference: scripts/torch.sh 1.13 python3 (numpy 1.24)
and scripts/torch.sh current python3 (numpy 2.x)):

  npy_headers.py --dump build/bin/differential_dump [--count 3000] [--seed 1]

numpy reads a header with ast.literal_eval (numpy/lib/format.py), so its
text may hold what any Python literal may: comments, implicit string
concatenation, escapes, form feeds and carriage returns between tokens,
line continuations, Python 2 long suffixes, a descr given as a comma
string, a subarray, a list, a dict or a str of fields. Each case is a
header built from such pieces (and random edits of them), written as an
.npy with a body that fits what numpy makes of it: numpy's own
read_array_header_* (which only literal_evals) says whether the header is
valid and whether its dtype holds objects; torchport (differential_dump)
must agree: refuse what numpy refuses, walk the pickle of an object array,
and list a numeric array with numpy's dtype and shape. Exit 1 on any
disagreement (each printed), 2 when the run fails.
"""

import argparse
import io
import json
import os
import pickle
import random
import struct
import subprocess
import sys
import tempfile
import warnings

warnings.simplefilter("ignore")
import numpy as np  # noqa: E402

try:
    from numpy.lib import format as npformat  # numpy 1.x and 2.x
except ImportError:  # pragma: no cover
    npformat = np.lib.format

SIMPLE = {"<f4": "float32", "<f8": "float64", "<i8": "int64", "|u1": "uint8", "<i4": "int32",
          "<f2": "float16", "|b1": "bool", "<i2": "int16", "|i1": "int8", "<c8": "complex64",
          "<u2": "uint16", "<u4": "uint32", "<u8": "uint64", "<c16": "complex128"}

# descr texts (Python source), each a piece numpy reads one way or another
DESCRS = [
    "'<f4'", "'<f8'", "'|u1'", "'<i8'", "'|b1'", "'O'", "'|O'", "'<O'", "'O8'", "'object'",
    "'(2,)O'", "'(2,)<f4'", "'2O'", "'3<f4'", "'f4,O'", "'f4, i8'", "'O,f4'", "' f4 , O '",
    "'4,O'", "'()O'", "'(2,3)f4'", "'(2)O'", "'f4,'", "',f4'", "'<f4,>f4'", "'float32'",
    "'<f4 '", "'f4\\n'", "'f4,O\\t'", "'int64'", "'O4'", "'>f4'", "'=f8'", "'M8[ns]'", "'S5'",
    "'U3'", "'V8'", "'(2,)f4,(3,)O'", "'|(2,)O'", "'<(2,)f4'",
    "('O', (2,))", "('<f4', 3)", "('<f4', (2, 2))", "('O', 2, 'extra')", "('<f4',)",
    "[('a', '<f4')]", "[('a', 'O')]", "[('a', '<f4'), ('b', 'O')]", "[('a', '<f4', (2,))]",
    "[('a', 'O', 2)]", "['aO']", "['a<f4']", "['af']", "[('', '|V4'), ('b', '<f4')]",
    "{'aO': 1}", "[['a', 'O']]", "[(('t', 'a'), 'O')]", "[('a', ('O', (2,)))]", "[('a', [('b', 'O')])]",
    "'<f' '4'", "'O' ''", "'\\x4f'", "'\\117'", "'\\u004f'", "'\\U0000004f'", "'\\N{LATIN CAPITAL LETTER O}'",
    "u'O'", "r'O'", "'''O'''", "\"O\"", "b'O'", "'O' # c\n", "('O'\n)", "'\\\nO'",
]
SHAPES = ["(2,)", "(2, )", "(1, 2)", "()", "(True,)", "(2L,)", "(0x2,)", "(0b10,)", "(2_0,)",
          "(-1,)", "(2.0,)", "[2]", "(02,)", "(+2,)", "(-(-2),)", "((2),)", "(2,) # c"]
FORTRANS = ["False", "True", "0", "None", "not False"]
SEPARATORS = [" ", "", "\t", "\x0c", "\r", "\n", "\\\n", " # c\n", "\r\n", "  "]


def header_text(rng):
    keys = [("descr", rng.choice(DESCRS)), ("fortran_order", rng.choice(FORTRANS)),
            ("shape", rng.choice(SHAPES))]
    if rng.random() < 0.1:
        keys.append(("descr", rng.choice(DESCRS)))  # a repeated key keeps the last value
    if rng.random() < 0.05:
        keys.append(("extra", "1"))
    rng.shuffle(keys)
    sep = lambda: rng.choice(SEPARATORS) if rng.random() < 0.4 else " "  # noqa: E731
    q = lambda k: rng.choice([f"'{k}'", f'"{k}"', f"'{k[:2]}' '{k[2:]}'", f"'\\x{ord(k[0]):02x}{k[1:]}'",  # noqa: E731
                              f"u'{k}'"]) if rng.random() < 0.3 else f"'{k}'"
    body = ",".join(f"{sep()}{q(k)}{sep()}:{sep()}{v}" for k, v in keys)
    trail = rng.choice(["", ",", ", "]) if rng.random() < 0.5 else ","
    text = "{" + body + trail + sep() + "}"
    if rng.random() < 0.1:
        text = rng.choice([" ", "\t", "\x0c", "\n", "# c\n", "\x0c "]) + text
    if rng.random() < 0.05:
        text = "(" + text + ")"
    return text


def mutate(rng, text):
    pieces = ["#", "\\", "'", '"', "\n", "\r", "\x0c", " ", ",", "(", ")", "L", "O", "u", "b", "x", "0", "\x00",
              "\xe9", "\t", "[", "]", ":", "{", "}", "j", "_", "."]
    s = list(text)
    for _ in range(rng.randint(1, 3)):
        op = rng.random()
        at = rng.randrange(len(s) + 1)
        if op < 0.5:
            s.insert(at, rng.choice(pieces))
        elif op < 0.8 and s:
            del s[min(at, len(s) - 1)]
        elif s:
            s[min(at, len(s) - 1)] = rng.choice(pieces)
    return "".join(s)


def npy_bytes(text, version, body):
    enc = "utf8" if version == 3 else "latin1"
    h = text.encode(enc)
    pre = 10 if version == 1 else 12
    h = h + b" " * ((64 - (pre + len(h) + 1) % 64) % 64) + b"\n"
    size = struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([version, 0]) + size + h + body


def numpy_reading(data, version):
    """numpy's reading of the header: None when it refuses, else (dtype, shape, fortran)."""
    f = io.BytesIO(data)
    try:
        npformat.read_magic(f)
        read = {1: npformat.read_array_header_1_0, 2: npformat.read_array_header_2_0}.get(version)
        if read is not None:
            shape, fortran, dtype = read(f, max_header_size=1 << 20)
        else:  # numpy 2 keeps the private reader in numpy.lib._format_impl
            impl = getattr(npformat, "_read_array_header", None)
            if impl is None:
                from numpy.lib import _format_impl

                impl = _format_impl._read_array_header
            shape, fortran, dtype = impl(f, (3, 0), max_header_size=1 << 20)
        np.empty(0, dtype=dtype)  # a dtype numpy can make arrays of
        if any(d < 0 for d in shape):
            return None
        return dtype, tuple(shape), fortran
    except Exception:  # any refusal: ValueError, SyntaxError, TypeError, MemoryError...
        return None


def one_field_comma(text):
    """Whether the header's descr is a comma string of one item ("f4,"),
    which numpy 1 and numpy 2 read differently."""
    import ast

    try:
        d = ast.literal_eval(text)
    except Exception:
        try:
            d = ast.literal_eval(npformat._filter_header(text) if hasattr(npformat, "_filter_header") else
                                 __import__("numpy.lib._format_impl", fromlist=["x"])._filter_header(text))
        except Exception:
            return False
    descr = d.get("descr") if isinstance(d, dict) else None
    return isinstance(descr, str) and "," in descr and np.dtype(descr).names is not None or \
        isinstance(descr, str) and descr.strip().endswith(",")


def body_for(reading):
    dtype, shape, _ = reading
    if dtype.hasobject:
        # What np.save writes for an object array: its pickle (harmless ints).
        return pickle.dumps(np.array([1, 2], dtype=object), protocol=3)
    n = int(np.prod(shape)) if shape else 1
    return b"\x00" * (n * dtype.itemsize)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    cases = []
    with tempfile.TemporaryDirectory(prefix="torchport-npy-headers-") as tmp:
        for i in range(a.count):
            text = header_text(rng)
            if rng.random() < 0.3:
                text = mutate(rng, text)
            version = rng.choice([1, 1, 2, 3])
            try:
                probe = npy_bytes(text, version, b"")
            except UnicodeEncodeError:
                continue
            reading = numpy_reading(probe, version)
            body = body_for(reading) if reading else b"\x00" * 8
            path = os.path.join(tmp, f"{i:05d}.npy")
            with open(path, "wb") as f:
                f.write(npy_bytes(text, version, body))
            cases.append((path, text, version, reading))
        r = subprocess.run([a.dump], input="".join(p + "\n" for p, *_ in cases), capture_output=True,
                           text=True, timeout=600)
        lines = r.stdout.splitlines()
        if len(lines) != len(cases):
            print(f"npy_headers: the dump printed {len(lines)} lines for {len(cases)} files: {r.stderr[:300]}")
            return 2
        counts = {"refused by both": 0, "object arrays": 0, "numbers": 0, "other dtypes": 0,
                  "read differently by numpy 1 and 2": 0, "refused for \\N{...}": 0}
        fails = []
        for (path, text, version, reading), line in zip(cases, lines):
            got = json.loads(line)
            op = got["open"]
            verdict = got.get("scan", {}).get("verdict")
            why = None
            if reading is not None and not op["ok"] and op.get("code") == "unsupported" and "\\N{" in text:
                # \N{...} needs Unicode's name table, which torchport does not
                # carry: refused by name, and a scan judges the data as a
                # pickle (an object array's is one).
                counts["refused for \\N{...}"] += 1
            elif reading is None:
                if op["ok"]:
                    why = f"numpy refuses the header, torchport reads it ({op.get('format')})"
                else:
                    counts["refused by both"] += 1
            else:
                dtype, shape, fortran = reading
                if dtype.hasobject:
                    # The pickle is walked: the file opens (the array's values
                    # are inert), and the scan judges the pickle.
                    if not op["ok"] or verdict not in ("clean", "unsafe"):
                        why = f"numpy reads an object array; torchport: {op.get('code')} {op.get('message', '')[:120]}, scan {verdict}"
                    else:
                        counts["object arrays"] += 1
                elif dtype.newbyteorder("<").str in SIMPLE and dtype.names is None and dtype.subdtype is None:
                    # big-endian arrays are listed in the host's order
                    want = SIMPLE[dtype.newbyteorder("<").str]
                    t = op.get("tensors") or [{}]
                    if not op["ok"] and op.get("code") == "unsupported" and one_field_comma(text):
                        # "f4,": numpy 1 reads a plain array, numpy 2 a
                        # structured one of one field; torchport neither.
                        counts["read differently by numpy 1 and 2"] += 1
                    elif not op["ok"] or t[0].get("dtype") != want or \
                            tuple(t[0].get("shape", ())) != shape:
                        why = f"numpy reads {dtype.str} {shape}; torchport: " + \
                            (f"{t[0].get('dtype')} {t[0].get('shape')}" if op["ok"] else
                             f"{op.get('code')} {op.get('message', '')[:120]}")
                    else:
                        counts["numbers"] += 1
                else:
                    # structured, strings, subarrays of numbers, big-endian:
                    # not a tensor torchport lists, and never a pickle.
                    if op["ok"] or op.get("code") not in ("unsupported",) or verdict == "unsafe":
                        why = f"numpy reads dtype {dtype!r}; torchport: ok={op['ok']} {op.get('code')} " \
                              f"{op.get('message', '')[:120]} scan {verdict}"
                    else:
                        counts["other dtypes"] += 1
            if why:
                fails.append(f"  v{version} {text!r}: {why}")
    print(f"npy_headers: numpy {np.__version__}, {len(cases)} headers: " +
          ", ".join(f"{v} {k}" for k, v in counts.items()) + f", {len(fails)} disagreements")
    for f in fails[:40]:
        print(f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
