// Dtype conversions against torch's and numpy's roundings, and the range checks.

#include <bit>
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "support/fixtures.hpp"
#include "torchport/core/convert.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/open.hpp"

using namespace torchport;

namespace {

// Bitwise equal, or both NaN (torch drops NaN payloads and signs differently).
void same_bits_16(const Tensor& got, const Tensor& want, bool (*is_nan)(std::uint16_t)) {
  const Tensor gc = got.contiguous(), wc = want.contiguous();
  const auto g = gc.span<std::uint16_t>();
  const auto w = wc.span<std::uint16_t>();
  ASSERT_EQ(g.size(), w.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (g[i] != w[i] && !(is_nan(g[i]) && is_nan(w[i])) && bad++ < 5)
      ADD_FAILURE() << "element " << i << ": got 0x" << std::hex << g[i] << " want 0x" << w[i];
}

bool half_nan(std::uint16_t h) {
  return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
}
bool bf16_nan(std::uint16_t h) {
  return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu);
}

class Conversions : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cat_ = new TensorCatalog(open(test::fixture("conversions.pt"))); }
  static void TearDownTestSuite() { delete cat_; }
  const Tensor& t(const char* name) { return *cat_->find(name); }
  static TensorCatalog* cat_;
};
TensorCatalog* Conversions::cat_ = nullptr;

TEST_F(Conversions, F32ToF16MatchesTorch) {
  same_bits_16(t("f32").to(DType::F16), t("f32_to_f16"), half_nan);
}
TEST_F(Conversions, F32ToBF16MatchesTorch) {
  same_bits_16(t("f32").to(DType::BF16), t("f32_to_bf16"), bf16_nan);
}
// torch rounds a double to float, then to half (c10::Half is made from a
// float): the fixture holds doubles just off a tie, where that differs from
// rounding once.
TEST_F(Conversions, F64ToF16RoundsAsTorchDoes) {
  same_bits_16(t("f64").to(DType::F16), t("f64_to_f16"), half_nan);
}

TEST_F(Conversions, EveryHalfWidensExactly) {
  const Tensor bits = t("f16_bits");
  const Tensor as_half(DType::F16, bits.shape(), bits.strides(), bits.storage_offset(),
                       bits.storage());
  const Tensor widened = as_half.to(DType::F32);
  const auto got = widened.span<float>();
  const auto want = t("f16_bits_to_f32").span<float>();
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_TRUE(std::bit_cast<std::uint32_t>(got[i]) == std::bit_cast<std::uint32_t>(want[i]) ||
                (std::isnan(got[i]) && std::isnan(want[i])))
        << i;
}

TEST_F(Conversions, F64ToF32MatchesTorch) {
  EXPECT_TRUE(t("f64").to(DType::F32).equal(t("f64_to_f32")));
}

// A 64-bit integer becomes a float in one rounding, as torch's .float()
// gives (printed by torch 2.14.1: 2^60 + 2^36 + 1 -> 0x1.000002p+60; through
// a double it would tie and round to 2^60).
TEST(Convert, Int64RoundsToFloatOnce) {
  const std::vector<std::int64_t> v = {(std::int64_t{1} << 60) + (std::int64_t{1} << 36) + 1,
                                       -((std::int64_t{1} << 60) + (std::int64_t{1} << 36) + 1)};
  const Tensor x = Tensor::from(std::span<const std::int64_t>(v), Shape{2});
  const Tensor xf = x.to(DType::F32);
  const auto f = xf.span<float>();
  EXPECT_EQ(f[0], std::ldexp(1.0f + std::ldexp(1.0f, -23), 60));
  EXPECT_EQ(f[1], -std::ldexp(1.0f + std::ldexp(1.0f, -23), 60));
  // bfloat16 from the same float: 2^60 (torch: 1.152921504606847e+18).
  const Tensor b = x.to(DType::BF16).to(DType::F32);  // bf16 widens exactly
  EXPECT_EQ(b.span<float>()[0], std::ldexp(1.0f, 60));
}

