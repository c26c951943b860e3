#pragma once
/// \file
/// `prune_tensors`: a value tree with its tensors hidden, the "values" view
/// `torchport inspect` shows (and `TensorCatalog::values()` returns).

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "torchport/core/value.hpp"

namespace torchport {

/// Lines of Python-like text for a value tree with tensors hidden: dict
/// entries and list items that hold only tensors are dropped. This is what
/// `torchport inspect` shows as "values". Returns None when nothing is left.
/// Each shared node is visited once, so a DAG costs its distinct nodes.
Value prune_tensors(const Value& v);

/// The values a file of tensors alone (safetensors) would drop.
struct DroppedValues {
  std::size_t count = 0;           ///< all of them
  std::vector<std::string> first;  ///< the first five: "name (repr)", "name (a numpy array)"
  /// The first ones, comma-separated, with ", ..." when there are more.
  std::string names() const;
};

/// The values (not tensors) of `root` a tensor file would drop, named as
/// the catalogue names keys: scalars, strings, objects and numpy arrays
/// (which torch.load gives back as arrays, not tensors), each container's
/// leaves. None and empty containers hold nothing to lose, and a pickled
/// torch.nn module's attributes (its class's configuration, which no tensor
/// file holds) are not counted: its tensors are the catalogue. Names `keep`
/// rejects are left out (the user dropped them); empty keeps all.
/// Nothing is dropped silently: `convert` refuses, or keeps the whole tree.
DroppedValues dropped_values(const Value& root,
                             const std::function<bool(std::string_view)>& keep = {});

}  // namespace torchport
