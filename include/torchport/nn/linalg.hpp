#pragma once
/// \file
/// Matrix products on OpenBLAS: `matmul` and `linear`.

#include "torchport/core/tensor.hpp"

namespace torchport::nn {

/// torch.matmul: 1-d·1-d is a dot product (0-d result); 2-d·2-d a matrix
/// product; a 1-d first operand is treated as a row [1, k] and a 1-d second
/// operand as a column [k, 1], the added dimension removed from the result;
/// with more dimensions the leading (batch) dimensions broadcast.
///
/// Operands may be strided views: a matrix whose last two dimensions are
/// row- or column-major (e.g. `k.transpose(-2, -1)`) is passed to BLAS
/// without a copy. F16/BF16 operands compute in F32, F64 in F64
/// (`cblas_sgemm` / `cblas_dgemm`).
/// \throws Error(shape_mismatch) when the inner sizes differ or the batch
/// dimensions do not broadcast; Error(invalid_argument) for a 0-d or
/// non-floating operand; Error(limit_exceeded) when a size exceeds BLAS's
/// 32-bit integers.
Tensor matmul(const Tensor& a, const Tensor& b);

/// A fully connected layer: `y = x @ weight + bias`.
///
/// Layout: `weight` is **[in_features, out_features]** (torchport's layout;
/// torch's `nn.Linear.weight` is [out, in], so pass its transpose — a
/// transposed view is used without copying). `x` is [..., in_features]
/// (1-d allowed), the result [..., out_features]. `bias` is [out_features]
/// or undefined for none.
/// \throws Error(shape_mismatch) naming the shapes when `x`'s last size is not
/// `in_features` or `bias` does not have `out_features` elements;
/// Error(invalid_argument) when `weight` is not 2-d or an operand is not floating.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace torchport::nn
