#!/usr/bin/env bash
# Compares `torchport scan` with picklescan, modelscan and fickling on the
# same files: detections on malicious samples, false positives on benign
# ones. Run by hand (not in CI); the results go to bench/results.md.
#
#   bash bench/scan_compare.sh [TORCHPORT_BINARY]
#   SUMMARY_ONLY=1 bash bench/scan_compare.sh   # the summary of an existing $OUT
#
# The three scanners are the PyPI releases users install, pinned in
# bench/requirements-scanners.txt (picklescan 1.0.5, modelscan 0.8.8,
# fickling 0.1.12), in a virtual environment of their own that this script
# makes when it is missing ($VENV, default /var/lib/torchport/venv-scan;
# never the torch environments), run by its Python.
# Optionally, $SCANNERS/picklescan and $SCANNERS/modelscan (default
# SCANNERS=/tmp/scanners): checkouts of their public sources, whose test
# samples then join the corpus (picklescan's, labelled as its tests label
# them; modelscan's two committed ones). Nothing of it is committed.
# Our own corpus: every entry of tests/security/crafted/expected.json
# (code-running files and folders; the few expected unscannable or
# truncated are labelled "fail-closed") and of
# tests/security/benign/expected.json (benign files of the same shapes;
# those expected truncated are "benign-damaged"), files and folders alike (a
# Hugging Face snapshot is a folder of symlinks into ../../blobs, copied as
# symlinks); the advisory corpus, tests/security/advisory/expected.json
# (issue 39: each case, whose payload make_advisory_corpus.py --verify runs
# in its real consumer, and its benign twin; the twins of the stores that
# hold what the scan does not read (a -wal file beside a SQLite shelf, a
# view) are "benign-unread", expected unscannable); plus our reader fixtures (real torch files). Every scanner
# runs on every file or folder of the corpus (torchport: one process each,
# 60 s each). None of them unpickles: they read opcodes. Never point
# torch.load, np.load, joblib.load or pickle.load at this corpus.
#
# Output: one TSV line per file or folder in $OUT: label, group (the
# technique: our crafted/ or benign/ subfolder, "(reads on)" when only a
# loader that reads on reaches the payload), expected verdict (ours; "-"
# for the other scanners' samples), path in the corpus, then each
# scanner's result: 1 detected, 0 passed, E error or not run. For
# torchport the exit status: 1, 0, or 2 (unscannable, truncated,
# malformed), E for a timeout or crash; torchport_verdict lists the
# verdicts its --json names. The summary (per group, then totals) goes to
# stdout; torchport's cells add "[N unsafe]", the files it called unsafe
# (its verdict, not its exit status).
set -uo pipefail

HERE=$(cd "$(dirname "$0")/.." && pwd)
TOOL=${1:-$HERE/build/bin/torchport}
SCANNERS=${SCANNERS:-/tmp/scanners}
VENV=${VENV:-/var/lib/torchport/venv-scan}
CORPUS=${CORPUS:-/tmp/scan_corpus}
OUT=${OUT:-/tmp/scan_compare.tsv}
PY=/usr/bin/python3

