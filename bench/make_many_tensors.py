"""Checkpoints of many small tensors, as mixture-of-experts models and
optimizer states hold them, for bench/many_tensors.py. Run with torch 2.6
and safetensors (scripts/torch.sh 2.6 python3 bench/make_many_tensors.py DIR
[COUNT ...]); each file is made once and kept.

  dict_N.pt           torch.save of a dict of N tensors of 16 float32s, named
                      layers.L.experts.E.w (64 experts a layer)
  dict_N.safetensors  the same, by safetensors.torch.save_file
  shards_90k/         90,000 such tensors in 8 safetensors shards with a
                      model.safetensors.index.json, as transformers'
                      save_pretrained writes a sharded checkpoint
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file


def tensors(n, seed=28):
    g = torch.Generator().manual_seed(seed)
    data = torch.randn(n, 16, generator=g)
    # One storage per tensor, as a model's parameters have (clone of a row).
    return {f"layers.{i // 64}.experts.{i % 64}.w": data[i].clone() for i in range(n)}


def main():
    out = sys.argv[1]
    counts = [int(c) for c in sys.argv[2:]] or [1000, 10000, 80000, 320000]
    os.makedirs(out, exist_ok=True)
    for n in counts:
        pt, st = os.path.join(out, f"dict_{n}.pt"), os.path.join(out, f"dict_{n}.safetensors")
        if os.path.exists(pt) and os.path.exists(st):
            continue
        d = tensors(n)
        torch.save(d, pt + ".tmp")
        os.replace(pt + ".tmp", pt)
        save_file(d, st + ".tmp", metadata={"format": "pt"})
        os.replace(st + ".tmp", st)
        print(f"made {pt} and {st}")
    shards = os.path.join(out, "shards_90k")
    index = os.path.join(shards, "model.safetensors.index.json")
    if not os.path.exists(index):
        os.makedirs(shards, exist_ok=True)
        d = tensors(90000, seed=90)
        names = list(d)
        per = (len(names) + 7) // 8
        weight_map = {}
        total = 0
        for s in range(8):
            file = f"model-{s + 1:05d}-of-00008.safetensors"
            part = {k: d[k] for k in names[s * per:(s + 1) * per]}
            save_file(part, os.path.join(shards, file), metadata={"format": "pt"})
            for k, v in part.items():
                weight_map[k] = file
                total += v.numel() * v.element_size()
        with open(index + ".tmp", "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
        os.replace(index + ".tmp", index)
        print(f"made {shards}")


if __name__ == "__main__":
    main()
