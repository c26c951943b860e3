"""nn.MultiheadAttention: fused in_proj, and separate q/k/v with kdim/vdim."""
import torch
import torch.nn as nn
from common import ours, perturb_, save_case


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2)
        self.cross = nn.MultiheadAttention(8, 2, kdim=6, vdim=4, batch_first=True)


torch.manual_seed(1)
m = perturb_(Model(), seed=17).eval()
g = torch.Generator().manual_seed(2)
q = torch.rand(5, 3, 8, generator=g)
kq = torch.rand(3, 5, 8, generator=g)
k = torch.rand(3, 7, 6, generator=g)
v = torch.rand(3, 7, 4, generator=g)
out, w = m.attn(q, q, q)
cross, cw = m.cross(kq, k, v)
save_case("multihead_attention", m.state_dict(), ours(m),
          {"q": q, "output": out, "weights": w, "cross_q": kq, "cross_k": k, "cross_v": v, "cross_output": cross,
           "cross_weights": cw})
