"""A Llama decoder block, written as Hugging Face's LlamaDecoderLayer
computes it (transformers is not in Debian): RMSNorm, rotary embeddings
(rotate_half convention), grouped-query attention (4 query heads sharing 2
key/value heads), a SwiGLU MLP (gate/up/down), residuals.

The checkpoint holds bf16 weights, as Llama checkpoints do. The reference
output is torch's f32 forward of the same bf16-rounded weights (what a C++
runtime computing in f32 should reproduce); torch's all-bf16 forward is
saved too, to show how far bf16 arithmetic is from it. Tiny sizes: hidden
16, head_dim 4, intermediate 32."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
from common import ours, perturb_, save_case

HIDDEN, N_HEADS, N_KV_HEADS, INTERMEDIATE = 16, 4, 2, 32
HEAD_DIM = HIDDEN // N_HEADS
ROPE_THETA, RMS_EPS = 10000.0, 1e-5


class RMSNorm(nn.Module):
    """LlamaRMSNorm (torch 1.13 has no nn.RMSNorm)."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.variance_epsilon = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * x.to(dtype)


def rotary(position_ids, dtype):
    """LlamaRotaryEmbedding: cos, sin [B, T, head_dim] (computed in f32)."""
    inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
    freqs = position_ids.float()[..., None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n_rep):
    b, h, t, d = x.shape
    return x[:, :, None, :, :].expand(b, h, n_rep, t, d).reshape(b, h * n_rep, t, d)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(HIDDEN, N_HEADS * HEAD_DIM, bias=False)
        self.k_proj = nn.Linear(HIDDEN, N_KV_HEADS * HEAD_DIM, bias=False)
        self.v_proj = nn.Linear(HIDDEN, N_KV_HEADS * HEAD_DIM, bias=False)
        self.o_proj = nn.Linear(N_HEADS * HEAD_DIM, HIDDEN, bias=False)

    def forward(self, x, position_ids):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, N_HEADS, HEAD_DIM).transpose(1, 2)
        k = self.k_proj(x).view(b, t, N_KV_HEADS, HEAD_DIM).transpose(1, 2)
        v = self.v_proj(x).view(b, t, N_KV_HEADS, HEAD_DIM).transpose(1, 2)
        cos, sin = rotary(position_ids, x.dtype)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # [B, 1, T, D]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = repeat_kv(k, N_HEADS // N_KV_HEADS)
        v = repeat_kv(v, N_HEADS // N_KV_HEADS)
        w = torch.matmul(q, k.transpose(2, 3)) / HEAD_DIM ** 0.5
        causal = torch.full((t, t), torch.finfo(w.dtype).min, dtype=w.dtype).triu(1)
        w = F.softmax((w + causal).float(), dim=-1).to(q.dtype)
        a = torch.matmul(w, v).transpose(1, 2).reshape(b, t, N_HEADS * HEAD_DIM)
        return self.o_proj(a)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(HIDDEN, INTERMEDIATE, bias=False)
        self.up_proj = nn.Linear(HIDDEN, INTERMEDIATE, bias=False)
        self.down_proj = nn.Linear(INTERMEDIATE, HIDDEN, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = RMSNorm(HIDDEN, RMS_EPS)
        self.self_attn = Attention()
        self.post_attention_layernorm = RMSNorm(HIDDEN, RMS_EPS)
        self.mlp = MLP()

    def forward(self, x, position_ids):
        a = self.self_attn(self.input_layernorm(x), position_ids)
        x = x + a
        return x + self.mlp(self.post_attention_layernorm(x)), a


if __name__ == "__main__":
    torch.manual_seed(1)
    m = perturb_(Block(), seed=22).eval().to(torch.bfloat16)
    f32 = copy.deepcopy(m).float()  # the same bf16-rounded weights, in f32
    x = torch.randn(2, 5, HIDDEN, generator=torch.Generator().manual_seed(2))
    positions = torch.arange(3, 8).expand(2, 5)  # as if 3 tokens came before (rotary offsets)
    with torch.no_grad():
        out, attn = f32(x, positions)
        out_bf16, _ = m(x.bfloat16(), positions)
    expected = {k.replace("layernorm.weight", "layernorm.gamma"): v for k, v in ours(m).items()}  # RMSNorm: gamma
    save_case("llama_block", m.state_dict(), expected,
              {"input": x, "position_ids": positions, "attn": attn, "output": out, "output_bf16_compute": out_bf16})
