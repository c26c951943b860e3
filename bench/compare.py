#!/usr/bin/python3
"""Loads the same checkpoints with torch.load, libtorch's torch::pickle_load
and torchport in one run, in each memory regime (bench/regimes.py:
back-to-back, after idle, cold page cache), interleaving the methods round
by round, and prints the medians and the ratios per regime. One command:

    bash bench/run.sh            (installs, builds the benchmarks, runs this)

or, with benchmarks already built in build/:

    /usr/bin/python3 bench/compare.py [--build build] [--runs 5] [--skip-llama]
        [--regimes back-to-back,after-idle,cold] [--skip-record-files]

Every measurement is one fresh process: the load's time, and the peak
resident memory above the process's own baseline (VmHWM after the load
minus VmRSS before it, /proc/self/clear_refs resetting the peak). The cold
regime drops the page cache, so it needs root. Rewrites its own sections of
bench/results.md (between the load-bench markers) and keeps the rest.
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
sys.path.insert(0, HERE)
import make_workloads  # noqa: E402
import regimes  # noqa: E402

TORCH_LOAD = r"""
import json, os, sys, time, torch
def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
paths = sys.argv[1:]
open("/proc/self/clear_refs", "w").write("5")
base = status("VmRSS:")
t0 = time.perf_counter()
out = {}
for p in paths:
    out.update(torch.load(p, map_location="cpu"))
t = time.perf_counter() - t0
print(json.dumps({"seconds": t, "peak": status("VmHWM:") - base,
                  "bytes": sum(v.numel() * v.element_size() for v in out.values() if torch.is_tensor(v))}))
"""


def files_of(path):
    if os.path.isdir(path):
        return [os.path.join(path, f) for f in sorted(os.listdir(path))]
    return [path]


def torch_load(paths):
    def run():
        out = subprocess.run([sys.executable, "-c", TORCH_LOAD, *paths], check=True, capture_output=True, text=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    return run


def tool(binary, *args):
    def run():
        out = subprocess.run([binary, *args], check=True, capture_output=True, text=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        return {"seconds": r["median"], "peak": r["peak_above_baseline"], "bytes": r.get("bytes", 0)}
    return run


def dd(path):
    """The disk's floor: every byte read with O_DIRECT, past the page cache."""
    def run():
        t0 = time.perf_counter()
        for f in files_of(path):
            subprocess.run(["dd", f"if={f}", "of=/dev/null", "bs=16M", "iflag=direct"], check=True,
                           capture_output=True)
        return {"seconds": time.perf_counter() - t0, "peak": 0, "bytes": sum(map(os.path.getsize, files_of(path)))}
    return run


def machine():
    model = "unknown CPU"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal")) / 1e6
    return f"{model}, {os.cpu_count()} cores, {mem:.0f} GB RAM, Linux {platform.release()}"


def convert_peak(torchport, src, dst, *extra):
    """Peak RSS of `torchport convert` (GNU time's maximum resident set)."""
    out = subprocess.run(["/usr/bin/time", "-v", torchport, "convert", src, dst, *extra],
                         check=True, capture_output=True, text=True)
    kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", out.stderr).group(1))
    secs = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", out.stderr).group(1)
    parts = [float(p) for p in secs.split(":")]
    return kb * 1024, sum(p * 60 ** i for i, p in enumerate(reversed(parts)))


