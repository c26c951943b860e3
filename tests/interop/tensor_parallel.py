#!/usr/bin/env python3
"""Tensor-parallel loading end to end (examples/tensor_parallel, issue 19).

    tensor_parallel.py --llama-tp BIN --mpirun MPIRUN --np N --dir DIR [--format pt|safetensors|dcp]
                       [--save-world W] [--dtype bf16|f32]

Builds a small random Llama decoder layer with torch (grouped-query
attention: 8 heads, 2 key/value heads, so 4 ranks replicate each key/value
head on two of them), saves its state dict (with `--format dcp`: as a
distributed checkpoint saved by W gloo ranks, torch 2.x), runs
`mpirun -np N llama_tp ...` and checks
- the output against the reference below, written as Hugging Face's
  LlamaDecoderLayer computes it (RMSNorm in f32, rotary embeddings with
  rope_theta, repeat_kv, causal softmax attention, SwiGLU, residuals), on
  the same weights in f32: max|ours - torch| <= 1e-4 * max|torch|;
- the line llama_tp prints, and that the most bytes any rank read is within
  5% of 1/N of the split weights plus the replicated ones (the norms, and
  the key/value heads a rank shares with others: 1/min(N, kv_heads) of them).
Exit status 0 when every check passes."""

import argparse
import collections
import importlib
import math
import os
import re
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_reader  # noqa: E402
import safetensors_writer  # noqa: E402

HIDDEN, HEADS, KV_HEADS, INTER = 64, 8, 2, 128
BATCH, SEQ = 2, 7
EPS, THETA = 1e-5, 500000.0


