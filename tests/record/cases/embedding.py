import torch
import torch.nn as nn
from common import ours, perturb_, save_case


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 3)

    def forward(self, x):
        return self.embed(x)


torch.manual_seed(1)
m = perturb_(Model(), seed=8)
x = torch.tensor([[1, 2, 4, 5], [4, 3, 2, 9]])
save_case("embedding", m.state_dict(), ours(m), {"input": x, "output": m(x)})
