#pragma once
/// \file
/// Convolutions and transposed convolutions, 1-d and 2-d.
///
/// Common contract (see `torchport/nn/ops.hpp`): any floating dtype and any
/// strides in (F16/BF16 compute in F32, F64 in F64); a fresh contiguous
/// tensor out. Weights use torch's layouts. The input may be batched
/// ([N, C, ...]) or unbatched ([C, ...], as torch accepts; the result is then
/// unbatched too). `bias` is undefined for none.
///
/// Errors: Error(invalid_argument) for a bad rank, a non-positive stride,
/// dilation or group count, a negative padding, or an output_padding that
/// is not smaller than the stride or the dilation; Error(shape_mismatch),
/// naming the shapes, when channels do not match the weight and groups, the
/// bias does not have one value per output channel, or the (padded) input is
/// smaller than the (dilated) kernel.

#include <cstdint>

#include "torchport/core/tensor.hpp"
#include "torchport/nn/types.hpp"

namespace torchport::nn {

/// Hyper-parameters of `conv2d` (torch.nn.functional.conv2d's), per
/// dimension (height, width); one int sets both.
struct Conv2dOptions {
  Int2 stride = 1;          ///< step between output positions, >= 1
  Int2 padding = 0;         ///< zeros added on both sides, >= 0
  Int2 dilation = 1;        ///< spacing between kernel taps, >= 1
  std::int64_t groups = 1;  ///< channel groups; in_channels for depthwise
};

/// 2-d convolution (cross-correlation, as torch). `x` is [N, C_in, H, W] or
/// [C_in, H, W]; `weight` [C_out, C_in / groups, kH, kW]; `bias` [C_out].
/// The result is [N, C_out, H_out, W_out] with
/// `H_out = (H + 2*padding - dilation*(kH - 1) - 1) / stride + 1`.
/// Computed by im2col and one gemm per image and group (1x1 kernels with
/// stride 1 and no padding skip im2col); grouped convolutions with one input
/// channel per group (depthwise) use a direct loop.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const Conv2dOptions& options = {});

/// Hyper-parameters of `conv1d`.
struct Conv1dOptions {
  std::int64_t stride = 1;    ///< >= 1
  std::int64_t padding = 0;   ///< >= 0
  std::int64_t dilation = 1;  ///< >= 1
  std::int64_t groups = 1;    ///< >= 1
};

/// 1-d convolution: `x` [N, C_in, L] or [C_in, L]; `weight` [C_out,
/// C_in / groups, k]; `bias` [C_out]. Computed as `conv2d` of height 1.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const Conv1dOptions& options = {});

/// Hyper-parameters of `conv_transpose2d`.
struct ConvTranspose2dOptions {
  Int2 stride = 1;          ///< >= 1
  Int2 padding = 0;         ///< removed from both sides of the full output, >= 0
  Int2 output_padding = 0;  ///< extra rows/columns on one side; < stride or < dilation
  Int2 dilation = 1;        ///< >= 1
  std::int64_t groups = 1;  ///< >= 1
};

/// 2-d transposed convolution (the gradient of conv2d with respect to its
/// input). `x` is [N, C_in, H, W] or [C_in, H, W]; `weight` is
/// [C_in, C_out / groups, kH, kW] (torch's ConvTranspose layout); `bias`
/// [C_out]. `H_out = (H - 1)*stride - 2*padding + dilation*(kH - 1) +
/// output_padding + 1`. Computed as one gemm per image and group followed
/// by col2im.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        const ConvTranspose2dOptions& options = {});

/// Hyper-parameters of `conv_transpose1d`.
struct ConvTranspose1dOptions {
  std::int64_t stride = 1;          ///< >= 1
  std::int64_t padding = 0;         ///< >= 0
  std::int64_t output_padding = 0;  ///< < stride or < dilation
  std::int64_t dilation = 1;        ///< >= 1
  std::int64_t groups = 1;          ///< >= 1
};

/// 1-d transposed convolution: `x` [N, C_in, L] or [C_in, L]; `weight`
/// [C_in, C_out / groups, k]; `bias` [C_out]. Computed as `conv_transpose2d`
/// of height 1.
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        const ConvTranspose1dOptions& options = {});

}  // namespace torchport::nn
