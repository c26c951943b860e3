#pragma once
/// \file
/// Embedding lookup.

#include "torchport/core/tensor.hpp"

namespace torchport::nn {

/// Rows of `weight` ([num_embeddings, dim]) picked by `indices` (an I64 or
/// I32 tensor of any shape, any strides): the result has shape
/// `indices.shape() + [dim]`, F32 (F64 for an F64 weight). Only the rows
/// used are converted, so an F16/BF16 table is never widened as a whole.
/// (torch's `padding_idx` only affects training: its row is returned as is.)
/// \throws Error(invalid_argument) when an index is negative or not below
/// num_embeddings (naming the index, its position and the table size), when
/// `indices` is not I64/I32, or `weight` is not a 2-d floating tensor.
Tensor embedding(const Tensor& indices, const Tensor& weight);

}  // namespace torchport::nn
