"""Integer buffers (I64 in the file)."""
import torch
import torch.nn as nn
from common import ours, save_case


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buffer", torch.tensor([[1, 2, 3], [-4, 5, 6]], dtype=torch.int64))

    def forward(self, x):
        return self.buffer


m = Model()
save_case("integer", m.state_dict(), ours(m))
