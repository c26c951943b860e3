import torch
import torch.nn as nn
from common import ours, perturb_, save_case


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(2, 3)
        self.fc2 = nn.Linear(3, 4, bias=False)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


torch.manual_seed(1)
m = perturb_(Model(), seed=14)
x = torch.rand(4, 2, generator=torch.Generator().manual_seed(2))
save_case("linear", m.state_dict(), ours(m), {"input": x, "output": m(x)})
