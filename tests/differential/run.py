"""The differential suite: generate mutants, read each with torch (in a
sandbox) and with torchport, compare, summarise. See README.md.

Usage: run.py --dump build/bin/differential_dump --out DIR [--seed 1] [--count 2000]
              [--cli build/bin/torchport] [--no-generate] [--no-sandbox] [FILE...]
With FILEs (reproducers), reads just those (copied into DIR/given/).
Exit status: 0 when no case fails, 1 when some do, 2 when the run itself failed
(the generator, or the self-check: torch.save's own zip must compare equal).
"""

import argparse
import collections
import json
import os
import select
import shutil
import subprocess
import sys
import time
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_SH = os.path.join(HERE, "..", "..", "scripts", "torch.sh")


def torch_argv(ref):
    """The command that runs torch REF's Python (scripts/torch.sh REF argv)."""
    return subprocess.run(["bash", TORCH_SH, ref, "argv"], check=True, capture_output=True,
                          text=True).stdout.splitlines()


PY = None  # generates the files: torch 1.13
TORCH_PY = None  # reads them as torch does: --torch 1.13, 2.6 or current
NATIVE_FORMATS = ("safetensors", "torchport")


def sandbox_prefix(use):
    """`unshare -n` (no network) and `setpriv` to nobody, when we can."""
    if not use:
        return [], "none (--no-sandbox)"
    prefix = []
    notes = []
    if shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0:
        prefix += ["unshare", "-n"]
        notes.append("no network (unshare -n)")
    else:
        notes.append("network NOT isolated (unshare -n unavailable: not root?)")
    if os.geteuid() == 0 and shutil.which("setpriv"):
        prefix += ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        notes.append("as nobody (setpriv)")
    else:
        notes.append("as the current user (not root: cannot drop privileges)")
    return prefix, ", ".join(notes)


class LineWorker:
    """Runs `cmd`, feeding one request per line and reading one JSON line per
    request; restarts it after a crash or a stall, marking that request."""

    def __init__(self, cmd, env=None, stall=30):
        self.cmd, self.env, self.stall = cmd, env, stall

    def run(self, requests, make_line, on_fail):
        results = []
        i = 0
        while i < len(requests):
            p = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 env=self.env, cwd="/")
            # feed everything from a thread-free writer: write all now (pipes may block), so use a feeder
            import threading

            todo = requests[i:]

            def feed():
                try:
                    for r in todo:
                        p.stdin.write((make_line(r) + "\n").encode())
                    p.stdin.close()
                except (BrokenPipeError, OSError):
                    pass

            t = threading.Thread(target=feed, daemon=True)
            t.start()
            buf = b""
            done = 0
            failed = None
            while done < len(todo):
                r, _, _ = select.select([p.stdout], [], [], self.stall)
                if not r:
                    failed = "stalled"
                    break
                chunk = os.read(p.stdout.fileno(), 1 << 20)
                if not chunk:
                    failed = f"died ({p.poll()})"
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    results.append(json.loads(line))
                    done += 1
            if failed:
                p.kill()
                p.wait()
                results.append(on_fail(todo[done], failed))
                done += 1
            else:
                p.wait()
            i += done
        return results


