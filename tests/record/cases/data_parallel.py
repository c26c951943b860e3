"""A state dict saved from nn.DataParallel: every key starts with `module.`."""
import torch
import torch.nn as nn
from common import ours, perturb_, save_case


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(2, 3)
        self.norm = nn.BatchNorm1d(3)


torch.manual_seed(1)
m = perturb_(Model(), seed=19)
sd = nn.DataParallel(m).state_dict()
assert all(k.startswith("module.") for k in sd)
save_case("data_parallel", sd, ours(m))
