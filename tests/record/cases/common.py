"""Shared by the record cases (Burn's pytorch-tests, ported).

Each case script builds a PyTorch model and calls `save_case`, which writes
to ../fixtures/:
  <case>.pt           what the C++ test loads (usually model.state_dict())
  <case>.expected.pt  every tensor the C++ module must hold after loading,
                      under torchport's names and in torchport's layout
                      (computed here independently of torchport's adapter)
  <case>.io.pt        optional: forward-pass inputs and torch's outputs
Run with Debian's torch: /usr/bin/python3 tests/record/cases/<case>.py
"""

import collections
import os

import torch
import torch.nn as nn

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")


def ours(module, prefix=""):
    """The tensors torchport's modules hold for `module`, named as torchport
    names them: Linear weights transposed to [in, out]; norms' weight/bias as
    gamma/beta; PReLU's weight as alpha; attention and LSTM/GRU split per
    projection and gate."""
    out = collections.OrderedDict()

    def put(name, t):
        if t is not None:
            out[prefix + name] = t.detach().clone()

    if isinstance(module, nn.Linear):
        put("weight", module.weight.t().contiguous())
        put("bias", module.bias)
        return out
    if isinstance(module, (nn.BatchNorm1d, nn.BatchNorm2d)):
        put("gamma", module.weight)
        put("beta", module.bias)
        put("running_mean", module.running_mean)
        put("running_var", module.running_var)
        put("num_batches_tracked", module.num_batches_tracked)
        return out
    if isinstance(module, (nn.LayerNorm, nn.GroupNorm)):
        put("gamma", module.weight)
        put("beta", module.bias)
        return out
    if isinstance(module, nn.PReLU):
        put("alpha", module.weight)
        return out
    if isinstance(module, nn.MultiheadAttention):
        e = module.embed_dim
        for i, name in enumerate(("query", "key", "value")):
            if module.in_proj_weight is not None:
                w = module.in_proj_weight[i * e:(i + 1) * e]
            else:
                w = getattr(module, "qkv"[i] + "_proj_weight")
            put(name + ".weight", w.t().contiguous())
            if module.in_proj_bias is not None:
                put(name + ".bias", module.in_proj_bias[i * e:(i + 1) * e])
        put("output.weight", module.out_proj.weight.t().contiguous())
        put("output.bias", module.out_proj.bias)
        return out
    if isinstance(module, (nn.LSTM, nn.GRU)):
        gates = (("input_gate", "forget_gate", "cell_gate", "output_gate") if isinstance(module, nn.LSTM)
                 else ("reset_gate", "update_gate", "new_gate"))
        h = module.hidden_size
        for k in range(module.num_layers):
            for side, tag in (("input_transform", "ih"), ("hidden_transform", "hh")):
                w = getattr(module, f"weight_{tag}_l{k}")
                b = getattr(module, f"bias_{tag}_l{k}", None)
                for i, gate in enumerate(gates):
                    base = f"layers.{k}.{gate}.{side}."
                    put(base + "weight", w[i * h:(i + 1) * h].t().contiguous())
                    if b is not None:
                        put(base + "bias", b[i * h:(i + 1) * h])
        return out
    # Leaves with torch's own layout, and containers.
    for name, p in module.named_parameters(recurse=False):
        put(name, p)
    for name, b in module.named_buffers(recurse=False):
        if name not in module._non_persistent_buffers_set:
            put(name, b)
    for name, child in module.named_children():
        out.update(ours(child, prefix + name + "."))
    return out


def renumber(expected, container, mapping):
    """Renames `container.<old>.` to `container.<new>.` (nn.Sequential indices
    compacted by the loader)."""
    out = collections.OrderedDict()
    for k, v in expected.items():
        for old, new in mapping.items():
            head = f"{container}.{old}."
            if k.startswith(head):
                k = f"{container}.{new}." + k[len(head):]
                break
        out[k] = v
    return out


def save_case(case, checkpoint, expected, io=None):
    os.makedirs(FIXTURES, exist_ok=True)
    torch.save(checkpoint, os.path.join(FIXTURES, case + ".pt"))
    torch.save(collections.OrderedDict(expected), os.path.join(FIXTURES, case + ".expected.pt"))
    if io is not None:
        torch.save(collections.OrderedDict(io), os.path.join(FIXTURES, case + ".io.pt"))


def perturb_(model, seed=0):
    """Non-trivial values everywhere (BatchNorm statistics included)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            if t.dtype.is_floating_point:
                if name.endswith("running_var"):
                    t.copy_(torch.rand(t.shape, generator=g) + 0.5)
                else:
                    t.copy_(torch.randn(t.shape, generator=g) * 0.5)
    return model
