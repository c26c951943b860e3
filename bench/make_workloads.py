#!/usr/bin/python3
"""Writes the benchmark workloads into bench/data/ with Debian's torch.

  resnet18.pt, resnet50.pt, resnet152.pt   torchvision state_dict() files (f32, zip);
                                           random weights, non-trivial BatchNorm statistics
  resnet152_legacy.pt                      the same in the legacy (pre-1.6) format
  resnet152_bf16.pt                        the same in bf16
  resnet152_plaindict.pt                   a plain dict copy (torch::pickle_load knows no OrderedDict)
  llama/                                   a Llama-shaped bf16 checkpoint in Hugging Face shards:
                                           pytorch_model-0000k-of-0000n.bin + pytorch_model.bin.index.json
                                           (about 3B parameters in 2 GB shards by default; the
                                           safetensors shards are made from these by compare.py)

Usage: /usr/bin/python3 bench/make_workloads.py [--llama-params 3e9] [--shard-gb 2] [names...]
Existing files are kept.
"""
import argparse
import collections
import json
import os

import torch
import torchvision

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def path(name):
    return os.path.join(DATA, name)


def resnet_state(arch):
    torch.manual_seed(0)
    m = getattr(torchvision.models, arch)()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
    return m.state_dict()


def resnets():
    for arch in ("resnet18", "resnet50", "resnet152"):
        if not os.path.exists(path(arch + ".pt")):
            torch.save(resnet_state(arch), path(arch + ".pt"))
    sd = torch.load(path("resnet152.pt"))
    if not os.path.exists(path("resnet152_legacy.pt")):
        torch.save(sd, path("resnet152_legacy.pt"), _use_new_zipfile_serialization=False)
    if not os.path.exists(path("resnet152_bf16.pt")):
        torch.save(collections.OrderedDict((k, v.bfloat16() if v.is_floating_point() else v) for k, v in sd.items()),
                   path("resnet152_bf16.pt"))
    if not os.path.exists(path("resnet152_plaindict.pt")):
        torch.save(dict(sd), path("resnet152_plaindict.pt"))


def llama(params, shard_gb):
    """Llama-2-like shapes, layer count scaled to reach `params`."""
    out = path("llama")
    index = os.path.join(out, "pytorch_model.bin.index.json")
    if os.path.exists(index):
        return
    os.makedirs(out, exist_ok=True)
    hidden, inter, vocab, heads, kv_heads = 3200, 8640, 32000, 32, 32
    head_dim = hidden // heads
    per_layer = 2 * hidden * hidden + 2 * hidden * kv_heads * head_dim + 3 * hidden * inter + 2 * hidden
    layers = max(1, round((params - 2 * vocab * hidden) / per_layer))
    g = torch.Generator().manual_seed(0)

    def t(*shape):
        return (torch.randn(*shape, generator=g) * 0.02).bfloat16()

    names = [("model.embed_tokens.weight", (vocab, hidden))]
    for i in range(layers):
        p = f"model.layers.{i}."
        names += [(p + "self_attn.q_proj.weight", (hidden, hidden)),
                  (p + "self_attn.k_proj.weight", (kv_heads * head_dim, hidden)),
                  (p + "self_attn.v_proj.weight", (kv_heads * head_dim, hidden)),
                  (p + "self_attn.o_proj.weight", (hidden, hidden)),
                  (p + "mlp.gate_proj.weight", (inter, hidden)),
                  (p + "mlp.up_proj.weight", (inter, hidden)),
                  (p + "mlp.down_proj.weight", (hidden, inter)),
                  (p + "input_layernorm.weight", (hidden,)),
                  (p + "post_attention_layernorm.weight", (hidden,))]
    names += [("model.norm.weight", (hidden,)), ("lm_head.weight", (vocab, hidden))]
    limit = shard_gb * 1e9
    shards, current, size = [], collections.OrderedDict(), 0
    for name, shape in names:
        n = 2
        for d in shape:
            n *= d
        if current and size + n > limit:
            shards.append(current)
            current, size = collections.OrderedDict(), 0
        current[name] = t(*shape)
        size += n
        if size > limit:
            shards.append(current)
            current, size = collections.OrderedDict(), 0
    if current:
        shards.append(current)
    weight_map, total = {}, 0
    for i, shard in enumerate(shards):
        file = f"pytorch_model-{i + 1:05d}-of-{len(shards):05d}.bin"
        torch.save(shard, os.path.join(out, file))
        for k, v in shard.items():
            weight_map[k] = file
            total += v.numel() * 2
        del shard
    with open(index, "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)
    print(f"llama: {layers} layers, {total / 2 / 1e9:.2f}B parameters, {len(shards)} shards")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-params", type=float, default=3e9)
    ap.add_argument("--shard-gb", type=float, default=2)
    ap.add_argument("names", nargs="*", default=["resnets", "llama"])
    args = ap.parse_args()
    os.makedirs(DATA, exist_ok=True)
    if "resnets" in args.names:
        resnets()
    if "llama" in args.names:
        llama(args.llama_params, args.shard_gb)
    for name in sorted(os.listdir(DATA)):
        print(name)
