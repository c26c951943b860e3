#pragma once
/// \file
/// Reductions (sum, mean, max, var, argmax) and softmax over dimensions.
///
/// Common contract (see `torchport/nn/ops.hpp`): any floating dtype and any
/// strides in; F16/BF16 compute in F32; results are fresh contiguous F32
/// (F64 for F64 input) tensors. Sums accumulate in double, so long F32
/// reductions are at least as accurate as torch's.
///
/// `dims` lists the dimensions to reduce (negative counts from the end);
/// an empty list reduces every dimension (as torch's `dim=[]`). With
/// `keepdim` the reduced dimensions stay with size 1, else they are removed.
/// \throws Error(invalid_argument) on a dimension out of range, a repeated
/// dimension, or a non-floating input.

#include <cstdint>
#include <optional>

#include "torchport/core/tensor.hpp"
#include "torchport/nn/types.hpp"

namespace torchport::nn {

/// Sum over `dims` (torch.sum). An empty reduction is 0.
Tensor sum(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
/// Mean over `dims` (torch.mean). An empty reduction is NaN.
Tensor mean(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
/// Largest value over `dims` (torch.amax; NaN wins, as in torch).
/// \throws Error(invalid_argument) when a reduced dimension is empty.
Tensor max(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
/// Variance over `dims` (torch.var): divides by N - 1 when `unbiased`
/// (Bessel's correction), else by N; N - 1 = 0 gives inf or NaN, as torch.
Tensor var(const Tensor& x, const Dims& dims = {}, bool unbiased = true, bool keepdim = false);
/// Index of the largest value along `dim` as an I64 tensor (torch.argmax):
/// the first one on ties, the first NaN if any. Without `dim` the input is
/// flattened and the result is 0-d (all dimensions of size 1 with `keepdim`).
/// \throws Error(invalid_argument) when the reduced dimension is empty.
Tensor argmax(const Tensor& x, std::optional<std::int64_t> dim = std::nullopt,
              bool keepdim = false);

/// Softmax along `dim`, computed stably (the maximum is subtracted first).
/// A slice of all -inf gives NaN, as in torch.
Tensor softmax(const Tensor& x, std::int64_t dim);
/// `log(softmax(x))` along `dim`, computed as `x - max - log(sum(exp(x - max)))`.
Tensor log_softmax(const Tensor& x, std::int64_t dim);

}  // namespace torchport::nn
