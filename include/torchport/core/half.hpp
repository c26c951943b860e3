#pragma once
/// \file
/// 16-bit and 8-bit float element types and their exact conversions.

#include <bit>
#include <cstdint>
#include <cstring>

namespace torchport {

/// IEEE 754 binary16, stored as its bits (torch.float16).
struct Half {
  std::uint16_t bits = 0;  ///< sign, 5 exponent bits, 10 mantissa bits
};
/// bfloat16, stored as its bits (torch.bfloat16): the high half of an f32.
struct BFloat16 {
  std::uint16_t bits = 0;  ///< sign, 8 exponent bits, 7 mantissa bits
};

/// Exact widening of a binary16 value.
inline float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1f;
  std::uint32_t man = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);  // inf / nan (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    exp = 113;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

/// binary32 -> binary16, round to nearest even; overflow gives infinity, NaN stays NaN.
inline std::uint16_t float_to_half(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {  // result is subnormal or zero
    // Shift the implicit-one mantissa into place with round-to-nearest-even.
    if (abs < 0x33000000u) return static_cast<std::uint16_t>(sign);  // < half of min subnormal
    const std::uint32_t e = abs >> 23;
    const std::uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - e;  // 14 + (112 - e) + 0: maps to 10-bit mantissa
    const std::uint32_t half_m = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    std::uint32_t r = half_m;
    if (rem > halfway || (rem == halfway && (half_m & 1u))) ++r;
    return static_cast<std::uint16_t>(sign | r);
  }
  // Normal: rebias exponent, round mantissa from 23 to 10 bits (RNE).
  std::uint32_t r = abs - 0x38000000u;  // exponent bias 127 -> 15
  const std::uint32_t lsb = (r >> 13) & 1u;
  r += 0xfffu + lsb;
  return static_cast<std::uint16_t>(sign | (r >> 13));
}

/// Exact widening of a bfloat16 value.
inline float bf16_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

/// binary32 -> bfloat16, round to nearest even; NaN stays a (quiet) NaN.
inline std::uint16_t float_to_bf16(float f) noexcept {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

}  // namespace torchport
