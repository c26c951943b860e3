"""The three memory regimes a load can meet, shared by bench/compare.py and
bench/fill_strategies.py.

  back-to-back  the measured run comes right after an unmeasured run of the
                same command: the memory it frees is still the guest's
  after-idle    3 s of sleep before the measured run: on a VM the hypervisor
                takes freed memory back and must hand it out again
  cold          the page cache is dropped before the run (needs root): the
                bytes come from the disk

`measure(regimes, methods, rounds)` interleaves the methods round by round
(a user alternates tools; no method gets a quieter machine than another)
and returns {regime: {method: [samples]}}. A method is (name, run) or
(name, run, only_in): run() -> dict with at least "seconds"; only_in, a set
of regimes, limits where it runs (dd iflag=direct means something only cold).
"""
import os
import subprocess
import time

REGIMES = ("back-to-back", "after-idle", "cold")
IDLE_SECONDS = 3.0


def warm(paths):
    for p in paths:
        files = [os.path.join(p, f) for f in sorted(os.listdir(p))] if os.path.isdir(p) else [p]
        for f in files:
            with open(f, "rb") as h:
                while h.read(1 << 24):
                    pass


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1\n")


def can_drop_caches():
    return os.access("/proc/sys/vm/drop_caches", os.W_OK)


def measure(regimes, methods, rounds, paths, log=print):
    """methods: list of (name, run). paths: every file the methods read
    (warmed before the warm regimes)."""
    out = {r: {m[0]: [] for m in methods} for r in regimes}
    for regime in regimes:
        for i in range(rounds):
            for name, run, *only_in in methods:
                if only_in and regime not in only_in[0]:
                    continue
                if regime == "cold":
                    drop_caches()
                else:
                    if i == 0:
                        warm(paths)
                    if regime == "back-to-back":
                        run()  # unmeasured
                    else:
                        time.sleep(IDLE_SECONDS)
                sample = run()
                out[regime][name].append(sample)
                log(f"  {regime:12s} round {i + 1}/{rounds} {name:40s} {sample['seconds']:8.4f} s")
    return out
