"""A two-layer LSTM (batch_first) and a GRU (record only)."""
import torch
import torch.nn as nn
from common import ours, perturb_, save_case


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 6, num_layers=2, batch_first=True)
        self.gru = nn.GRU(3, 5)


torch.manual_seed(1)
m = perturb_(Model(), seed=18).eval()
x = torch.rand(2, 5, 4, generator=torch.Generator().manual_seed(2))
out, (h, c) = m.lstm(x)
save_case("lstm", m.state_dict(), ours(m), {"input": x, "output": out, "h_n": h, "c_n": c})