def torch_side(files, prefix):
    """torch.load of every file, in the sandbox. A sandbox user (nobody) may
    not reach the checkout or the build folder (a clone under /root is 0700),
    so the worker's scripts and the files are staged, world-readable, in a
    fresh folder of their own first."""
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "OMP_NUM_THREADS": "1",
           "PYTHONDONTWRITEBYTECODE": "1"}
    stage = None
    here, paths = HERE, {r["path"]: r["path"] for r in files}
    if "setpriv" in prefix:
        stage = tempfile.mkdtemp(prefix="torchport-differential-")
        os.chmod(stage, 0o755)
        here = os.path.join(stage, "scripts")
        os.mkdir(here)
        for name in os.listdir(HERE):
            if name.endswith(".py"):
                shutil.copy(os.path.join(HERE, name), here)
                os.chmod(os.path.join(here, name), 0o644)
        os.chmod(here, 0o755)
        data = os.path.join(stage, "files")
        os.mkdir(data)
        for i, r in enumerate(files):
            dst = os.path.join(data, f"{i}-{os.path.basename(r['path'])}")
            shutil.copyfile(r["path"], dst)
            os.chmod(dst, 0o644)
            paths[r["path"]] = dst
        os.chmod(data, 0o755)
    back = {v: k for k, v in paths.items()}
    try:
        w = LineWorker(prefix + TORCH_PY + [os.path.join(here, "torch_worker.py")], env, stall=60)
        results = w.run(files, lambda r: json.dumps({"path": paths[r["path"]]}),
                        lambda r, why: {"path": paths[r["path"]], "ok": False, "error": f"torch worker {why}",
                                        "crash": True})
    finally:
        if stage:
            shutil.rmtree(stage, ignore_errors=True)
    for res in results:
        res["path"] = back.get(res["path"], res["path"])
    return results


def torchport_side(files, dump):
    w = LineWorker([dump], None, stall=60)
    return w.run(files, lambda r: r["path"],
                 lambda r, why: {"path": r["path"], "open": {"ok": False, "code": "crash", "message": why},
                                 "scan": {"verdict": "crash"}})


# ---------------------------------------------------------------- comparison


def compare_tensors(tt, pt, strict_layout=True):
    """Differences between torch's tensor list and torchport's, as a list of
    (aspect, detail)."""
    diffs = []
    tn = [t["name"] for t in tt]
    pn = [t["name"] for t in pt]
    if len(tt) == 1 and len(pt) == 1 and tt[0]["name"] == "":
        pn = [""]  # a bare tensor: its name is torchport's to choose
    if sorted(tn) != sorted(pn):
        return [("names", f"torch {tn[:6]}{'...' if len(tn) > 6 else ''} vs torchport {pn[:6]}"
                          f"{'...' if len(pn) > 6 else ''}")]
    if tn != pn:
        diffs.append(("order", "same names, other order"))
    pmap = dict(zip(pn, pt))
    torch_index = {n: i for i, n in enumerate(tn)}
    for t in tt:
        p = pmap[t["name"]]
        n = t["name"]
        if "layout" in t or "layout" in p:
            # sparse: the layout, dtype, dense shape and dense values
            for aspect in ("layout", "dtype", "shape", "sha256"):
                if t.get(aspect) != p.get(aspect):
                    diffs.append((aspect if aspect != "sha256" else "values",
                                  f"{n}: torch {t.get(aspect)} vs torchport {p.get(aspect)}"))
            continue
        for aspect in ("dtype", "shape") + (("strides", "offset") if strict_layout else ()):
            tk = {"strides": "strides", "offset": "offset"}.get(aspect, aspect)
            if t.get(tk) != p.get(tk):
                diffs.append((aspect, f"{n}: torch {t.get(tk)} vs torchport {p.get(tk)}"))
        if t.get("sha256") and p.get("sha256") and t["sha256"] != p["sha256"]:
            diffs.append(("values", f"{n}: element hashes differ"))
    if strict_layout:
        # sharing: the partition of tensors by storage must be the same
        def groups(lst, names):
            g = collections.defaultdict(set)
            for i, t in enumerate(lst):
                s = t.get("storage", -1)
                if s is not None and s >= 0:
                    g[s].add(names[i])
            return sorted(sorted(v) for v in g.values() if len(v) > 1)

        gt, gp = groups(tt, tn), groups(pt, pn)
        if gt != gp:
            diffs.append(("sharing", f"torch shares {gt[:3]} vs torchport {gp[:3]}"))
    del torch_index
    return diffs


# torch refusals where torchport's reading is still the object torch would
# build without that one check (README: "allowed differences").
LENIENT = [
    ('hasRecord("version")', "zip_without_version_record"),
    ("Only Tensors of floating point and complex dtype can require gradients", "requires_grad_on_integer_tensor"),
    ('File "code/', "torchscript_code_torch_cannot_compile"),  # torchport never reads code/
]

