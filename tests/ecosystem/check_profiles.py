"""What building each class of torchport's opt-in profiles runs, shown and
checked against the installed libraries, under the current torch:

  scripts/torch.sh current python3 tests/ecosystem/check_profiles.py --cli torchport [FILE...]

A profile (docs/security.md, "Profiles"; `torchport scan --list-profiles`)
lets a pickle use each of its classes in one form only:

  object       NEWOBJ of the class with no arguments, then BUILD with a dict
               of str keys: `cls.__new__(cls)`, then pickle's load_build,
               which looks up `inst.__setstate__` and, finding none, stores
               the dict's items into `inst.__dict__`
  enum-member  `builtins.getattr(cls, 'NAME')`, as Python 3.11 pickles an
               Enum member

For each class it prints and checks:
  1. by introspection, what that form can reach: a `__new__`,
     `__setstate__`, `__getattribute__` or `__getattr__` of the class's own
     (none, but a `__getattr__` in ALLOWANCES), `__slots__`; for an Enum, its
     metaclass (enum.EnumType itself), that its members are named as
     torchport takes a member name (^[A-Z][A-Z0-9_]*$) and that every such
     name the class has is a member;
  2. by tracing (sys.settrace), every Python function entered while pickle
     builds it in that form, the libraries imported beforehand: none, but
     the ALLOWANCES, each of which must be entered only as said and end in
     the exception said;
  3. for contrast, what the other forms would run: calling the class
     (REDUCE, `cls()`: `__init__`, a dataclass's `__post_init__`) and an
     Enum by value (`cls(value)`: EnumType.__call__ and the class's
     `_missing_`), which a profile never admits.
Then, for each FILE and a training_args.bin it saves as transformers'
Trainer saves one (`torch.save(args)` once the devices are set up), every
Python function torch.load(weights_only=False) enters outside torch and the
standard library, which must be the allowances alone; and `torchport scan`
of it: clean with the profile; without it, unsafe, naming exactly the
profile's classes the file holds and builtins.getattr; torch_weights_only
naming exactly the add_safe_globals torch needs (checked by torch: it loads
with those, and refuses without any one of them).

Exits 1 when a check fails, 2 when the run itself fails.
"""

import argparse
import enum
import importlib
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
warnings.simplefilter("ignore")

import torch  # noqa: E402

MEMBER = re.compile(r"^[A-Z][A-Z0-9_]*$")  # torchport's enum_member_name

# The only library functions a profile's class may make Python enter while
# it is built in its form: (class, function) -> (the arguments it must be
# entered with, the exception it must end in). accelerate's PartialState
# defines __getattr__ (it words the AttributeError of a missing attribute);
# pickle's load_build looks up __setstate__ on the new, empty instance, which
# enters it once with that fixed name, before any of the file's state is
# stored, and it raises AttributeError: nothing of the file reaches it.
ALLOWANCES = {
    ("accelerate.state.PartialState", "PartialState.__getattr__"): ({"name": "__setstate__"},
                                                                     AttributeError),
}

failures = []


def fail(msg):
    failures.append(msg)
    print("  FAIL " + msg)


def resolve(qualified):
    module, _, name = qualified.rpartition(".")
    return getattr(importlib.import_module(module), name)


class Trace:
    """Every Python function entered while active: (module, qualname,
    arguments, exception it ended in or None), outside this file."""

    def __init__(self):
        self.calls = []

    def __enter__(self):
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc):
        sys.settrace(None)
        return False

    def _global(self, frame, event, arg):
        if event != "call" or frame.f_code.co_filename == __file__:
            return None
        code = frame.f_code
        args = {n: frame.f_locals.get(n) for n in code.co_varnames[:code.co_argcount]}
        entry = [frame.f_globals.get("__name__", "?"), code.co_qualname, args, None]
        self.calls.append(entry)

        def local(frame, event, arg):
            if event == "exception":
                entry[3] = arg[0]
            elif event == "return" and arg is not None:
                entry[3] = None  # caught inside: returned normally
            return local

        return local

    def outside(self, skip=("torch", "importlib", "pickle", "zipfile", "_compat_pickle", "typing",
                            "contextlib", "os", "posixpath", "genericpath", "threading",
                            "warnings", "weakref", "copyreg", "_weakrefset", "abc", "enum",
                            "functools", "collections", "io", "codecs", "re", "sre_parse",
                            "sre_compile", "struct", "inspect", "difflib", "traceback", "linecache",
                            "tokenize", "dataclasses")):
        """The calls outside torch and the standard library."""
        return [c for c in self.calls if c[0].split(".")[0] not in skip]


