"""Writes what bench/resnet_vs_libtorch compares, into argv[1] (default
bench/data/resnet): one random-initialised torchvision ResNet-50 (BatchNorm
statistics perturbed, eval mode), as

  resnet50.pt         its state_dict(), which torchport loads
  resnet50.ts         torch.jit.script of the same model, which libtorch runs
                      (as loaded, and after torch::jit::optimize_for_inference;
                      an optimised module cannot be saved: its oneDNN-packed
                      weights do not load back)

Run with Debian's torch: /usr/bin/python3 bench/make_resnet_bench.py
"""
import os
import sys

import torch
import torchvision

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "resnet")
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
model = torchvision.models.resnet50()
g = torch.Generator().manual_seed(0)
with torch.no_grad():
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=g) * 0.2)
            m.running_var.copy_(torch.rand(c, generator=g) + 0.5)
            m.weight.copy_(0.5 + torch.rand(c, generator=g) * 0.5)
            m.bias.copy_(torch.randn(c, generator=g) * 0.2)
model.eval()
torch.save(model.state_dict(), os.path.join(out, "resnet50.pt"))
scripted = torch.jit.script(model)
scripted.save(os.path.join(out, "resnet50.ts"))
print("wrote", out)