def replace_section(text, name, body):
    """Replaces the text between <!-- NAME:begin --> and <!-- NAME:end -->
    (appending the section when it is not there)."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    block = f"{begin}\n{body.rstrip()}\n{end}"
    if begin in text and end in text:
        return text[:text.index(begin)] + block + text[text.index(end) + len(end):]
    return text.rstrip() + "\n\n" + block + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--runs", type=int, default=5, help="measured runs per method and regime (median)")
    ap.add_argument("--regimes", default=",".join(regimes.REGIMES))
    ap.add_argument("--skip-llama", action="store_true")
    ap.add_argument("--llama-params", type=float, default=3e9)
    ap.add_argument("--skip-record-files", action="store_true")
    args = ap.parse_args()
    chosen = [r for r in args.regimes.split(",") if r]
    if "cold" in chosen and not regimes.can_drop_caches():
        print("the cold regime drops the page cache and needs root: skipped", file=sys.stderr)
        chosen.remove("cold")
    bin_dir = os.path.join(args.build, "bin")
    load_bench = os.path.join(bin_dir, "load_bench")
    libtorch = os.path.join(bin_dir, "libtorch_load")
    torchport = os.path.join(bin_dir, "torchport")

    os.makedirs(DATA, exist_ok=True)
    make_workloads.resnets()
    p = lambda n: os.path.join(DATA, n)  # noqa: E731
    notes = []
    if not args.skip_llama:
        make_workloads.llama(args.llama_params, 2)
        st_dir = p("llama_st")
        if not os.path.exists(os.path.join(st_dir, "model.safetensors.index.json")):
            os.makedirs(st_dir, exist_ok=True)
            peak, secs = convert_peak(torchport, p("llama"), os.path.join(st_dir, "model.safetensors"),
                                      "--max-shard-size", "2GB")
            notes.append(f"`torchport convert` of the Llama-shaped .bin shards to safetensors shards: "
                         f"{secs:.1f} s, peak resident memory {peak / 1e6:.0f} MB")

    # The workloads measured in every regime: (name, paths read, methods).
    rn = p("resnet152.pt")
    workloads = [("resnet152 (zip, f32)", [rn, p("resnet152_plaindict.pt")], [
        ("torch.load", torch_load([rn])),
        *([("libtorch pickle_load", tool(libtorch, p("resnet152_plaindict.pt"), "1"))]
          if os.path.exists(libtorch) else []),
        ("pread floor", tool(load_bench, "pread", rn)),
        ("dd iflag=direct", dd(rn), {"cold"}),
        ("fresh memory, written once a page", tool(load_bench, "fresh", rn)),
        ("torchport owned", tool(load_bench, "owned", rn)),
        ("torchport mapped", tool(load_bench, "mapped", rn)),
        ("torchport typed", tool(load_bench, "typed", rn)),
    ])]
    if not args.skip_llama:
        llama, st_dir = p("llama"), p("llama_st")
        shards = [f for f in files_of(llama) if f.endswith(".bin")]
        workloads.append(("llama (bf16, .bin shards)", [llama], [
            ("torch.load", torch_load(shards)),
            ("pread floor", tool(load_bench, "pread", llama)),
            ("dd iflag=direct", dd(llama), {"cold"}),
            ("fresh memory, written once a page", tool(load_bench, "fresh", llama)),
            ("torchport owned", tool(load_bench, "owned", llama)),
            ("torchport mapped", tool(load_bench, "mapped", llama)),
        ]))
        workloads.append(("llama (bf16, safetensors shards)", [st_dir], [
            ("pread floor", tool(load_bench, "pread", st_dir)),
            ("dd iflag=direct", dd(st_dir), {"cold"}),
            ("fresh memory, written once a page", tool(load_bench, "fresh", st_dir)),
            ("torchport owned", tool(load_bench, "owned", st_dir)),
            ("torchport mapped", tool(load_bench, "mapped", st_dir)),
        ]))

    results = {}  # (workload, regime, method) -> samples
    for name, paths, methods in workloads:
        print(f"{name}:", flush=True)
        res = regimes.measure(chosen, methods, args.runs, paths, log=lambda line: print(line, flush=True))
        for regime, by_method in res.items():
            for method, samples in by_method.items():
                if samples:
                    results[(name, regime, method)] = samples

    def med(w, r, m):
        s = results.get((w, r, m))
        return statistics.median(x["seconds"] for x in s) if s else None

    # Other files, back-to-back only: formats and dtypes that share the path above.
    extras = [("resnet152 (legacy, f32)", p("resnet152_legacy.pt")), ("resnet152 (zip, bf16)", p("resnet152_bf16.pt")),
              ("resnet50 (zip, f32)", p("resnet50.pt")), ("resnet18 (zip, f32)", p("resnet18.pt"))]
    extra_rows = []
    for name, f in extras:
        res = regimes.measure(["back-to-back"], [("torch.load", torch_load([f])),
                                                 ("torchport owned", tool(load_bench, "owned", f))],
                              args.runs, [f], log=lambda line: None)["back-to-back"]
        tl = statistics.median(x["seconds"] for x in res["torch.load"])
        own = statistics.median(x["seconds"] for x in res["torchport owned"])
        extra_rows.append((name, tl, own, max(x["peak"] for x in res["torchport owned"]) / res["torchport owned"][0]["bytes"]))
        print(f"{name:26s} torch.load {tl:.4f} s  torchport owned {own:.4f} s  ({tl / own:.2f}x)", flush=True)

    # The targets, per workload and regime: (label, value, target, higher is better).
    checks = []
    for name, _, methods in workloads:
        for r in chosen:
            own, tl, fl = med(name, r, "torchport owned"), med(name, r, "torch.load"), med(name, r, "pread floor")
            if r in ("back-to-back", "after-idle"):
                if tl:
                    checks.append((name, r, "owned vs torch.load (speed-up)", tl / own,
                                   2.0 if r == "back-to-back" else 1.5, True))
                checks.append((name, r, "owned vs the pread floor (speed-up)", fl / own, 1.0, True))
                lt = med(name, r, "libtorch pickle_load")
                if lt:
                    checks.append((name, r, "owned vs libtorch (speed-up)", lt / own, None, True))
                if tl:
                    checks.append((name, r, "mapped vs torch.load (speed-up)", tl / med(name, r, "torchport mapped"),
                                   20.0, True))
            if r == "cold":
                dd_s = med(name, r, "dd iflag=direct")
                checks.append((name, r, "owned / dd iflag=direct (time)", own / dd_s, 1.15, False))
                # Where faulting fresh memory alone takes longer than the disk,
                # that is the floor; the two overlap at best.
                fault_s = med(name, r, "fresh memory, written once a page")
                if fault_s and fault_s > dd_s:
                    checks.append((name, r, "owned / max(dd, fresh memory) (time)",
                                   own / fault_s, 1.15, False))
                if tl:
                    checks.append((name, r, "owned vs torch.load (speed-up)", tl / own, None, True))
        b2b = results.get((name, "back-to-back", "torchport owned")) or next(
            (results[k] for k in results if k[0] == name and k[2] == "torchport owned"), None)
        if b2b:
            checks.append((name, "any", "owned peak / tensor bytes", max(x["peak"] for x in b2b) / b2b[0]["bytes"],
                           1.05, False))
    if not args.skip_llama:
        for r in chosen:
            st, bn = med("llama (bf16, safetensors shards)", r, "torchport owned"), med(
                "llama (bf16, .bin shards)", r, "torchport owned")
            checks.append(("llama", r, "owned: safetensors shards / .bin shards (time)", st / bn, 1.0, False))

    print()
    for w, r, label, v, target, higher in checks:
        ok = "" if target is None else ("  ok" if (v >= target if higher else v <= target) else "  MISSED")
        tgt = "" if target is None else f" (target {'>=' if higher else '<='} {target:g})"
        print(f"{w:34s} {r:12s} {label:48s} {v:8.2f}{tgt}{ok}")

    # bench/results.md: the tables between the markers; the rest is kept.
    lines = [f"Measured {datetime.date.today().isoformat()} by `bash bench/run.sh` on {machine()}: median of "
             f"{args.runs} runs per method and regime, the methods interleaved round by round; each run is one "
             "fresh process. Regimes: **back-to-back** (each measured run right after an unmeasured run of the "
             "same command), **after-idle** (3 s of sleep before each run: this VM's host takes freed memory "
             "back), **cold** (page cache dropped before each run). Peak: resident memory above the process's "
             "baseline.", ""]
    for name, _, methods in workloads:
        lines += [f"**{name}**", "", "| method | " + " | ".join(f"{r} s" for r in chosen) + " | GB/s (back-to-back) | peak MB |",
                  "|---|" + "---:|" * (len(chosen) + 2)]
        for m, *_ in methods:
            cells = [med(name, r, m) for r in chosen]
            any_s = next((results[(name, r, m)] for r in chosen if (name, r, m) in results), None)
            b = any_s[0]["bytes"] if any_s else 0
            first = med(name, "back-to-back", m)
            gbps = f"{b / first / 1e9:.2f}" if first and b else ""
            peak = f"{max(x['peak'] for x in any_s) / 1e6:.1f}" if any_s and m != "dd iflag=direct" else ""
            lines.append(f"| {m} | " + " | ".join(f"{c:.4f}" if c is not None else "" for c in cells) +
                         f" | {gbps} | {peak} |")
        lines.append("")
    lines += ["| workload | regime | ratio | value | target |", "|---|---|---|---:|---|"]
    for w, r, label, v, target, higher in checks:
        tgt = "" if target is None else f"{'>=' if higher else '<='} {target:g}" + (
            "" if (v >= target if higher else v <= target) else " **missed**")
        lines.append(f"| {w} | {r} | {label} | {v:.2f} | {tgt} |")
    lines += ["", "Other files, back-to-back:", "", "| file | torch.load s | torchport owned s | speed-up | owned peak / bytes |",
              "|---|---:|---:|---:|---:|"]
    lines += [f"| {n} | {tl:.4f} | {own:.4f} | {tl / own:.2f} | {pk:.3f} |" for n, tl, own, pk in extra_rows]
    if notes:
        lines += [""] + notes

    path = os.path.join(HERE, "results.md")
    text = open(path).read() if os.path.exists(path) else ""
    text = replace_section(text, "load-bench", "\n".join(lines))
    if not args.skip_record_files:
        text = replace_section(text, "record-files", record_files(torchport, load_bench, rn, args.runs))
    with open(path, "w") as f:
        f.write(text)
    print("\nwrote bench/results.md")


def record_files(torchport, load_bench, rn, runs):
    """ResNet-152 saved in each of our record formats and loaded back."""
    rec_dir = os.path.join(DATA, "records")
    os.makedirs(rec_dir, exist_ok=True)
    regimes.warm([rn])
    lines = [f"ResNet-152 in each record format, measured {datetime.date.today().isoformat()} on {machine()} "
             "(save: `torchport convert` from the .pt, whole process, peak resident set; load: `open()` + "
             "materialise, peak above baseline; back-to-back):", "",
             "| format | file MB | save s | save peak MB | load owned s | owned peak MB | load mapped s | mapped peak MB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for ext, extra in (("safetensors", ()), ("mpk", ()), ("mpk.gz", ()), ("json", ()), ("json.gz", ()),
                       ("tpb", ()), ("tpb.gz", ()), ("half.tpb", ("--dtype", "F16"))):
        out = os.path.join(rec_dir, "resnet152." + ext)
        saves = [convert_peak(torchport, rn, out, *extra) for _ in range(max(1, runs // 2))]
        res = regimes.measure(["back-to-back"], [("owned", tool(load_bench, "owned", out)),
                                                 ("mapped", tool(load_bench, "mapped", out))],
                              runs, [out], log=lambda line: None)["back-to-back"]
        o = statistics.median(x["seconds"] for x in res["owned"])
        m = statistics.median(x["seconds"] for x in res["mapped"])
        lines.append(f"| {ext} | {os.path.getsize(out) / 1e6:.1f} | {statistics.median(t for _, t in saves):.3f} | "
                     f"{max(k for k, _ in saves) / 1e6:.0f} | {o:.4f} | {max(x['peak'] for x in res['owned']) / 1e6:.1f} | "
                     f"{m:.4f} | {max(x['peak'] for x in res['mapped']) / 1e6:.1f} |")
        print(lines[-1], flush=True)
    return "\n".join(lines)


if __name__ == "__main__":
    main()
