"""Burn's complex_nested: conv blocks in a Sequential, a norm, two Linears."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
from common import ours, perturb_, save_case


class ConvBlock(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.norm = nn.BatchNorm2d(out_channels)

    def forward(self, x):
        return self.norm(self.conv(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_blocks = nn.Sequential(ConvBlock(2, 4, (3, 2)), ConvBlock(4, 6, (3, 2)))
        self.norm1 = nn.BatchNorm2d(6)
        self.fc1 = nn.Linear(120, 12)
        self.fc2 = nn.Linear(12, 10)

    def forward(self, x):
        x = self.conv_blocks(x)
        x = self.norm1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


torch.manual_seed(1)
m = perturb_(Net(), seed=3).eval()
x = torch.rand(1, 2, 9, 6, generator=torch.Generator().manual_seed(2))
half_params = copy.deepcopy(m).half().float()  # parameters rounded to f16, computed in f32
save_case("complex_nested", m.state_dict(), ours(m),
          {"input": x, "output": m(x), "output_half_params": half_params(x)})
