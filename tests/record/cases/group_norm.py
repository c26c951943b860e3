import torch
import torch.nn as nn
from common import ours, perturb_, save_case


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.GroupNorm(2, 6)

    def forward(self, x):
        return self.norm1(x)


torch.manual_seed(1)
m = perturb_(Model(), seed=10)
x = torch.rand(1, 6, 2, 2, generator=torch.Generator().manual_seed(2))
save_case("group_norm", m.state_dict(), ours(m), {"input": x, "output": m(x)})
