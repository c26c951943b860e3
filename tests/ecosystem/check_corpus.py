"""Checks torchport against the libraries' own loaders on the ecosystem
corpus (make_corpus.py), under the current torch:

  scripts/torch.sh current python3 check_corpus.py --cli torchport --dump differential_dump CORPUS
  scripts/torch.sh current python3 check_corpus.py --cli torchport --dump differential_dump --make

(--make builds the corpus with make_corpus.py into a fresh temporary folder,
removed afterwards: what ctest runs.)

For every file and folder in CORPUS/manifest.json, read with what the
manifest says the user trusts (its "profiles" and "allow": --profile,
--allow):
  list     torchport's catalogue (differential_dump) equals what the library
           loads: names, dtypes, shapes, strides, offsets, shared storages and
           the bytes (sha256); a folder is opened with no flags, as the
           library lays it out
  convert  `torchport convert` to .pt (the whole object) and to safetensors
           reads back as the same tensors (the .pt loaded as the library
           loads the original: torch.load's default weights_only=True where
           it uses that), and a pickle's .pt (the whole
           object, when it holds values besides tensors) as the same values
           beside them (containers, numbers, strings, objects and
           their attributes, Enum members; not an OrderedDict's instance
           attributes, a state_dict's _metadata, which torchport drops by
           design: docs/format.md)
  scan     a benign file gets a verdict a user can act on: clean, or
           not-a-model-file for the JSON and text beside the weights; any
           other verdict is a false positive
  default  a file that needs trust is, without it, refused by name: open()
           fails naming what the user would trust (unsafe_global for the
           getattr of Enum members; unsupported, with the --allow hint, for
           a tensor subclass), and the scan calls it
           unsafe naming exactly those classes (a profile's classes the file
           holds, and builtins.getattr for its Enum members)
Prints one line a file and a summary; exits 1 on any difference or false
positive, 2 when the run itself fails.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "differential"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.simplefilter("ignore")

import torch  # noqa: E402
from run import compare_tensors  # noqa: E402
from torch_worker import flatten, tensor_json  # noqa: E402


def plain(v, depth=0):
    """The object as torchport lists it: a numpy array is a tensor of its
    own (named by its place), and a tensor subclass that flattens
    (torchao's quantized tensors, __tensor_flatten__) is its component
    tensors, NAME.ATTR, never densified."""
    import numpy as np

    if depth > 100:
        return v
    if isinstance(v, np.ndarray) and v.dtype != object:
        return torch.from_numpy(np.ascontiguousarray(v))
    if isinstance(v, torch.Tensor) and type(v) not in (torch.Tensor, torch.nn.Parameter) \
            and hasattr(v, "__tensor_flatten__"):
        attrs, _ = v.__tensor_flatten__()
        return {a: plain(getattr(v, a), depth + 1) for a in attrs}
    if isinstance(v, dict):
        return type(v)((k, plain(x, depth + 1)) for k, x in v.items()) if type(v) in (dict,) else \
            {k: plain(x, depth + 1) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x, depth + 1) for x in v]
    return v


def tensors_of(obj):
    """The flattened tensors of a loaded object, as the differential suite
    describes them (names, layout, storage identity, sha256)."""
    out, idents = [], {}
    for i, (n, t) in enumerate(flatten(plain(obj))):
        j = tensor_json(n, t, {})
        if "storage" in j and j["storage"] != -1:
            st = t.untyped_storage()
            j["storage"] = idents.setdefault((st.data_ptr(), st.nbytes()), i)
        out.append(j)
    return out


def library_load(root, it):
    """What the library itself gets from the file or folder, as one object."""
    import safetensors.torch

    path = os.path.join(root, it["path"])
    load = it["load"]
    if it.get("needs_import"):
        __import__(it["needs_import"])
    if load == "safetensors":
        return safetensors.torch.load_file(path)
    if load == "folder":
        return library_load(root, {**it, "path": os.path.join(it["path"], it["file"]),
                                   "load": "safetensors" if it["file"].endswith(".safetensors")
                                   else "torch.load:True"})
    if load == "index":
        names = [n for n in os.listdir(path) if n.endswith(".index.json")]
        with open(os.path.join(path, names[0])) as f:
            weight_map = json.load(f)["weight_map"]
        merged = {}
        for shard in sorted(set(weight_map.values())):
            sp = os.path.join(path, shard)
            part = safetensors.torch.load_file(sp) if shard.endswith(".safetensors") else \
                torch.load(sp, map_location="cpu", weights_only=True)
            merged.update(part)
        return {k: merged[k] for k in weight_map}
    if load.startswith("torch.load:"):
        mode = load.split(":", 1)[1]
        if mode == "safe_globals":
            from transformers.trainer_pt_utils import safe_globals

            with safe_globals():
                return torch.load(path, map_location="cpu", weights_only=True)
        return torch.load(path, map_location="cpu", weights_only=(mode == "True"))
    raise ValueError(f"unknown loader {load}")


def trust(it):
    """The command-line options for what the item says the user trusts."""
    out = []
    for p in it.get("profiles", []):
        out += ["--profile", p]
    for p in it.get("allow", []):
        out += ["--allow", p]
    return out


def dump(dump_bin, path, options=()):
    r = subprocess.run([dump_bin, *options], input=path + "\n", capture_output=True, text=True,
                       timeout=120)
    return json.loads(r.stdout.splitlines()[0])


def same_values(a, b, path="", depth=0):
    """Where two loaded objects differ beyond their tensors (which
    compare_tensors compares), or None: containers, numbers, strings, Enum
    members, and objects by class and attributes."""
    import enum

    import numpy as np

    where = path or "the whole object"
    if depth > 100:
        return None
    if isinstance(a, (torch.Tensor, np.ndarray)) or isinstance(b, (torch.Tensor, np.ndarray)):
        return None if type(a) is type(b) else f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if type(a) is not type(b):
        return f"{where}: {type(a).__qualname__} vs {type(b).__qualname__}"
    if isinstance(a, enum.Enum):
        return None if a is b else f"{where}: {a!r} vs {b!r}"
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{where}: keys {list(a)[:6]} vs {list(b)[:6]}"
        for k in a:
            d = same_values(a[k], b[k], f"{path}.{k}" if path else str(k), depth + 1)
            if d:
                return d
        # An OrderedDict's instance attributes (a state_dict's _metadata, the
        # modules' versions) are dropped by design (docs/format.md).
        if hasattr(a, "__dict__") and not isinstance(a, collections.OrderedDict):
            return same_values(vars(a), vars(b), path, depth + 1)
        return None
    if isinstance(a, (list, tuple, set, frozenset)):
        if len(a) != len(b):
            return f"{where}: {len(a)} vs {len(b)} items"
        pairs = zip(sorted(a, key=repr), sorted(b, key=repr)) if isinstance(a, (set, frozenset)) \
            else zip(a, b)
        for i, (x, y) in enumerate(pairs):
            d = same_values(x, y, f"{path}.{i}" if path else str(i), depth + 1)
            if d:
                return d
        return None
    if isinstance(a, float) and a != a:
        return None if b != b else f"{where}: nan vs {b!r}"
    if isinstance(a, (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device,
                      torch.Size, torch.layout, torch.memory_format)):
        return None if a == b else f"{where}: {a!r} vs {b!r}"
    if hasattr(a, "__dict__"):
        return same_values(vars(a), vars(b), path, depth + 1)
    return None if a == b else f"{where}: {a!r} vs {b!r}"


def has_values(v, depth=0):
    """True when a loaded object holds values besides tensors (torchport's
    convert then writes the whole object to .pt)."""
    if depth > 100 or isinstance(v, torch.Tensor):
        return False
    if isinstance(v, dict):
        return any(has_values(x, depth + 1) for x in v.values())
    if isinstance(v, (list, tuple)):
        return any(has_values(x, depth + 1) for x in v)
    return True


def flagged(cli, path, options=()):
    """`torchport scan --json`: the verdict and the globals its findings name."""
    r = subprocess.run([cli, "scan", "--json", path, *options], capture_output=True, text=True)
    j = json.loads(r.stdout)
    return j, sorted({f["global"] for f in j["findings"] if f.get("global")})


def profile_classes(cli):
    out = subprocess.run([cli, "scan", "--list-profiles", "--json"], capture_output=True, text=True,
                         check=True).stdout
    return {p["name"]: {c["class"] for c in p["classes"]} for p in json.loads(out)}


def check_default(a, path, it):
    """A file needing trust, read without it: refused by name (see the
    module's doc). 'ok', or what is wrong."""
    d = dump(a.dump, path)
    report, named = flagged(a.cli, path)
    held = set()
    for p in report["pickles"]:
        held.update(g["name"] for g in p["globals"])
    want = set(it.get("allow", []))
    for p in it.get("profiles", []):
        want |= profile_classes(a.cli)[p] & held
    if it.get("profiles") and "builtins.getattr" in held:
        want.add("builtins.getattr")
    problems = []
    if d["open"]["ok"]:
        problems.append("read without trust")
    elif d["open"]["code"] not in ("unsafe_global", "unsupported") or \
            not any(w in d["open"]["message"] for w in want):
        problems.append(f"refused as {d['open']['code']}: {d['open']['message'][:120]}")
    elif it.get("allow") and "--allow" not in d["open"]["message"]:
        problems.append("refused without the --allow hint")
    if report["verdict"] != "unsafe" or named != sorted(want):
        problems.append(f"scan {report['verdict']} naming {named}, not {sorted(want)}")
    return "ok" if not problems else "; ".join(problems)


def check_item(a, root, it, tmp):
    """(list, convert, scan, default) outcomes: each 'ok', '-' or a reason."""
    path = os.path.join(root, it["path"])
    options = trust(it)
    d = dump(a.dump, path, options)
    verdict = d.get("scan", {}).get("verdict", "?")
    if it["load"] == "none":
        listed = "ok" if not d["open"]["ok"] else f"opened as {d['open'].get('format')}"
        scanned = "ok" if verdict in ("not-a-model-file", "clean") else f"verdict {verdict}"
        return listed, "-", scanned, "-", verdict, 0
    loaded = library_load(root, it)
    want = tensors_of(loaded)
    default = check_default(a, path, it) if options else "-"
    if not d["open"]["ok"]:
        return f"refused: {d['open'].get('code')}: {d['open'].get('message', '')[:150]}", "-", \
            ("ok" if verdict == "clean" else f"verdict {verdict}"), default, verdict, len(want)
    single = it["load"] not in ("index", "folder")
    diffs = compare_tensors(want, d["open"]["tensors"], strict_layout=single)
    if not single:
        diffs = [x for x in diffs if x[0] != "order"]
    listed = "ok" if not diffs else "; ".join(f"{k}: {v}" for k, v in diffs[:3])

    # convert: to .pt (the whole object) and to safetensors, read back by torch
    conv = []
    for ext, extra in ((".pt", []), (".safetensors", ["--tensors-only"])):
        out = os.path.join(tmp, os.path.basename(it["path"].rstrip("/")) + ext)
        r = subprocess.run([a.cli, "convert", "-q", "--force", path, out, *options, *extra],
                           capture_output=True, text=True)
        if r.returncode != 0:
            conv.append(f"{ext}: exit {r.returncode}: {r.stderr.strip()[:150]}")
            continue
        import safetensors.torch

        if ext == ".safetensors":
            back = safetensors.torch.load_file(out)
        elif it["load"].startswith("torch.load:"):  # as the library loads the original
            back = library_load(tmp, {**it, "path": os.path.basename(out)})
        else:
            back = torch.load(out, map_location="cpu", weights_only=True)
        got = tensors_of(back)
        names = {t["name"] for t in want}
        got = [t for t in got if t["name"] in names] if ext == ".safetensors" else got
        # safetensors keeps no order of its own (load_file lists by offset,
        # safe_open sorts), so only a .pt keeps the library's order.
        dd = [x for x in compare_tensors(want, got, strict_layout=False)
              if x[0] != "order" or (single and ext == ".pt")]
        if dd:
            conv.append(f"{ext}: " + "; ".join(f"{k}: {v}" for k, v in dd[:2]))
        elif ext == ".pt" and single and it["load"] != "safetensors" and has_values(loaded):
            # Kept as the whole object (an object of tensors alone is written
            # as a state_dict of them, named as listed).
            vd = same_values(loaded, back)
            if vd:
                conv.append(f".pt values: {vd[:150]}")
    converted = "ok" if not conv else " | ".join(conv)
    scanned = "ok" if verdict == "clean" else f"verdict {verdict}: {d['scan'].get('reason', '')[:150]}"
    return listed, converted, scanned, default, verdict, len(want)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--make", action="store_true",
                    help="build the corpus (make_corpus.py) into a fresh temporary folder first")
    ap.add_argument("corpus", nargs="?")
    a = ap.parse_args()
    if a.make == bool(a.corpus):
        ap.error("give either CORPUS or --make")
    with tempfile.TemporaryDirectory(prefix="torchport-ecosystem-") as tmp:
        if a.make:
            root = os.path.join(tmp, "corpus")
            r = subprocess.run([sys.executable, os.path.join(HERE, "make_corpus.py"), root],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"check_corpus: make_corpus.py failed:\n{r.stdout[-2000:]}{r.stderr[-4000:]}",
                      file=sys.stderr)
                return 2
        else:
            root = os.path.abspath(a.corpus)
        work = os.path.join(tmp, "work")
        os.makedirs(work)
        return check(a, root, work)


def check(a, root, tmp):
    with open(os.path.join(root, "manifest.json")) as f:
        man = json.load(f)
    print("check_corpus: " + ", ".join(f"{k} {v}" for k, v in man["versions"].items()))
    results, fails = [], 0
    for it in man["items"]:
        try:
            listed, converted, scanned, default, verdict, count = check_item(a, root, it, tmp)
        except Exception as e:  # the library's loader itself failed: the run is broken
            print(f"check_corpus: {it['path']}: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
        bad = [x for x in (listed, converted, scanned, default) if x not in ("ok", "-")]
        fails += bool(bad)
        results.append({**it, "list": listed, "convert": converted, "scan": scanned,
                        "default": default, "verdict": verdict, "tensors": count})
        print(f"{'FAIL' if bad else 'ok  '}  {it['library']:22} {it['path']:60} {verdict:17} "
              + ("" if not bad else " / ".join(bad)))
    n = len(results)
    files = sum(1 for r in results if not os.path.isdir(os.path.join(root, r["path"])))
    tensors = sum(r["tensors"] for r in results)
    fp = sum(1 for r in results if r["scan"] not in ("ok", "-"))
    diff = sum(1 for r in results if r["list"] != "ok" or r["convert"] not in ("ok", "-"))
    refusals = sum(1 for r in results if r["default"] not in ("ok", "-"))
    print(f"check_corpus: {n} items ({files} files, {n - files} folders), {tensors} tensors compared: "
          f"{diff} read or converted differently from the library, {fp} false positives, "
          f"{refusals} not refused by name without trust")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
