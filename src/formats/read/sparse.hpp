#pragma once
// Sparse tensors in torch pickles (torch/_tensor.py `_reduce_ex_internal`,
// torch/_utils.py `_rebuild_sparse_tensor`):
//
//   _rebuild_sparse_tensor(layout, data)
//   layout: torch.serialization._get_layout('torch.sparse_coo') (torch 1.x),
//           or the global torch.sparse_coo
//   data:   COO (indices, values, size[, is_coalesced]);
//           CSR, CSC, BSR, BSC (compressed_indices, plain_indices, values, size)

#include <functional>

#include "torchport/core/tensor.hpp"
#include "torchport/core/value.hpp"

namespace torchport::formats::sparse {

/// The sparse tensor `_rebuild_sparse_tensor(args)` describes; `inner`
/// turns nested values (the index and value tensors) into what they stand for.
/// \throws Error(corrupt) for malformed arguments, Error(unsupported) for other layouts.
Tensor rebuild(const Value& args, const std::function<Value(const Value&)>& inner);

}  // namespace torchport::formats::sparse
