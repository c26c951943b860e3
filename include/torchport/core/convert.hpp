#pragma once
/// \file
/// Element conversion between dtypes, correctly rounded and range-checked.

#include <cstddef>

#include "torchport/core/dtype.hpp"

namespace torchport {

/// True when `convert_elements` can turn `from` into `to` at all: any
/// float/complex/int/bool into float or complex, int/bool into int/bool,
/// complex only into complex. Float to integer is refused (it would truncate);
/// converting *to* an F8 kind is not implemented. F4 (float4_e2m1fn_x2) and
/// the bits dtypes convert to nothing else and from nothing else (torch 2.14
/// cannot convert F4 either).
bool convertible(DType from, DType to) noexcept;

/// Converts `count` elements at `src` (dtype `from`) into `dst` (dtype `to`).
/// Floats round to nearest even, including f64 -> f16/bf16 (no double
/// rounding), except into BC32, whose components round through float as
/// torch's c10::complex<BFloat16> does. F8_E8M0 decodes as 2^(x - 127), NaN
/// at 0xFF. An integer or bool that does not fit `to` is an error, not a wrap.
/// `src` and `dst` need not be aligned and must not overlap.
/// \throws Error(dtype_mismatch) naming the element index and value, or when
/// `convertible(from, to)` is false.
void convert_elements(const std::byte* src, DType from, std::byte* dst, DType to,
                      std::size_t count);

}  // namespace torchport
