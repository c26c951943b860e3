"""No payload ever runs: every file of the crafted corpus is flagged by
torchport.scan as its expected.json says, with the CLI's own JSON, and
refused by torchport.load (framework torch and numpy); torchport.open keeps
what it reads inert. The session's canary check (conftest) fails if
/tmp/torchport-pwned appears or changes."""

import json
import os
import subprocess

import pytest

import torchport
from conftest import BENIGN, CRAFTED, tool

with open(os.path.join(CRAFTED, "expected.json")) as f:
    EXPECTED = json.load(f)


def crafted_files():
    out = []
    for dirpath, dirnames, filenames in os.walk(CRAFTED):
        dirnames.sort()
        for n in sorted(filenames):
            if not n.endswith((".py", ".json", ".txt")):
                out.append(os.path.join(dirpath, n))
    return out


FILES = crafted_files()


@pytest.mark.parametrize("entry", EXPECTED, ids=[e["file"] for e in EXPECTED])
def test_scan_flags_as_expected(entry):
    path = os.path.join(CRAFTED, entry["file"])
    if os.path.isdir(path):
        reports = torchport.scan_directory(path)
        verdicts = {r.verdict for r in reports}
        assert entry["verdict"] in verdicts, (entry, verdicts)
        return
    r = torchport.scan(path)
    assert r.verdict == entry["verdict"], (r.verdict, r.reason)
    if entry.get("global"):
        names = {f.global_name for f in r.findings} | {
            f.global_name for m in r.members for f in m.findings}
        assert entry["global"] in names or entry["global"] in r.json(), (entry["global"], names)
    if r.verdict != "clean":
        assert r.findings and r.reason
        assert r.exit_code != 0


@pytest.mark.parametrize("path", FILES, ids=[os.path.relpath(p, CRAFTED) for p in FILES])
def test_load_refuses_and_json_is_the_clis(path):
    r = torchport.scan(path)
    cli = subprocess.run([tool(), "scan", "--json", path], capture_output=True, text=True)
    assert cli.returncode == r.exit_code
    assert r.json() == cli.stdout.rstrip("\n")
    if r.verdict in ("clean", "not-a-model-file"):
        return
    for fw in ("numpy", "torch"):
        try:
            torchport.load(path, framework=fw)
        except torchport.TorchportError as e:
            assert e.code and str(e)
        else:
            # Read inertly: the unsafe part is not what load() builds (a
            # payload in a member torch.load never opens, say); nothing ran.
            assert r.verdict != "unsafe" or r.reading == "ok", (path, r.verdict)


def test_open_keeps_unknown_classes_inert():
    path = os.path.join(CRAFTED, "unknown_class_call.pt")
    try:
        f = torchport.open(path)
    except torchport.TorchportError as e:
        assert e.code in ("unsafe_global", "unsupported", "corrupt")
        return
    with pytest.raises(torchport.TorchportError):
        f.object()


def test_benign_corpus_scans():
    with open(os.path.join(BENIGN, "expected.json")) as f:
        expected = json.load(f)
    items = expected if isinstance(expected, list) else [
        {"file": k, **(v if isinstance(v, dict) else {"verdict": v})} for k, v in expected.items()]
    checked = 0
    for e in items:
        path = os.path.join(BENIGN, e["file"])
        if not os.path.isfile(path) or "verdict" not in e:
            continue
        assert torchport.scan(path).verdict == e["verdict"], e
        checked += 1
    assert checked > 0