ERROR_KINDS = [
    ("Trying to resize storage that is not resizable", "view_beyond_torch_storage"),
    ("storage has wrong byte size", "view_beyond_torch_storage"),
    ("invalid storage offset", "view_beyond_torch_storage"),
    ("set_() received an invalid combination", "build_state_torch_rejects"),
    ("requires_grad must be a bool", "build_state_torch_rejects"),
    ("Expected a Storage of type", "build_state_torch_rejects"),
    ("a leaf Variable that requires grad", "build_state_torch_rejects"),
    ("only Tensors of floating point", "build_state_torch_rejects"),
    ("not enough values to unpack", "state_arity_torch_rejects"),
    ("file must have 'read'", "tar_member_not_a_regular_file"),
    ("Can't get attribute", "global_torch_cannot_resolve"),
    ("Invalid argument", "zip_torch_cannot_read"),
    ("is not in a subdirectory", "zip_prefix_torch_rejects"),
    ("PytorchStreamReader", "zip_torch_cannot_read"),
    ("Invalid magic number", "not_legacy_for_torch"),
    ("invalid load key", "not_a_pickle_for_torch"),
]


def code_record_unreadable(path):
    """True when a code/ record of a TorchScript zip does not read back
    (bad CRC, bad deflate stream)."""
    try:
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if "/code/" in info.filename:
                    try:
                        z.read(info)
                    except Exception:
                        return True
    except Exception:
        return False
    return False


def torch_error_kind(err):
    for pattern, kind in ERROR_KINDS:
        if pattern in err:
            return kind
    return err.split(":", 1)[0] or "error"


def release(text):
    return tuple(int(x) for x in text.split("+")[0].split(".")[:2])


def weights_only_loads(scan, tr):
    """scan's torch_weights_only answer for the release of the torch that
    read the file (its range in weights_only_releases), or None."""
    version = tr.get("torch_version")
    if not version:
        return None
    for r in scan.get("weights_only_releases") or []:
        if release(r["first"]) <= release(version) <= release(r["last"]):
            return r["loads"]
    return None


