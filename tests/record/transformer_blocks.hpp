#pragma once
// A GPT-2 decoder block and a Llama decoder block as torchport records, built
// from the nn modules and ops, with Hugging Face's state_dict() names (the
// reference implementations are tests/record/cases/gpt2_block.py and
// llama_block.py).

#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "torchport/core/error.hpp"
#include "torchport/nn/modules.hpp"
#include "torchport/nn/ops.hpp"
#include "torchport/record/fields.hpp"

namespace transformer_blocks {

using namespace torchport;

/// `[b, t, h, d]` viewed as `[b, h, t, d]` (no copy).
inline Tensor heads_first(const Tensor& x) {
  const Shape order{0, 2, 1, 3};
  return x.permute(order);
}

/// `[b, h, t, d]` back to a contiguous `[b, t, h * d]`.
inline Tensor merge_heads(const Tensor& x) {
  const Shape order{0, 2, 1, 3};
  return x.permute(order).contiguous().reshape({x.size(0), x.size(2), x.size(1) * x.size(3)});
}

// --- GPT-2 ----------------------------------------------------------------------

/// GPT-2's Conv1D: `y = x W + b` with W stored **[in, out]**. That is already
/// torchport's Linear layout, so this record has no kind: the PyTorch adapter
/// passes it through as the file has it. (Declaring the field as nn::Linear
/// would make the adapter transpose it as if it were torch's [out, in], and
/// the shape check would refuse it.)
struct Conv1D {
  Tensor weight;  ///< [in, out]
  Tensor bias;    ///< [out]
  TORCHPORT_FIELDS(weight, bias)

  Conv1D() = default;
  Conv1D(std::int64_t in, std::int64_t out)
      : weight(Tensor::zeros(DType::F32, {in, out})), bias(Tensor::zeros(DType::F32, {out})) {}
  Tensor forward(const Tensor& x) const { return nn::linear(x, weight, bias); }
};

/// GPT2Attention: one fused projection to q, k, v, causal attention, c_proj.
struct Gpt2Attention {
  /// The causal mask GPT-2 checkpoints carry ("h.<i>.attn.bias"): BOOL
  /// [1, 1, n_ctx, n_ctx], true where a query may attend to a key (torch's
  /// SDPA convention too). Absent: causal attention without it.
  std::optional<Tensor> bias;
  Conv1D c_attn;  ///< [n_embd, 3 * n_embd]: q, k, v side by side
  Conv1D c_proj;
  std::int64_t n_head = 1;
  TORCHPORT_FIELDS(bias, c_attn, c_proj)

  /// `x` [b, t, n_embd] -> [b, t, n_embd].
  Tensor forward(const Tensor& x) const {
    const std::int64_t b = x.size(0), t = x.size(1), e = x.size(2), d = e / n_head;
    // The fused output [b, t, 3 * e] is [b, t, 3, h, d]: one copy reorders it
    // to [3, b, h, t, d], whose three slabs are q, k and v.
    const Shape order{2, 0, 3, 1, 4};
    const Tensor qkv = c_attn.forward(x).reshape({b, t, 3, n_head, d}).permute(order).contiguous();
    const auto part = [&](std::int64_t i) {
      return qkv.narrow(0, i, 1).reshape({b, n_head, t, d});
    };
    Tensor mask;
    if (bias) {
      if (t > bias->size(2))
        throw Error(ErrorCode::shape_mismatch, "sequence of " + std::to_string(t) +
                                                   " tokens is longer than n_ctx " +
                                                   std::to_string(bias->size(2)));
      mask = bias->narrow(2, 0, t).narrow(3, 0, t);
    }
    const Tensor a =
        nn::scaled_dot_product_attention(part(0), part(1), part(2), mask, /*causal*/ !bias);
    return c_proj.forward(merge_heads(a));
  }
};

/// GPT2MLP: c_fc, tanh-approximated GELU ("gelu_new"), c_proj.
struct Gpt2Mlp {
  Conv1D c_fc, c_proj;
  TORCHPORT_FIELDS(c_fc, c_proj)
  Tensor forward(const Tensor& x) const {
    return c_proj.forward(nn::gelu(c_fc.forward(x), nn::GeluApproximation::tanh));
  }
};

/// GPT2Block: pre-norm attention and MLP with residuals.
struct Gpt2Block {
  nn::LayerNorm ln_1;
  Gpt2Attention attn;
  nn::LayerNorm ln_2;
  Gpt2Mlp mlp;
  TORCHPORT_FIELDS(ln_1, attn, ln_2, mlp)

