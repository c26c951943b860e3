// Value::repr prints floats as Python's repr does: the shortest digits that
// read back to the same double (0.9, not 0.90000000000000002), fixed or
// exponent notation by Python's rule. The table was printed by CPython's
// repr().

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "torchport/core/value.hpp"

using torchport::to_json;
using torchport::Value;

namespace {

TEST(ValueRepr, FloatsAsPythonsRepr) {
  const std::vector<std::pair<double, std::string>> table = {
      {0.9, "0.9"},
      {0.1, "0.1"},
      {0.1 + 0.2, "0.30000000000000004"},
      {1.0 / 3, "0.3333333333333333"},
      {2.0, "2.0"},
      {-0.0, "-0.0"},
      {0.0, "0.0"},
      {1e16, "1e+16"},
      {1e15, "1000000000000000.0"},
      {123456789012345678.0, "1.2345678901234568e+17"},
      {1e-4, "0.0001"},
      {1e-5, "1e-05"},
      {1.5e-7, "1.5e-07"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {-2.5, "-2.5"},
      {100.0, "100.0"},
      {1e22, "1e+22"},
      {3.14159, "3.14159"},
      {1234.5, "1234.5"},
      {9007199254740992.0, "9007199254740992.0"},
      {0.001, "0.001"},
      {12345678901234567.0, "1.2345678901234568e+16"},
      {1e-310, "1e-310"},
      {2.2250738585072014e-308, "2.2250738585072014e-308"},
      {1e100, "1e+100"},
      {-1e-100, "-1e-100"},
  };
  for (const auto& [x, want] : table) EXPECT_EQ(Value::real(x).repr(), want) << want;
  EXPECT_EQ(Value::real(std::numeric_limits<double>::infinity()).repr(), "inf");
  EXPECT_EQ(Value::real(-std::numeric_limits<double>::infinity()).repr(), "-inf");
  EXPECT_EQ(Value::real(std::numeric_limits<double>::quiet_NaN()).repr(), "nan");
  // In containers, as a training checkpoint's param_groups print.
  Value group = Value::dict();
  group.insert(Value::str("lr"), Value::real(0.1));
  group.insert(Value::str("momentum"), Value::real(0.9));
  group.insert(Value::str("eps"), Value::real(1e-8));
  EXPECT_EQ(group.repr(), "{'lr': 0.1, 'momentum': 0.9, 'eps': 1e-08}");
}

// JSON numbers are what Python's json.dumps writes: the float's repr.
TEST(ValueRepr, JsonFloatsAsPythonsJsonDumps) {
  EXPECT_EQ(to_json(Value::real(0.9)), "0.9");
  EXPECT_EQ(to_json(Value::real(2.0)), "2.0");
  EXPECT_EQ(to_json(Value::real(1e-5)), "1e-05");
  EXPECT_EQ(to_json(Value::real(123456789012345678.0)), "1.2345678901234568e+17");
  Value group = Value::dict();
  group.insert(Value::str("lr"), Value::real(0.1));
  group.insert(Value::str("betas"), Value::tuple({Value::real(0.9), Value::real(0.999)}));
  EXPECT_EQ(to_json(group), R"({"lr":0.1,"betas":[0.9,0.999]})");
}

TEST(ValueRepr, ComplexAsPythonsRepr) {
  const std::vector<std::pair<std::pair<double, double>, std::string>> table = {
      {{1, 2}, "(1+2j)"},
      {{1.5, -0.5}, "(1.5-0.5j)"},
      {{0, 2}, "2j"},
      {{-0.0, 2}, "(-0+2j)"},
      {{0.1, 1e-5}, "(0.1+1e-05j)"},
      {{0, 0}, "0j"},
      {{1e16, -1e-5}, "(1e+16-1e-05j)"},
  };
  for (const auto& [c, want] : table)
    EXPECT_EQ(Value::complex(c.first, c.second).repr(), want) << want;
}

// Any double: the text reads back to the very same bits, and no shorter
// run of digits would (the digits are std::to_chars' shortest).
TEST(ValueRepr, EveryFloatReadsBackToItsBits) {
  std::mt19937_64 rng(41);
  for (int i = 0; i < 200000; ++i) {
    std::uint64_t bits = rng();
    double x;
    std::memcpy(&x, &bits, sizeof x);
    if (!std::isfinite(x)) continue;
    const std::string s = Value::real(x).repr();
    double back = 0;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), back);
    ASSERT_EQ(r.ec, std::errc()) << s;
    ASSERT_EQ(r.ptr, s.data() + s.size()) << s;
    std::uint64_t back_bits;
    std::memcpy(&back_bits, &back, sizeof back);
    ASSERT_EQ(back_bits, bits) << s;
  }
}

}  // namespace