def allowed_calls(qualified, calls):
    """The calls not admitted by ALLOWANCES; checks each admitted one."""
    rest = []
    for module, qualname, args, exc in calls:
        allowance = ALLOWANCES.get((qualified, qualname))
        if allowance is None:
            rest.append((module, qualname))
            continue
        want_args, want_exc = allowance
        for k, v in want_args.items():
            if args.get(k) != v:
                fail(f"{qualified}: {qualname} entered with {k}={args.get(k)!r}, not {v!r}")
        if exc is not want_exc:
            fail(f"{qualified}: {qualname} ended in {exc}, not {want_exc.__name__}")
    return rest


def object_pickle(cls, state):
    """The pickle of the profile's object form: NEWOBJ with no arguments,
    BUILD with `state` (protocol 2, as torch.save writes)."""
    out = b"\x80\x02c" + f"{cls.__module__}\n{cls.__qualname__}\n".encode() + b")\x81"
    return out + pickle.dumps(state, protocol=2)[2:-1] + b"b."


def own(cls, name):
    """Where in cls's MRO (before object) `name` is defined, or None."""
    for k in cls.__mro__[:-1]:
        if name in vars(k):
            return k.__qualname__
    return None


def check_object(qualified, cls):
    print(f"{qualified}  (object: NEWOBJ with no arguments, BUILD of a dict)")
    if type(cls) is not type:
        fail(f"{qualified}: metaclass {type(cls)}, not type")
    for name in ("__new__", "__setstate__", "__getattribute__", "__slots__", "__reduce_ex__"):
        where = own(cls, name)
        if name == "__reduce_ex__":
            continue  # how it is saved, never run by loading
        if where:
            fail(f"{qualified}: defines {name} ({where})")
    getattr_at = own(cls, "__getattr__")
    allowance = (qualified, f"{cls.__qualname__}.__getattr__")
    if getattr_at and allowance not in ALLOWANCES:
        fail(f"{qualified}: defines __getattr__ ({getattr_at}), which load_build's lookup of "
             "__setstate__ enters")
    print(f"  own __new__/__setstate__/__getattribute__/__slots__: none; __getattr__: "
          f"{getattr_at or 'none'}")
    for state in ({}, {"a": 1, "b": [1, 2]}):
        data = object_pickle(cls, state)
        with Trace() as t:
            obj = pickle.loads(data)
        rest = allowed_calls(qualified, t.calls)
        entered = [q for _, q in rest]
        print(f"  pickle.loads(NEWOBJ {cls.__qualname__}(), BUILD {state}): enters "
              f"{[c[1] for c in t.calls] or 'no Python function'}")
        if rest:
            fail(f"{qualified}: building it enters {entered}")
        if type(obj) is not cls or vars(obj) != state:
            fail(f"{qualified}: built {type(obj)} with {vars(obj)}, not the state")
    # What a call of the class (REDUCE) would run instead.
    with Trace() as t:
        try:
            cls()
        except Exception as e:  # noqa: BLE001 -- a required argument, say: it still ran code
            note = f", then {type(e).__name__}"
        else:
            note = ""
    lib = t.outside()
    print(f"  contrast: {cls.__qualname__}() (REDUCE) enters {len(t.calls)} Python functions, "
          f"{len(lib)} of its library's{note} (first: "
          f"{', '.join(sorted({q for _, q, *_ in lib})[:4]) or '-'})")


def check_enum(qualified, cls):
    print(f"{qualified}  (enum-member: builtins.getattr(cls, 'NAME'))")
    if type(cls) is not enum.EnumType or not issubclass(cls, enum.Enum):
        fail(f"{qualified}: {type(cls)} is not enum.EnumType, or not an Enum")
        return
    members = list(cls.__members__)
    bad = [m for m in members if not MEMBER.match(m)]
    if bad:
        fail(f"{qualified}: members not named ^[A-Z][A-Z0-9_]*$: {bad}")
    names = set()
    for k in type(cls).__mro__ + cls.__mro__:
        names.update(n for n in vars(k) if MEMBER.match(n))
    names.update(n for n in dir(cls) if MEMBER.match(n))
    strays = sorted(n for n in names if n not in cls.__members__)
    if strays:
        fail(f"{qualified}: attributes named as members but not members: {strays}")
    entered = set()
    for m in members:
        data = (b"\x80\x02c__builtin__\ngetattr\nc" + f"{cls.__module__}\n{cls.__qualname__}\n".encode()
                + pickle.dumps(m, protocol=2)[2:-1] + b"\x86R.")
        with Trace() as t:
            v = pickle.loads(data)
        entered.update(q for _, q, *_ in t.calls)
        if v is not cls[m]:
            fail(f"{qualified}: getattr(cls, {m!r}) gave {v!r}")
    print(f"  {len(members)} members, all named as members, no other attribute so named; "
          f"getattr of each enters {sorted(entered) or 'no Python function'}")
    if entered:
        fail(f"{qualified}: getattr of a member enters {sorted(entered)}")
    with Trace() as t:
        cls(next(iter(cls)).value)
    print(f"  contrast: {cls.__qualname__}(value) enters "
          f"{sorted({q for _, q, *_ in t.calls})}")


