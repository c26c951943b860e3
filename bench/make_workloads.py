#!/usr/bin/python3
"""Writes the benchmark workloads into bench/data/ with Debian's torch.

  resnet152.pt  torchvision ResNet-152 state_dict() (about 241 MB of f32),
                random weights with non-trivial BatchNorm statistics
Usage: /usr/bin/python3 bench/make_workloads.py [names...]
"""
import os
import sys

import torch
import torchvision

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def resnet152():
    torch.manual_seed(0)
    m = torchvision.models.resnet152()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
    torch.save(m.state_dict(), os.path.join(DATA, "resnet152.pt"))


WORKLOADS = {"resnet152": resnet152}

if __name__ == "__main__":
    os.makedirs(DATA, exist_ok=True)
    for name in sys.argv[1:] or WORKLOADS:
        path = os.path.join(DATA, name + ".pt")
        if not os.path.exists(path):
            WORKLOADS[name]()
        print(path, os.path.getsize(path))
