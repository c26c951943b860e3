#include "nn/parity.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "torchport/core/dtype.hpp"
#include "torchport/formats/open.hpp"

namespace torchport::test {

NnFixture::NnFixture(const std::string& name)
    : name_(name),
      catalog_(open(std::filesystem::path(TORCHPORT_NN_FIXTURES_DIR) / (name + ".pt"))) {}

Tensor NnFixture::operator[](const std::string& key) const {
  const Tensor* t = catalog_.find(key);
  if (t == nullptr) throw std::runtime_error("fixture " + name_ + " has no tensor '" + key + "'");
  return t->contiguous();
}

void expect_close(const Tensor& actual, const Tensor& expected, Tolerance tol,
                  const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what << ": result undefined";
  ASSERT_EQ(actual.shape(), expected.shape())
      << what << ": shape " << shape_to_string(actual.shape()) << " vs expected "
      << shape_to_string(expected.shape());
  if (is_floating(expected.dtype())) {
    const DType want = expected.dtype() == DType::F64 ? DType::F64 : DType::F32;
    ASSERT_EQ(actual.dtype(), want) << what << ": dtype " << dtype_name(actual.dtype());
  } else {
    ASSERT_EQ(actual.dtype(), expected.dtype()) << what << ": dtype " << dtype_name(actual.dtype());
  }
  EXPECT_TRUE(actual.is_contiguous()) << what << ": result is not contiguous";
  const Tensor a = actual.to(DType::F64), e = expected.to(DType::F64);
  const auto av = a.span<double>(), ev = e.span<double>();
  std::size_t bad = 0, worst = 0;
  double worst_excess = -1, max_abs = 0, max_ratio = 0;
  for (std::size_t i = 0; i < av.size(); ++i) {
    if (std::isnan(av[i]) && std::isnan(ev[i])) continue;
    if (std::isinf(ev[i]) && av[i] == ev[i]) continue;
    const double err = std::abs(av[i] - ev[i]);
    max_abs = std::max(max_abs, err);
    if (tol.atol + tol.rtol > 0)
      max_ratio = std::max(max_ratio, err / (tol.atol + tol.rtol * std::abs(ev[i])));
    const double allowed = tol.atol + tol.rtol * std::abs(ev[i]);
    if (!(err <= allowed)) {
      ++bad;
      const double excess = std::isnan(err) ? INFINITY : err / allowed;
      if (excess > worst_excess) worst_excess = excess, worst = i;
    }
  }
  // TORCHPORT_NN_TOLERANCE_REPORT=1 prints how much of each tolerance is used.
  if (std::getenv("TORCHPORT_NN_TOLERANCE_REPORT") != nullptr)
    std::printf("%-45s max |err| %.3g, %.3g of the tolerance\n", what.c_str(), max_abs, max_ratio);
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << av.size() << " elements outside rtol "
                     << tol.rtol << " atol " << tol.atol << "; worst at flat index " << worst
                     << ": got " << av[worst] << ", expected " << ev[worst];
}

Tensor f32(std::initializer_list<float> values, Shape shape) {
  return Tensor::from(std::span<const float>(values.begin(), values.size()), std::move(shape));
}

}  // namespace torchport::test
