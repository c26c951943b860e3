"""A state dict under a top-level key of a training checkpoint."""
import torch
import torch.nn as nn
from common import ours, perturb_, save_case


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 2, (2, 2))
        self.conv2 = nn.Conv2d(2, 2, (2, 2), bias=False)


torch.manual_seed(1)
m = perturb_(Model(), seed=16)
save_case("top_level_key", {"my_state_dict": m.state_dict(), "epoch": 7}, ours(m))
