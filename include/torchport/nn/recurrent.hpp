#pragma once
/// \file
/// Recurrent layers' forward passes: a (stacked) LSTM.

#include <array>
#include <span>

#include "torchport/core/tensor.hpp"

namespace torchport::nn {

/// The parameters of one LSTM layer, one tensor per gate in torch's order
/// (input i, forget f, cell g, output o): an argument bundle for `lstm()`,
/// holding no state.
///
/// Layout: weights are **[in, out]** like `linear`'s, so gate `k` of
/// `w_ih` is chunk `k` of torch's `weight_ih_l{n}` ([4H, in]) transposed:
/// `w_ih[k]` is [input_size, H] (the previous layer's H for layers above
/// the first) and `w_hh[k]` is [H, H]. Biases are [H] per gate; an
/// undefined bias counts as zero (torch's `bias=False`).
struct LstmLayerWeights {
  std::array<Tensor, 4> w_ih{};  ///< input-to-hidden, [in, H] per gate i, f, g, o
  std::array<Tensor, 4> w_hh{};  ///< hidden-to-hidden, [H, H] per gate
  std::array<Tensor, 4> b_ih{};  ///< [H] per gate, or undefined
  std::array<Tensor, 4> b_hh{};  ///< [H] per gate, or undefined
};

/// Options of `lstm`.
struct LstmOptions {
  bool batch_first = false;  ///< input and output are [N, T, *] rather than [T, N, *]
  Tensor h0{};               ///< [layers, N, H] ([layers, H] unbatched); undefined = zeros
  Tensor c0{};               ///< like h0
};

/// What `lstm` returns (torch's `output, (h_n, c_n)`).
struct LstmResult {
  Tensor output{};  ///< the last layer's h at every step: [T, N, H] ([N, T, H] batch_first, [T, H]
                    ///< unbatched)
  Tensor h_n{};     ///< every layer's final h: [layers, N, H] ([layers, H] unbatched)
  Tensor c_n{};     ///< every layer's final cell state, like h_n
};

/// torch.nn.LSTM's forward in eval mode (unidirectional, no projection;
/// inter-layer dropout is an inference no-op), one layer per entry of
/// `layers`, each feeding the next:
/// `i = σ(x W_ii + b_ii + h W_hi + b_hi)`, likewise f and o, `g = tanh(...)`,
/// `c' = f c + i g`, `h' = o tanh(c')`.
/// `input` is [T, N, input_size] ([N, T, input_size] with batch_first) or
/// [T, input_size] unbatched. Each layer's input projection is one gemm
/// over all steps; each step is one gemm of the hidden state.
/// \throws Error(invalid_argument) for no layers, a bad rank, or layers of
/// different hidden sizes; Error(shape_mismatch) naming the layer, gate and
/// shapes when a weight, bias, h0 or c0 does not fit.
LstmResult lstm(const Tensor& input, std::span<const LstmLayerWeights> layers,
                const LstmOptions& options = {});

}  // namespace torchport::nn
