#!/usr/bin/python3
"""Cost per tensor: checkpoints of 1k to 320k small tensors (16 float32s
each, as mixture-of-experts layers and optimizer states hold them) loaded,
listed, scanned and converted by torchport, side by side in one run with
the torch.load of each torch users run (scripts/torch.sh: torch 1.13 from
Debian 12, torch 2.6 from Debian 13, whose weights_only=True default users
get, and the current torch from PyPI) and safetensors' own
load_file/save_file (the current torch's environment). Every measurement
is one fresh process, interleaved round by round in each memory regime
(bench/regimes.py); ratios are against the fastest torch.load of the three.
Beside wall time: CPU time (user + system) and the system calls of one
more run of each method under `strace -f -c` (torch's and safetensors'
less those of an interpreter that only imports torch). One command:

    /usr/bin/python3 bench/many_tensors.py [--build build] [--runs 3]
        [--counts 1000,10000,80000,320000] [--regimes back-to-back,after-idle,cold]

The checkpoints are made once under bench/data/many (bench/make_many_tensors.py,
run by torch 2.6). Times: torch's and safetensors' are the call alone
(after `import torch`); torchport's are the whole process, start to exit.
Peak memory: torch's and safetensors' above the process's baseline after
the import, torchport's the whole process's maximum resident set. Rewrites
the many-tensors section of bench/results.md.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import regimes  # noqa: E402
from compare import machine, replace_section  # noqa: E402

DATA = os.path.join(HERE, "data", "many")
TORCH_SH = os.path.join(ROOT, "scripts", "torch.sh")
TORCH2 = [TORCH_SH, "2.6", "python3"]
TORCH_CURRENT = [TORCH_SH, "current", "python3"]

# Runs in the interpreter under test: times one call and its peak memory
# above the baseline (VmHWM after, VmRSS before; clear_refs resets the peak).
SNIPPET = r"""
import json, resource, sys, time
import torch
def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
what, path = sys.argv[1], sys.argv[2]
d = {}
if what == "save_file":  # the tensors to save, loaded before the clock starts
    from safetensors.torch import load_file, save_file
    d = load_file(path)
    if not d:
        raise SystemExit(f"{path} holds no tensors to save")
open("/proc/self/clear_refs", "w").write("5")
base = status("VmRSS:")
r0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
if what == "none":
    pass
elif what == "torch.load":
    d = torch.load(path, map_location="cpu")
elif what == "load_file":
    from safetensors.torch import load_file
    import os
    d = {}
    for f in ([os.path.join(path, x) for x in sorted(os.listdir(path)) if x.endswith(".safetensors")]
              if os.path.isdir(path) else [path]):
        d.update(load_file(f))
elif what == "save_file":
    save_file(d, "/tmp/torchport-many-save.safetensors")
t = time.perf_counter() - t0
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": t, "peak": status("VmHWM:") - base, "tensors": len(d),
                  "cpu": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
                  "sys": r1.ru_stime - r0.ru_stime}))
