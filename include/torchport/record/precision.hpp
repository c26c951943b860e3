#pragma once
/// \file
/// Precision settings: which dtypes records are loaded and saved in.

#include <optional>
#include <string_view>

#include "torchport/core/dtype.hpp"

namespace torchport {

/// The element types a record uses, as Burn's precision settings do.
enum class Precision {
  Full,    ///< floats as F32, integers as I32
  Half,    ///< floats as F16, integers as I16
  Double,  ///< floats as F64, integers as I64
  Keep,    ///< each tensor keeps the dtype it has
};

/// "full", "half", "double", "keep".
std::string_view precision_name(Precision p) noexcept;
/// Parses a name as printed by `precision_name` (case-insensitive).
std::optional<Precision> precision_parse(std::string_view name) noexcept;

/// The dtype a tensor of dtype `d` takes under `p`: floating types become the
/// precision's float, complex its complex (C64 for Full and Half, C128 for
/// Double), integers its integer, BOOL stays BOOL, and Keep keeps `d`.
DType precision_dtype(Precision p, DType d) noexcept;

}  // namespace torchport
