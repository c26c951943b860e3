"""Rules that only work together: model.conv.0 -> conv1, model.conv.1 -> conv2,
each after `model.` has been stripped by the first rule."""
import collections
import torch
import torch.nn as nn
from common import ours, perturb_, save_case


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(2, 2, (2, 2)), nn.Conv2d(2, 2, (2, 2), bias=False))
        self.fc = nn.Linear(2, 3)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = Inner()


torch.manual_seed(1)
m = perturb_(Model(), seed=12)
names = {"model.conv.0.": "conv1.", "model.conv.1.": "conv2.", "model.fc.": "fc."}
expected = collections.OrderedDict()
for k, v in ours(m).items():
    for old, new in names.items():
        if k.startswith(old):
            expected[new + k[len(old):]] = v
save_case("key_remap_chained", m.state_dict(), expected)