"""


def python_call(interpreter, what, path):
    def run():
        out = subprocess.run([*interpreter, "-c", SNIPPET, what, path], check=True,
                             capture_output=True, text=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    run.argv = [*interpreter, "-c", SNIPPET, what, path]
    run.baseline = [*interpreter, "-c", SNIPPET, "none", path]
    return run


def syscalls(argv):
    """System calls of one run of argv and its children (strace -f -c)."""
    log = f"/tmp/torchport-many-strace-{os.getpid()}"
    subprocess.run(["strace", "-f", "-c", "-o", log, *argv], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    with open(log) as f:
        for line in f:
            parts = line.split()
            if parts and parts[-1] == "total":
                return int(parts[3])
    return None


def process(*cmd):
    """A whole process: wall time, and its maximum resident set as GNU time
    reports it (a child of this interpreter would count the interpreter's
    own memory, which a fork copies, in its ru_maxrss)."""
    def run():
        peak_file = os.path.join("/tmp", f"torchport-many-peak-{os.getpid()}")
        t0 = time.perf_counter()
        r = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", "-o", peak_file, *cmd],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        t = time.perf_counter() - t0
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed: {r.stderr}")
        with open(peak_file) as f:
            kb, user, system = f.read().split()[-3:]
        return {"seconds": t, "peak": int(kb) * 1024, "cpu": float(user) + float(system),
                "sys": float(system)}
    run.argv = list(cmd)
    run.baseline = None
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--counts", default="1000,10000,80000,320000")
    ap.add_argument("--regimes", default=None)
    ap.add_argument("--no-write", action="store_true", help="do not touch bench/results.md")
    a = ap.parse_args()
    counts = [int(c) for c in a.counts.split(",")]
    rn = a.regimes.split(",") if a.regimes else [
        r for r in regimes.REGIMES if r != "cold" or regimes.can_drop_caches()]
    tp = os.path.join(a.build, "bin", "torchport")
    typed = os.path.join(a.build, "bin", "typed_many")
    subprocess.run([*TORCH2, os.path.join(HERE, "make_many_tensors.py"), DATA, *map(str, counts)],
                   check=True)
    have_current = subprocess.run([*TORCH_CURRENT, "-c", "import torch, safetensors"],
                                  capture_output=True).returncode == 0
    lib = [*TORCH_CURRENT, "-W", "ignore"] if have_current else [*TORCH2, "-W", "ignore"]
    out = "/tmp/torchport-many"
    os.makedirs(out, exist_ok=True)
    torch1 = ["/usr/bin/python3", "-W", "ignore"]
    torch2 = [*TORCH2, "-W", "ignore"]

    def workloads():
        for n in counts:
            yield n, os.path.join(DATA, f"dict_{n}.pt"), os.path.join(DATA, f"dict_{n}.safetensors")
        yield 90000, os.path.join(DATA, "shards_90k"), os.path.join(DATA, "shards_90k")

    rows = []
    for n, pt, st in workloads():
        sharded = os.path.isdir(pt)
        label = "90k in 8 safetensors shards" if sharded else f"{n:,}"
        methods = []
        if not sharded:
            methods += [
                ("torch 1.13 torch.load", python_call(torch1, "torch.load", pt)),
                ("torch 2.6 torch.load", python_call(torch2, "torch.load", pt)),
            ]
            if have_current:
                methods.append(("current torch torch.load",
                                python_call([*TORCH_CURRENT, "-W", "ignore"], "torch.load", pt)))
            methods += [
                ("torchport load .pt", process(tp, "load", pt)),
                ("torchport typed load .pt into modules",
                 process(typed, pt, str(n), "owned")),
                ("torchport inspect --json .pt", process(tp, "inspect", "--json", pt)),
                ("torchport scan .pt", process(tp, "scan", pt)),
                ("torchport convert .pt to .safetensors",
                 process(tp, "convert", "--force", pt, os.path.join(out, "a.safetensors"))),
                ("torchport convert .pt to .pt", process(tp, "convert", "--force", pt, os.path.join(out, "a.pt"))),
                ("safetensors save_file", python_call(lib, "save_file", st)),
            ]
        methods += [
            ("safetensors load_file", python_call(lib, "load_file", st)),
            ("torchport load .safetensors", process(tp, "load", st)),
            ("torchport convert .safetensors to .safetensors",
             process(tp, "convert", "--force", st, os.path.join(out, "b.safetensors"))),
        ]
        print(f"== {label} tensors", flush=True)
        res = regimes.measure(rn, methods, a.runs, [pt, st])
        calls = {}
        for name, run in methods:
            c = syscalls(run.argv)
            if c is not None and run.baseline:
                b = syscalls(run.baseline)
                c = c - b if b is not None else None
            calls[name] = c
        size = sum(os.path.getsize(os.path.join(pt, f)) for f in os.listdir(pt)) if sharded \
            else os.path.getsize(pt)
        rows.append((n, label, size, os.path.getsize(st) if not sharded else size, res, calls))

    lines = [f"Machine: {machine()}. {a.runs} run(s) per regime, medians; "
             f"{time.strftime('%Y-%m-%d')}. `python3 bench/many_tensors.py`.", ""]
    for regime in rn:
        lines += [f"**{regime}**", "",
                  "| tensors | what | time | CPU (system) | µs per tensor | vs the fastest torch.load "
                  "| system calls | peak memory | bytes per tensor beyond the file |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for n, label, size, st_size, res, calls in rows:
            r = res[regime]
            loads = [statistics.median(s["seconds"] for s in v) for k, v in r.items()
                     if k.endswith("torch.load") and v]
            ref = r.get("safetensors load_file")
            ref_t = min(loads) if loads else (statistics.median(s["seconds"] for s in ref)
                                              if ref else None)
            for name, samples in r.items():
                if not samples:
                    continue
                t = statistics.median(s["seconds"] for s in samples)
                peak = statistics.median(s["peak"] for s in samples)
                file = st_size if "safetensors" in name.split(" to ")[0] else size
                beyond = (peak - 2 * file) / n if "torchport" in name else (peak - file) / n
                ratio = f"{ref_t / t:.1f}x" if ref_t and name.startswith("torchport") else ""
                cpu = statistics.median(s["cpu"] for s in samples)
                system = statistics.median(s["sys"] for s in samples)
                nc = calls.get(name)
                lines.append(f"| {label} | {name} | {t:.3f} s | {cpu:.3f} s ({system:.3f} s) | "
                             f"{1e6 * t / n:.1f} | {ratio} | {nc if nc is not None else ''} | "
                             f"{peak / 1e6:.0f} MB | {beyond:.0f} |")
        lines.append("")
    lines += ["Ratios: against the fastest `torch.load` of the torches measured (for the "
              "safetensors shards, against `load_file`). CPU: user + system seconds (torch's and "
              "safetensors' of the call, torchport's of the whole process). System calls: one "
              "more run under `strace -f -c`; torch's and safetensors' less those of the same "
              "interpreter importing torch and loading nothing.", "",
              "Bytes per tensor beyond the file: for torchport, the peak minus twice the file "
              "(the mapped file plus the owned copy of its tensors) per tensor; for torch and "
              "safetensors, the peak above their baseline minus the file, per tensor.", ""]
    text = "\n".join(lines)
    print(text)
    if not a.no_write:
        path = os.path.join(HERE, "results.md")
        body = open(path).read() if os.path.exists(path) else ""
        open(path, "w").write(replace_section(body, "many-tensors", text))


if __name__ == "__main__":
    main()
