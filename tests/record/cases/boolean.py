"""A module whose only record is a bool buffer."""
import torch
import torch.nn as nn
from common import ours, save_case


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buffer", torch.tensor([True, False, True]))

    def forward(self, x):
        return self.buffer


m = Model()
save_case("boolean", m.state_dict(), ours(m))
