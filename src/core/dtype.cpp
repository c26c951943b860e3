#include "torchport/core/dtype.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

namespace torchport {
namespace {

struct DTypeInfo {
  DType dtype;
  std::size_t size;
  std::size_t align;
  std::string_view name;           // safetensors spelling
  std::string_view torch_name;     // torch attribute
  std::string_view storage_class;  // legacy typed storage class, if any
};

// Order matches the enum.
constexpr std::array<DTypeInfo, kDTypeCount> kInfo{{
    {DType::BOOL, 1, 1, "BOOL", "bool", "BoolStorage"},
    {DType::U8, 1, 1, "U8", "uint8", "ByteStorage"},
    {DType::I8, 1, 1, "I8", "int8", "CharStorage"},
    {DType::I16, 2, 2, "I16", "int16", "ShortStorage"},
    {DType::U16, 2, 2, "U16", "uint16", ""},
    {DType::I32, 4, 4, "I32", "int32", "IntStorage"},
    {DType::U32, 4, 4, "U32", "uint32", ""},
    {DType::I64, 8, 8, "I64", "int64", "LongStorage"},
    {DType::U64, 8, 8, "U64", "uint64", ""},
    {DType::F16, 2, 2, "F16", "float16", "HalfStorage"},
    {DType::BF16, 2, 2, "BF16", "bfloat16", "BFloat16Storage"},
    {DType::F32, 4, 4, "F32", "float32", "FloatStorage"},
    {DType::F64, 8, 8, "F64", "float64", "DoubleStorage"},
    {DType::C32, 4, 2, "C32", "complex32", "ComplexHalfStorage"},
    {DType::C64, 8, 4, "C64", "complex64", "ComplexFloatStorage"},
    {DType::C128, 16, 8, "C128", "complex128", "ComplexDoubleStorage"},
    {DType::F8_E4M3, 1, 1, "F8_E4M3", "float8_e4m3fn", ""},
    {DType::F8_E5M2, 1, 1, "F8_E5M2", "float8_e5m2", ""},
    {DType::F8_E4M3FNUZ, 1, 1, "F8_E4M3FNUZ", "float8_e4m3fnuz", ""},
    {DType::F8_E5M2FNUZ, 1, 1, "F8_E5M2FNUZ", "float8_e5m2fnuz", ""},
    {DType::BITS8, 1, 1, "BITS8", "bits8", ""},
    {DType::BITS16, 2, 2, "BITS16", "bits16", ""},
    {DType::BITS1X8, 1, 1, "BITS1X8", "bits1x8", ""},
    {DType::BITS2X4, 1, 1, "BITS2X4", "bits2x4", ""},
    {DType::BITS4X2, 1, 1, "BITS4X2", "bits4x2", ""},
    {DType::F8_E8M0, 1, 1, "F8_E8M0", "float8_e8m0fnu", ""},
    {DType::F4, 1, 1, "F4", "float4_e2m1fn_x2", ""},
    {DType::BC32, 4, 2, "BC32", "bcomplex32", ""},
}};

const DTypeInfo& info(DType d) noexcept {
  return kInfo[static_cast<std::size_t>(d)];
}

// torch's aliases for its dtype attributes (torch.float is float32, ...).
struct Alias {
  std::string_view name;
  DType dtype;
};
constexpr std::array<Alias, 11> kTorchAliases{{
    {"float", DType::F32},
    {"double", DType::F64},
    {"half", DType::F16},
    {"long", DType::I64},
    {"int", DType::I32},
    {"short", DType::I16},
    {"cfloat", DType::C64},
    {"cdouble", DType::C128},
    {"chalf", DType::C32},
    {"complex32", DType::C32},
    {"bf16", DType::BF16},
}};

}  // namespace

std::size_t dtype_size(DType d) noexcept {
  return info(d).size;
}
std::size_t dtype_alignment(DType d) noexcept {
  return info(d).align;
}
std::string_view dtype_name(DType d) noexcept {
  return info(d).name;
}
std::string_view dtype_torch_name(DType d) noexcept {
  return info(d).torch_name;
}
std::string_view dtype_storage_class(DType d) noexcept {
  return info(d).storage_class;
}

std::optional<DType> dtype_from_name(std::string_view name) noexcept {
  for (const auto& i : kInfo)
    if (i.name == name) return i.dtype;
  return std::nullopt;
}

std::optional<DType> dtype_from_torch_name(std::string_view name) noexcept {
  for (const auto& i : kInfo)
    if (i.torch_name == name) return i.dtype;
  for (const auto& a : kTorchAliases)
    if (a.name == name) return a.dtype;
  return std::nullopt;
}

std::optional<DType> dtype_from_storage_class(std::string_view name) noexcept {
  if (name.empty()) return std::nullopt;
  for (const auto& i : kInfo)
    if (i.storage_class == name) return i.dtype;
  return std::nullopt;
}

std::optional<DType> dtype_parse(std::string_view name) noexcept {
  std::string upper(name), lower(name);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (auto d = dtype_from_name(upper)) return d;
  if (lower.starts_with("torch.")) lower.erase(0, 6);
  return dtype_from_torch_name(lower);
}

bool is_floating(DType d) noexcept {
  switch (d) {
    case DType::F16:
    case DType::BF16:
    case DType::F32:
    case DType::F64:
    case DType::F8_E4M3:
    case DType::F8_E5M2:
    case DType::F8_E4M3FNUZ:
    case DType::F8_E5M2FNUZ:
    case DType::F8_E8M0:
    case DType::F4:
      return true;
    default:
      return false;
  }
}

bool is_complex(DType d) noexcept {
  return d == DType::C32 || d == DType::C64 || d == DType::C128 || d == DType::BC32;
}

bool is_signed_integer(DType d) noexcept {
  return d == DType::I8 || d == DType::I16 || d == DType::I32 || d == DType::I64;
}

bool is_bits(DType d) noexcept {
  return d >= DType::BITS8 && d <= DType::BITS4X2;
}

bool is_integer(DType d) noexcept {
  return is_signed_integer(d) || d == DType::U8 || d == DType::U16 || d == DType::U32 ||
         d == DType::U64;
}

}  // namespace torchport