def rms_norm(x, w):
    var = x.float().pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + EPS))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotary(positions, dim):
    inv_freq = 1.0 / (THETA ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    freqs = positions[..., None].float() * inv_freq  # [b, t, dim/2]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos()[:, None], emb.sin()[:, None]  # [b, 1, t, dim]


def repeat_kv(x, n):
    b, h, t, d = x.shape
    return x if n == 1 else x[:, :, None].expand(b, h, n, t, d).reshape(b, h * n, t, d)


def layer(sd, x):
    """LlamaDecoderLayer.forward as transformers computes it (f32)."""
    w = {k: v.float() for k, v in sd.items()}
    b, t, _ = x.shape
    d = HIDDEN // HEADS
    h = rms_norm(x, w["input_layernorm.weight"])
    q = (h @ w["self_attn.q_proj.weight"].T).view(b, t, HEADS, d).transpose(1, 2)
    k = (h @ w["self_attn.k_proj.weight"].T).view(b, t, KV_HEADS, d).transpose(1, 2)
    v = (h @ w["self_attn.v_proj.weight"].T).view(b, t, KV_HEADS, d).transpose(1, 2)
    cos, sin = rotary(torch.arange(t).expand(b, t), d)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    k, v = repeat_kv(k, HEADS // KV_HEADS), repeat_kv(v, HEADS // KV_HEADS)
    scores = q @ k.transpose(2, 3) / math.sqrt(d)
    mask = torch.full((t, t), float("-inf")).triu(1)
    probs = torch.softmax(scores + mask, dim=-1, dtype=torch.float32)
    a = (probs @ v).transpose(1, 2).reshape(b, t, HEADS * d) @ w["self_attn.o_proj.weight"].T
    x = x + a
    h = rms_norm(x, w["post_attention_layernorm.weight"])
    gate = h @ w["mlp.gate_proj.weight"].T
    up = h @ w["mlp.up_proj.weight"].T
    return x + (torch.nn.functional.silu(gate) * up) @ w["mlp.down_proj.weight"].T


def weights(dtype):
    g = torch.Generator().manual_seed(19)
    d = HIDDEN // HEADS

    def lin(out, inp):
        return (torch.randn(out, inp, generator=g) / math.sqrt(inp)).to(dtype)

    sd = collections.OrderedDict()
    sd["self_attn.q_proj.weight"] = lin(HEADS * d, HIDDEN)
    sd["self_attn.k_proj.weight"] = lin(KV_HEADS * d, HIDDEN)
    sd["self_attn.v_proj.weight"] = lin(KV_HEADS * d, HIDDEN)
    sd["self_attn.o_proj.weight"] = lin(HIDDEN, HEADS * d)
    sd["mlp.gate_proj.weight"] = lin(INTER, HIDDEN)
    sd["mlp.up_proj.weight"] = lin(INTER, HIDDEN)
    sd["mlp.down_proj.weight"] = lin(HIDDEN, INTER)
    sd["input_layernorm.weight"] = (1 + 0.1 * torch.randn(HIDDEN, generator=g)).to(dtype)
    sd["post_attention_layernorm.weight"] = (1 + 0.1 * torch.randn(HIDDEN, generator=g)).to(dtype)
    return sd


def expected_bytes(sd, n):
    nbytes = {k: v.numel() * v.element_size() for k, v in sd.items()}
    split = sum(v for k, v in nbytes.items() if k.endswith("_proj.weight") and "k_proj" not in k and "v_proj" not in k)
    kv = nbytes["self_attn.k_proj.weight"] + nbytes["self_attn.v_proj.weight"]
    norms = nbytes["input_layernorm.weight"] + nbytes["post_attention_layernorm.weight"]
    return split / n + kv / min(n, KV_HEADS) + norms, sum(nbytes.values())


def dcp_worker(rank, world, port, dtype, folder):
    # One rank of a DTensor save: column-parallel weights split by rows,
    # row-parallel ones by columns, the norms replicated.
    import warnings
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    import faulthandler
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), USE_LIBUV="0")  # Debian's torch has no libuv store
    warnings.simplefilter("ignore")
    # A rank stuck in gloo (seen once, on a loaded machine) says where and
    # exits, and the save is tried again.
    faulthandler.dump_traceback_later(50, exit=True)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        mesh = init_device_mesh("cpu", (world,))
        out = {}
        for k, t in weights(dtype).items():  # the same seed: the same weights
            place = [Replicate()] if "layernorm" in k else \
                [Shard(1)] if ("o_proj" in k or "down_proj" in k) else [Shard(0)]
            out[k] = distribute_tensor(t, mesh, place)
        dcp.save(out, checkpoint_id=folder)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def save_dcp(dtype, folder, world):
    """weights(dtype) as torch.distributed.checkpoint saves it from `world`
    gloo ranks (torch 2.x). The ranks are forked before this process runs
    any torch operation: a child forked after torch started its thread
    pools can hang in them."""
    import multiprocessing
    import shutil
    import socket
    for attempt in range(3):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        shutil.rmtree(folder, ignore_errors=True)
        ctx = multiprocessing.get_context("fork")
        procs = [ctx.Process(target=dcp_worker, args=(r, world, port, dtype, folder))
                 for r in range(world)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        for p in procs:
            if p.exitcode is None:
                p.kill()
                p.join()
        codes = [p.exitcode for p in procs]
        if all(c == 0 for c in codes):
            return
        print(f"the DCP save's ranks exited with {codes} (attempt {attempt + 1} of 3)")
    raise SystemExit("FAIL: the DCP save failed 3 times")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-tp", required=True)
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--format", choices=["pt", "safetensors", "dcp"], default="pt")
    ap.add_argument("--save-world", type=int, default=2,
                    help="--format dcp: ranks that save the checkpoint (torch 2.x)")
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    wpath = os.path.join(a.dir, "layer." + a.format)
    if a.format == "dcp":
        try:
            importlib.import_module("torch.distributed.tensor")  # DTensor: torch 2.4+
        except ImportError:
            print("skipped: this torch cannot save DTensors")
            return 0
        save_dcp(dtype, wpath, a.save_world)
    torch.manual_seed(0)
    sd = weights(dtype)
    if a.format == "pt":
        torch.save(sd, wpath)
    elif a.format == "dcp":
        pass  # saved above
    else:
        safetensors_writer.save(sd, wpath)
    x = torch.randn(BATCH, SEQ, HIDDEN, generator=torch.Generator().manual_seed(7))
    ipath, opath = os.path.join(a.dir, "input.safetensors"), os.path.join(a.dir, "output.safetensors")
    safetensors_writer.save({"input": x}, ipath)
    with torch.no_grad():
        want = layer(sd, x)

    cmd = [a.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(a.np), a.llama_tp, "--weights", wpath,
           "--input", ipath, "--output", opath, "--heads", str(HEADS), "--kv-heads", str(KV_HEADS),
           "--rope-theta", str(THETA), "--eps", str(EPS)]
    print(" ".join(cmd))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    if p.returncode != 0:
        print(f"FAIL: llama_tp exited with {p.returncode}")
        return 1
    lines = [l for l in p.stdout.splitlines() if l.strip()]
    m = re.fullmatch(r"tensor-parallel: ranks=(\d+) max_rel_err=(\S+) bytes_read_per_rank=(\d+) "
                     r"total_tensor_bytes=(\d+)", lines[-1] if lines else "")
    ok = True
    if not m or len(lines) != 1:
        print(f"FAIL: expected one line 'tensor-parallel: ranks=N max_rel_err=E bytes_read_per_rank=B "
              f"total_tensor_bytes=T', got {lines!r}")
        return 1
    ranks, own_err, per_rank, total = int(m[1]), float(m[2]), int(m[3]), int(m[4])
    got = safetensors_reader.load(opath)[0]["output"]
    err = ((got - want).abs().max() / want.abs().max()).item()
    want_bytes, want_total = expected_bytes(sd, a.np)
    print(f"np={a.np} {a.format} {a.dtype}: max rel err vs torch {err:.3g} (llama_tp's own {own_err:.3g}); "
          f"bytes per rank {per_rank} (expected {want_bytes:.0f}), total {total} (expected {want_total})")
    checks = [
        (ranks == a.np, f"ranks={ranks}, ran {a.np}"),
        (tuple(got.shape) == tuple(want.shape) and got.dtype == torch.float32,
         f"output {got.dtype} {tuple(got.shape)}"),
        (err <= 1e-4, f"output differs from torch's: {err:.3g} > 1e-4"),
        (own_err <= 1e-4, f"llama_tp's own comparison: {own_err:.3g} > 1e-4"),
        (abs(per_rank - want_bytes) <= 0.05 * want_bytes,
         f"bytes per rank {per_rank} not within 5% of {want_bytes:.0f}"),
        (total == want_total, f"total tensor bytes {total} != {want_total}"),
    ]
    for good, why in checks:
        if not good:
            print("FAIL: " + why)
            ok = False
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
