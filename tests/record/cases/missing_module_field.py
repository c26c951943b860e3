"""A file without a field the C++ module declares."""
import torch
import torch.nn as nn
from common import ours, save_case


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 2, (2, 2))


torch.manual_seed(1)
m = Model()
save_case("missing_module_field", m.state_dict(), ours(m))
