#pragma once
// The report's suggestions (suggest.cpp; internal to src/record).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "torchport/record/load.hpp"

namespace torchport::detail {

/// The unused keys closest to a missing field's path (at most three).
std::vector<std::string> suggestions(const std::string& path,
                                     const std::vector<std::string>& unused);

/// The dotted components of a key.
std::vector<std::string_view> components(std::string_view key);

/// For the optional field `field` left empty, the unused key that ends like
/// it and the remap rule that would give it to the field; `parts[i]` is
/// `components(unused[i])`.
std::optional<LoadReport::Warning> look_alike(
    const std::string& field, const std::vector<std::string>& unused,
    const std::vector<std::vector<std::string_view>>& parts);

}  // namespace torchport::detail
