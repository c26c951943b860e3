#pragma once
/// \file
/// Ops that move elements without arithmetic: concat, slice, flatten.
///
/// These keep the input's dtype (any dtype, not only floating). Views that
/// need no copy already exist on `Tensor` (`reshape`, `permute`,
/// `transpose`, `narrow`, `contiguous`); the functions here always return a
/// fresh, owned, contiguous tensor that shares nothing with the input.

#include <cstdint>
#include <limits>
#include <vector>

#include "torchport/core/tensor.hpp"

namespace torchport::nn {

/// torch.cat: joins `tensors` along `dim` (negative counts from the end).
/// All must have the same number of dimensions and the same sizes except at
/// `dim`. Tensors of one dtype keep it; a mix of floating dtypes is promoted
/// (F64 if any is F64, else F32).
/// \throws Error(invalid_argument) for an empty list, an undefined or 0-d
/// tensor, a bad `dim` or a mix of dtypes that is not all floating;
/// Error(shape_mismatch) naming the first shape that does not fit.
Tensor concat(const std::vector<Tensor>& tensors, std::int64_t dim = 0);

/// `x[..., start:end:step, ...]` on dimension `dim`, with Python's rules:
/// negative `start`/`end` count from the end and both are clamped to the
/// size. Returns a copy.
/// \throws Error(invalid_argument) on a bad `dim` or `step <= 0` (torch
/// rejects negative steps as well).
Tensor slice(const Tensor& x, std::int64_t dim, std::int64_t start,
             std::int64_t end = std::numeric_limits<std::int64_t>::max(), std::int64_t step = 1);

/// torch.flatten: merges dimensions `start_dim..end_dim` (inclusive,
/// negative counts from the end) into one. A 0-d input gives shape [1].
/// Returns a copy. \throws Error(invalid_argument) on bad dimensions or
/// `start_dim > end_dim`.
Tensor flatten(const Tensor& x, std::int64_t start_dim = 0, std::int64_t end_dim = -1);

}  // namespace torchport::nn
