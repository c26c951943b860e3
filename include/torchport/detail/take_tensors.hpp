#pragma once
/// \file
/// A state dict's tree taken apart as it is read (internal).

#include <functional>
#include <string>

#include "torchport/core/tensor.hpp"
#include "torchport/core/value.hpp"

namespace torchport::detail {

/// When `root` is the only handle on a dict whose keys are all strings and
/// whose values are all plain tensors, each reached once (a state dict as
/// torch saves it): calls `take(key, tensor)` for every pair in order, the
/// key's string and the tensor moved out, and frees each pair's nodes as it
/// goes, so that the tree and what is made of it are never both whole;
/// `root` is None after, `ordered` says whether it was an OrderedDict, and
/// `Value::dict` (or `ordered_dict`) of the pairs taken makes it again.
/// Returns false, and touches nothing, for any other value. Should `take`
/// throw, `root` is left partly taken: the caller drops it.
bool take_tensor_dict(Value& root, bool& ordered,
                      const std::function<void(std::string&&, Tensor&&)>& take);

}  // namespace torchport::detail
