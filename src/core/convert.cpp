#include "torchport/core/convert.hpp"

#include <algorithm>
#include <bit>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "torchport/core/error.hpp"
#include "torchport/core/half.hpp"

namespace torchport {
namespace {

enum class Family { Bool, Signed, Unsigned, Float, Complex };

Family family(DType d) noexcept {
  if (d == DType::BOOL) return Family::Bool;
  if (is_signed_integer(d)) return Family::Signed;
  if (is_integer(d)) return Family::Unsigned;
  if (is_complex(d)) return Family::Complex;
  return Family::Float;
}

bool is_f8(DType d) noexcept {
  return d == DType::F8_E4M3 || d == DType::F8_E5M2 || d == DType::F8_E4M3FNUZ ||
         d == DType::F8_E5M2FNUZ || d == DType::F8_E8M0;
}

template <class T>
T load(const std::byte* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <class T>
void store(std::byte* p, T v) noexcept {
  std::memcpy(p, &v, sizeof(T));
}

// float8 decoding (OCP FP8 and the "fnuz" variants torch ships).
double f8_to_double(std::uint8_t b, DType d) noexcept {
  // e8m0 (OCP MX scales): 2^(b - 127), 0xFF the NaN (c10/util/Float8_e8m0fnu.h;
  // 0x00 is 2^-127, a float32 subnormal, as torch's .to(float32) gives it).
  if (d == DType::F8_E8M0)
    return b == 0xffu ? std::numeric_limits<double>::quiet_NaN()
                      : std::ldexp(1.0, static_cast<int>(b) - 127);
  const bool neg = (b & 0x80u) != 0;
  int exp_bits, man_bits, bias;
  bool fnuz = false;
  switch (d) {
    case DType::F8_E4M3:
      exp_bits = 4, man_bits = 3, bias = 7;
      break;
    case DType::F8_E4M3FNUZ:
      exp_bits = 4, man_bits = 3, bias = 8, fnuz = true;
      break;
    case DType::F8_E5M2FNUZ:
      exp_bits = 5, man_bits = 2, bias = 16, fnuz = true;
      break;
    default:
      exp_bits = 5, man_bits = 2, bias = 15;
      break;  // F8_E5M2
  }
  const unsigned exp = (b >> man_bits) & ((1u << exp_bits) - 1);
  const unsigned man = b & ((1u << man_bits) - 1);
  if (fnuz) {
    if (b == 0x80u) return std::numeric_limits<double>::quiet_NaN();  // the only NaN
  } else if (d == DType::F8_E4M3) {
    if ((b & 0x7fu) == 0x7fu) return std::numeric_limits<double>::quiet_NaN();  // no infinities
  } else if (exp == 0x1fu) {  // E5M2 has IEEE inf/nan
    if (man != 0) return std::numeric_limits<double>::quiet_NaN();
    return neg ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
  double v;
  if (exp == 0)
    v = std::ldexp(static_cast<double>(man), 1 - bias - man_bits);
  else
    v = std::ldexp(static_cast<double>(man | (1u << man_bits)),
                   static_cast<int>(exp) - bias - man_bits);
  return neg ? -v : v;
}

// A float as the float8 byte torch's .to() makes of it (c10's Float8 types
// are made from a float: a double rounds to float first, as for half).
// Nearest even on the format's grid, subnormals included; then, past the
// largest finite value: e4m3fn saturates to +-448 (torch 2.14; the caller
// refuses what torch 2.6 made NaN instead), e5m2 goes to infinity, the
// fnuz formats to their one NaN (0x80, which also makes -0 a 0). NaN keeps
// its sign where the format has one. e8m0fnu (2^(b-127), unsigned) takes
// the exponent of |x|, one more when the fraction is at least a half (1.5
// gives 2, 3 gives 4; a float subnormal only past a half: 2^-127 and 0
// give 0x00), NaN, an infinity and what rounds past 2^127 give 0xff. Checked against each
// torch's own .to() over every float32 of 2^16 patterns and around every
// code (tests/interop/check_float8_casts.py).
std::uint8_t float_to_f8(float f, DType d) noexcept {
  const auto bits = std::bit_cast<std::uint32_t>(f);
  const std::uint8_t sign = static_cast<std::uint8_t>((bits >> 24) & 0x80u);
  const std::uint32_t abs_bits = bits & 0x7fffffffu;
  if (d == DType::F8_E8M0) {
    if (abs_bits >= 0x7f800000u) return 0xff;
    const std::uint32_t exp = abs_bits >> 23, frac = abs_bits & 0x7fffffu;
    // Up from a half of the fraction; a float subnormal only past a half.
    const bool up = frac > 0x400000u || (frac == 0x400000u && exp != 0);
    return static_cast<std::uint8_t>(std::min<std::uint32_t>(0xff, exp + (up ? 1u : 0u)));
  }
  const bool fnuz = d == DType::F8_E4M3FNUZ || d == DType::F8_E5M2FNUZ;
  const bool e4m3 = d == DType::F8_E4M3 || d == DType::F8_E4M3FNUZ;
  const int man = e4m3 ? 3 : 2;
  const int bias = d == DType::F8_E4M3       ? 7
                   : d == DType::F8_E4M3FNUZ ? 8
                   : d == DType::F8_E5M2     ? 15
                                             : 16;
  if (abs_bits > 0x7f800000u) return fnuz ? 0x80 : static_cast<std::uint8_t>(sign | 0x7f);  // NaN
  // The magnitude's code on an unbounded grid (exact arithmetic: a float
  // over a power of two is exact in double, rint rounds to nearest even).
  std::uint32_t code;
  if (abs_bits == 0x7f800000u) {
    code = 0x100;  // an infinity: past every finite code
  } else {
    const double a = std::fabs(static_cast<double>(f));
    int e2 = 0;
    (void)std::frexp(a, &e2);                                   // a = m * 2^e2, m in [0.5, 1)
    const int exp = a == 0.0 ? 1 : std::max(e2 - 1 + bias, 1);  // biased, 1 for subnormals
    const double q = std::rint(std::ldexp(a, man - (exp - bias)));
    // q in [0, 2^(man+1)]: subnormals below 2^man, else 2^man + mantissa
    const double c = exp == 1 ? q : q + static_cast<double>((exp - 1) << man);
    code = c >= 256.0 ? 0x100 : static_cast<std::uint32_t>(c);
  }
  if (fnuz) {
    if (code > 0x7f) return 0x80;
    return code == 0 ? 0x00 : static_cast<std::uint8_t>(sign | code);
  }
  if (d == DType::F8_E5M2)
    return static_cast<std::uint8_t>(sign | std::min<std::uint32_t>(code, 0x7c));
  return static_cast<std::uint8_t>(sign | std::min<std::uint32_t>(code, 0x7e));  // e4m3fn
}

// What torch 2.6 makes NaN and torch 2.14 saturates to +-448 when writing
// float8_e4m3fn: magnitudes past 464 (the tie with 480, a NaN's code, goes
// to 448 in both) and infinities.
bool e4m3fn_ambiguous(float f) noexcept {
  return !std::isnan(f) && std::fabs(f) > 464.0f;
}

double load_real(const std::byte* p, DType d) noexcept {
  switch (d) {
    case DType::BOOL:
      return load<std::uint8_t>(p) != 0 ? 1.0 : 0.0;
    case DType::U8:
      return load<std::uint8_t>(p);
    case DType::I8:
      return load<std::int8_t>(p);
    case DType::I16:
      return load<std::int16_t>(p);
    case DType::U16:
      return load<std::uint16_t>(p);
    case DType::I32:
      return load<std::int32_t>(p);
    case DType::U32:
      return load<std::uint32_t>(p);
    case DType::I64:
      return static_cast<double>(load<std::int64_t>(p));
    case DType::U64:
      return static_cast<double>(load<std::uint64_t>(p));
    case DType::F16:
      return half_to_float(load<std::uint16_t>(p));
    case DType::BF16:
      return bf16_to_float(load<std::uint16_t>(p));
    case DType::F32:
      return load<float>(p);
    case DType::F64:
      return load<double>(p);
    default:
      return f8_to_double(load<std::uint8_t>(p), d);
  }
}

// As torch stores a value: c10::Half and c10::BFloat16 are made from a
// float, so a double rounds to float first, then to 16 bits (a double just
// off a tie between two halves can round the other way than numpy's direct
// rounding; torch is what a converted file must match).
void store_real(std::byte* p, DType d, double v) noexcept {
  switch (d) {
    case DType::F16:
      store(p, float_to_half(static_cast<float>(v)));
      break;
    case DType::BF16:
      store(p, float_to_bf16(static_cast<float>(v)));
      break;
    case DType::F32:
      store(p, static_cast<float>(v));
      break;
    default:
      store(p, v);
      break;  // F64
  }
}

// Complex numbers: a pair of components of the complex dtype's component type.
DType component(DType d) noexcept {
  switch (d) {
    case DType::C32:
      return DType::F16;
    case DType::BC32:
      return DType::BF16;
    case DType::C64:
      return DType::F32;
    default:
      return DType::F64;
  }
}

// A component of a complex target. bcomplex32 is torch 2.14's
// c10::complex<c10::BFloat16>, which converts through float (BFloat16 has a
// float constructor only): a double rounds to float, then to bf16, as
// torch's .to(torch.bcomplex32) does.
void store_component(std::byte* p, DType complex_dtype, DType component_dtype, double v) noexcept {
  if (complex_dtype == DType::BC32)
    store(p, float_to_bf16(static_cast<float>(v)));
  else
    store_real(p, component_dtype, v);
}

// Integers travel as a sign and a magnitude so that every int64 and uint64
// value is exact.
struct Wide {
  bool negative;
  std::uint64_t magnitude;
};

Wide load_int(const std::byte* p, DType d) noexcept {
  auto s = [](std::int64_t v) {
    return v < 0 ? Wide{true, static_cast<std::uint64_t>(-(v + 1)) + 1}
                 : Wide{false, static_cast<std::uint64_t>(v)};
  };
  switch (d) {
    case DType::BOOL:
      return {false, load<std::uint8_t>(p) != 0 ? 1u : 0u};
    case DType::U8:
      return {false, load<std::uint8_t>(p)};
    case DType::U16:
      return {false, load<std::uint16_t>(p)};
    case DType::U32:
      return {false, load<std::uint32_t>(p)};
    case DType::U64:
      return {false, load<std::uint64_t>(p)};
    case DType::I8:
      return s(load<std::int8_t>(p));
    case DType::I16:
      return s(load<std::int16_t>(p));
    case DType::I32:
      return s(load<std::int32_t>(p));
    default:
      return s(load<std::int64_t>(p));
  }
}

std::string wide_to_string(Wide w) {
  std::string s = std::to_string(w.magnitude);
  if (w.negative) s.insert(s.begin(), '-');
  return s;
}

// Stores `w` into integer dtype `d`; false when it does not fit.
bool store_int(std::byte* p, DType d, Wide w) noexcept {
  auto fits_signed = [&](std::uint64_t max_pos) {
    return w.negative ? w.magnitude <= max_pos + 1 : w.magnitude <= max_pos;
  };
  auto as_signed = [&]() -> std::int64_t {
    return w.negative ? -static_cast<std::int64_t>(w.magnitude - 1) - 1
                      : static_cast<std::int64_t>(w.magnitude);
  };
  switch (d) {
    case DType::BOOL:
      if (w.negative || w.magnitude > 1) return false;
      store(p, static_cast<std::uint8_t>(w.magnitude));
      return true;
    case DType::U8:
      if (w.negative || w.magnitude > 0xffu) return false;
      store(p, static_cast<std::uint8_t>(w.magnitude));
      return true;
    case DType::U16:
      if (w.negative || w.magnitude > 0xffffu) return false;
      store(p, static_cast<std::uint16_t>(w.magnitude));
      return true;
    case DType::U32:
      if (w.negative || w.magnitude > 0xffffffffu) return false;
      store(p, static_cast<std::uint32_t>(w.magnitude));
      return true;
    case DType::U64:
      if (w.negative) return false;
      store(p, w.magnitude);
      return true;
    case DType::I8:
      if (!fits_signed(0x7f)) return false;
      store(p, static_cast<std::int8_t>(as_signed()));
      return true;
    case DType::I16:
      if (!fits_signed(0x7fff)) return false;
      store(p, static_cast<std::int16_t>(as_signed()));
      return true;
    case DType::I32:
      if (!fits_signed(0x7fffffff)) return false;
      store(p, static_cast<std::int32_t>(as_signed()));
      return true;
    default:
      if (!fits_signed(0x7fffffffffffffffull)) return false;
      store(p, as_signed());
      return true;
  }
}

// Vector kernels for the conversions every half-precision load and save
// runs, chosen at run time (AVX2 + F16C on x86-64; the scalar loops below
// elsewhere). They round as the scalar code does: to nearest even.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TORCHPORT_X86_KERNELS 1
__attribute__((target("avx2,f16c"))) void f16_to_f32_avx2(const std::byte* src, std::byte* dst,
                                                          std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm256_storeu_ps(reinterpret_cast<float*>(dst + 4 * i), _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) store(dst + 4 * i, half_to_float(load<std::uint16_t>(src + 2 * i)));
}
__attribute__((target("avx2,f16c"))) void f32_to_f16_avx2(const std::byte* src, std::byte* dst,
                                                          std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 f = _mm256_loadu_ps(reinterpret_cast<const float*>(src + 4 * i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i),
                     _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) store(dst + 2 * i, float_to_half(load<float>(src + 4 * i)));
}
__attribute__((target("avx2"))) void bf16_to_f32_avx2(const std::byte* src, std::byte* dst,
                                                      std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    const __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 4 * i), w);
  }
  for (; i < n; ++i) store(dst + 4 * i, bf16_to_float(load<std::uint16_t>(src + 2 * i)));
}
__attribute__((target("avx2"))) void f32_to_bf16_avx2(const std::byte* src, std::byte* dst,
                                                      std::size_t n) {
  std::size_t i = 0;
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet = _mm256_set1_epi32(0x00400000);
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 4 * i));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
    const __m256i rounded = _mm256_add_epi32(x, _mm256_add_epi32(bias, lsb));
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
    const __m256i v =
        _mm256_srli_epi32(_mm256_blendv_epi8(rounded, _mm256_or_si256(x, quiet), is_nan), 16);
    // Pack the low halves of eight 32-bit lanes into eight 16-bit values.
    const __m256i packed = _mm256_packus_epi32(v, v);
    const __m256i ordered = _mm256_permute4x64_epi64(packed, 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), _mm256_castsi256_si128(ordered));
  }
  for (; i < n; ++i) store(dst + 2 * i, float_to_bf16(load<float>(src + 4 * i)));
}
bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
bool has_f16c() {
  // clang 14 knows no __builtin_cpu_supports("f16c"): ask cpuid (leaf 1, ECX bit 29).
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return has_avx2() && __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
  }();
  return yes;
}
#endif