TEST(Convert, IntegersAreRangeChecked) {
  const Tensor ok = Tensor::from<std::int64_t>({-128, 127, 0}, {3});
  const Tensor i8 = ok.to(DType::I8);
  EXPECT_EQ(i8.span<std::int8_t>()[0], -128);
  const Tensor too_big = Tensor::from<std::int64_t>({1, 300}, {2});
  try {
    too_big.to(DType::I8);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::dtype_mismatch);
    EXPECT_NE(std::string(e.what()).find("element 1 is 300"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tensor::from<std::int32_t>({-1}, {1}).to(DType::U64), Error);
  const Tensor big = Tensor::from<std::uint64_t>({~0ull}, {1}).to(DType::F64);
  EXPECT_EQ(big.span<double>()[0], 18446744073709551616.0);
  EXPECT_THROW(Tensor::from<std::uint64_t>({~0ull}, {1}).to(DType::I64), Error);
  const Tensor min =
      Tensor::from<std::int64_t>({std::numeric_limits<std::int64_t>::min()}, {1}).to(DType::I64);
  EXPECT_EQ(min.span<std::int64_t>()[0], std::numeric_limits<std::int64_t>::min());
  EXPECT_THROW(Tensor::from<std::int64_t>({2}, {1}).to(DType::BOOL), Error);
}

TEST(Convert, RefusesLossyKinds) {
  EXPECT_FALSE(convertible(DType::F32, DType::I32));
  EXPECT_FALSE(convertible(DType::C64, DType::F32));
  EXPECT_FALSE(convertible(DType::C64, DType::F8_E4M3));
  EXPECT_TRUE(convertible(DType::F8_E5M2, DType::F32));
  EXPECT_TRUE(convertible(DType::I64, DType::F16));
  try {
    Tensor::from<float>({1.5f}, {1}).to(DType::I32);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncate"), std::string::npos);
  }
}

TEST(Convert, Float8Decodes) {
  // e4m3fn: 0, 1, 2, 448, -1, NaN; e5m2: 0, 1, 2, 57344, -1, inf
  const std::uint8_t a[] = {0x00, 0x38, 0x40, 0x7e, 0xb8, 0x7f};
  const std::uint8_t b[] = {0x00, 0x3c, 0x40, 0x7b, 0xbc, 0x7c};
  float out[6];
  convert_elements(reinterpret_cast<const std::byte*>(a), DType::F8_E4M3,
                   reinterpret_cast<std::byte*>(out), DType::F32, 6);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[3], 448.0f);
  EXPECT_EQ(out[4], -1.0f);
  EXPECT_TRUE(std::isnan(out[5]));
  convert_elements(reinterpret_cast<const std::byte*>(b), DType::F8_E5M2,
                   reinterpret_cast<std::byte*>(out), DType::F32, 6);
  EXPECT_EQ(out[2], 2.0f);
  EXPECT_EQ(out[3], 57344.0f);
  EXPECT_TRUE(std::isinf(out[5]));
}

// Into float8, as torch's .to() (tests/interop/check_float8_casts.py holds
// every byte against torch 2.6 and 2.14): nearest even, e5m2 overflows to
// infinity, the fnuz kinds to their one NaN; e4m3fn past 464 is refused,
// since torch 2.6 writes NaN there and torch 2.14 saturates to 448.
TEST(Convert, Float8Encodes) {
  const auto bytes = [](std::vector<float> in, DType to) {
    std::vector<std::uint8_t> out(in.size());
    convert_elements(reinterpret_cast<const std::byte*>(in.data()), DType::F32,
                     reinterpret_cast<std::byte*>(out.data()), to, in.size());
    return out;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(
      bytes({0.0f, -0.0f, 1.0f, 1.0625f, 1.1875f, 448.0f, 464.0f, -1.0f, nan}, DType::F8_E4M3),
      (std::vector<std::uint8_t>{0x00, 0x80, 0x38, 0x38, 0x3a, 0x7e, 0x7e, 0xb8, 0x7f}));
  EXPECT_EQ(bytes({57344.0f, 61440.0f, inf, -inf, 0.0f}, DType::F8_E5M2),
            (std::vector<std::uint8_t>{0x7b, 0x7c, 0x7c, 0xfc, 0x00}));
  EXPECT_EQ(bytes({240.0f, 256.0f, -0.0f, nan}, DType::F8_E4M3FNUZ),
            (std::vector<std::uint8_t>{0x7f, 0x80, 0x00, 0x80}));
  EXPECT_EQ(bytes({1.0f, 1.5f, 3.0f, 0.0f, -1.0f, inf}, DType::F8_E8M0),
            (std::vector<std::uint8_t>{0x7f, 0x80, 0x81, 0x00, 0x7f, 0xff}));
  try {
    (void)bytes({1.0f, 465.0f}, DType::F8_E4M3);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::ambiguous);
    EXPECT_NE(std::string(e.what()).find("element 1"), std::string::npos) << e.what();
  }
}

TEST(Convert, ComplexWidens) {
  const Tensor c = Tensor::from<std::complex<float>>({{1.5f, -2.0f}}, {1});
  const Tensor wide = c.to(DType::C128);
  EXPECT_EQ(wide.span<std::complex<double>>()[0], std::complex<double>(1.5, -2.0));
  const Tensor real = Tensor::from<float>({3.0f}, {1}).to(DType::C64);
  EXPECT_EQ(real.span<std::complex<float>>()[0], std::complex<float>(3.0f, 0.0f));
}

}  // namespace
