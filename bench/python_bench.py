#!/usr/bin/env python3
"""torchport's Python API against the loaders Python users run, one run each
(every method a fresh process, the methods interleaved), as ratios:

  load:  torchport.load, torchport.open(...).get of every tensor (mapped
         views), against torch.load, torch.load(mmap=True),
         safetensors.torch.load_file and safe_open(...).get_tensor, on
         ResNet-152 (state_dict, f32), the Llama-shaped bf16 shards
         (.bin and safetensors) and 80,000 small tensors (dict_80000.pt/
         .safetensors, as bench/make_many_tensors.py makes them);
  scan:  torchport.scan against picklescan, modelscan and fickling
         (bench/requirements-scanners.txt, in their own venv,
         bench/.venv-scanners) on tests/security/crafted: seconds per GB
         scanned and files flagged.

Run with the current torch's Python and the build tree's package:
  PYTHONPATH=build/python scripts/torch.sh current python3 bench/python_bench.py \\
      [--llama-params 3e9] [--out bench/results.md]
Workloads go to bench/data (made once, kept). The tables replace the
"Python API" section of bench/results.md.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "data")
CRAFTED = os.path.join(ROOT, "tests", "security", "crafted")

# One measured call per method, in a fresh interpreter: it prints seconds.
LOADERS = {
    "torch.load": "import torch; o = torch.load({p!r}, map_location='cpu', weights_only=True); n = [t.sum() for t in o.values()] if {touch} else None",
    "torch.load(mmap=True)": "import torch; o = torch.load({p!r}, map_location='cpu', weights_only=True, mmap=True); n = [t.sum() for t in o.values()] if {touch} else None",
    "safetensors load_file": "from safetensors.torch import load_file; o = load_file({p!r}); n = [t.sum() for t in o.values()] if {touch} else None",
    "safetensors safe_open().get_tensor": "from safetensors import safe_open\nwith safe_open({p!r}, 'pt') as f:\n    o = {{k: f.get_tensor(k) for k in f.keys()}}\n    n = [t.sum() for t in o.values()] if {touch} else None",
    "torchport.load": "import torchport; o = torchport.load({p!r}, framework='torch'); n = [t.sum() for t in o.values()] if {touch} else None",
    "torchport.open().get (mapped)": "import torchport\nwith torchport.open({p!r}, 'torch') as f:\n    o = {{k: f.get(k) for k in f.keys()}}\n    n = [t.sum() for t in o.values()] if {touch} else None",
}
SAFETENSORS_ONLY = {"safetensors load_file", "safetensors safe_open().get_tensor"}
TORCH_ONLY = {"torch.load", "torch.load(mmap=True)"}


def timed(code):
    prog = "import time, sys\nt0 = time.perf_counter()\n" + code + "\nprint(time.perf_counter() - t0)"
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"
    return float(r.stdout.strip().splitlines()[-1]), ""


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
    made["ResNet-152"] = (rn, rs)
    many = os.path.join(DATA, "many")
    if not os.path.exists(os.path.join(many, "dict_80000.safetensors")):
        subprocess.run([sys.executable, os.path.join(HERE, "make_many_tensors.py"), many, "80000"], check=True)
    made["80,000 small tensors"] = (os.path.join(many, "dict_80000.pt"), os.path.join(many, "dict_80000.safetensors"))
    llama = os.path.join(DATA, f"llama_{llama_params:.0e}")
    one_bin = os.path.join(llama, "model.bin")
    one_st = os.path.join(llama, "model.safetensors")
    if not os.path.exists(one_st):
        # The Llama shape of make_workloads.py, scaled to llama_params, one
        # file of each format (the loaders compared read one file).
        os.makedirs(llama, exist_ok=True)
        if True:
            hidden, inter, layers, vocab = 2048, 5632, max(1, int(llama_params / 2.1e8)), 32000
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
    made[f"Llama-shaped bf16 ({llama_params:.1e} parameters)"] = (one_bin, one_st)
    return made


def size_gb(paths):
    return sum(os.path.getsize(p) for p in paths) / 1e9


def bench_loads(workloads, touch):
    rows = []
    for name, (pt, st) in workloads.items():
        times = {}
        for method, code in LOADERS.items():
            path = st if method in SAFETENSORS_ONLY else pt
            times[method] = timed(code.format(p=path, touch=touch))
        base = times["torch.load"][0]
        for method, (t, err) in times.items():
            rows.append((name, method, t, base / t if (t and base) else None, err))
    return rows


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
    rows.append(("torchport.scan 0.1.0", float(t), int(flagged)))

    def one_by_one(label, argv_of, flagged_if):
        t0 = time.perf_counter()
        n = 0
        for f in files:
            p = subprocess.run(argv_of(f), capture_output=True, text=True)
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
    ap.add_argument("--llama-params", type=float, default=3e9)
    ap.add_argument("--out", default=os.path.join(HERE, "results.md"))
    ap.add_argument("--skip-scan", action="store_true")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    workloads = make_workloads(args.llama_params)
    lines = ["## Python API (bench/python_bench.py)", "",
             f"Measured {time.strftime('%Y-%m-%d')} by `bench/python_bench.py`: {machine()}. "
             "One run of each method, each a fresh process, page cache warm (the files were just "
             "written or read: back-to-back), every tensor summed after loading so that lazy "
             "methods pay for their reads. Ratio: torch.load's time over the method's."]
    if load_before > (os.cpu_count() or 1):
        lines += ["", f"**Marked: the machine was loaded** (load average {load_before:.1f} on "
                  f"{os.cpu_count()} cores, other builds running): these numbers are noisy."]
    lines += ["", "| workload | method | seconds | vs torch.load |", "|---|---|---:|---:|"]
    for name, method, t, ratio, err in bench_loads(workloads, True):
        lines.append(f"| {name} | {method} | {t:.3f} | {ratio:.2f}x |" if t else
                     f"| {name} | {method} | failed: {err[:60]} | |")
    if not args.skip_scan:
        rows, n, n_unsafe, gb = bench_scans()
        lines += ["", f"Scanners on tests/security/crafted ({n} files, {gb * 1e3:.2f} MB; "
                  f"{n_unsafe} entries of its expected.json are not clean), one file a process "
                  "for the command-line scanners, one interpreter for torchport.scan:", "",
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
