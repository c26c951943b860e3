"""torchport convert of distributed checkpoints against the current torch's
own consolidation (torch 2.14: run by ctest as interop_dcp_torch_current).

    python3 dcp_consolidation.py TORCHPORT_CLI WORK_DIR

Saves, in WORK_DIR, with the torch running this script:

  default writer   1, 2 and 4 gloo ranks on 127.0.0.1 (spawned processes,
                   CPU): DTensors (Shard, Replicate, uneven and empty
                   chunks, a 2x2 mesh at 4 ranks), plain tensors and values;
                   one process: every dtype, views, values, tuples and lists;
                   an Adam state (get_state_dict and the plain
                   optimizer.state_dict()); the same through the zstd stream
                   transform (FileSystemWriter(_extensions=[ZStandard()])).
  Hugging Face     HuggingFaceStorageWriter(save_distributed=True) from 4
                   ranks, and with enable_consolidation=True from 2 (float
                   tensors: torch's consolidation refuses integer ones).

and checks, for each, that
  - `torchport convert DIR out.pt` equals format_utils.dcp_to_torch_save
    (the whole object: keys, order, values, tensors bit for bit);
  - `torchport convert DIR out.safetensors --tensors-only` holds exactly the
    tensors of dcp_to_torch_save's object, bit for bit, named by their key
    paths;
  - for the Hugging Face shards, `torchport convert DIR/sharded out.safetensors`
    holds exactly the tensors of torch's consolidated file (and of
    HuggingFaceStorageReader's reading), bit for bit, and `torchport convert`
    of the consolidated folder the same.
Ends with "N passed, N failed"; exits 1 when any failed.
"""

import hashlib
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from safetensors.torch import load_file
from torch.distributed.checkpoint import FileSystemWriter, HuggingFaceStorageReader, HuggingFaceStorageWriter
from torch.distributed.checkpoint._extension import ZStandard
from torch.distributed.checkpoint.default_planner import _EmptyStateDictLoadPlanner
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures", "dcp"))
import make_dcp_fixtures as states  # noqa: E402  (the fixtures' state dicts)

warnings.simplefilter("ignore")
CLI = WORK = None
RESULTS = []


def check(name, ok, detail=""):
    RESULTS.append(ok)
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + detail), flush=True)


def sha(t):
    t = t.detach().contiguous().reshape(-1)
    return hashlib.sha256(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"").hexdigest()


