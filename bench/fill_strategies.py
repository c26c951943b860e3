#!/usr/bin/python3
"""Which way of filling fresh memory with a file is fastest in each memory
regime (bench/regimes.py): huge or 4 KiB pages, MADV_POPULATE_WRITE or
first touch by the reading threads, one or two threads, piece sizes,
pread, memcpy from a mapping, or O_DIRECT. Runs build/bin/fill_bench, one
process per measurement, interleaved, and prints the medians.

    /usr/bin/python3 bench/fill_strategies.py [--build build] [--rounds 5]
        [--regimes back-to-back,after-idle,cold] FILE...
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import regimes  # noqa: E402

STRATEGIES = {
    "huge, 2 threads, 16 MiB": ["--pages", "huge", "--threads", "2", "--chunk", "16"],
    "4 KiB, 2 threads, 16 MiB": ["--pages", "small", "--threads", "2", "--chunk", "16"],
    "4 KiB, 1 thread, 16 MiB": ["--pages", "small", "--threads", "1", "--chunk", "16"],
    "huge, 1 thread, 16 MiB": ["--pages", "huge", "--threads", "1", "--chunk", "16"],
    "huge + POPULATE_WRITE, 2 threads": ["--pages", "huge", "--populate", "write", "--threads", "2"],
    "4 KiB + POPULATE_WRITE, 2 threads": ["--pages", "small", "--populate", "write", "--threads", "2"],
    "huge + touch, 2 threads": ["--pages", "huge", "--populate", "touch", "--threads", "2"],
    "4 KiB + touch, 2 threads": ["--pages", "small", "--populate", "touch", "--threads", "2"],
    "4 KiB + POPULATE_WRITE per piece, 2 threads, 2 MiB":
        ["--pages", "small", "--populate", "piece", "--threads", "2", "--chunk", "2"],
    "4 KiB + POPULATE_WRITE per piece, 2 threads, 16 MiB":
        ["--pages", "small", "--populate", "piece", "--threads", "2", "--chunk", "16"],
    "adaptive, 2 threads, 2 MiB": ["--pages", "adaptive", "--threads", "2", "--chunk", "2"],
    "split 256 MiB 4 KiB / huge + POPULATE_WRITE per piece, 2 threads, 2 MiB":
        ["--pages", "split", "--populate", "piece", "--threads", "2", "--chunk", "2"],
    "huge + POPULATE_WRITE per piece, 2 threads, 2 MiB":
        ["--pages", "huge", "--populate", "piece", "--threads", "2", "--chunk", "2"],
    "4 KiB, 2 threads, 1 MiB": ["--pages", "small", "--threads", "2", "--chunk", "1"],
    "4 KiB, 2 threads, 4 MiB": ["--pages", "small", "--threads", "2", "--chunk", "4"],
    "4 KiB, 2 threads, 2 MiB": ["--pages", "small", "--threads", "2", "--chunk", "2"],
    "4 KiB, 2 threads, 64 MiB": ["--pages", "small", "--threads", "2", "--chunk", "64"],
    "4 KiB, 2 threads, memcpy from mapping": ["--pages", "small", "--threads", "2", "--read", "mmap"],
    "huge, 2 threads, memcpy from mapping": ["--pages", "huge", "--threads", "2", "--read", "mmap"],
    "split + populate per piece, 2 threads, 2 MiB, FADV_SEQUENTIAL":
        ["--pages", "split", "--populate", "piece", "--threads", "2", "--chunk", "2", "--fadvise", "seq"],
    "split + populate per piece, 2 threads, 2 MiB, FADV_WILLNEED":
        ["--pages", "split", "--populate", "piece", "--threads", "2", "--chunk", "2", "--fadvise", "willneed"],
    "split + populate per piece, 2 threads, 2 MiB, a span per thread":
        ["--pages", "split", "--populate", "piece", "--threads", "2", "--chunk", "2", "--order", "spans"],
    "split + populate per piece, 1 thread, 2 MiB":
        ["--pages", "split", "--populate", "piece", "--threads", "1", "--chunk", "2"],
    "split + populate per piece, 2 threads, 16 MiB":
        ["--pages", "split", "--populate", "piece", "--threads", "2", "--chunk", "16"],
    "split, 2 threads, O_DIRECT, 16 MiB":
        ["--pages", "split", "--threads", "2", "--chunk", "16", "--read", "direct"],
    "4 KiB, 2 threads, O_DIRECT": ["--pages", "small", "--threads", "2", "--read", "direct"],
    "huge, 2 threads, O_DIRECT": ["--pages", "huge", "--threads", "2", "--read", "direct"],
    "huge + POPULATE_WRITE per piece, 2 threads, 16 MiB":
        ["--pages", "huge", "--populate", "piece", "--threads", "2", "--chunk", "16"],
    "faulted only, split, populate per 2 MiB, 2 threads":
        ["--pages", "split", "--populate", "piece", "--threads", "2", "--chunk", "2", "--read", "none"],
    "faulted only, huge, populate per 2 MiB, 2 threads":
        ["--pages", "huge", "--populate", "piece", "--threads", "2", "--chunk", "2", "--read", "none"],
    "faulted only, 4 KiB, populate per 2 MiB, 2 threads":
        ["--pages", "small", "--populate", "piece", "--threads", "2", "--chunk", "2", "--read", "none"],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--regimes", default=",".join(regimes.REGIMES))
    ap.add_argument("--only", default="", help='strategy names separated by ";" (substring match)')
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    binary = os.path.join(args.build, "bin", "fill_bench")
    chosen = [r for r in args.regimes.split(",") if r]
    if "cold" in chosen and not regimes.can_drop_caches():
        sys.exit("the cold regime drops the page cache: run as root")
    files = []
    for f in args.files:
        files += [os.path.join(f, n) for n in sorted(os.listdir(f))] if os.path.isdir(f) else [f]
    names = [n for n in STRATEGIES if not args.only or any(o in n for o in args.only.split(";"))]

    def runner(flags):
        def run():
            out = subprocess.run([binary, *flags, *files], check=True, capture_output=True, text=True)
            return json.loads(out.stdout)
        return run

    methods = [(n, runner(STRATEGIES[n])) for n in names]
    if "cold" in chosen:
        methods.append(("dd iflag=direct (disk floor)", lambda: dd(files), {"cold"}))
    res = regimes.measure(chosen, methods, args.rounds, files, log=lambda s: print(s, file=sys.stderr))
    total = sum(os.path.getsize(f) for f in files)
    print(f"{total / 1e6:.0f} MB in {len(files)} file(s); median of {args.rounds}, seconds")
    print("| strategy | " + " | ".join(chosen) + " |")
    print("|---|" + "---:|" * len(chosen))
    for name, *_ in methods:
        cells = []
        for r in chosen:
            s = res[r][name]
            cells.append(f"{statistics.median(x['seconds'] for x in s):.3f}" if s else "")
        print(f"| {name} | " + " | ".join(cells) + " |")


def dd(files):
    import time
    t0 = time.perf_counter()
    for f in files:
        subprocess.run(["dd", f"if={f}", "of=/dev/null", "bs=16M", "iflag=direct"], check=True,
                       capture_output=True)
    return {"seconds": time.perf_counter() - t0}


if __name__ == "__main__":
    main()