# --- the summary -------------------------------------------------------------------
summary() {
$PY - "$OUT" <<'EOF'
import csv, sys, collections
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
names = ["torchport", "picklescan", "modelscan", "fickling"]
ok = {n: "yes" if any(r[n] != "E" for r in rows) else "no" for n in names}  # not run: no result at all
WHAT = {"malicious": "detected", "code": "detected (code: whole module, TorchScript)",
        "object-arrays": "flagged", "fail-closed": "flagged (expected unscannable/truncated)",
        "benign": "false positives", "benign-damaged": "flagged (expected truncated)",
        "benign-unread": "flagged (holds what torchport does not read: expected unscannable)",
        "benign-trust": "flagged (benign, constructs library classes: torchport flags it until trusted)"}

# A folder's verdict is the worst of its files'.
ORDER = ["unsafe", "unscannable", "truncated", "malformed", "clean", "not-a-model-file", "unrecognized"]
def worst(v):
    vs = [x for x in v.split("+") if x in ORDER]
    return min(vs, key=ORDER.index) if vs else v

def cell(rs, n):
    if ok[n] != "yes":
        return "not run"
    hit = sum(r[n] == "1" for r in rs)
    two = sum(r[n] == "2" for r in rs)
    err = sum(r[n] == "E" for r in rs)
    out = f"{hit}"
    if two:
        out += f" (+{two} exit 2)"
    if err:
        out += f" ({err} errors)"
    if n == "torchport":  # exit 1 is unsafe or (before the rewrite) malformed: how many said unsafe
        out += f" [{sum(worst(r['torchport_verdict']) == 'unsafe' for r in rs)} unsafe]"
    return out

groups = collections.OrderedDict()
for r in rows:
    groups.setdefault((r["label"], r["group"]), []).append(r)
print("| files | n | " + " | ".join(names) + " |")
print("|---|---:|" + "---:|" * len(names))
for (label, group), rs in groups.items():
    print(f"| {label} ({group}): {WHAT.get(label, 'flagged')} | {len(rs)} | "
          + " | ".join(cell(rs, n) for n in names) + " |")
print()
print("Totals:")
print("| files | n | " + " | ".join(names) + " |")
print("|---|---:|" + "---:|" * len(names))
for title, pick in (
        ("code-running: our crafted files and folders", lambda r: r["label"] == "malicious" and r["group"].startswith("crafted")),
        ("code-running: ... of which only a loader that reads on reaches", lambda r: r["label"] == "malicious" and r["group"].endswith("(reads on)")),
        ("code-running: the advisory corpus (issue 39)", lambda r: r["label"] == "malicious" and r["group"].startswith("advisory")),
        ("benign twins of the advisory corpus: false positives", lambda r: r["label"] == "benign" and r["group"].startswith("advisory")),
        ("benign twins holding what torchport does not read (expected unscannable)", lambda r: r["label"] == "benign-unread"),
        ("code-running: picklescan's and modelscan's samples", lambda r: r["label"] == "malicious" and not r["group"].startswith(("crafted", "advisory"))),
        ("fail-closed (expected unscannable/truncated)", lambda r: r["label"] == "fail-closed"),
        ("benign, expected clean or not-a-model-file: false positives", lambda r: r["label"] == "benign" and not r["group"].startswith(("advisory", "ecosystem"))),
        ("the ecosystem corpus (issue 38), benign: false positives", lambda r: r["label"] == "benign" and r["group"].startswith("ecosystem")),
        ("the ecosystem corpus, files that construct library classes (flagged until trusted)", lambda r: r["label"] == "benign-trust"),
        ("benign, expected truncated", lambda r: r["label"] == "benign-damaged")):
    rs = [r for r in rows if pick(r)]
    print(f"| {title} | {len(rs)} | " + " | ".join(cell(rs, n) for n in names) + " |")
ours = [r for r in rows if r["expected"] != "-"]
match = sum(1 for r in ours if worst(r["torchport_verdict"]) == r["expected"])
print(f"\ntorchport's --json verdict (a folder's: the worst of its files') equals the expected one on "
      f"{match} of {len(ours)} of our files and folders")
EOF
echo "per-file results: $OUT"
}

if [ -n "${SUMMARY_ONLY:-}" ]; then
  summary
  exit 0
fi

# --- the corpus: label, group, expected verdict, path --------------------------
WORK=$(mktemp -d)
ITEMS=$WORK/items # label \t group \t expected \t path
: >"$ITEMS"
rm -rf "$CORPUS"
mkdir -p "$CORPUS"
add() { # label source file
  local dest="$CORPUS/$1/$2"
  mkdir -p "$dest"
  cp "$3" "$dest/"
  printf '%s\t%s\t-\t%s\n' "$1" "$2" "$dest/$(basename "$3")" >>"$ITEMS"
}
# picklescan's samples. Its own tests call these benign; everything else
# in tests/data and tests/data2 is a malicious sample.
PS_BENIGN="benign0_v0.pkl benign0_v3.pkl benign0_v4.pkl benign_password_protected.zip pytorch_model.bin
  new_pytorch_model.bin not_a_pickle.bin bad_pytorch.pt int_array.npy int_arrays.npz int_arrays_compressed.npz"
