"""Checks `torchport scan --json`'s "torch_weights_only" against torch >= 2.6
itself, on every checkpoint under the given folders (run by torch 2.6's
Python: scripts/torch2.sh python3 check_weights_only.py CLI DIR...).

For each file whose scan has the field: torch.load(f, weights_only=True)
must load exactly when "loads" is true; when it does not load, and the
scan says only globals are missing (no "why") and calls the file clean,
running the scan's "add_safe_globals" line must make it load (never for a
file it calls unsafe: that would let its globals run). Every other file (safetensors,
numpy, our records) must have no such field. Prints a summary; exits 1 on
the first disagreement.
"""

import json
import os
import subprocess
import sys
import warnings

warnings.simplefilter("ignore")
import torch  # noqa: E402

SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".tar")


def main():
    cli, dirs = sys.argv[1], sys.argv[2:]
    files = []
    for d in dirs:
        for root, _, names in os.walk(d):
            files += [os.path.join(root, n) for n in sorted(names) if n.endswith(SUFFIXES)]
    counts = {"loads": 0, "refused": 0, "allowed by the line": 0, "not judged": 0, "no field": 0}
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
        torch.serialization.clear_safe_globals()
        try:
            torch.load(path, weights_only=True)
            ok, err = True, ""
        except Exception as e:  # any refusal
            ok, err = False, str(e).split("\n")[0][:200]
        if wo["loads"] is None:  # the scan says it cannot tell, and why
            counts["not judged"] += 1
            continue
        if ok != wo["loads"]:
            print(f"check_weights_only: {path}: torch {torch.__version__} loads={ok}, scan says {wo}; "
                  f"torch: {err}")
            return 1
        if ok:
            counts["loads"] += 1
            continue
        counts["refused"] += 1
        # Only for files our own allow-list calls clean (numpy's arrays,
        # say): the line would let a hostile file's globals run.
        if wo["needs"] and "why" not in wo and rep["verdict"] == "clean":
            exec(wo["add_safe_globals"], {})
            try:
                torch.load(path, weights_only=True)
            except Exception as e:
                print(f"check_weights_only: {path}: still refused after the scan's line: {str(e)[:300]}")
                return 1
            counts["allowed by the line"] += 1
    torch.serialization.clear_safe_globals()
    print(f"check_weights_only: torch {torch.__version__}, {len(files)} files: " +
          ", ".join(f"{v} {k}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
