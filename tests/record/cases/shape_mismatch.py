"""A BatchNorm of 5 channels, to be refused by a module of 4 (Burn accepted it)."""
import torch
import torch.nn as nn
from common import ours, save_case


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(5)


m = Model()
save_case("shape_mismatch", m.state_dict(), ours(m))