[[noreturn]] void refuse(DType from, DType to, const std::string& why) {
  throw Error(ErrorCode::dtype_mismatch, "cannot convert " + std::string(dtype_name(from)) +
                                             " to " + std::string(dtype_name(to)) + ": " + why);
}

}  // namespace

bool convertible(DType from, DType to) noexcept {
  if (from == to) return true;
  if (is_bits(from) || is_bits(to) || from == DType::F4 || to == DType::F4) return false;
  const Family f = family(from), t = family(to);
  switch (t) {
    case Family::Float:
      return f != Family::Complex;
    case Family::Complex:
      return true;
    default:
      return f == Family::Bool || f == Family::Signed || f == Family::Unsigned;
  }
}

void convert_elements(const std::byte* src, DType from, std::byte* dst, DType to,
                      std::size_t count) {
  const std::size_t in = dtype_size(from), out = dtype_size(to);
  if (from == to) {
    if (count != 0) std::memcpy(dst, src, count * in);
    return;
  }
  if (!convertible(from, to)) {
    if (is_bits(from) || is_bits(to)) refuse(from, to, "bits dtypes hold raw bits, not numbers");
    if (from == DType::F4 || to == DType::F4)
      refuse(from, to,
             "float4_e2m1fn_x2 packs two 4-bit values a byte, and torch cannot convert it to or "
             "from another dtype either (its copy kernel is not implemented for "
             "Float4_e2m1fn_x2)");
    if (family(from) == Family::Complex) refuse(from, to, "it would drop the imaginary part");
    refuse(from, to, "it would truncate floating-point values");
  }
  const Family f = family(from), t = family(to);
  // Hot paths: the conversions precision settings use on every load.
#ifdef TORCHPORT_X86_KERNELS
  if (from == DType::F16 && to == DType::F32 && has_f16c()) return f16_to_f32_avx2(src, dst, count);
  if (from == DType::F32 && to == DType::F16 && has_f16c()) return f32_to_f16_avx2(src, dst, count);
  if (from == DType::BF16 && to == DType::F32 && has_avx2())
    return bf16_to_f32_avx2(src, dst, count);
  if (from == DType::F32 && to == DType::BF16 && has_avx2())
    return f32_to_bf16_avx2(src, dst, count);
#endif
  if (from == DType::F16 && to == DType::F32) {
    for (std::size_t i = 0; i < count; ++i)
      store(dst + 4 * i, half_to_float(load<std::uint16_t>(src + 2 * i)));
    return;
  }
  if (from == DType::BF16 && to == DType::F32) {
    for (std::size_t i = 0; i < count; ++i)
      store(dst + 4 * i, bf16_to_float(load<std::uint16_t>(src + 2 * i)));
    return;
  }
  if (from == DType::F32 && to == DType::F16) {
    for (std::size_t i = 0; i < count; ++i)
      store(dst + 2 * i, float_to_half(load<float>(src + 4 * i)));
    return;
  }
  if (from == DType::F32 && to == DType::BF16) {
    for (std::size_t i = 0; i < count; ++i)
      store(dst + 2 * i, float_to_bf16(load<float>(src + 4 * i)));
    return;
  }
  if (t == Family::Complex) {
    const DType tc = component(to);
    const std::size_t half_out = out / 2;
    for (std::size_t i = 0; i < count; ++i) {
      double re, im = 0.0;
      if (f == Family::Complex) {
        const DType fc = component(from);
        re = load_real(src + i * in, fc);
        im = load_real(src + i * in + in / 2, fc);
      } else if (f == Family::Float || f == Family::Bool) {
        re = load_real(src + i * in, from);
      } else {
        // One rounding to the component's float, as for real targets.
        const Wide w = load_int(src + i * in, from);
        if (tc != DType::F64) {
          const float x = static_cast<float>(w.magnitude);
          re = w.negative ? -x : x;
        } else {
          re = static_cast<double>(w.magnitude) * (w.negative ? -1.0 : 1.0);
        }
      }
      store_component(dst + i * out, to, tc, re);
      store_component(dst + i * out + half_out, to, tc, im);
    }
    return;
  }
  if (is_f8(to)) {
    // Through a float, as c10's Float8 constructors take one.
    for (std::size_t i = 0; i < count; ++i) {
      float x;
      if (f == Family::Float || f == Family::Bool) {
        x = static_cast<float>(load_real(src + i * in, from));
      } else {
        const Wide w = load_int(src + i * in, from);
        x = static_cast<float>(w.magnitude);
        if (w.negative) x = -x;
      }
      if (to == DType::F8_E4M3 && e4m3fn_ambiguous(x))
        throw Error(ErrorCode::ambiguous,
                    "cannot convert " + std::string(dtype_name(from)) + " to F8_E4M3: element " +
                        std::to_string(i) + " is " + std::to_string(x) +
                        ", past float8_e4m3fn's largest value (448): ambiguous, as torch 2.6 "
                        "writes it as NaN and torch 2.14 as +-448; clamp the values first");
      store(dst + i * out, float_to_f8(x, to));
    }
    return;
  }
  if (t == Family::Float) {
    for (std::size_t i = 0; i < count; ++i) {
      double v;
      if (f == Family::Float || f == Family::Bool) {
        v = load_real(src + i * in, from);
      } else {
        // An integer becomes a float in one rounding, as static_cast does
        // in torch (through a double, a 64-bit integer would round twice).
        const Wide w = load_int(src + i * in, from);
        if (to != DType::F64) {
          const float x = static_cast<float>(w.magnitude);
          store_real(dst + i * out, to, w.negative ? -x : x);
          continue;
        }
        v = static_cast<double>(w.magnitude) * (w.negative ? -1.0 : 1.0);
      }
      store_real(dst + i * out, to, v);
    }
    return;
  }
  // Integer or bool target from integer or bool source: exact or refused.
  for (std::size_t i = 0; i < count; ++i) {
    const Wide w = load_int(src + i * in, from);
    if (!store_int(dst + i * out, to, w))
      refuse(from, to,
             "element " + std::to_string(i) + " is " + wide_to_string(w) + ", which does not fit");
  }
}

}  // namespace torchport