def scan(cli, path, profile):
    argv = [cli, "scan", "--json", path] + (["--profile", profile] if profile else [])
    r = subprocess.run(argv, capture_output=True, text=True)
    return json.loads(r.stdout)


def unsafe_globals(report):
    return sorted({f["global"] for f in report["findings"] if f.get("global")})


def check_file(cli, path, profile, classes):
    print(f"{path}")
    # Load once untraced (imports happen here), then traced.
    torch.load(path, weights_only=False)
    with Trace() as t:
        obj = torch.load(path, weights_only=False)
    lib = t.outside()
    qual_of = {c.split(".")[-1]: c for c in classes}
    rest = []
    for module, qualname, args, exc in lib:
        owner = qual_of.get(qualname.split(".")[0])
        if owner is None or not allowed_calls(owner, [(module, qualname, args, exc)]) == []:
            rest.append(f"{module}.{qualname}")
    print(f"  torch.load(weights_only=False): {type(obj).__module__}.{type(obj).__qualname__}; "
          f"enters {len(t.calls)} Python functions, outside torch and the standard library: "
          f"{[f'{m}.{q}' for m, q, *_ in lib] or 'none'}")
    if rest:
        fail(f"{path}: loading enters {rest}")
    clean = scan(cli, path, profile)
    if clean["verdict"] != "clean":
        fail(f"{path}: scan --profile {profile}: {clean['verdict']}: {clean['reason']}")
    plain = scan(cli, path, None)
    named = set()
    for p in plain["pickles"]:
        named.update(g["name"] for g in p["globals"])
    want = sorted((named & set(classes)) | ({"builtins.getattr"} & named))
    got = unsafe_globals(plain)
    print(f"  scan: with --profile {profile}: {clean['verdict']}; without: {plain['verdict']}, "
          f"naming {got}")
    if plain["verdict"] != "unsafe" or got != want:
        fail(f"{path}: scan without the profile names {got}, not {want}")
    needs = clean.get("torch_weights_only", {}).get("needs", [])
    print(f"  torch_weights_only needs: {needs}")
    objs = [resolve(n) for n in needs]
    with torch.serialization.safe_globals(objs):
        torch.load(path, weights_only=True)
    for i, n in enumerate(needs):
        try:
            with torch.serialization.safe_globals(objs[:i] + objs[i + 1:]):
                torch.load(path, weights_only=True)
        except Exception:  # noqa: BLE001 -- torch's refusal
            continue
        fail(f"{path}: torch loads it without {n}, which the scan says it needs")
    print(f"  torch {torch.__version__} loads it with exactly those in add_safe_globals, and "
          "refuses it without any one")


def training_args_bin(folder):
    """A training_args.bin as transformers' Trainer saves one."""
    from transformers import TrainingArguments

    args = TrainingArguments(output_dir="checkpoints", report_to=[], use_cpu=True, seed=0)
    _ = args.device  # the Trainer sets up the devices (args.distributed_state) before saving
    path = os.path.join(folder, "training_args.bin")
    torch.save(args, path)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    profiles = json.loads(subprocess.run([a.cli, "scan", "--list-profiles", "--json"],
                                         capture_output=True, text=True, check=True).stdout)
    versions = {m: importlib.import_module(m).__version__ for m in ("torch", "transformers", "accelerate")}
    print(f"check_profiles: Python {sys.version.split()[0]}, "
          + ", ".join(f"{k} {v}" for k, v in versions.items()))
    for p in profiles:
        print(f"\nprofile {p['name']}: {p['summary']}")
        classes = [c["class"] for c in p["classes"]]
        for c in p["classes"]:
            cls = resolve(c["class"])
            (check_object if c["use"] == "object" else check_enum)(c["class"], cls)
        for qualified, _ in ALLOWANCES:
            if qualified not in classes:
                fail(f"allowance for {qualified}, which the profile does not list")
        with tempfile.TemporaryDirectory(prefix="torchport-profiles-") as tmp:
            files = a.files + [training_args_bin(tmp)]
            print()
            for f in files:
                check_file(a.cli, f, p["name"], classes)
    print(f"\ncheck_profiles: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