  /// Zero parameters of GPT-2's shapes (so a load checks every shape).
  static Gpt2Block make(std::int64_t n_embd, std::int64_t n_head, std::int64_t n_ctx,
                        double eps = 1e-5) {
    Gpt2Block blk;
    blk.ln_1 = nn::LayerNorm({n_embd}, eps);
    blk.ln_2 = nn::LayerNorm({n_embd}, eps);
    blk.attn.bias = Tensor::zeros(DType::BOOL, {1, 1, n_ctx, n_ctx});
    blk.attn.c_attn = Conv1D(n_embd, 3 * n_embd);
    blk.attn.c_proj = Conv1D(n_embd, n_embd);
    blk.attn.n_head = n_head;
    blk.mlp = Gpt2Mlp{Conv1D(n_embd, 4 * n_embd), Conv1D(4 * n_embd, n_embd)};
    return blk;
  }

  /// `x` [b, t, n_embd] -> the block's output and the attention sublayer's.
  std::pair<Tensor, Tensor> forward(const Tensor& x) const {
    const Tensor a = attn.forward(ln_1.forward(x));
    const Tensor h = nn::add(x, a);
    return {nn::add(h, mlp.forward(ln_2.forward(h))), a};
  }
};

// --- Llama ----------------------------------------------------------------------

/// LlamaRotaryEmbedding's tables for `positions` (integers, [b, t]):
/// cos and sin [b, 1, t, head_dim], with the inverse frequencies
/// `theta^(-2i/head_dim)` and the angles computed in f32, as Hugging Face does.
inline std::pair<Tensor, Tensor> rotary_tables(const Tensor& positions, std::int64_t head_dim,
                                               double theta) {
  const Tensor pos = positions.to(DType::I64);
  const std::int64_t b = pos.size(0), t = pos.size(1), half = head_dim / 2;
  std::vector<float> inv(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i)
    inv[static_cast<std::size_t>(i)] =
        1.0f / std::pow(static_cast<float>(theta),
                        static_cast<float>(2 * i) / static_cast<float>(head_dim));
  std::vector<float> c(static_cast<std::size_t>(b * t * head_dim)), s(c.size());
  const auto p = pos.span<std::int64_t>();
  for (std::int64_t r = 0; r < b * t; ++r)
    for (std::int64_t j = 0; j < head_dim; ++j) {  // cat(freqs, freqs)
      const float angle = static_cast<float>(p[static_cast<std::size_t>(r)]) *
                          inv[static_cast<std::size_t>(j % half)];
      c[static_cast<std::size_t>(r * head_dim + j)] = std::cos(angle);
      s[static_cast<std::size_t>(r * head_dim + j)] = std::sin(angle);
    }
  return {Tensor::from(std::span<const float>(c), {b, 1, t, head_dim}),
          Tensor::from(std::span<const float>(s), {b, 1, t, head_dim})};
}

/// LlamaAttention: q/k/v/o projections without bias, rotary embeddings on q
/// and k, grouped-query attention (each of the `n_kv_heads` key/value heads
/// serves `n_heads / n_kv_heads` query heads), causal.
struct LlamaAttention {
  nn::Linear q_proj, k_proj, v_proj, o_proj;
  std::int64_t n_heads = 1, n_kv_heads = 1;
  double rope_theta = 10000.0;
  TORCHPORT_FIELDS(q_proj, k_proj, v_proj, o_proj)

