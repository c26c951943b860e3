"""Writes the torch checkpoints the interop tests convert, into argv[1]:

  state.pt        a flat state dict: every dtype torch 1.13 saves, views,
                  tied weights, 0-d and empty tensors
  ckpt.pt         {"state_dict": <state.pt's dict>, "epoch": 3, ...}
  legacy.pt       state.pt in the legacy (non-zip) format
  module.pt       a whole pickled nn.Sequential (loaded by name lists)
  hf/             a Hugging Face sharded checkpoint written the way
                  transformers writes one: pytorch_model-0000k-of-00003.bin
                  shards and pytorch_model.bin.index.json
"""

import collections
import json
import os
import sys

import torch

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)

sd = collections.OrderedDict()
for dtype in [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64, torch.complex128]:
    sd[f"randn.{str(dtype)[6:]}"] = torch.randn(3, 5).to(dtype)
for dtype in [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]:
    sd[f"ints.{str(dtype)[6:]}"] = torch.randint(-100 if dtype != torch.uint8 else 0, 100, (4, 2), dtype=dtype)
sd["bool"] = torch.rand(7) > 0.5
sd["special"] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1e-45, 3.4e38])
sd["special_bf16"] = torch.tensor([float("nan"), float("inf"), -0.0, 1e-40, 3.0e38]).bfloat16()
base = torch.randn(6, 8)
sd["view.base"] = base
sd["view.t"] = base.t()
sd["view.rows"] = base[2:4]
sd["view.cols"] = base[:, 3:6]
sd["view.strided"] = base[::2, ::3]
sd["tied.a"] = base          # the same tensor twice: tied weights
sd["scalar"] = torch.tensor(2.5)
sd["empty"] = torch.zeros(0, 4)
sd["empty_long"] = torch.zeros(0, dtype=torch.int64)
torch.save(sd, os.path.join(out, "state.pt"))
torch.save({"state_dict": sd, "epoch": 3, "lr": 0.1}, os.path.join(out, "ckpt.pt"))
torch.save(sd, os.path.join(out, "legacy.pt"), _use_new_zipfile_serialization=False)

# A training checkpoint: a model, an optimizer's state and values of every
# kind a pickle holds, with shared references and views of one storage.
torch.manual_seed(1)
net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
net(torch.randn(5, 4)).sum().backward()
opt.step()
shared = torch.arange(6.0)
train = {"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": 7, "loss": 0.125,
         "args": {"lr": 1e-3, "name": "run-1", "layers": [4, 3], "flags": (True, False, None)},
         "big": 2**100, "negative": -2**70, "complex": complex(1.5, -2), "raw": b"\x00\xff abc",
         "tags": {1, 2, 3}, "views": [shared, shared[2:], shared.view(2, 3)], "empty": {},
         "ordered": collections.OrderedDict(a=1), "unicode": "h\u00e9llo \u2603"}
train["again"] = train["args"]
torch.save(train, os.path.join(out, "train.pt"))
torch.save(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2)),
           os.path.join(out, "module.pt"))

# A sharded checkpoint as transformers' save_pretrained writes it.
hf = os.path.join(out, "hf")
os.makedirs(hf, exist_ok=True)
model = collections.OrderedDict()
for i in range(6):
    model[f"model.layers.{i}.weight"] = torch.randn(16, 16)
    model[f"model.layers.{i}.bias"] = torch.randn(16)
model["lm_head.weight"] = torch.randn(10, 16)
names = list(model)
shards = [names[0:5], names[5:10], names[10:]]
weight_map = {}
for k, part in enumerate(shards):
    file = f"pytorch_model-{k + 1:05d}-of-{len(shards):05d}.bin"
    torch.save(collections.OrderedDict((n, model[n]) for n in part), os.path.join(hf, file))
    weight_map.update({n: file for n in part})
total = sum(t.numel() * t.element_size() for t in model.values())
with open(os.path.join(hf, "pytorch_model.bin.index.json"), "w") as f:
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)
torch.save(model, os.path.join(out, "hf_model.pt"))  # the same tensors in one file, for comparison
