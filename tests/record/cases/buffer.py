"""A registered float buffer, added in the forward pass."""
import torch
import torch.nn as nn
from common import ours, save_case


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buffer", torch.ones(3, 3))

    def forward(self, x):
        return x + self.buffer


m = Model()
x = torch.rand(3, 3, generator=torch.Generator().manual_seed(0))
save_case("buffer", m.state_dict(), ours(m), {"input": x, "output": m(x)})
