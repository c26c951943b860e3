import torch
import torch.nn as nn
from common import ours, perturb_, save_case


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.ConvTranspose1d(2, 2, 2)
        self.conv2 = nn.ConvTranspose1d(2, 2, 2, bias=False)

    def forward(self, x):
        return self.conv2(self.conv1(x))


torch.manual_seed(1)
m = perturb_(Model(), seed=6)
x = torch.rand(1, 2, 4, generator=torch.Generator().manual_seed(2))
save_case("conv_transpose1d", m.state_dict(), ours(m), {"input": x, "output": m(x)})
