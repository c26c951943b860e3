"""Checks `torchport scan --json`'s "torch_weights_only" against the torch
it runs under (torch 2.6 or the current one, scripts/torch.sh REF python3
check_weights_only.py CLI DIR...), on every checkpoint under the folders.

The verdict answers release by release ("releases": ranges of torch 2.x
releases with one answer each). For each file whose scan has the field,
the range holding this torch's release is compared: torch.load(f,
weights_only=True) must load exactly when its "loads" is true; when it is
refused for a global, torch's message must name the range's first "needs"
as torch spells it; when only globals are missing (no "why") and the scan
calls the file clean, the range's "add_safe_globals" line must make it
load (never for a file it calls unsafe: that would let its globals run).
Every other file (safetensors, numpy, our records) must have no such
field. First, the allow-list src/pickle/globals.cpp holds (kTorchWeightsOnly,
each name from the release kWeightsOnlySince gives) must be this torch's
`_get_allowed_globals()` exactly. Prints counts; exits 1 on the first
disagreement.
"""

import json
import os
import re
import subprocess
import sys
import warnings

warnings.simplefilter("ignore")
import torch  # noqa: E402
import torch._weights_only_unpickler as wou  # noqa: E402

SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".tar")
HERE = os.path.dirname(os.path.abspath(__file__))
GLOBALS_CPP = os.path.join(HERE, "..", "..", "src", "pickle", "globals.cpp")
RELEASE = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])


def release_of(text):
    return tuple(int(x) for x in text.split("."))


def our_list():
    """The names of kTorchWeightsOnly this release allows."""
    src = open(GLOBALS_CPP).read()
    body = src[src.index("kTorchWeightsOnly[] = {"):]
    body = body[: body.index("};")]
    names = re.findall(r'"([^"]+)"', body)
    since_body = src[src.index("kWeightsOnlySince[] = {"):]
    since_body = since_body[: since_body.index("};")]
    # {"torch.int1", 7, 6}: allowed from 2.7 (the first number).
    since = {n: (2, int(m)) for n, m in re.findall(r'\{"([^"]+)",\s*(\d+),\s*\d+\}', since_body)}
    return sorted(n for n in names if since.get(n, (2, 6)) <= RELEASE)


def check_allow_list():
    ours = our_list()
    theirs = sorted(wou._get_allowed_globals())
    if ours != theirs:
        print(f"check_weights_only: torch {torch.__version__}'s default allow-list differs from "
              f"src/pickle/globals.cpp's for this release: only torch's "
              f"{sorted(set(theirs) - set(ours))}, only ours {sorted(set(ours) - set(theirs))}")
        return False
    print(f"check_weights_only: torch {torch.__version__}'s allow-list ({len(theirs)} globals) "
          f"is src/pickle/globals.cpp's for {RELEASE[0]}.{RELEASE[1]}")
    return True


def range_for(wo):
    """The range of "releases" holding this torch, or None."""
    for r in wo.get("releases", []):
        if release_of(r["first"]) <= RELEASE <= release_of(r["last"]):
            return r
    return None


def torch_named(message):
    """The global torch's weights_only refusal names, or None."""
    m = re.search(r"GLOBAL (\S+) (?:was not an allowed global|whose module)", message)
    return m.group(1) if m else None


def as_torch_names(name):
    # torch >= 2.7 names builtins without their module in its message.
    if RELEASE >= (2, 7) and name.startswith("builtins."):
        return name[len("builtins."):]
    return name


def main():
    cli, dirs = sys.argv[1], sys.argv[2:]
    if not check_allow_list():
        return 1
    files = []
    for d in dirs:
        for root, _, names in os.walk(d):
            files += [os.path.join(root, n) for n in sorted(names) if n.endswith(SUFFIXES)]
    counts = {"loads": 0, "refused": 0, "named as torch names it": 0, "allowed by the line": 0,
              "not judged": 0, "not for this release": 0, "no field": 0}
    per_release = {"holds for every release": 0, "changes between releases": 0}
    for path in sorted(files):
        r = subprocess.run([cli, "scan", "--json", path], capture_output=True, text=True)
        try:
            rep = json.loads(r.stdout)
        except ValueError:
            print(f"check_weights_only: {path}: scan printed no JSON (exit {r.returncode}): {r.stderr[:200]}")
            return 1
        wo = rep.get("torch_weights_only")
        if wo is None:
            counts["no field"] += 1
            continue
        per_release["holds for every release" if len(wo["releases"]) == 1 else "changes between releases"] += 1
        verdict = range_for(wo)
        if verdict is None:
            counts["not for this release"] += 1
            continue
        torch.serialization.clear_safe_globals()
        try:
            torch.load(path, weights_only=True)
            ok, err = True, ""
        except Exception as e:  # any refusal
            ok, err = False, str(e)
        if verdict["loads"] is None:  # the scan says it cannot tell, and why
            counts["not judged"] += 1
            continue
        if ok != verdict["loads"]:
            first = next((line for line in err.split("WeightsUnpickler error:")[-1].splitlines() if line.strip()), "")
            print(f"check_weights_only: {path}: torch {torch.__version__} loads={ok}, scan says {verdict} "
                  f"for torch {verdict['first']} to {verdict['last']}; torch: {first[:300]}")
            return 1
        if ok:
            counts["loads"] += 1
            continue
        counts["refused"] += 1
        named = torch_named(err)
        if named is not None and "why" not in verdict:
            if not verdict["needs"] or as_torch_names(verdict["needs"][0]) != named:
                print(f"check_weights_only: {path}: torch {torch.__version__} refuses the global {named}, "
                      f"scan's first need is {verdict['needs'][:1]}")
                return 1
            counts["named as torch names it"] += 1
        # Only for files our own allow-list calls clean (numpy's arrays,
        # say): the line would let a hostile file's globals run.
        if verdict["needs"] and "why" not in verdict and rep["verdict"] == "clean":
            exec(verdict["add_safe_globals"], {})
            try:
                torch.load(path, weights_only=True)
            except Exception as e:
                print(f"check_weights_only: {path}: still refused after the scan's line: {str(e)[:300]}")
                return 1
            counts["allowed by the line"] += 1
    torch.serialization.clear_safe_globals()
    print(f"check_weights_only: torch {torch.__version__}, {len(files)} files: " +
          ", ".join(f"{v} {k}" for k, v in counts.items()) + "; verdicts: " +
          ", ".join(f"{v} {k}" for k, v in per_release.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
