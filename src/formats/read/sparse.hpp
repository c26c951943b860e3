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
#include <optional>
#include <string_view>

#include "torchport/core/tensor.hpp"
#include "torchport/core/value.hpp"

namespace torchport::formats::sparse {

/// The sparse tensor `_rebuild_sparse_tensor(args)` describes; `inner`
/// turns nested values (the index and value tensors) into what they stand for.
/// Validated as torch.load validates it (SparseParts::validate).
/// \throws Error(corrupt) for malformed arguments or parts that break
/// torch's invariants, Error(unsupported) for other layouts.
Tensor rebuild(const Value& args, const std::function<Value(const Value&)>& inner);

/// SparseParts::validate, its refusal saying which torch releases refuse
/// the tensor too (`who`).
void validated(const SparseParts& parts, bool is_coalesced, std::string_view who);

/// `torch.sparse.FloatTensor(indices, values, size)` (and the other
/// classes of torch.sparse and torch.cuda.sparse): the legacy constructor,
/// which torch's weights_only list allows and torch never writes. A COO
/// tensor of the values' dtype, validated as torch >= 2.7 validates it;
/// nothing for any other global.
/// \throws Error(corrupt) for invalid parts, Error(unsupported) for the
/// constructor's other forms.
std::optional<Tensor> legacy_constructor(const Global& g, const Value& args,
                                         const std::function<Value(const Value&)>& inner);

}  // namespace torchport::formats::sparse