def classify(rec, tr, pr):
    """One case's outcome: (outcome, class, detail). outcome is one of
    agree, allowed, fail, inconclusive."""
    po = pr["open"]
    scan = pr.get("scan", {})
    verdict = scan.get("verdict")
    pre = tr.get("prescan") or {}
    if po.get("code") in ("exception", "crash"):
        return "fail", f"torchport_{po['code']}", po.get("message", "")[:200]
    if verdict in ("exception", "crash"):
        return "fail", f"scan_{verdict}", scan.get("reason", "")[:200]
    if tr.get("crash") or tr.get("timeout"):
        return "inconclusive", "torch_" + ("timeout" if tr.get("timeout") else "crash"), tr.get("error", "")
    if tr.get("blocked"):
        return "inconclusive", "guard_blocked", tr.get("error", "")
    if pre.get("runs_code"):
        if verdict == "clean":
            return "fail", "scan_clean_but_runs_code", f"torch would import/call {pre['code_globals'][:4]}; scan: clean"
        return "agree", "code_flagged", f"{pre['code_globals'][:3]} -> scan {verdict}"
    t_ok = tr.get("ok")
    p_ok = po.get("ok")
    scan_wo = weights_only_loads(scan, tr)
    if TORCH_PY != PY and scan_wo is not None and not pre.get("runs_code") \
            and pre.get("mode") != "jit":  # the worker reads TorchScript with torch.jit.load
        # torch >= 2.6's side: does its default torch.load load the file, as
        # scan's torch_weights_only says for that release? (Only files the
        # pre-scan let torch read, and which torch did not stop in for
        # other reasons.)
        wo_loads = bool(t_ok) and not tr.get("weights_only_refuses")
        if scan_wo != wo_loads and (t_ok or not scan_wo):
            return "fail", f"weights_only_verdict:scan_{scan_wo}_torch_{wo_loads}", \
                f"scan: {scan.get('weights_only_why', '')[:120]}; torch: " \
                f"{(tr.get('weights_only_refuses') or tr.get('error') or 'loads')[:160]}"
    if t_ok and verdict == "dangerous":
        fail_dangerous = ("fail", "scan_dangerous_but_torch_loads_with_allowlist",
                          f"globals {pre.get('globals', [])[:6]}; scan: {scan.get('reason', '')[:160]}")
    else:
        fail_dangerous = None
    route = pre.get("route") or ""
    if t_ok and p_ok:
        diffs = compare_tensors(tr["tensors"], po["tensors"])
        if diffs:
            aspects = sorted({a for a, _ in diffs})
            detail = "; ".join(d for _, d in diffs[:3])
            fmt = po.get("format", "")
            if route == "safetensors" and fmt == "safetensors" and aspects == ["order"]:
                # The safetensors library lists tensors by data offset, ties
                # (empty tensors) in its own order; names and values agree.
                return "allowed", "lenient:safetensors_library_order", detail
            if route == "legacy" and fmt == "pickle":
                return "fail", "legacy_read_as_plain_pickle", f"torchport: format pickle, {len(po['tensors'])} " \
                                                              f"tensors; {detail}"
            if route != "zip" and not route.startswith(fmt.replace("pytorch-", "")):
                return "fail", f"other_reading:torch_{route}_torchport_{fmt}", detail
            return "fail", "differ:" + "+".join(aspects), detail
        if fail_dangerous:
            return fail_dangerous
        if tr.get("weights_only_refuses"):
            # torch >= 2.6's default loader refuses what its full loader reads
            # the same as torchport: torch's narrower opcode set, not a
            # different reading (scan reports it as torch_weights_only).
            return "allowed", "weights_only_refuses:" + tr["weights_only_refuses"].split(":")[-1].strip()[:60], ""
        return "agree", "both_accept_same", ""
    if t_ok and not p_ok:
        if fail_dangerous:
            return fail_dangerous
        if po.get("code") == "ambiguous":
            return "allowed", "ambiguous_refusal", po.get("message", "")[:200]
        if rec.get("family") == "real":
            return "fail", "refuses_real_checkpoint:" + po.get("code", "?"), po.get("message", "")[:200]
        return "allowed", "torchport_refuses:" + po.get("code", "?"), po.get("message", "")[:160]
    if not t_ok and not p_ok:
        return "agree", "both_refuse", ""
    # torch refuses, torchport accepts
    fmt = po.get("format", "")
    if rec.get("expect_native") is not None and fmt.startswith(NATIVE_FORMATS):
        exp = rec["expect_native"]
        diffs = compare_tensors(exp, po["tensors"], strict_layout=False)
        if diffs:
            return "fail", "native_differs:" + "+".join(sorted({a for a, _ in diffs})), diffs[0][1]
        return "allowed", f"native_format:{fmt}", "torch.load does not read this format"
    if rec.get("base", "").startswith("record_") and rec.get("family") == "real" and fmt.startswith("torchport"):
        return "allowed", "native_format:torchport", "torch.load does not read our records"
    if fmt == "pickle" and pre.get("legacy_magic"):
        return "fail", "legacy_magic_read_as_plain_pickle", f"the first pickle is torch's legacy magic number; " \
                                                            f"torch: {tr.get('error', '')[:120]}"
    if fmt == "pickle" and not po["tensors"]:
        return "allowed", "plain_pickle_torch_refuses", tr.get("error", "")[:120]
    err = tr.get("error", "")
    for pattern, why in LENIENT:
        if pattern in err:
            return "allowed", f"lenient:{why}", err[:160]
    if fmt == "torchscript" and code_record_unreadable(rec["path"]):
        # torch.jit.load reads (and compiles) code/, which torchport never
        # reads: a damaged code record fails torch only.
        return "allowed", "lenient:torchscript_code_torch_cannot_read", err[:160]
    return "fail", f"accepts_what_torch_refuses:{fmt}:{torch_error_kind(err)}", f"torch: {tr.get('error', '')[:160]}; torchport: " \
                                                        f"{len(po['tensors'])} tensors as {fmt}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--cli", default="")
    ap.add_argument("--torch", choices=("1.13", "2.6", "current"), default="1.13",
                    help="torch's side (scripts/torch.sh): 1.13's full unpickler behind an allow-list "
                         "guard, or 2.6's or the current torch's default, weights_only=True")
    ap.add_argument("--no-generate", action="store_true")
    ap.add_argument("--no-sandbox", action="store_true")
    ap.add_argument("--list", type=int, default=3, help="failing cases listed per class")
    ap.add_argument("files", nargs="*", help="read these files only (a reproducer), no generation")
    a = ap.parse_args()
    global PY, TORCH_PY
    PY = torch_argv("1.13")
    TORCH_PY = torch_argv(a.torch)
    a.dump, a.out = os.path.abspath(a.dump), os.path.abspath(a.out)
    a.cli = os.path.abspath(a.cli) if a.cli else ""
    t0 = time.time()
    mutants = os.path.join(a.out, "mutants")
    if a.files:
        a.no_generate = True
        mutants = os.path.join(a.out, "given")
        os.makedirs(mutants, exist_ok=True)
        with open(os.path.join(mutants, "manifest.jsonl"), "w") as f:
            for i, src in enumerate(a.files):
                dst = os.path.join(mutants, f"{i:05d}-" + os.path.basename(src))
                shutil.copyfile(src, dst)
                stem = os.path.basename(src).split(".")[0]
                parts = stem.split("-", 2)
                fam, mut = (parts[1], parts[2]) if len(parts) == 3 else ("given", stem)
                f.write(json.dumps({"id": stem, "path": dst, "base": fam, "family": fam, "mutation": mut}) + "\n")
    if not a.no_generate:
        os.makedirs(mutants, exist_ok=True)
        cmd = PY + [os.path.join(HERE, "generate.py"), mutants, "--seed", str(a.seed), "--count", str(a.count)]
        if a.cli:
            cmd += ["--cli", a.cli]
        r = subprocess.run(cmd)
        if r.returncode != 0:
            print("generator failed", file=sys.stderr)
            return 2
    os.chmod(a.out, 0o755)
    os.chmod(mutants, 0o755)
    with open(os.path.join(mutants, "manifest.jsonl")) as f:
        recs = [json.loads(line) for line in f]
    for r in recs:
        os.chmod(r["path"], 0o644)
    t_gen = time.time() - t0

    prefix, sandbox_note = sandbox_prefix(not a.no_sandbox)
    import threading

    out = {}

    def run_torch():
        out["torch"] = torch_side(recs, prefix)

    th = threading.Thread(target=run_torch)
    th.start()
    out["torchport"] = torchport_side(recs, a.dump)
    th.join()
    t_read = time.time() - t0 - t_gen
    tmap = {r["path"]: r for r in out["torch"]}
    pmap = {r["path"]: r for r in out["torchport"]}

    results = []
    for rec in recs:
        tr = tmap.get(rec["path"], {"ok": False, "error": "missing", "crash": True})
        pr = pmap.get(rec["path"], {"open": {"ok": False, "code": "crash", "message": "missing"}, "scan": {}})
        outcome, cls, detail = classify(rec, tr, pr)
        results.append({"id": rec["id"], "path": rec["path"], "family": rec["family"], "mutation": rec["mutation"],
                        "outcome": outcome, "class": cls, "detail": detail,
                        "torch": {k: tr.get(k) for k in ("ok", "error", "type", "weights_only_refuses")} | {
                            "route": (tr.get("prescan") or {}).get("route"),
                            "globals": (tr.get("prescan") or {}).get("globals"),
                            "tensors": len(tr.get("tensors") or [])},
                        "torchport": {"ok": pr["open"].get("ok"), "format": pr["open"].get("format"),
                                      "code": pr["open"].get("code"), "message": pr["open"].get("message"),
                                      "tensors": len(pr["open"].get("tensors") or []),
                                      "scan": pr.get("scan", {}).get("verdict"),
                                      "weights_only_loads": weights_only_loads(pr.get("scan", {}), tr)}})
    with open(os.path.join(a.out, "results.jsonl"), "w") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")

    n = len(results)
    t_acc = sum(1 for r in recs if tmap.get(r["path"], {}).get("ok"))
    t_skip = sum(1 for r in recs if tmap.get(r["path"], {}).get("skipped"))
    p_acc = sum(1 for r in recs if pmap.get(r["path"], {}).get("open", {}).get("ok"))
    by_outcome = collections.Counter(r["outcome"] for r in results)
    by_class = collections.Counter((r["outcome"], r["class"]) for r in results)
    lines = []
    lines.append(f"differential: {n} files (seed {a.seed}), generated in {t_gen:.0f} s, read in {t_read:.0f} s, "
                 f"torch side: torch {a.torch}{', weights_only=True' if a.torch != '1.13' else ''}")
    lines.append(f"sandbox for torch.load: {sandbox_note}")
    lines.append(f"accepted by torch: {t_acc}   not run by torch (would run code): {t_skip}   "
                 f"accepted by torchport: {p_acc}")
    lines.append(f"agreements: {by_outcome['agree']}   allowed differences: {by_outcome['allowed']}   "
                 f"inconclusive: {by_outcome['inconclusive']}   FAILURES: {by_outcome['fail']}")
    if TORCH_PY != PY:
        judged = [r for r in results if r["torchport"]["weights_only_loads"] is not None
                  and r["torch"]["globals"] is not None and r["outcome"] != "fail"
                  and (r["torch"]["ok"] or not r["torchport"]["weights_only_loads"])]
        lines.append(f"scan's torch_weights_only matched torch {a.torch} on {len(judged)} files "
                     f"({sum(r['torchport']['weights_only_loads'] for r in judged)} loading)")
    amb = sum(c for (o, k), c in by_class.items() if k == "ambiguous_refusal")
    lines.append(f"ambiguous refusals (torch accepts, torchport refuses as ambiguous): {amb}")
    for outcome in ("fail", "allowed", "inconclusive", "agree"):
        cl = sorted(((k, c) for (o, k), c in by_class.items() if o == outcome), key=lambda x: -x[1])
        if not cl:
            continue
        lines.append(f"-- {outcome}:")
        for k, c in cl:
            lines.append(f"   {c:5d}  {k}")
    fails = [r for r in results if r["outcome"] == "fail"]
    if fails:
        lines.append("-- failures by class and mutation (family/mutation: count):")
        per = collections.defaultdict(collections.Counter)
        for r in fails:
            per[r["class"]][f"{r['family']}/{r['mutation']}"] += 1
        for k in sorted(per, key=lambda k: -sum(per[k].values())):
            top = ", ".join(f"{m}: {c}" for m, c in per[k].most_common(6))
            more = len(per[k]) - 6
            lines.append(f"   {k}: {top}{f', +{more} more' if more > 0 else ''}")
        lines.append("-- failing cases (first per class; all in results.jsonl):")
        shown = collections.Counter()
        for r in fails:
            if shown[r["class"]] >= a.list:
                continue
            shown[r["class"]] += 1
            lines.append(f"   [{r['class']}] {r['path']}")
            lines.append(f"       {r['family']}/{r['mutation']}: {r['detail'][:300]}")
    # The harness checks itself: torch's own protocol-2 zip must read the same
    # on both sides, or the comparison (not torchport) is broken.
    harness_ok = True
    for r in results:
        if r["family"] == "real" and r["mutation"] == "zip_p2" and r["class"] != "both_accept_same":
            harness_ok = False
            lines.append(f"HARNESS CHECK FAILED: torch.save's own zip does not compare equal ({r['class']}: "
                         f"{r['detail'][:200]}); the readings, not torchport, may be wrong")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write(text + "\n")
    if not harness_ok:
        return 2
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