def same(a, b, path="root"):
    """None when equal (tensors bit for bit, containers by type, keys and
    order); else where they differ."""
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor):
            return f"{path}: tensor vs {type(b).__name__}"
        if a.dtype != b.dtype or a.shape != b.shape or sha(a) != sha(b):
            return f"{path}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)} (or its bytes)"
        return None
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{path}: keys {list(a)} vs {list(b)}"
        for k in a:
            if (d := same(a[k], b[k], f"{path}.{k}")) is not None:
                return d
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: {len(a)} vs {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            if (d := same(x, y, f"{path}.{i}")) is not None:
                return d
        return None
    return None if a == b else f"{path}: {a!r} vs {b!r}"


def tensors_of(obj, prefix=""):
    """The tensors of an object by their dotted key paths."""
    out = {}
    if isinstance(obj, torch.Tensor):
        out[prefix] = obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            out.update(tensors_of(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out.update(tensors_of(v, f"{prefix}.{i}" if prefix else str(i)))
    return out


def same_tensors(got, want):
    if sorted(got) != sorted(want):
        return f"names differ: {sorted(set(got) ^ set(want))}"
    for k in want:
        if (d := same(got[k], want[k], k)) is not None:
            return d
    return None


def convert(src, out, *extra):
    r = subprocess.run([CLI, "convert", src, out, "--quiet", *extra], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"torchport convert {src} {out} {' '.join(extra)}: {r.stderr.strip()}")


def compare_default(name, folder):
    """A FileSystemWriter checkpoint against dcp_to_torch_save."""
    ref_path = os.path.join(WORK, name + ".ref.pt")
    dcp_to_torch_save(folder, ref_path)
    ref = torch.load(ref_path, weights_only=False)
    try:
        ours_pt = os.path.join(WORK, name + ".pt")
        convert(folder, ours_pt)
        check(f"{name}: convert .pt == dcp_to_torch_save", (d := same(torch.load(ours_pt, weights_only=True), ref)) is None, str(d))
        ours_st = os.path.join(WORK, name + ".safetensors")
        convert(folder, ours_st, "--tensors-only")
        check(f"{name}: convert .safetensors == dcp_to_torch_save's tensors",
              (d := same_tensors(load_file(ours_st), tensors_of(ref))) is None, str(d))
    except RuntimeError as e:
        check(f"{name}: convert", False, str(e))


def compare_tensors(name, folder, want):
    try:
        out = os.path.join(WORK, name.split(" ")[0].replace("/", "_") + ".safetensors")
        convert(folder, out)
        check(f"{name}: convert .safetensors == torch", (d := same_tensors(load_file(out), want)) is None, str(d))
    except RuntimeError as e:
        check(f"{name}: convert", False, str(e))


# --------------------------------------------------------------------------
# Savers (ranks are forked processes over gloo on 127.0.0.1).

def tp_state(world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor
    mesh = init_device_mesh("cpu", (world,))
    sd = {"model": {k: distribute_tensor(t, mesh, p) for k, (t, p) in states.tp_globals().items()}}
    if world == 4:
        mesh2 = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        sd["model"].update({k: distribute_tensor(t, mesh2, p) for k, (t, p) in states.mesh2d_globals().items()})
    sd.update(states.tp_plain())
    return sd


def optim_state():
    from torch.distributed.checkpoint.state_dict import get_state_dict
    torch.manual_seed(4)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU(), torch.nn.Linear(2, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(2, 3)).sum().backward()
    opt.step()
    msd, osd = get_state_dict(model, opt)
    return {"model": msd, "optim": osd, "optim_plain": opt.state_dict(), "epoch": 3}


def hf_state(world, floats_only):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor
    mesh = init_device_mesh("cpu", (world,))
    sd = {k: distribute_tensor(t, mesh, p) for k, (t, p) in states.tp_globals().items()
          if t.dtype.is_floating_point or not floats_only}
    if world == 4:
        mesh2 = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        sd.update({k: distribute_tensor(t, mesh2, p) for k, (t, p) in states.mesh2d_globals().items()})
    return sd


def worker(rank, world, port, kind, folder):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    warnings.simplefilter("ignore")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        if kind == "tp":
            dcp.save(tp_state(world), storage_writer=FileSystemWriter(folder))
        elif kind == "tp_zstd":
            dcp.save(tp_state(world), storage_writer=FileSystemWriter(folder, _extensions=[ZStandard()]))
        elif kind == "optim":
            dcp.save(optim_state(), storage_writer=FileSystemWriter(folder))
        elif kind == "hf":
            dcp.save(hf_state(world, False), storage_writer=HuggingFaceStorageWriter(folder, save_distributed=True))
        elif kind == "hf_consolidated":
            dcp.save(hf_state(world, True), storage_writer=HuggingFaceStorageWriter(
                folder, save_distributed=True, enable_consolidation=True))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def spawn(world, kind, name):
    folder = os.path.join(WORK, name)
    port = states.free_port()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=worker, args=(r, world, port, kind, folder)) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    codes = [p.exitcode for p in procs]
    if any(c != 0 for c in codes):
        check(f"{name}: saved by {world} ranks", False, f"exit codes {codes}")
        return None
    return folder


def hf_read(folder):
    sd = {}
    _load_state_dict(sd, storage_reader=HuggingFaceStorageReader(folder), planner=_EmptyStateDictLoadPlanner(),
                     no_dist=True)
    return sd


def main():
    global CLI, WORK
    CLI, WORK = sys.argv[1], sys.argv[2]
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    print(f"torch {torch.__version__}", flush=True)

    # One process (no process group: dcp.save saves alone).
    for name, ext in (("single", None), ("single_zstd", [ZStandard()])):
        folder = os.path.join(WORK, name)
        dcp.save(states.single_state(), storage_writer=FileSystemWriter(folder, _extensions=ext))
        compare_default(name, folder)
    for world in (1, 2, 4):
        if folder := spawn(world, "tp", f"tp{world}"):
            compare_default(f"tp{world}", folder)
    if folder := spawn(2, "tp_zstd", "tp2_zstd"):
        compare_default("tp2_zstd", folder)
    if folder := spawn(2, "optim", "optim2"):
        compare_default("optim2", folder)

    # Hugging Face storage.
    if folder := spawn(4, "hf", "hf4"):
        compare_tensors("hf4 (shards) vs HuggingFaceStorageReader", folder, hf_read(folder))
    if folder := spawn(2, "hf_consolidated", "hf2c"):
        consolidated = load_file(os.path.join(folder, "model-00001-of-00001.safetensors"))
        check("hf2c: HuggingFaceStorageReader == torch's consolidation",
              (d := same_tensors(hf_read(os.path.join(folder, "sharded")), consolidated)) is None, str(d))
        compare_tensors("hf2c/sharded vs torch's consolidation", os.path.join(folder, "sharded"), consolidated)
        compare_tensors("hf2c (consolidated folder) vs torch's consolidation", folder, consolidated)

    passed = sum(RESULTS)
    print(f"{passed} passed, {len(RESULTS) - passed} failed")
    return 0 if passed == len(RESULTS) and RESULTS else 1


if __name__ == "__main__":
    sys.exit(main())
