#!/usr/bin/python3
"""Writes tests/nn/fixtures/<case>.pt: inputs, parameters and PyTorch's outputs
for the parity tests of torchport::nn (tests/nn/test_nn_parity.cpp).

Run with Debian's python3-torch (1.13):  /usr/bin/python3 tests/nn/make_nn_fixtures.py

Each case is seeded from its name, so adding or editing one case leaves the
others' files unchanged. Every tensor is cloned before saving (a view would
drag its whole storage into the file). Layout conventions of torchport::nn:
linear, multi-head attention and LSTM weights are stored [in, out] (torch's
transposed); conv weights keep torch's layout. Hyper-parameters are repeated
in the C++ test next to each case's name.
"""

import math
import os
import zlib

import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def save(name, **tensors):
    path = os.path.join(OUT, name + ".pt")
    torch.save({k: v.detach().clone().contiguous() for k, v in tensors.items()}, path)


def seed(name):
    torch.manual_seed(zlib.crc32(name.encode()))


def rnd(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


# ---------------------------------------------------------------- elementwise

@case
def elementwise():
    seed("elementwise")
    a = rnd(2, 3, 4)
    b = rnd(3, 1)
    b = b + torch.sign(b) * 0.5  # keep divisors away from 0
    save("elementwise", a=a, b=b, add=a + b, sub=a - b, mul=a * b, div=a / b,
         add_s=a + 0.1, sub_s=a - 2.5, mul_s=a * 3.0, div_s=a / 7.0)


@case
def elementwise_f64():
    seed("elementwise_f64")
    a = rnd(4, 1, 3, dtype=torch.float64)
    b = rnd(5, 1, dtype=torch.float64) + 3.0
    save("elementwise_f64", a=a, b=b, add=a + b, mul=a * b, div=a / b)


@case
def unary():
    seed("unary")
    x = rnd(3, 5)
    p = torch.rand(3, 5) * 4 + 0.05  # positive, for log / sqrt / pow
    save("unary", x=x, p=p, neg=-x, exp=torch.exp(x), log=torch.log(p), sqrt=torch.sqrt(p),
         rsqrt=torch.rsqrt(p), pow2=torch.pow(x, 2.0), pow3=torch.pow(x, 3.0),
         pow_half=torch.pow(p, 0.5), pow_m15=torch.pow(p, -1.5))


# ---------------------------------------------------------------- matmul

@case
def matmul():
    seed("matmul")
    m2a, m2b = rnd(5, 7), rnd(7, 3)
    ba, bb = rnd(2, 1, 4, 6), rnd(3, 6, 5)  # batch dims broadcast to [2, 3]
    v7, v5 = rnd(7), rnd(5)
    b3 = rnd(2, 5, 7)
    save("matmul", m2a=m2a, m2b=m2b, mm=m2a @ m2b, ba=ba, bb=bb, bmm=ba @ bb, v7=v7, v5=v5, b3=b3,
         dot=torch.matmul(v7, v7), vm=torch.matmul(v5, m2a), mv=torch.matmul(m2a, v7),
         bv=torch.matmul(b3, v7), vb=torch.matmul(v5, b3))


@case
def matmul_f64():
    seed("matmul_f64")
    a, b = rnd(3, 4, 9, dtype=torch.float64), rnd(9, 6, dtype=torch.float64)
    save("matmul_f64", a=a, b=b, expected=a @ b)


@case
def linear():
    seed("linear")
    lin = torch.nn.Linear(8, 5)
    x = rnd(2, 3, 8)
    x1 = rnd(8)
    with torch.no_grad():
        save("linear", input=x, input_1d=x1, weight=lin.weight.t(), weight_torch=lin.weight, bias=lin.bias,
             expected=lin(x), expected_1d=lin(x1), expected_nobias=x @ lin.weight.t())


@case
def linear_half_weights():
    seed("linear_half_weights")
    x = rnd(4, 16)
    w = rnd(16, 12) * 0.25
    b = rnd(12)
    w16, b16 = w.half(), b.half()
    wbf, bbf = w.bfloat16(), b.bfloat16()
    # torch 1.13's CPU linear does not mix dtypes; the reference widens the
    # stored 16-bit values exactly, which is what torchport does.
    save("linear_half_weights", input=x, weight_f16=w16, bias_f16=b16, weight_bf16=wbf, bias_bf16=bbf,
         expected_f16=x @ w16.float() + b16.float(), expected_bf16=x @ wbf.float() + bbf.float())


# ---------------------------------------------------------------- shape ops

@case
def shape_ops():
    seed("shape_ops")
    a, b = rnd(2, 3, 4), rnd(2, 1, 4)
    save("shape_ops", a=a, b=b, cat1=torch.cat([a, b], 1), cat_last=torch.cat([a, a], -1),
         slice=a[:, :, 1:4:2], slice_neg=a[:, -2:, :], flat=torch.flatten(a, 1, 2), flat_all=torch.flatten(a))


# ---------------------------------------------------------------- reductions

@case
def reductions():
    seed("reductions")
    x = rnd(3, 4, 5)
    x[1, 2, 0] = x[1, 2, 3] = x.abs().max() + 1  # a tie at the maximum: argmax takes the first
    save("reductions", x=x,
         sum_1=x.sum(1), sum_02k=x.sum((0, 2), keepdim=True), sum_all=x.sum(),
         mean_12=x.mean((1, 2)), max_2=x.amax(2), max_02=x.amax((0, 2)),
         var_1=x.var(1), var_02_biased_k=x.var((0, 2), unbiased=False, keepdim=True),
         argmax_1=x.argmax(1), argmax_2k=x.argmax(2, keepdim=True), argmax_all=x.argmax())


@case
def reductions_long():
    seed("reductions_long")
    x = rnd(2, 8192) + 3.0  # a large mean makes float32 accumulation lose digits
    save("reductions_long", x=x, sum=x.sum(1), mean=x.mean(1), var=x.var(1))


@case
def reductions_f64():
    seed("reductions_f64")
    x = rnd(4, 6, dtype=torch.float64)
    save("reductions_f64", x=x, sum_0=x.sum(0), var_1=x.var(1), softmax_1=torch.softmax(x, 1))


@case
def softmax():
    seed("softmax")
    x = rnd(2, 3, 7) * 30  # large logits: only a max-shifted softmax survives
    save("softmax", x=x, sm_last=torch.softmax(x, -1), sm_1=torch.softmax(x, 1),
         lsm_last=torch.log_softmax(x, -1), lsm_0=torch.log_softmax(x, 0))


# ---------------------------------------------------------------- activations

@case
def activations():
    seed("activations")
    x = torch.linspace(-6, 6, 132).reshape(4, 33) + rnd(4, 33) * 0.01
    xc = rnd(2, 4, 3, 3)
    a1 = torch.tensor([0.2])
    a4 = torch.tensor([0.1, -0.3, 0.25, 2.0])
    save("activations", x=x, relu=F.relu(x), gelu=F.gelu(x), gelu_tanh=F.gelu(x, approximate="tanh"),
         silu=F.silu(x), sigmoid=torch.sigmoid(x), tanh=torch.tanh(x), leaky=F.leaky_relu(x, 0.2),
         xc=xc, a1=a1, a4=a4, prelu1=F.prelu(xc, a1), prelu4=F.prelu(xc, a4))


# ---------------------------------------------------------------- convolutions

def conv2d_case(name, n, c, h, w, o, k, bias=True, dtype=torch.float32, **kw):
    seed(name)
    x = rnd(n, c, h, w, dtype=dtype)
    wt = rnd(o, c // kw.get("groups", 1), *k, dtype=dtype) * 0.3
    b = rnd(o, dtype=dtype) if bias else None
    y = F.conv2d(x, wt, b, **kw)
    t = dict(input=x, weight=wt, expected=y)
    if b is not None:
        t["bias"] = b
    save(name, **t)


@case
def conv2d_cases():
    conv2d_case("conv2d_basic", 2, 3, 9, 8, 4, (3, 2))
    conv2d_case("conv2d_pad_stride", 1, 4, 10, 11, 6, (3, 3), stride=(2, 1), padding=(1, 2))
    conv2d_case("conv2d_dilation", 2, 2, 12, 12, 3, (3, 3), bias=False, padding=2, dilation=2)
    conv2d_case("conv2d_groups2", 2, 4, 7, 9, 6, (3, 3), stride=2, padding=1, groups=2)
    conv2d_case("conv2d_depthwise", 1, 5, 8, 8, 5, (3, 3), padding=1, groups=5)
    conv2d_case("conv2d_depth_multiplier", 2, 3, 9, 7, 6, (3, 2), stride=2, padding=(1, 0), dilation=(1, 2), groups=3)
    conv2d_case("conv2d_1x1", 2, 8, 5, 6, 4, (1, 1))
    conv2d_case("conv2d_f64", 2, 3, 6, 7, 4, (3, 3), dtype=torch.float64, stride=2, padding=1)


@case
def conv2d_bf16_weight():
    seed("conv2d_bf16_weight")
    x = rnd(1, 3, 8, 8)
    w = (rnd(4, 3, 3, 3) * 0.3).bfloat16()
    b = rnd(4).bfloat16()
    save("conv2d_bf16_weight", input=x, weight=w, bias=b,
         expected=F.conv2d(x, w.float(), b.float(), padding=1))


@case
def conv2d_unbatched():
    seed("conv2d_unbatched")
    x = rnd(3, 7, 6)
    w = rnd(2, 3, 2, 3) * 0.3
    save("conv2d_unbatched", input=x, weight=w, expected=F.conv2d(x, w, None, padding=(0, 1)))


@case
def conv1d_cases():
    seed("conv1d")
    x = rnd(2, 4, 15)
    w = rnd(6, 4, 5) * 0.3
    b = rnd(6)
    wg = rnd(6, 2, 3) * 0.3
    save("conv1d", input=x, weight=w, bias=b, expected=F.conv1d(x, w, b, stride=2, padding=2),
         weight_g=wg, expected_g=F.conv1d(x, wg, None, padding=1, dilation=2, groups=2))


@case
def conv_transpose_cases():
    seed("conv_transpose2d")
    x = rnd(2, 4, 5, 6)
    w = rnd(4, 3, 3, 2) * 0.3  # [C_in, C_out/groups, kH, kW]
    b = rnd(3)
    wg = rnd(4, 3, 3, 3) * 0.3  # groups 2: C_out = 6
    bg = rnd(6)
    save("conv_transpose2d", input=x, weight=w, bias=b,
         expected=F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
         weight_g=wg, bias_g=bg,
         expected_g=F.conv_transpose2d(x, wg, bg, stride=(2, 3), padding=(1, 0), output_padding=(1, 2),
                                       groups=2, dilation=2))
    seed("conv_transpose1d")
    x = rnd(2, 3, 7)
    w = rnd(3, 4, 4) * 0.3
    b = rnd(4)
    x6 = rnd(1, 6, 5)
    wg = rnd(6, 1, 3) * 0.3  # depthwise transposed: groups 6
    save("conv_transpose1d", input=x, weight=w, bias=b,
         expected=F.conv_transpose1d(x, w, b, stride=3, padding=1, output_padding=2),
         input_g=x6, weight_g=wg, expected_g=F.conv_transpose1d(x6, wg, None, stride=2, groups=6))


# ---------------------------------------------------------------- norms

@case
def norms():
    seed("batch_norm")
    x = rnd(3, 4, 5, 5)
    rm, rv = rnd(4), torch.rand(4) + 0.5
    g, b = rnd(4), rnd(4)
    x2 = rnd(6, 4)
    save("batch_norm", input=x, running_mean=rm, running_var=rv, weight=g, bias=b,
         expected=F.batch_norm(x, rm, rv, g, b, False, 0.1, 1e-5), input_2d=x2,
         expected_2d=F.batch_norm(x2, rm, rv, None, None, False, 0.1, 1e-3))
    seed("layer_norm")
    x = rnd(2, 5, 8) * 2 + 1
    g, b = rnd(8), rnd(8)
    save("layer_norm", input=x, weight=g, bias=b, expected=F.layer_norm(x, [8], g, b, 1e-5),
         expected_2=F.layer_norm(x, [5, 8], None, None, 1e-6))
    seed("group_norm")
    x = rnd(2, 6, 4, 4)
    g, b = rnd(6), rnd(6)
    save("group_norm", input=x, weight=g, bias=b, expected=F.group_norm(x, 3, g, b, 1e-5),
         expected_instance=F.group_norm(x, 6, None, None, 1e-5))
    seed("rms_norm")
    x = rnd(2, 3, 16)
    g = rnd(16)
    eps_f32 = torch.finfo(torch.float32).eps
    # torch 1.13 has no F.rms_norm: Llama's RMSNorm, in float64 then rounded.
    xd = x.double()
    ref = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * g.double()
    ref2 = xd * torch.rsqrt(xd.pow(2).mean((-2, -1), keepdim=True) + eps_f32)
    save("rms_norm", input=x, weight=g, expected=ref.float(), expected_2=ref2.float())


# ---------------------------------------------------------------- embedding

@case
def embedding():
    seed("embedding")
    w = rnd(10, 6)
    i64 = torch.tensor([[0, 9, 3], [3, 3, 7]], dtype=torch.int64)
    i32 = torch.tensor([5, 1, 0, 9], dtype=torch.int32)
    wbf = w.bfloat16()
    save("embedding", weight=w, idx64=i64, idx32=i32, expected64=F.embedding(i64, w),
         expected32=F.embedding(i32.long(), w), weight_bf16=wbf, expected_bf16=F.embedding(i64, wbf.float()))


# ---------------------------------------------------------------- pooling

@case
def pooling():
    seed("pooling")
    x = rnd(2, 3, 9, 10)
    save("pooling", input=x,
         max_a=F.max_pool2d(x, 3, 2, 1),
         max_b=F.max_pool2d(x, (2, 3), (1, 2), 0, ceil_mode=True),
         max_c=F.max_pool2d(x, 3, 1, 1, dilation=2),
         max_d=F.max_pool2d(x, 2, 2, 1, ceil_mode=True),  # H: the last window would start in the padding
         avg_e=F.avg_pool2d(x, 2, 2, 1, ceil_mode=True),
         avg_a=F.avg_pool2d(x, 3, 2, 1),
         avg_b=F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
         avg_c=F.avg_pool2d(x, (3, 2), 2, (1, 1), ceil_mode=True),
         avg_d=F.avg_pool2d(x, 2, divisor_override=5),
         adapt_43=F.adaptive_avg_pool2d(x, (4, 3)), adapt_11=F.adaptive_avg_pool2d(x, 1),
         adapt_75=F.adaptive_avg_pool2d(x, (7, 5)))


# ---------------------------------------------------------------- attention

def sdpa_ref(q, k, v, mask=None, causal=False):
    """torch 2.x's documented reference, evaluated in float64."""
    q, k, v = q.double(), k.double(), v.double()
    L, S = q.size(-2), k.size(-2)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if causal:
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask.double()
    return (torch.softmax(s, -1) @ v).float()


@case
def sdpa():
    seed("sdpa")
    q, k, v = rnd(2, 3, 5, 8), rnd(2, 3, 7, 8), rnd(2, 3, 7, 4)
    bmask = torch.rand(5, 7) > 0.3
    bmask[:, 0] = True  # no query row fully masked
    fmask = rnd(2, 1, 5, 7)
    qs, ks, vs = rnd(2, 6, 8), rnd(2, 6, 8), rnd(2, 6, 8)
    save("sdpa", q=q, k=k, v=v, bmask=bmask, fmask=fmask, plain=sdpa_ref(q, k, v),
         with_bmask=sdpa_ref(q, k, v, bmask), with_fmask=sdpa_ref(q, k, v, fmask),
         causal_rect=sdpa_ref(q, k, v, causal=True),
         qs=qs, ks=ks, vs=vs, causal=sdpa_ref(qs, ks, vs, causal=True))


def mha_save(name, mha, query, key, value, **kw):
    mha.eval()
    with torch.no_grad():
        out, weights = mha(query, key, value, **kw)
        e = mha.embed_dim
        if mha._qkv_same_embed_dim:
            wq, wk, wv = mha.in_proj_weight.chunk(3)
        else:
            wq, wk, wv = mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight
        t = dict(query=query, key=key, value=value, q_weight=wq.t(), k_weight=wk.t(), v_weight=wv.t(),
                 out_weight=mha.out_proj.weight.t(), output=out)
        if mha.in_proj_bias is not None:
            bq, bk, bv = mha.in_proj_bias.chunk(3)
            t.update(q_bias=bq, k_bias=bk, v_bias=bv, out_bias=mha.out_proj.bias)
        if weights is not None:
            t["weights"] = weights
        for k_, v_ in kw.items():
            if isinstance(v_, torch.Tensor):
                t[k_] = v_
        assert e == wq.shape[0]
        save(name, **t)


@case
def mha():
    seed("mha_basic")
    m = torch.nn.MultiheadAttention(8, 2)
    mha_save("mha_basic", m, rnd(4, 3, 8), rnd(6, 3, 8), rnd(6, 3, 8))

    seed("mha_masks")
    m = torch.nn.MultiheadAttention(12, 3, batch_first=True)
    q, kv = rnd(2, 5, 12), rnd(2, 6, 12)
    attn_mask = torch.rand(5, 6) > 0.7  # True = not allowed
    attn_mask[:, 1] = False
    kpm = torch.tensor([[False] * 6, [False, False, False, False, True, True]])
    mha_save("mha_masks", m, q, kv, kv, attn_mask=attn_mask, key_padding_mask=kpm, average_attn_weights=False)

    seed("mha_kdim_float_mask")
    m = torch.nn.MultiheadAttention(8, 4, bias=False, kdim=5, vdim=7)
    mha_save("mha_kdim_float_mask", m, rnd(3, 2, 8), rnd(4, 2, 5), rnd(4, 2, 7),
             attn_mask=rnd(2 * 4, 3, 4))

    seed("mha_unbatched")
    m = torch.nn.MultiheadAttention(6, 2)
    x = rnd(4, 6)
    mha_save("mha_unbatched", m, x, x, x, key_padding_mask=torch.tensor([False, False, True, False]))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rope_tables(positions, dim, base=10000.0):
    """Hugging Face LlamaRotaryEmbedding: cos/sin of [..., positions, dim]."""
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
    freqs = positions.float()[..., None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


@case
def rotary():
    seed("rotary")
    x = rnd(2, 4, 6, 8)
    cos, sin = rope_tables(torch.arange(6), 8)  # [6, 8]
    cos_b, sin_b = rope_tables(torch.tensor([[0, 1, 2, 3, 4, 5], [3, 4, 5, 6, 7, 8]]), 8)
    cos_b, sin_b = cos_b[:, None], sin_b[:, None]  # [2, 1, 6, 8]
    kv = rnd(2, 2, 3, 4)
    n_rep = 3
    rep = kv[:, :, None].expand(2, 2, n_rep, 3, 4).reshape(2, 2 * n_rep, 3, 4)
    save("rotary", x=x, cos=cos, sin=sin, expected=x * cos + rotate_half(x) * sin,
         cos_b=cos_b, sin_b=sin_b, expected_b=x * cos_b + rotate_half(x) * sin_b, kv=kv, repeated=rep)


@case
def llama_attention():
    """A Llama attention block: GQA (4 query heads, 2 kv heads), RoPE, causal."""
    seed("llama_attention")
    n, L, heads, kv_heads, hd = 2, 5, 4, 2, 8
    e = heads * hd
    x = rnd(n, L, e)
    wq, wk, wv, wo = (rnd(e, e) * 0.2, rnd(e, kv_heads * hd) * 0.2, rnd(e, kv_heads * hd) * 0.2,
                      rnd(e, e) * 0.2)  # [in, out]
    cos, sin = rope_tables(torch.arange(L), hd)
    q = (x @ wq).view(n, L, heads, hd).transpose(1, 2)
    k = (x @ wk).view(n, L, kv_heads, hd).transpose(1, 2)
    v = (x @ wv).view(n, L, kv_heads, hd).transpose(1, 2)
    q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    rep = heads // kv_heads
    k = k[:, :, None].expand(n, kv_heads, rep, L, hd).reshape(n, heads, L, hd)
    v = v[:, :, None].expand(n, kv_heads, rep, L, hd).reshape(n, heads, L, hd)
    ctx = sdpa_ref(q, k, v, causal=True)
    out = ctx.transpose(1, 2).reshape(n, L, e) @ wo
    save("llama_attention", x=x, wq=wq, wk=wk, wv=wv, wo=wo, cos=cos, sin=sin, expected=out)


# ---------------------------------------------------------------- LSTM

def lstm_save(name, lstm, x, h0=None, c0=None):
    lstm.eval()
    with torch.no_grad():
        out, (hn, cn) = lstm(x, None if h0 is None else (h0, c0))
        t = dict(input=x, output=out, h_n=hn, c_n=cn)
        if h0 is not None:
            t.update(h0=h0, c0=c0)
        for layer in range(lstm.num_layers):
            for kind in ("ih", "hh"):
                w = getattr(lstm, f"weight_{kind}_l{layer}")
                for gate, chunk in zip("ifgo", w.chunk(4)):
                    t[f"w_{kind}_l{layer}_{gate}"] = chunk.t()  # [in, H]
                if lstm.bias:
                    b = getattr(lstm, f"bias_{kind}_l{layer}")
                    for gate, chunk in zip("ifgo", b.chunk(4)):
                        t[f"b_{kind}_l{layer}_{gate}"] = chunk
        save(name, **t)


@case
def lstm():
    seed("lstm_single")
    lstm_save("lstm_single", torch.nn.LSTM(4, 6), rnd(5, 3, 4))
    seed("lstm_stacked")
    lstm_save("lstm_stacked", torch.nn.LSTM(4, 5, num_layers=2, batch_first=True), rnd(3, 6, 4),
              rnd(2, 3, 5), rnd(2, 3, 5))
    seed("lstm_f64")
    lstm_save("lstm_f64", torch.nn.LSTM(3, 4, num_layers=2).double(), rnd(4, 2, 3, dtype=torch.float64))
    seed("lstm_unbatched_nobias")
    lstm_save("lstm_unbatched_nobias", torch.nn.LSTM(3, 4, num_layers=2, bias=False), rnd(7, 3))


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(1)
    for fn in CASES:
        fn()
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"{len(os.listdir(OUT))} fixtures, {total} bytes in {OUT}")


if __name__ == "__main__":
    main()
