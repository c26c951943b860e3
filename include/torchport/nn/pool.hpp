#pragma once
/// \file
/// 2-d pooling: max, average and adaptive average.
///
/// Common contract (see `torchport/nn/ops.hpp`): `x` is [N, C, H, W] or
/// [C, H, W], any floating dtype and strides (F16/BF16 compute in F32); the
/// result is a fresh contiguous F32 (F64 for F64 input) tensor of the same rank.
/// Output sizes follow torch: `(H + 2*padding - dilation*(k - 1) - 1) /
/// stride + 1`, rounded down, or up with `ceil_mode` (a last window that
/// would start inside the right padding is dropped).
/// \throws Error(invalid_argument) on a bad rank, a non-positive kernel,
/// stride or dilation, a padding larger than half the kernel, or an empty
/// output (naming the shapes).

#include <cstdint>
#include <optional>

#include "torchport/core/tensor.hpp"
#include "torchport/nn/types.hpp"

namespace torchport::nn {

/// Options of `max_pool2d` (torch.nn.functional.max_pool2d's).
struct MaxPool2dOptions {
  std::optional<Int2> stride{};  ///< default: the kernel size
  Int2 padding = 0;              ///< implicit -inf padding, at most half the kernel
  Int2 dilation = 1;             ///< spacing between window elements
  bool ceil_mode = false;        ///< round output sizes up instead of down
};
/// Maximum over each window (NaN wins, as in torch).
Tensor max_pool2d(const Tensor& x, Int2 kernel_size, const MaxPool2dOptions& options = {});

/// Options of `avg_pool2d` (torch.nn.functional.avg_pool2d's).
struct AvgPool2dOptions {
  std::optional<Int2> stride{};   ///< default: the kernel size
  Int2 padding = 0;               ///< implicit zero padding, at most half the kernel
  bool ceil_mode = false;         ///< round output sizes up instead of down
  bool count_include_pad = true;  ///< count padded zeros in the divisor
  std::optional<std::int64_t> divisor_override{};  ///< divide by this instead (non-zero)
};
/// Mean over each window. Following torch, the divisor counts padding (when
/// `count_include_pad`) but never the part of a `ceil_mode` window beyond it.
Tensor avg_pool2d(const Tensor& x, Int2 kernel_size, const AvgPool2dOptions& options = {});

/// Mean over `output_size` adaptive windows: output row `i` covers input
/// rows `floor(i*H/out_h)` to `ceil((i+1)*H/out_h)` (exclusive), as torch.
/// \throws Error(invalid_argument) when an output size is < 1 or the input
/// has an empty spatial dimension.
Tensor adaptive_avg_pool2d(const Tensor& x, Int2 output_size);

}  // namespace torchport::nn
