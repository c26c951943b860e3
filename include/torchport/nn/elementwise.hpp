#pragma once
/// \file
/// Elementwise arithmetic with PyTorch broadcasting.
///
/// Common contract (see `torchport/nn/ops.hpp`): inputs may be any floating
/// dtype and any strides; F16/BF16 compute in F32; the result is a fresh,
/// owned, contiguous F32 tensor, or F64 when an operand is F64.

#include "torchport/core/tensor.hpp"

namespace torchport::nn {

/// `a + b` with broadcasting (torch.add). \throws Error(shape_mismatch) when
/// the shapes do not broadcast; Error(invalid_argument) on a non-floating operand.
Tensor add(const Tensor& a, const Tensor& b);
/// `a - b` with broadcasting (torch.sub). Errors as `add`.
Tensor sub(const Tensor& a, const Tensor& b);
/// `a * b` with broadcasting (torch.mul). Errors as `add`.
Tensor mul(const Tensor& a, const Tensor& b);
/// `a / b` with broadcasting (torch.div, true division: x/0 is ±inf or NaN). Errors as `add`.
Tensor div(const Tensor& a, const Tensor& b);

/// `a + s`; `s` is rounded to the compute dtype first, as torch does.
/// \throws Error(invalid_argument) on a non-floating `a`.
Tensor add(const Tensor& a, double s);
/// `a - s`. Errors as `add(a, s)`.
Tensor sub(const Tensor& a, double s);
/// `a * s`. Errors as `add(a, s)`.
Tensor mul(const Tensor& a, double s);
/// `a / s`. Errors as `add(a, s)`.
Tensor div(const Tensor& a, double s);

/// `-x`. \throws Error(invalid_argument) on a non-floating `x` (all unary ops below too).
Tensor neg(const Tensor& x);
/// `e^x`.
Tensor exp(const Tensor& x);
/// Natural logarithm (NaN below 0, -inf at 0).
Tensor log(const Tensor& x);
/// Square root (NaN below 0).
Tensor sqrt(const Tensor& x);
/// `1 / sqrt(x)` (inf at 0, NaN below 0).
Tensor rsqrt(const Tensor& x);
/// `x ^ exponent` (torch.pow with a scalar exponent).
Tensor pow(const Tensor& x, double exponent);

}  // namespace torchport::nn
