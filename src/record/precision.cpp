#include "torchport/record/precision.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>

namespace torchport {

std::string_view precision_name(Precision p) noexcept {
  switch (p) {
    case Precision::Full:
      return "full";
    case Precision::Half:
      return "half";
    case Precision::Double:
      return "double";
    case Precision::Keep:
      return "keep";
  }
  return "?";
}

std::optional<Precision> precision_parse(std::string_view name) noexcept {
  std::string s(name);
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (Precision p : {Precision::Full, Precision::Half, Precision::Double, Precision::Keep})
    if (precision_name(p) == s) return p;
  return std::nullopt;
}

DType precision_dtype(Precision p, DType d) noexcept {
  if (p == Precision::Keep || d == DType::BOOL) return d;
  if (is_complex(d)) return p == Precision::Double ? DType::C128 : DType::C64;
  if (is_floating(d))
    return p == Precision::Full ? DType::F32 : p == Precision::Half ? DType::F16 : DType::F64;
  return p == Precision::Full ? DType::I32 : p == Precision::Half ? DType::I16 : DType::I64;
}

}  // namespace torchport
