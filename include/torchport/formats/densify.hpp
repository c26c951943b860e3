#pragma once
/// \file
/// Sparse tensors on their way to formats without sparse layouts
/// (safetensors, torchport records): refused, or written dense; and meta
/// tensors (no data) on their way to formats that only store data: refused.

#include <string_view>

#include "torchport/formats/catalog.hpp"

namespace torchport {

/// `catalog` with every sparse tensor replaced by its `to_dense()`; other
/// tensors as they are. The result's root is a flat dict of the tensors.
TensorCatalog densify_tensors(const TensorCatalog& catalog);

/// \throws Error(invalid_argument) naming the first sparse tensor of
/// `catalog` and the option `--densify` when there is one; `target` names
/// the output format ("safetensors").
void refuse_sparse(const TensorCatalog& catalog, std::string_view target);

/// \throws Error(invalid_argument) naming the first meta tensor of `catalog`
/// (dtype and shape, no data) when there is one: `target` ("safetensors")
/// stores data only. A `.pt` file keeps meta tensors as torch saves them.
void refuse_meta(const TensorCatalog& catalog, std::string_view target);

}  // namespace torchport
