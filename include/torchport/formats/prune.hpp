#pragma once
/// \file
/// `prune_tensors`: a value tree with its tensors hidden, the "values" view
/// `torchport inspect` shows (and `TensorCatalog::values()` returns).

#include "torchport/core/value.hpp"

namespace torchport {

/// Lines of Python-like text for a value tree with tensors hidden: dict
/// entries and list items that hold only tensors are dropped. This is what
/// `torchport inspect` shows as "values". Returns None when nothing is left.
/// Each shared node is visited once, so a DAG costs its distinct nodes.
Value prune_tensors(const Value& v);

}  // namespace torchport
