#pragma once
/// \file
/// Element types: torch's full set, spelled the way safetensors spells them.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace torchport {

/// The element type of a tensor. The set is torch's (every dtype `torch.save`
/// can write, up to torch 2.14), named as in safetensors' header (`F32`,
/// `BF16`, `I64`, `BOOL`). New dtypes are appended (record files store the
/// names, but keep the order stable anyway). torch's sub-byte shells
/// (`uint1`..`uint7`, `int1`..`int7`) are not here: torch 2.14 cannot save
/// them ("dtype torch.uint4 is not recognized"), and a file naming one is
/// refused by name.
enum class DType : std::uint8_t {
  BOOL,
  U8,
  I8,
  I16,
  U16,
  I32,
  U32,
  I64,
  U64,
  F16,
  BF16,
  F32,
  F64,
  C32,   ///< complex32 (two f16), torch.complex32 / chalf
  C64,   ///< complex64 (two f32)
  C128,  ///< complex128 (two f64)
  F8_E4M3,
  F8_E5M2,
  F8_E4M3FNUZ,
  F8_E5M2FNUZ,
  /// torch's bits dtypes (torch.bits8, bits16, bits1x8, bits2x4, bits4x2):
  /// raw bits with no arithmetic, read and written as their bytes, never
  /// converted to or from another dtype.
  BITS8,
  BITS16,
  BITS1X8,
  BITS2X4,
  BITS4X2,
  /// torch.float8_e8m0fnu (safetensors `F8_E8M0`): an unsigned 8-bit
  /// exponent, 2^(x - 127), NaN at 0xFF; no zero, no sign, no infinity.
  F8_E8M0,
  /// torch.float4_e2m1fn_x2 (safetensors `F4`): one byte holding two e2m1
  /// values. An element is that byte, as torch counts it: a tensor's shape
  /// is torch's (safetensors files count 4-bit elements: their last
  /// dimension is twice torch's). torch cannot convert it to any other
  /// dtype, and neither does torchport.
  F4,
  /// torch.bcomplex32: a complex number of two bf16 (real, imaginary).
  BC32,
};

/// Number of dtypes, for tables indexed by `DType`.
inline constexpr int kDTypeCount = static_cast<int>(DType::BC32) + 1;

/// Bytes per element.
std::size_t dtype_size(DType d) noexcept;
/// Natural alignment of one element (a complex number aligns as its component).
std::size_t dtype_alignment(DType d) noexcept;
/// The safetensors spelling: "F32", "BF16", "BOOL", "C64", "F8_E4M3", ...
std::string_view dtype_name(DType d) noexcept;
/// Parses a safetensors spelling (case-sensitive, as the format requires).
std::optional<DType> dtype_from_name(std::string_view name) noexcept;
/// Parses a user's spelling: safetensors names in any case, plus torch's
/// (`float32`, `bfloat16`, `half`, `float`, `int64`, `long`, ...).
std::optional<DType> dtype_parse(std::string_view name) noexcept;
/// torch's attribute name: "float32", "bfloat16", "complex64", "float8_e4m3fn", ...
std::string_view dtype_torch_name(DType d) noexcept;
/// torch's legacy typed storage class for `d` ("FloatStorage"), or empty when
/// the dtype only exists as UntypedStorage + dtype (u16/u32/u64, float8).
std::string_view dtype_storage_class(DType d) noexcept;
/// Maps a torch dtype attribute name (`float32`, `half`, `long`, `float8_e5m2`) to a DType.
std::optional<DType> dtype_from_torch_name(std::string_view name) noexcept;
/// Maps a typed storage class name (`FloatStorage`, `BFloat16Storage`) to its DType.
std::optional<DType> dtype_from_storage_class(std::string_view name) noexcept;

/// F16, BF16, F32, F64, the F8 kinds and F4 (torch's `is_floating_point`)
bool is_floating(DType d) noexcept;
bool is_complex(DType d) noexcept;         ///< C32, C64, C128, BC32
bool is_integer(DType d) noexcept;         ///< signed and unsigned integers, not BOOL
bool is_signed_integer(DType d) noexcept;  ///< I8, I16, I32, I64
bool is_bits(DType d) noexcept;            ///< BITS8, BITS16, BITS1X8, BITS2X4, BITS4X2

}  // namespace torchport
