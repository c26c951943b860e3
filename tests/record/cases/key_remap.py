"""Keys that differ from the module's field names: conv.conv1 -> conv1."""
import collections
import torch
import torch.nn as nn
from common import ours, perturb_, save_case


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 2, (2, 2))
        self.conv2 = nn.Conv2d(2, 2, (2, 2), bias=False)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = Inner()

    def forward(self, x):
        return self.conv.conv2(self.conv.conv1(x))


torch.manual_seed(1)
m = perturb_(Model(), seed=11)
x = torch.rand(1, 2, 5, 5, generator=torch.Generator().manual_seed(2))
expected = collections.OrderedDict((k[len("conv."):], v) for k, v in ours(m).items())
save_case("key_remap", m.state_dict(), expected, {"input": x, "output": m(x)})
