"""A BatchNorm2d whose running statistics came from training steps."""
import torch
import torch.nn as nn
from common import ours, save_case


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(5)

    def forward(self, x):
        return self.norm1(x)


torch.manual_seed(1)
m = Model()
for _ in range(3):  # training steps move the running statistics
    m(torch.randn(2, 5, 3, 3))
m.eval()
x = torch.randn(1, 5, 2, 2)
save_case("batch_norm", m.state_dict(), ours(m), {"input": x, "output": m(x)})
