"""Burn's enum_module: the same field holds a depthwise-separable conv in one
file and a plain conv in the other."""
import torch
import torch.nn as nn
from common import ours, perturb_, save_case


class DwsConv(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.dconv = nn.Conv2d(in_channels, in_channels, kernel_size, groups=in_channels)
        self.pconv = nn.Conv2d(in_channels, out_channels, 1)

    def forward(self, x):
        return self.pconv(self.dconv(x))


class Model(nn.Module):
    def __init__(self, depthwise):
        super().__init__()
        self.conv = DwsConv(2, 2, 3) if depthwise else nn.Conv2d(2, 2, 3)

    def forward(self, x):
        return self.conv(x)


x = torch.rand(1, 2, 5, 5, generator=torch.Generator().manual_seed(2))
for depthwise in (True, False):
    torch.manual_seed(1)
    m = perturb_(Model(depthwise), seed=9)
    name = "enum_depthwise_true" if depthwise else "enum_depthwise_false"
    save_case(name, m.state_dict(), ours(m), {"input": x, "output": m(x)})
