"""nn.Sequential with activations: keys 0, 2, 4 become items 0, 1, 2."""
import torch
import torch.nn as nn
from common import ours, perturb_, renumber, save_case


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.variable_layers = nn.Sequential(nn.Conv2d(2, 2, (3, 3), padding="same"), nn.ReLU(),
                                             nn.Conv2d(2, 2, (3, 3), padding="same"), nn.ReLU(),
                                             nn.Conv2d(2, 2, (3, 3), padding="same"))

    def forward(self, x):
        return self.variable_layers(x)


torch.manual_seed(1)
m = perturb_(Model(), seed=15)
x = torch.rand(1, 2, 5, 5, generator=torch.Generator().manual_seed(2))
save_case("non_contiguous_indexes", m.state_dict(), renumber(ours(m), "variable_layers", {2: 1, 4: 2}),
          {"input": x, "output": m(x)})
