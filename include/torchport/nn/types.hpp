#pragma once
/// \file
/// Small argument types shared by the `torchport::nn` ops.

#include <cstdint>
#include <vector>

namespace torchport::nn {

/// A list of dimensions (negative values count from the end, as in torch).
using Dims = std::vector<std::int64_t>;

/// A per-dimension pair for 2-d ops (height, width), written as one int for
/// both (`2`) or two (`{2, 1}`), as torch's `int | tuple[int, int]` arguments.
struct Int2 {
  std::int64_t h = 0;  ///< height (the first spatial dimension)
  std::int64_t w = 0;  ///< width (the second spatial dimension)

  /// The same value for both dimensions.
  constexpr Int2(std::int64_t both) noexcept : h(both), w(both) {}  // NOLINT: implicit by design
  /// Height and width.
  constexpr Int2(std::int64_t height, std::int64_t width) noexcept : h(height), w(width) {}
  /// Element `i` (0 = height, 1 = width).
  constexpr std::int64_t operator[](int i) const noexcept { return i == 0 ? h : w; }
  /// Both values equal.
  friend constexpr bool operator==(const Int2&, const Int2&) noexcept = default;
};

}  // namespace torchport::nn
