#pragma once
/// \file
/// Attention: scaled dot-product attention, torch.nn.MultiheadAttention's
/// forward, and the rotary-embedding and grouped-query helpers of Llama-style
/// models.
///
/// Common contract (see `torchport/nn/ops.hpp`): floating operands of any
/// dtype and strides (F16/BF16 compute in F32, F64 when any is F64); fresh
/// contiguous results. Dropout is an inference no-op and is not applied.

#include <cstdint>
#include <optional>

#include "torchport/core/tensor.hpp"

namespace torchport::nn {

/// `softmax(q @ k^T * scale + mask) @ v` (torch.nn.functional.
/// scaled_dot_product_attention, torch >= 2.0, without dropout).
///
/// `q` is [..., L, E], `k` [..., S, E], `v` [..., S, Ev]; leading dimensions
/// broadcast; the result is [..., L, Ev]. `scale` defaults to `1/sqrt(E)`.
/// `mask` (undefined for none) broadcasts to [..., L, S]: a BOOL (or U8) mask
/// is **true where attention is allowed** (torch's SDPA convention, the
/// opposite of MultiheadAttention's), a floating mask is added to the scores.
/// `causal` blocks key positions j > i (the top-left aligned lower triangle,
/// as torch); it combines with `mask`. A query row with every key blocked
/// yields NaN, as in torch.
/// \throws Error(shape_mismatch) naming the shapes when E or S differ or the
/// mask does not broadcast; Error(invalid_argument) for operands with fewer
/// than 2 dimensions or a mask of another dtype.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask = Tensor(), bool causal = false,
                                    std::optional<double> scale = std::nullopt);

/// Options and masks of `multi_head_attention` (torch.nn.MultiheadAttention's
/// constructor and forward arguments).
struct MultiheadAttentionOptions {
  std::int64_t num_heads = 1;  ///< must divide the embedding size
  bool batch_first = false;    ///< inputs are [N, L, E] rather than [L, N, E]
  /// [L, S] or [N * num_heads, L, S], or undefined: BOOL (or U8) **true where
  /// attention is not allowed**, or floating, added to the scores.
  Tensor attn_mask{};
  /// [N, S] ([S] for unbatched input), or undefined: BOOL (or U8) true for key
  /// positions to ignore, or floating, added to the scores.
  Tensor key_padding_mask{};
  bool need_weights = true;          ///< also return the attention weights
  bool average_attn_weights = true;  ///< average the returned weights over heads
};

/// What `multi_head_attention` returns.
struct MultiheadAttentionResult {
  Tensor output{};   ///< [L, N, E] ([N, L, E] with batch_first; [L, E] unbatched)
  Tensor weights{};  ///< [N, L, S] averaged or [N, H, L, S] (no N unbatched); undefined unless
                     ///< need_weights
};

/// torch.nn.MultiheadAttention's forward in eval mode, with separate q/k/v
/// projections (an `in_proj_weight` is split in three along its first
/// dimension first) and no `bias_k`/`bias_v`/`add_zero_attn`.
///
/// Layout: every weight is **[in, out]**, as for `linear` (torch's
/// [out, in] transposed): `q_weight` [E_q, E], `k_weight` [kdim, E],
/// `v_weight` [vdim, E], `out_weight` [E, E]. Biases are [E] or undefined.
/// `query` is [L, N, E_q] (or [N, L, E_q] with batch_first, or [L, E_q]
/// unbatched), `key` [S, N, kdim] and `value` [S, N, vdim] likewise.
/// Scores are `q k^T / sqrt(E / num_heads)` plus the masks; a query row
/// whose keys are all masked yields NaN, as in torch.
/// \throws Error(shape_mismatch) naming the shapes when the inputs, weights
/// or masks disagree; Error(invalid_argument) when num_heads does not divide
/// E, a rank is wrong, or a mask's dtype is neither boolean nor floating.
MultiheadAttentionResult multi_head_attention(const Tensor& query, const Tensor& key,
                                              const Tensor& value, const Tensor& q_weight,
                                              const Tensor& k_weight, const Tensor& v_weight,
                                              const Tensor& q_bias, const Tensor& k_bias,
                                              const Tensor& v_bias, const Tensor& out_weight,
                                              const Tensor& out_bias,
                                              const MultiheadAttentionOptions& options);

/// Rotary position embedding in the Llama / GPT-NeoX "rotate_half"
/// convention: `x * cos + rotate_half(x) * sin` where `rotate_half(x)` is
/// `concat(-x[..., D/2:], x[..., :D/2])`. `x` is [..., D] with D even (e.g.
/// [N, H, L, D]); `cos` and `sin` broadcast to `x`'s shape (e.g. [L, D] or
/// [N, 1, L, D], as Hugging Face's `LlamaRotaryEmbedding` makes them).
/// \throws Error(invalid_argument) when D is odd or x is 0-d;
/// Error(shape_mismatch) when cos or sin do not broadcast to x.
Tensor apply_rotary(const Tensor& x, const Tensor& cos, const Tensor& sin);

/// Repeats each key/value head `n_rep` times for grouped-query attention:
/// [N, H_kv, S, D] to [N, H_kv * n_rep, S, D], head `h` becoming heads
/// `h*n_rep .. h*n_rep + n_rep - 1` (Hugging Face's `repeat_kv`). Keeps the
/// dtype (any dtype).
/// \throws Error(invalid_argument) when `x` is not 4-d or `n_rep < 1`.
Tensor repeat_kv(const Tensor& x, std::int64_t n_rep);

}  // namespace torchport::nn