# numpy object arrays of plain data: np.load(allow_pickle=True) unpickles
# numpy's own reconstructors.
PS_OBJECT="object_array.npy object_arrays.npz object_arrays_compressed.npz"
for f in "$SCANNERS"/picklescan/tests/data/* "$SCANNERS"/picklescan/tests/data2/*; do
  [ -f "$f" ] || continue
  name=$(basename "$f")
  if [[ " $(echo $PS_BENIGN) " == *" $name "* ]]; then
    add benign picklescan "$f"
  elif [[ " $PS_OBJECT " == *" $name "* ]]; then
    add object-arrays picklescan "$f"
  else
    add malicious picklescan "$f"
  fi
done
# modelscan's committed samples (its other samples are generated by its tests).
[ -f "$SCANNERS/modelscan/tests/data/unsafe_zip_pytorch.pt" ] &&
  add malicious modelscan "$SCANNERS/modelscan/tests/data/unsafe_zip_pytorch.pt"
[ -f "$SCANNERS/modelscan/tests/data/password_protected.zip" ] && # an encrypted, empty test.txt
  add benign modelscan "$SCANNERS/modelscan/tests/data/password_protected.zip"
# Our crafted and benign corpora, copied whole (symlinks kept), one item per
# expected.json entry.
mkdir -p "$CORPUS/ours"
cp -a "$HERE/tests/security/crafted" "$HERE/tests/security/benign" "$HERE/tests/security/advisory" "$CORPUS/ours/"
cat >"$WORK/items.py" <<'EOF'
import json, os, sys
root = sys.argv[1]
for which in ("crafted", "benign"):
    for e in json.load(open(os.path.join(root, which, "expected.json"))):
        group = e["file"].split("/")[0]
        if which == "crafted":
            group = group if "/" in e["file"] else "advisory globals"
            label = "malicious" if e["verdict"] == "unsafe" else "fail-closed"
            group = "crafted " + group + (" (reads on)" if e.get("reads_on") else "")
        else:
            label = "benign" if e["verdict"] in ("clean", "not-a-model-file") else "benign-damaged"
            group = "benign " + group
        print(f"{label}\t{group}\t{e['verdict']}\t{os.path.join(root, which, e['file'])}")
for e in json.load(open(os.path.join(root, "advisory", "expected.json"))):
    print(f"malicious\tadvisory\t{e['verdict']}\t{os.path.join(root, 'advisory', e['file'])}")
    label = "benign" if e["twin_verdict"] in ("clean", "not-a-model-file") else "benign-unread"
    print(f"{label}\tadvisory twins\t{e['twin_verdict']}\t{os.path.join(root, 'advisory', e['twin'])}")
EOF
$PY "$WORK/items.py" "$CORPUS/ours" >>"$ITEMS"
# The ecosystem corpus (issue 38: files and folders transformers,
# accelerate, Lightning, PEFT, timm, torchao and sentence-transformers save,
# tests/ecosystem/make_corpus.py under the current torch; $ECOSYSTEM, made
# when missing). Benign all: torchport's default scan must call each clean
# (the JSON and text beside the weights: not-a-model-file), except the
# files that construct library classes or tensor subclasses, which it
# flags by design until the user trusts them (--profile, --allow: then
# clean, as tests/ecosystem/check_corpus.py checks); those are counted
# apart ("benign-trust").
ECOSYSTEM=${ECOSYSTEM:-/tmp/scan_compare_ecosystem}
if [ ! -f "$ECOSYSTEM/manifest.json" ] && "$HERE/scripts/torch.sh" current python3 -c "import transformers" 2>/dev/null; then
  rm -rf "$ECOSYSTEM"
  HF_HUB_OFFLINE=1 "$HERE/scripts/torch.sh" current python3 "$HERE/tests/ecosystem/make_corpus.py" "$ECOSYSTEM" >/dev/null 2>&1 ||
    echo "scan_compare: the ecosystem corpus could not be made; left out" >&2
fi
if [ -f "$ECOSYSTEM/manifest.json" ]; then
  mkdir -p "$CORPUS/ecosystem"
  cp -a "$ECOSYSTEM/." "$CORPUS/ecosystem/"
  $PY - "$CORPUS/ecosystem" >>"$ITEMS" <<'EOF2'
import json, os, sys
root = sys.argv[1]
items = json.load(open(os.path.join(root, "manifest.json")))["items"]
for it in items:
    # A folder needs trust when a file in it does (a Trainer's folder holds
    # training_args.bin): the scan of a folder judges every file in it.
    inside = [x for x in items if x["path"] == it["path"] or x["path"].startswith(it["path"].rstrip("/") + "/")]
    trusted = any(x.get("profiles") or x.get("allow") for x in inside)
    label = "benign-trust" if trusted else "benign"
    expected = "unsafe" if trusted else ("not-a-model-file" if it["load"] == "none" else "clean")
    print(f"{label}\tecosystem {it['library']}\t{expected}\t{os.path.join(root, it['path'].rstrip('/'))}")
EOF2
fi
# Our reader fixtures (real torch files).
for f in "$HERE"/tests/fixtures/*.pt "$HERE"/tests/fixtures/*.pkl; do
  case "$(basename "$f")" in whole_module.pt | torchscript*.pt) add code torchport-fixtures "$f" ;; *) add benign torchport-fixtures "$f" ;; esac
done
LIST=$WORK/files
cut -f4 "$ITEMS" >"$LIST"

# --- the scanners ---------------------------------------------------------------
# torchport: one process per file or folder. The Python scanners: one
# process each, importing the scanner once and calling its API on every
# path, as its CLI would on that one path (a folder through the scanner's
# own folder walk; fickling has none: each file under it, symlinks
# followed, flagged when any file is); each prints "<path>\t<1|0|E>" lines
# (1 detected, 0 passed, E error). (A driver must not be named like its
# scanner's package: Python would import the driver.)
# The scanners' own environment, made once.
if [ ! -x "$VENV/bin/python" ]; then
  $PY -m venv "$VENV" || exit 1
  "$VENV/bin/pip" install -q -r "$HERE/bench/requirements-scanners.txt" || exit 1
fi
SPY=$VENV/bin/python
declare -A RESULT
record() { # scanner
  local f r
  while IFS=$'\t' read -r f r; do RESULT["$1|$f"]=$r; done
}
cat >"$WORK/verdicts.py" <<'EOF'
# The verdict a `torchport scan --json` output gives (a report's, a
# folder's), or else the verdicts of the reports it lists, joined by "+";
# "-" when it is not JSON.
import json, sys
try:
    d = json.load(sys.stdin)
except Exception:
    print("-")
    sys.exit()
KNOWN = ("clean", "not-a-model-file", "unsafe", "unscannable", "truncated", "malformed")
if isinstance(d, dict) and d.get("verdict") in KNOWN:  # a file, or a folder's summary
    print(d["verdict"])
    sys.exit()
out = set()
def walk(x):
    if isinstance(x, list):
        for y in x:
            walk(y)
    elif isinstance(x, dict):
        if isinstance(x.get("verdict"), str):
            out.add(x["verdict"])
        for k in ("files", "reports"):
            if k in x:
                walk(x[k])
walk(d)
print("+".join(sorted(out)) or "-")
EOF
while read -r f; do
  json=$(timeout 60 "$TOOL" scan --json "$f" 2>/dev/null)
  rc=$?
  case $rc in 0 | 1 | 2) RESULT["torchport|$f"]=$rc ;; *) RESULT["torchport|$f"]=E ;; esac
  RESULT["torchport_verdict|$f"]=$(printf '%s' "$json" | $PY "$WORK/verdicts.py")
done <"$LIST"

# picklescan: scan_file_path (scan_directory_path for a folder), as
# `picklescan -p PATH` (exit 1 when infected files, 2 on a scan error).
cat >"$WORK/run_picklescan.py" <<'EOF'
import os, sys
from picklescan.scanner import scan_directory_path, scan_file_path
for path in open(sys.argv[1]).read().split("\n"):
    if not path:
        continue
    try:
        r = scan_directory_path(path) if os.path.isdir(path) else scan_file_path(path)
        print(f"{path}\t{1 if r.infected_files > 0 else ('E' if r.scan_err else 0)}", flush=True)
    except Exception:
        print(f"{path}\tE", flush=True)
EOF
record picklescan < <(timeout 1800 "$SPY" "$WORK/run_picklescan.py" "$LIST" 2>/dev/null)

# modelscan: ModelScan(DEFAULT_SETTINGS).scan, as `modelscan -p PATH`
# (issues: 1; errors: E; no supported file: 0, modelscan's exit 3).
cat >"$WORK/run_modelscan.py" <<'EOF'
import sys, logging
logging.disable(logging.CRITICAL)
from modelscan.modelscan import ModelScan
from modelscan.settings import DEFAULT_SETTINGS
for path in open(sys.argv[1]).read().split("\n"):
    if not path:
        continue
    try:
        m = ModelScan(settings=DEFAULT_SETTINGS)
        m.scan(path)
        r = 1 if m.issues.all_issues else ("E" if m.errors else 0)
    except Exception:
        r = "E"
    print(f"{path}\t{r}", flush=True)
EOF
record modelscan < <(timeout 1800 "$SPY" "$WORK/run_modelscan.py" "$LIST" 2>/dev/null)

# fickling: its API as its README shows it: a zip through PyTorchModelWrapper
# (its scan_zip_archive when that fails), other files as stacked pickles
# (as `fickling --check-safety` reads them); unsafe when check_safety is
# above LIKELY_SAFE.
cat >"$WORK/run_fickling.py" <<'EOF'
import os, sys, zipfile, logging
logging.disable(logging.CRITICAL)
import fickling
from fickling import fickle
from fickling.analysis import Severity, check_safety
def unsafe(p):
    return check_safety(p).severity > Severity.LIKELY_SAFE
def check(path):
    if zipfile.is_zipfile(path):
        try:
            from fickling.pytorch import PyTorchModelWrapper
            return 1 if unsafe(PyTorchModelWrapper(path, force=True).pickled) else 0
        except Exception:
            results = list(fickling.scan_zip_archive(path, graceful=True).values())
            return 1 if any(x.severity > Severity.LIKELY_SAFE for x in results) else 0
    with open(path, "rb") as f:
        stacked = fickle.StackedPickle.load(f, fail_on_decode_error=False)
    return 1 if any(unsafe(p) for p in stacked) else 0
def check_path(path):
    if not os.path.isdir(path):
        return check(path)
    rs = []
    for root, _, files in os.walk(path):
        for name in sorted(files):
            try:
                rs.append(check(os.path.join(root, name)))
            except Exception:
                rs.append("E")
    return 1 if 1 in rs else ("E" if "E" in rs else 0)
for path in open(sys.argv[1]).read().split("\n"):
    if not path:
        continue
    try:
        r = check_path(path)
    except Exception:
        r = "E"
    print(f"{path}\t{r}", flush=True)
EOF
record fickling < <(timeout 1800 "$SPY" "$WORK/run_fickling.py" "$LIST" 2>/dev/null)

SCANNER_NAMES="torchport picklescan modelscan fickling"
printf 'label\tgroup\texpected\tfile' >"$OUT"
for s in $SCANNER_NAMES; do printf '\t%s' "$s" >>"$OUT"; done
printf '\ttorchport_verdict\n' >>"$OUT"
while IFS=$'\t' read -r label group expected f; do
  printf '%s\t%s\t%s\t%s' "$label" "$group" "$expected" "${f#"$CORPUS"/}" >>"$OUT"
  for s in $SCANNER_NAMES; do printf '\t%s' "${RESULT["$s|$f"]:-E}" >>"$OUT"; done
  printf '\t%s\n' "${RESULT["torchport_verdict|$f"]:--}" >>"$OUT"
done <"$ITEMS"
rm -rf "$WORK"

summary
