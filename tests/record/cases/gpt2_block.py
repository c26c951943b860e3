"""A GPT-2 decoder block, written as Hugging Face's GPT2Block computes it
(transformers is not in Debian): ln_1, attention with a fused c_attn and
the causal mask buffer GPT-2 checkpoints carry, ln_2, an MLP with the tanh
GELU ("gelu_new"), residuals. Linear layers are GPT-2's Conv1D, whose
weight is stored [in, out]. Tiny sizes: n_embd 16, 2 heads, n_ctx 8."""
import math

import torch
import torch.nn as nn
from common import ours, perturb_, save_case

N_EMBD, N_HEAD, N_CTX = 16, 2, 8


class Conv1D(nn.Module):
    """transformers.pytorch_utils.Conv1D: y = x @ weight + bias, weight [nx, nf]."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        # Persistent, as in the released GPT-2 checkpoints ("h.0.attn.bias"):
        # true where a query may attend to a key.
        self.register_buffer("bias", torch.tril(torch.ones(N_CTX, N_CTX, dtype=torch.bool)).view(1, 1, N_CTX, N_CTX))
        self.c_attn = Conv1D(3 * N_EMBD, N_EMBD)
        self.c_proj = Conv1D(N_EMBD, N_EMBD)

    def forward(self, x):
        b, t, e = x.shape
        q, k, v = self.c_attn(x).split(e, dim=2)

        def heads(y):
            return y.view(b, t, N_HEAD, e // N_HEAD).permute(0, 2, 1, 3)

        q, k, v = heads(q), heads(k), heads(v)
        w = torch.matmul(q, k.transpose(-1, -2)) / torch.full([], v.size(-1) ** 0.5)
        mask = self.bias[:, :, :t, :t]
        w = torch.where(mask, w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
        w = nn.functional.softmax(w, dim=-1)
        a = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous().view(b, t, e)
        return self.c_proj(a)


def gelu_new(x):
    """transformers' NewGELUActivation (GPT-2's "gelu_new")."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = Conv1D(4 * N_EMBD, N_EMBD)
        self.c_proj = Conv1D(N_EMBD, 4 * N_EMBD)

    def forward(self, x):
        return self.c_proj(gelu_new(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(N_EMBD, eps=1e-5)
        self.attn = Attention()
        self.ln_2 = nn.LayerNorm(N_EMBD, eps=1e-5)
        self.mlp = MLP()

    def forward(self, x):
        a = self.attn(self.ln_1(x))
        x = x + a
        return x + self.mlp(self.ln_2(x)), a


if __name__ == "__main__":
    torch.manual_seed(1)
    m = perturb_(Block(), seed=21).eval()
    x = torch.randn(2, 6, N_EMBD, generator=torch.Generator().manual_seed(2))  # 6 < n_ctx: the mask is sliced
    with torch.no_grad():
        out, attn = m(x)
    # Conv1D keeps torch's layout in ours() ([in, out] is already ours).
    save_case("gpt2_block", m.state_dict(), ours(m), {"input": x, "attn": attn, "output": out})
