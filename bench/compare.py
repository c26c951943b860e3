#!/usr/bin/python3
"""Loads the same checkpoints with torch.load, libtorch's torch::pickle_load
and torchport, in one run, with a warm page cache, and prints a table and
the ratios. One command:

    bash bench/run.sh            (installs, builds the benchmarks, runs this)

or, with benchmarks already built in build/:

    /usr/bin/python3 bench/compare.py [--build build] [--runs 5] [--skip-llama]

Every measurement runs in fresh processes: the median of RUNS timings, and
the peak resident memory above the process's own baseline (VmHWM after the
load minus VmRSS before it, /proc/self/clear_refs resetting the peak).
Writes bench/results.md.
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

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
sys.path.insert(0, HERE)
import make_workloads  # noqa: E402

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


def warm(paths):
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


def torch_load(paths, runs):
    warm(paths)
    samples = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", TORCH_LOAD, *paths], check=True, capture_output=True, text=True)
        samples.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {"median": statistics.median(s["seconds"] for s in samples),
            "peak": max(s["peak"] for s in samples), "bytes": samples[0]["bytes"]}


def tool(binary, *args):
    out = subprocess.run([binary, *args], check=True, capture_output=True, text=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return {"median": r["median"], "peak": r["peak_above_baseline"], "bytes": r.get("bytes", 0)}


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--skip-llama", action="store_true")
    ap.add_argument("--llama-params", type=float, default=3e9)
    ap.add_argument("--skip-record-files", action="store_true")
    args = ap.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    load_bench = os.path.join(bin_dir, "load_bench")
    libtorch = os.path.join(bin_dir, "libtorch_load")
    torchport = os.path.join(bin_dir, "torchport")

    os.makedirs(DATA, exist_ok=True)
    make_workloads.resnets()
    if not args.skip_llama:
        make_workloads.llama(args.llama_params, 2)

    rows, notes = [], []

    def add(workload, method, r):
        rows.append({"workload": workload, "method": method, **r})
        gbps = r["bytes"] / r["median"] / 1e9 if r["median"] and r["bytes"] else 0
        print(f"{workload:22s} {method:30s} {r['median']:9.4f} s {gbps:7.2f} GB/s {r['peak'] / 1e6:9.1f} MB",
              flush=True)

    p = lambda n: os.path.join(DATA, n)  # noqa: E731
    runs = str(args.runs)
    rn = p("resnet152.pt")
    add("resnet152 (zip, f32)", "torch.load", torch_load([rn], args.runs))
    if os.path.exists(libtorch):
        r = tool(libtorch, p("resnet152_plaindict.pt"), runs)
        r["bytes"] = rows[-1]["bytes"]
        add("resnet152 (zip, f32)", "libtorch pickle_load (plain dict)", r)
    for m in ("pread", "owned", "mapped", "open", "typed", "typed-owned"):
        add("resnet152 (zip, f32)", {"pread": "pread into 4 KiB pages (baseline)", "owned": "torchport owned",
                                    "mapped": "torchport mapped (--mmap)", "open": "torchport open only",
                                    "typed": "torchport typed (C++ ResNet-152)",
                                    "typed-owned": "torchport typed, owned copies"}[m],
            tool(load_bench, m, rn, runs))
    add("resnet152 (legacy, f32)", "torch.load", torch_load([p("resnet152_legacy.pt")], args.runs))
    add("resnet152 (legacy, f32)", "torchport owned", tool(load_bench, "owned", p("resnet152_legacy.pt"), runs))
    add("resnet152 (zip, bf16)", "torch.load", torch_load([p("resnet152_bf16.pt")], args.runs))
    add("resnet152 (zip, bf16)", "torchport owned", tool(load_bench, "owned", p("resnet152_bf16.pt"), runs))
    add("resnet152 (zip, bf16)", "torchport typed (bf16 -> f32)", tool(load_bench, "typed", p("resnet152_bf16.pt"), runs))
    for arch in ("resnet18", "resnet50"):
        add(f"{arch} (zip, f32)", "torchport owned", tool(load_bench, "owned", p(arch + ".pt"), runs))
        add(f"{arch} (zip, f32)", "torchport open only", tool(load_bench, "open", p(arch + ".pt"), runs))

    # Our record formats: ResNet-152 saved (converted by the tool, one
    # process per save) and loaded back (owned copies, and mapped where the
    # format allows), with file sizes.
    recorder_rows = []
    if not args.skip_record_files:
        rec_dir = p("records")
        os.makedirs(rec_dir, exist_ok=True)
        for ext, extra in (("safetensors", ()), ("mpk", ()), ("mpk.gz", ()), ("json", ()), ("json.gz", ()),
                           ("tpb", ()), ("tpb.gz", ()), ("half.tpb", ("--dtype", "F16"))):
            out = os.path.join(rec_dir, "resnet152." + ext)
            saves = [convert_peak(torchport, rn, out, *extra) for _ in range(max(1, args.runs // 2))]
            size = os.path.getsize(out)
            owned = tool(load_bench, "owned", out, runs)
            mapped = tool(load_bench, "mapped", out, runs)
            recorder_rows.append({"format": ext, "size": size, "save": statistics.median(t for _, t in saves),
                                  "save_peak": max(m for m, _ in saves), "owned": owned, "mapped": mapped})
            print(f"recorder {ext:12s} {size / 1e6:8.1f} MB  save {recorder_rows[-1]['save']:7.3f} s "
                  f"(peak {recorder_rows[-1]['save_peak'] / 1e6:6.0f} MB)  load owned {owned['median']:7.4f} s "
                  f"({owned['peak'] / 1e6:6.0f} MB)  mapped {mapped['median']:7.4f} s ({mapped['peak'] / 1e6:6.0f} MB)",
                  flush=True)

    if not args.skip_llama:
        llama = p("llama")
        shards = sorted(os.path.join(llama, f) for f in os.listdir(llama) if f.endswith(".bin"))
        st_dir = p("llama_st")
        if not os.path.exists(os.path.join(st_dir, "model.safetensors.index.json")):
            os.makedirs(st_dir, exist_ok=True)
            peak, secs = convert_peak(torchport, llama, os.path.join(st_dir, "model.safetensors"), "--max-shard-size", "2GB")
            notes.append(f"`torchport convert` of the Llama-shaped .bin shards to safetensors shards: "
                         f"{secs:.1f} s, peak resident memory {peak / 1e6:.0f} MB")
        add("llama (bf16, .bin shards)", "torch.load (every shard)", torch_load(shards, max(1, args.runs // 2)))
        for m in ("owned", "mapped", "open"):
            add("llama (bf16, .bin shards)", "torchport " + m, tool(load_bench, m, llama, runs))
        for m in ("owned", "mapped", "open"):
            add("llama (bf16, safetensors)", "torchport " + m, tool(load_bench, m, st_dir, runs))

    def get(workload, method):
        for r in rows:
            if r["workload"] == workload and r["method"] == method:
                return r
        return None

    w = "resnet152 (zip, f32)"
    tl, own, mp, ty = get(w, "torch.load"), get(w, "torchport owned"), get(w, "torchport mapped (--mmap)"), get(
        w, "torchport typed (C++ ResNet-152)")
    ratios = [
        ("owned load vs torch.load (speed-up, target >= 3x)", tl["median"] / own["median"]),
        ("owned load vs 4 KiB pread baseline (speed-up, target >= 1x)",
         get(w, "pread into 4 KiB pages (baseline)")["median"] / own["median"]),
        ("mapped load vs torch.load (speed-up, target >= 10x)", tl["median"] / mp["median"]),
        ("open (directory + pickle), milliseconds (target < 5)", get(w, "torchport open only")["median"] * 1e3),
        ("owned peak / tensor bytes (target <= 1.05)", own["peak"] / own["bytes"]),
        ("mapped peak / tensor bytes (target <= 0.05)", mp["peak"] / mp["bytes"]),
        ("typed load / owned load time (target <= 1.2)", ty["median"] / own["median"]),
        ("legacy / zip owned load time (target <= 1.5)",
         get("resnet152 (legacy, f32)", "torchport owned")["median"] / own["median"]),
    ]
    lt = get(w, "libtorch pickle_load (plain dict)")
    if lt:
        ratios.insert(1, ("owned load vs libtorch (speed-up, target >= 30x)", lt["median"] / own["median"]))
        ratios.append(("libtorch peak / tensor bytes", lt["peak"] / own["bytes"]))
    print()
    for name, v in ratios:
        print(f"{name:62s} {v:8.2f}")

    lines = [f"Measured {datetime.date.today().isoformat()} on {machine()}; median of {args.runs} runs, warm page cache, "
             "peak resident memory above each process's baseline.", "",
             "| workload | method | median s | GB/s | peak MB | peak / bytes |", "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        gbps = r["bytes"] / r["median"] / 1e9 if r["median"] and r["bytes"] else 0
        ratio = r["peak"] / r["bytes"] if r["bytes"] else 0
        lines.append(f"| {r['workload']} | {r['method']} | {r['median']:.4f} | {gbps:.2f} | "
                     f"{r['peak'] / 1e6:.1f} | {ratio:.3f} |")
    lines += ["", "| ratio | value |", "|---|---:|"] + [f"| {n} | {v:.2f} |" for n, v in ratios]
    if recorder_rows:
        lines += ["", "ResNet-152 in each record format (save: `torchport convert` from the .pt, whole process, "
                  "peak resident set; load: `open()` + materialise, peak above baseline):", "",
                  "| format | file MB | save s | save peak MB | load owned s | owned peak MB | load mapped s | mapped peak MB |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in recorder_rows:
            lines.append(f"| {r['format']} | {r['size'] / 1e6:.1f} | {r['save']:.3f} | {r['save_peak'] / 1e6:.0f} | "
                         f"{r['owned']['median']:.4f} | {r['owned']['peak'] / 1e6:.1f} | "
                         f"{r['mapped']['median']:.4f} | {r['mapped']['peak'] / 1e6:.1f} |")
    if notes:
        lines += [""] + notes
    with open(os.path.join(HERE, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\nwrote bench/results.md")


if __name__ == "__main__":
    main()