  /// `x` [b, t, hidden], `positions` [b, t] -> [b, t, hidden].
  Tensor forward(const Tensor& x, const Tensor& positions) const {
    const std::int64_t b = x.size(0), t = x.size(1);
    const std::int64_t d = q_proj.weight.size(1) / n_heads;
    const auto [cos, sin] = rotary_tables(positions, d, rope_theta);
    const Tensor q =
        nn::apply_rotary(heads_first(q_proj.forward(x).reshape({b, t, n_heads, d})), cos, sin);
    const Tensor k =
        nn::apply_rotary(heads_first(k_proj.forward(x).reshape({b, t, n_kv_heads, d})), cos, sin);
    const Tensor v = heads_first(v_proj.forward(x).reshape({b, t, n_kv_heads, d}));
    const std::int64_t rep = n_heads / n_kv_heads;
    const Tensor a = nn::scaled_dot_product_attention(
        q, nn::repeat_kv(k, rep), nn::repeat_kv(v, rep), Tensor(), /*causal*/ true);
    return o_proj.forward(merge_heads(a));
  }
};

/// LlamaMLP (SwiGLU): `down(silu(gate(x)) * up(x))`.
struct LlamaMlp {
  nn::Linear gate_proj, up_proj, down_proj;
  TORCHPORT_FIELDS(gate_proj, up_proj, down_proj)
  Tensor forward(const Tensor& x) const {
    return down_proj.forward(nn::mul(nn::silu(gate_proj.forward(x)), up_proj.forward(x)));
  }
};

/// LlamaDecoderLayer: RMSNorm, attention, residual; RMSNorm, MLP, residual.
struct LlamaBlock {
  nn::RMSNorm input_layernorm;
  LlamaAttention self_attn;
  nn::RMSNorm post_attention_layernorm;
  LlamaMlp mlp;
  TORCHPORT_FIELDS(input_layernorm, self_attn, post_attention_layernorm, mlp)

  /// Zero parameters of Llama's shapes in `dtype` (a load converts the
  /// file's weights to it).
  static LlamaBlock make(std::int64_t hidden, std::int64_t n_heads, std::int64_t n_kv_heads,
                         std::int64_t intermediate, double rms_eps, double rope_theta,
                         DType dtype = DType::F32) {
    if (n_heads % n_kv_heads != 0 || hidden % n_heads != 0)
      throw Error(ErrorCode::invalid_argument,
                  "n_kv_heads must divide n_heads, and n_heads the hidden size");
    const std::int64_t d = hidden / n_heads;
    LlamaBlock blk;
    blk.input_layernorm = nn::RMSNorm({hidden}, rms_eps, true, dtype);
    blk.post_attention_layernorm = nn::RMSNorm({hidden}, rms_eps, true, dtype);
    blk.self_attn.q_proj = nn::Linear(hidden, n_heads * d, false, dtype);
    blk.self_attn.k_proj = nn::Linear(hidden, n_kv_heads * d, false, dtype);
    blk.self_attn.v_proj = nn::Linear(hidden, n_kv_heads * d, false, dtype);
    blk.self_attn.o_proj = nn::Linear(n_heads * d, hidden, false, dtype);
    blk.self_attn.n_heads = n_heads;
    blk.self_attn.n_kv_heads = n_kv_heads;
    blk.self_attn.rope_theta = rope_theta;
    blk.mlp = LlamaMlp{nn::Linear(hidden, intermediate, false, dtype),
                       nn::Linear(hidden, intermediate, false, dtype),
                       nn::Linear(intermediate, hidden, false, dtype)};
    return blk;
  }

  /// `x` [b, t, hidden], `positions` [b, t] -> the block's output and the
  /// attention sublayer's.
  std::pair<Tensor, Tensor> forward(const Tensor& x, const Tensor& positions) const {
    const Tensor a = self_attn.forward(input_layernorm.forward(x), positions);
    const Tensor h = nn::add(x, a);
    return {nn::add(h, mlp.forward(post_attention_layernorm.forward(h))), a};
  }
};

}  // namespace transformer_blocks
