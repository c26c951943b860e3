import torch
import torch.nn as nn
from common import ours, perturb_, save_case


class Model(nn.Module):
    def __init__(self, bias=True):
        super().__init__()
        self.norm1 = nn.LayerNorm(2)
        if not bias:
            self.norm1.register_parameter("bias", None)  # LayerNorm(bias=False) of newer torch

    def forward(self, x):
        return self.norm1(x)


x = torch.rand(2, 3, 2, generator=torch.Generator().manual_seed(2))
for bias in (True, False):
    torch.manual_seed(1)
    m = perturb_(Model(bias), seed=13)
    save_case("layer_norm" if bias else "layer_norm_no_bias", m.state_dict(), ours(m),
              {"input": x, "output": m(x)})
