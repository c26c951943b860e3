#!/usr/bin/env python3
"""torchport's Python API against the loaders Python users run (every
method a fresh process, the methods interleaved round by round, back-to-back
and after idle, medians), as ratios:

  load:  torchport.load, torchport.open(...).get of every tensor and of
         one (mapped views), against torch.load, torch.load(mmap=True),
         safetensors.torch.load_file and safe_open(...).get_tensor of
         every tensor and of one, on
         ResNet-152 (state_dict, f32), a Llama-shaped bf16 checkpoint
         (one .bin and one safetensors file) and 80,000 small tensors (dict_80000.pt/
         .safetensors, as bench/make_many_tensors.py makes them);
  scan:  torchport.scan against picklescan, modelscan and fickling
         (bench/requirements-scanners.txt, in their own venv,
         bench/.venv-scanners) on tests/security/crafted: seconds per GB
         scanned and files flagged.

Run with the current torch's Python and the build tree's package:
  PYTHONPATH=build/python scripts/torch.sh current python3 bench/python_bench.py \\
      [--llama-params 1e9] [--runs 3] [--out bench/results.md]
Workloads go to bench/data (made once, kept). The tables replace the
"Python API" section of bench/results.md.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "data")
CRAFTED = os.path.join(ROOT, "tests", "security", "crafted")

# The methods: (imports, work). Each measured run is a fresh interpreter
# that imports first (torch is imported by every method: a user of the
# torch framework has it loaded), then times `work` alone, and prints
# seconds, CPU time and peak memory above the post-import baseline (the
# peak is reset after the imports through /proc/self/clear_refs).
# {p}: the file; {touch}: whether every loaded tensor is summed, so that
# lazy methods pay for their reads; {one}: the tensor the one-tensor
# methods read (the largest).
SUM = "n = [t.sum() for t in o.values()] if {touch} else None"
LOADERS = {
    "torch.load": ("import torch", "o = torch.load({p!r}, map_location='cpu', weights_only=True)\n" + SUM),
    "torch.load(mmap=True)": ("import torch", "o = torch.load({p!r}, map_location='cpu', weights_only=True, mmap=True)\n" + SUM),
    "safetensors load_file": ("import torch\nfrom safetensors.torch import load_file", "o = load_file({p!r})\n" + SUM),
    "safetensors safe_open, every tensor": ("import torch\nfrom safetensors import safe_open",
                                            "with safe_open({p!r}, 'pt') as f:\n    o = {{k: f.get_tensor(k) for k in f.keys()}}\n" + SUM),
    "safetensors safe_open, one tensor": ("import torch\nfrom safetensors import safe_open",
                                          "with safe_open({p!r}, 'pt') as f:\n    o = {{{one!r}: f.get_tensor({one!r})}}\n" + SUM),
    "torchport.load (owned)": ("import torch, torchport", "o = torchport.load({p!r}, framework='torch')\n" + SUM),
    "torchport.open().get, every tensor (mapped)": ("import torch, torchport",
                                                    "with torchport.open({p!r}, 'torch') as f:\n    o = {{k: f.get(k) for k in f.keys()}}\n" + SUM),
    "torchport.open().get, one tensor (mapped)": ("import torch, torchport",
                                                  "with torchport.open({p!r}, 'torch') as f:\n    o = {{{one!r}: f.get({one!r})}}\n" + SUM),
}
SAFETENSORS_ONLY = {m for m in LOADERS if m.startswith("safetensors")}

CHILD = """import json, resource, sys, time
{imports}
def status(key):
    for line in open('/proc/self/status'):
        if line.startswith(key + ':'):
            return int(line.split()[1]) * 1024
base = status('VmRSS')
open('/proc/self/clear_refs', 'w').write('5')  # resets VmHWM
r0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
{work}
t = time.perf_counter() - t0
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"seconds": t, "user": r1.ru_utime - r0.ru_utime, "sys": r1.ru_stime - r0.ru_stime,
                  "peak": status('VmHWM') - base}}))
"""


def run_method(method, path, touch, one):
    imports, work = LOADERS[method]
    prog = CHILD.format(imports=imports, work=work.format(p=path, touch=touch, one=one))
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True)
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines()
        raise RuntimeError(f"{method} on {path}: " + (lines[-1] if lines else "failed"))
    return json.loads(r.stdout.strip().splitlines()[-1])


def make_workloads(llama_params):
    import torch

    os.makedirs(DATA, exist_ok=True)
    made = {}
    rn = os.path.join(DATA, "resnet152.pt")
    sys.path.insert(0, HERE)
    import make_workloads  # its ResNet-152 state_dict, as bench/compare.py measures it

    if not os.path.exists(rn):
        torch.save(make_workloads.resnet_state("resnet152"), rn)
    rs = os.path.join(DATA, "resnet152.safetensors")
    if not os.path.exists(rs):
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in torch.load(rn, weights_only=True).items()}, rs)
    made["ResNet-152 (f32)"] = (rn, rs, True)
    many = os.path.join(DATA, "many")
    if not os.path.exists(os.path.join(many, "dict_80000.safetensors")):
        subprocess.run([sys.executable, os.path.join(HERE, "make_many_tensors.py"), many, "80000"], check=True)
    made["80,000 small tensors"] = (os.path.join(many, "dict_80000.pt"), os.path.join(many, "dict_80000.safetensors"), False)
    # The Llama shape of make_workloads.py (hidden 2048, intermediate 5632,
    # vocabulary 32000: 65.5M parameters of embedding and 51.4M a layer),
    # as many layers as come nearest llama_params; one file of each format
    # (the loaders compared read one file).
    hidden, inter, vocab = 2048, 5632, 32000
    per_layer = 4 * hidden * hidden + 3 * inter * hidden + hidden
    layers = max(1, round((llama_params - vocab * hidden) / per_layer))
    llama = os.path.join(DATA, f"llama_{layers}_layers")
    one_bin = os.path.join(llama, "model.bin")
    one_st = os.path.join(llama, "model.safetensors")
    if not os.path.exists(one_st):
        os.makedirs(llama, exist_ok=True)
        g = torch.Generator().manual_seed(0)
        sd = {"model.embed_tokens.weight": torch.randn(vocab, hidden, generator=g).to(torch.bfloat16)}
        for i in range(layers):
            for n, shape in (("self_attn.q_proj", (hidden, hidden)), ("self_attn.k_proj", (hidden, hidden)),
                             ("self_attn.v_proj", (hidden, hidden)), ("self_attn.o_proj", (hidden, hidden)),
                             ("mlp.gate_proj", (inter, hidden)), ("mlp.up_proj", (inter, hidden)),
                             ("mlp.down_proj", (hidden, inter))):
                sd[f"model.layers.{i}.{n}.weight"] = torch.randn(*shape, generator=g).to(torch.bfloat16)
            sd[f"model.layers.{i}.input_layernorm.weight"] = torch.ones(hidden, dtype=torch.bfloat16)
        torch.save(sd, one_bin)
        from safetensors.torch import save_file

        save_file(sd, one_st, metadata={"format": "pt"})
    params = vocab * hidden + layers * per_layer
    made[f"Llama-shaped bf16 ({layers} layers, {params / 1e6:.0f}M parameters, "
         f"{os.path.getsize(one_st) / 1e6:.0f} MB)"] = (one_bin, one_st, True)
    return made


def size_gb(paths):
    return sum(os.path.getsize(p) for p in paths) / 1e9


def largest_tensor(st_path):
    """The name of the largest tensor of a safetensors file (its header)."""
    with open(st_path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return max(header, key=lambda k: header[k]["data_offsets"][1] - header[k]["data_offsets"][0])


def bench_loads(workloads, runs, regimes):
    """{workload: {regime: {method: [samples]}}}: the methods interleaved
    round by round (bench/regimes.py), the back-to-back and after-idle
    regimes."""
    sys.path.insert(0, HERE)
    import regimes as rg

    out = {}
    for name, (pt, st, touch) in workloads.items():
        one = largest_tensor(st)
        methods = []
        for method in LOADERS:
            path = st if method in SAFETENSORS_ONLY else pt
            methods.append((method, lambda m=method, p=path: run_method(m, p, touch, one)))
        print(f"{name}:", flush=True)
        out[name] = rg.measure(regimes, methods, runs, [pt, st])
    return out


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def scanners_venv():
    venv = os.path.join(HERE, ".venv-scanners")
    py = os.path.join(venv, "bin", "python")
    stamp = os.path.join(venv, ".requirements")
    req = os.path.join(HERE, "requirements-scanners.txt")
    want = open(req).read()
    if not (os.path.exists(stamp) and open(stamp).read() == want):
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--clear", venv], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", "--no-input", "-r", req], check=True)
        open(stamp, "w").write(want)
    return venv


def bench_scans():
    files = []
    for d, dn, fn in os.walk(CRAFTED):
        dn.sort()
        files += [os.path.join(d, f) for f in sorted(fn) if not f.endswith((".py", ".json", ".txt"))]
    gb = size_gb(files)
    expected_unsafe = {e["file"] for e in json.load(open(os.path.join(CRAFTED, "expected.json")))
                       if e["verdict"] != "clean"}
    n_files = len(files)
    venv = scanners_venv()
    bin_ = os.path.join(venv, "bin")
    rows = []
    # torchport.scan, in-process over every file (one interpreter, as a service would run it).
    code = ("import torchport, sys, json\nfiles = json.loads(sys.argv[1])\nimport time\nt0 = time.perf_counter()\n"
            "flagged = sum(torchport.scan(f).verdict not in ('clean', 'not-a-model-file') for f in files)\n"
            "print(time.perf_counter() - t0, flagged)")
    r = subprocess.run([sys.executable, "-c", code, json.dumps(files)], capture_output=True, text=True, check=True)
    t, flagged = r.stdout.split()
    import torchport

    rows.append((f"torchport.scan {torchport.__version__}", float(t), int(flagged)))

    def one_by_one(label, argv_of, flagged_if):
        t0 = time.perf_counter()
        n = 0
        scratch = tempfile.mkdtemp()  # fickling writes safety_results.json where it runs
        for f in files:
            p = subprocess.run(argv_of(f), capture_output=True, text=True, cwd=scratch)
            n += bool(flagged_if(p))
        rows.append((label, time.perf_counter() - t0, n))

    # picklescan: exit 1 when it finds dangerous globals, 2 on scan errors.
    one_by_one("picklescan 1.0.5", lambda f: [os.path.join(bin_, "picklescan"), "-p", f],
               lambda p: p.returncode != 0)
    # modelscan: exit 1 when it reports issues; 2 on errors, 3 nothing scanned.
    one_by_one("modelscan 0.8.8", lambda f: [os.path.join(bin_, "modelscan"), "-p", f],
               lambda p: p.returncode in (1, 2))
    # fickling --check-safety: non-zero when the pickle is not likely safe.
    one_by_one("fickling 0.1.12", lambda f: [os.path.join(bin_, "fickling"), "--check-safety", f],
               lambda p: p.returncode != 0)
    return rows, n_files, len(expected_unsafe), gb


def machine():
    import torch

    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{os.cpu_count()} cores, {mem:.0f} GiB RAM, Linux {platform.release()}, Python "
            f"{platform.python_version()}, torch {torch.__version__}, load average "
            f"{os.getloadavg()[0]:.1f} at the start")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-params", type=float, default=1e9,
                    help="about how many parameters the Llama-shaped file holds (whole layers)")
    ap.add_argument("--runs", type=int, default=3, help="measured runs per method and regime (median)")
    ap.add_argument("--out", default=os.path.join(HERE, "results.md"))
    ap.add_argument("--skip-scan", action="store_true")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    workloads = make_workloads(args.llama_params)
    regimes = ("back-to-back", "after-idle")
    results = bench_loads(workloads, args.runs, regimes)
    lines = ["## Python API (bench/python_bench.py)", "",
             f"Measured {time.strftime('%Y-%m-%d')} by `bench/python_bench.py --runs {args.runs} "
             f"--llama-params {args.llama_params:.0e}`: {machine()}. "
             f"Median of {args.runs} runs per method and regime, the methods interleaved round by "
             "round (bench/regimes.py); each run a fresh interpreter that imports torch (and the "
             "method's package) first and times the call alone. Back-to-back: right after an "
             "unmeasured run of the same method; after idle: 3 s of sleep first. ResNet-152 and "
             "the Llama-shaped file: every tensor is summed after loading, so that lazy methods "
             "pay for their reads; 80,000 small tensors: not summed (a sum costs more than a "
             "tensor's load). The one-tensor methods read the file's largest tensor. CPU: user + "
             "system seconds of the call; peak: resident memory above the interpreter's after "
             "its imports. Ratio: torch.load's time over the method's."]
    if load_before > (os.cpu_count() or 1):
        lines += ["", f"**Marked: the machine was loaded** (load average {load_before:.1f} on "
                  f"{os.cpu_count()} cores): these numbers are noisy."]
    for name, by_regime in results.items():
        lines += ["", f"**{name}**", "",
                  "| method | back-to-back s | CPU s (user + sys) | vs torch.load | after idle s | vs torch.load | peak MB |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        med = {r: {m: median([x["seconds"] for x in xs]) for m, xs in by_regime[r].items()} for r in regimes}
        for method in LOADERS:
            b2b = by_regime["back-to-back"][method]
            cpu = (median([x["user"] for x in b2b]), median([x["sys"] for x in b2b]))
            peak = max(x["peak"] for r in regimes for x in by_regime[r][method]) / 1e6
            t, ti = med["back-to-back"][method], med["after-idle"][method]
            lines.append(f"| {method} | {t:.4f} | {cpu[0]:.3f} + {cpu[1]:.3f} | "
                         f"{med['back-to-back']['torch.load'] / t:.2f}x | {ti:.4f} | "
                         f"{med['after-idle']['torch.load'] / ti:.2f}x | {peak:.1f} |")
    if not args.skip_scan:
        rows, n, n_unsafe, gb = bench_scans()
        lines += ["", f"Scanners on tests/security/crafted ({n} files, {gb * 1e3:.2f} MB; "
                  f"{n_unsafe} entries of its expected.json are not clean), one run, one file a "
                  "process for the command-line scanners, one interpreter for torchport.scan:", "",
                  "| scanner | seconds | seconds per GB | files flagged |", "|---|---:|---:|---:|"]
        for label, t, flagged in rows:
            lines.append(f"| {label} | {t:.2f} | {t / gb:.0f} | {flagged} of {n} |")
    section = "\n".join(lines) + "\n"
    text = open(args.out).read() if os.path.exists(args.out) else ""
    start = text.find("## Python API (bench/python_bench.py)")
    if start >= 0:
        end = text.find("\n## ", start + 5)
        text = text[:start] + section + (text[end + 1:] if end >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    open(args.out, "w").write(text)
    print(section)


if __name__ == "__main__":
    main()
