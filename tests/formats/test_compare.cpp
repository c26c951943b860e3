// compare() and compare_tensors(): the structured result `torchport diff`
// prints, exact and within tolerances, NaNs, dtype and shape changes,
// quantized and sparse tensors.

#include <complex>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

#include "torchport/core/error.hpp"
#include "torchport/formats/compare.hpp"

using namespace torchport;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

float nan_with_payload(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

CompareOptions tolerance(double atol, double rtol = 0) {
  CompareOptions o;
  o.atol = atol;
  o.rtol = rtol;
  return o;
}

TensorCatalog catalog(std::vector<NamedTensor> ts) {
  return TensorCatalog::from_tensors(Format::state_dict, std::move(ts));
}

TEST(Compare, CatalogsByName) {
  const Tensor w = Tensor::from<float>({1, 2, 3, 4}, {2, 2});
  const TensorCatalog a = catalog({{"same", w}, {"changed", w}, {"only_a", w}, {"reshaped", w}});
  const TensorCatalog b = catalog({{"only_b", w},
                                   {"reshaped", w.reshape({4})},
                                   {"changed", Tensor::from<float>({1, 2, 3, 4.5f}, {2, 2})},
                                   {"same", w}});
  const Comparison c = compare(a, b);
  EXPECT_FALSE(c.equal);
  EXPECT_EQ(c.only_in_a, std::vector<std::string>{"only_a"});
  EXPECT_EQ(c.only_in_b, std::vector<std::string>{"only_b"});
  ASSERT_EQ(c.tensors.size(), 3u);  // in a's order
  EXPECT_EQ(c.tensors[0].name, "same");
  EXPECT_EQ(c.tensors[1].name, "changed");
  EXPECT_EQ(c.tensors[2].name, "reshaped");
  EXPECT_EQ(c.unequal, 2u);

  const TensorComparison& same = c.tensors[0];
  EXPECT_TRUE(same.equal);
  EXPECT_TRUE(same.comparable());
  EXPECT_EQ(same.numel, 4u);
  EXPECT_EQ(same.mismatched, 0u);
  EXPECT_FALSE(same.first_mismatch);

  const TensorComparison& changed = c.tensors[1];
  EXPECT_FALSE(changed.equal);
  EXPECT_EQ(changed.mismatched, 1u);
  EXPECT_EQ(changed.first_mismatch, 3u);
  EXPECT_DOUBLE_EQ(changed.max_abs, 0.5);
  EXPECT_DOUBLE_EQ(changed.max_rel, 0.5 / 4.5);

  const TensorComparison& reshaped = c.tensors[2];
  EXPECT_EQ(reshaped.check, ValueCheck::shape_differs);
  EXPECT_FALSE(reshaped.comparable());
  EXPECT_FALSE(reshaped.equal);
  EXPECT_EQ(reshaped.numel, 0u);
  EXPECT_EQ(reshaped.a.shape, (Shape{2, 2}));
  EXPECT_EQ(reshaped.b.shape, (Shape{4}));
  EXPECT_EQ(reshaped.a.description(), "F32[2, 2]");
  EXPECT_EQ(reshaped.b.description(), "F32[4]");
}

// The progress callback sees A's bytes compared (of the names B has too),
// rising to the total.
TEST(Compare, ProgressCountsTheBytesCompared) {
  const Tensor w = Tensor::from<float>({1, 2, 3, 4}, {2, 2});
  const TensorCatalog a = catalog({{"x", w}, {"y", w}, {"only_a", w}});
  const TensorCatalog b = catalog({{"x", w}, {"y", w}});
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  CompareOptions o;
  o.progress = [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); };
  const Comparison c = compare(a, b, o);
  EXPECT_TRUE(c.only_in_a.size() == 1 && !c.options.progress);
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> want = {{0, 32}, {16, 32}, {32, 32}};
  EXPECT_EQ(calls, want);
}

TEST(Compare, EqualCatalogsAndEmptyOnes) {
  const TensorCatalog a = catalog({{"x", Tensor::from<float>({1, 2}, {2})}});
  const Comparison c = compare(a, a);
  EXPECT_TRUE(c.equal);
  EXPECT_EQ(c.unequal, 0u);
  EXPECT_TRUE(c.options.exact());
  EXPECT_TRUE(compare(TensorCatalog{}, TensorCatalog{}).equal);
  const Comparison missing = compare(a, TensorCatalog{});
  EXPECT_FALSE(missing.equal);
  EXPECT_EQ(missing.only_in_a, std::vector<std::string>{"x"});
  EXPECT_TRUE(missing.tensors.empty());
}

TEST(Compare, ToleranceIsAtolPlusRtolTimesB) {
  const Tensor a = Tensor::from<float>({1.0f, 100.0f, -3.0f}, {3});
  const Tensor b = Tensor::from<float>({1.001f, 100.05f, -3.0f}, {3});
  EXPECT_FALSE(compare_tensors("x", a, b).equal);
  const TensorComparison atol_only = compare_tensors("x", a, b, tolerance(0.01));
  EXPECT_FALSE(atol_only.equal);  // 0.05 off at 100
  EXPECT_EQ(atol_only.mismatched, 1u);
  EXPECT_EQ(atol_only.first_mismatch, 1u);
  EXPECT_TRUE(compare_tensors("x", a, b, tolerance(0.01, 0.001)).equal);
  EXPECT_TRUE(compare_tensors("x", a, b, tolerance(0, 0.001)).equal);  // rtol alone
  EXPECT_FALSE(compare_tensors("x", a, b, tolerance(0, 0.0001)).equal);
}

TEST(Compare, DtypeChangeDiffersExactlyButValuesDecideWithATolerance) {
  const Tensor a = Tensor::from<float>({1.0f, 0.5f, -2.0f}, {3});
  const TensorComparison exact = compare_tensors("x", a, a.to(DType::BF16));
  EXPECT_TRUE(exact.dtype_differs());
  EXPECT_EQ(exact.a.dtype, DType::F32);
  EXPECT_EQ(exact.b.dtype, DType::BF16);
  EXPECT_FALSE(exact.equal);
  EXPECT_EQ(exact.mismatched, 0u);  // the values themselves are equal
  EXPECT_TRUE(compare_tensors("x", a, a.to(DType::BF16), tolerance(1e-9)).equal);
  // Across dtypes, an exact comparison counts the elements whose values differ.
  const TensorComparison rounded = compare_tensors("x", Tensor::from<float>({1.0f, 1.1f}, {2}),
                                                   Tensor::from<double>({1.0, 1.1}, {2}));
  EXPECT_EQ(rounded.mismatched, 1u);
  EXPECT_EQ(rounded.first_mismatch, 1u);
  // Integers of two widths.
  const TensorComparison ints =
      compare_tensors("i", Tensor::from<std::int64_t>({1, 2, 3}, {3}),
                      Tensor::from<std::int32_t>({1, 2, 4}, {3}), tolerance(0.5));
  EXPECT_EQ(ints.mismatched, 1u);
  EXPECT_DOUBLE_EQ(ints.max_abs, 1.0);
  EXPECT_TRUE(compare_tensors("i", Tensor::from<std::int64_t>({1, 2, 3}, {3}),
                              Tensor::from<std::int32_t>({1, 2, 4}, {3}), tolerance(1))
                  .equal);
}

TEST(Compare, ZerosAreBitwiseWhenExact) {
  const Tensor pos = Tensor::from<float>({0.0f}, {1}), neg = Tensor::from<float>({-0.0f}, {1});
  const TensorComparison exact = compare_tensors("z", pos, neg);
  EXPECT_FALSE(exact.equal);
  EXPECT_EQ(exact.mismatched, 1u);
  EXPECT_DOUBLE_EQ(exact.max_abs, 0.0);
  EXPECT_TRUE(compare_tensors("z", pos, neg, tolerance(0, 0.5)).equal);
}

TEST(Compare, NaNsByPolicy) {
  const float other = nan_with_payload(0x7fc00001u);
  const Tensor a = Tensor::from<float>({kNaN, 1.0f}, {2});
  const Tensor same = Tensor::from<float>({kNaN, 1.0f}, {2});
  const Tensor payload = Tensor::from<float>({other, 1.0f}, {2});
  const Tensor number = Tensor::from<float>({2.0f, 1.0f}, {2});

  // Default: a NaN equals the same NaN only, exactly or with a tolerance.
  for (const CompareOptions& o : {CompareOptions{}, tolerance(0, 0.5)}) {
    const TensorComparison s = compare_tensors("n", a, same, o);
    EXPECT_TRUE(s.equal);
    EXPECT_EQ(s.a.nans, 1u);
    EXPECT_EQ(s.b.nans, 1u);
    const TensorComparison p = compare_tensors("n", a, payload, o);
    EXPECT_FALSE(p.equal);
    EXPECT_EQ(p.mismatched, 1u);
    EXPECT_EQ(p.first_mismatch, 0u);
    EXPECT_DOUBLE_EQ(p.max_abs, 0.0);  // NaN elements count as mismatched, not in max_abs
    EXPECT_FALSE(compare_tensors("n", a, number, o).equal);
  }
  // Across dtypes, the widened NaNs' bits decide.
  EXPECT_TRUE(compare_tensors("n", a, a.to(DType::F64), tolerance(1e-6)).equal);

  CompareOptions any;
  any.nan = NanEquality::any;
  EXPECT_TRUE(compare_tensors("n", a, payload, any).equal);
  EXPECT_FALSE(compare_tensors("n", a, number, any).equal);
  any.rtol = 0.1;
  EXPECT_TRUE(compare_tensors("n", a, payload, any).equal);

  CompareOptions never;
  never.nan = NanEquality::never;
  EXPECT_FALSE(compare_tensors("n", a, same, never).equal);
  EXPECT_EQ(compare_tensors("n", a, same, never).mismatched, 1u);
  never.atol = 1;
  EXPECT_FALSE(compare_tensors("n", a, same, never).equal);
  EXPECT_TRUE(compare_tensors("n", number, number, never).equal);
}

TEST(Compare, Infinities) {
  const Tensor a = Tensor::from<float>({kInf, -kInf, 1.0f}, {3});
  const TensorComparison same = compare_tensors("i", a, a, tolerance(1e-3));
  EXPECT_TRUE(same.equal);
  EXPECT_DOUBLE_EQ(same.max_abs, 0.0);  // inf - inf is not NaN here
  EXPECT_EQ(same.a.infinities, 2u);
  const TensorComparison flipped =
      compare_tensors("i", a, Tensor::from<float>({kInf, kInf, 1.0f}, {3}), tolerance(1e9));
  EXPECT_FALSE(flipped.equal);
  EXPECT_EQ(flipped.mismatched, 1u);
  EXPECT_EQ(flipped.max_abs, std::numeric_limits<double>::infinity());
  EXPECT_EQ(flipped.b.infinities, 2u);
  // b = 0 with a != 0: an infinite relative error.
  const TensorComparison zero = compare_tensors("z", Tensor::from<float>({1.0f}, {1}),
                                                Tensor::from<float>({0.0f}, {1}), tolerance(2));
  EXPECT_TRUE(zero.equal);
  EXPECT_EQ(zero.max_rel, std::numeric_limits<double>::infinity());
}

TEST(Compare, ComplexByModulusAndNeverWithReals) {
  using C = std::complex<float>;
  const Tensor a = Tensor::from<C>({C(1, 2), C(3, -1)}, {2});
  const Tensor b = Tensor::from<std::complex<double>>({{1, 2.001}, {3, -1}}, {2});
  const TensorComparison exact = compare_tensors("c", a, b);
  EXPECT_TRUE(exact.comparable());
  EXPECT_EQ(exact.mismatched, 1u);
  EXPECT_NEAR(exact.max_abs, 0.001, 1e-6);
  EXPECT_TRUE(compare_tensors("c", a, b, tolerance(0.002)).equal);
  EXPECT_TRUE(compare_tensors("c", a, a).equal);
  // The same stored bits per component, -0 in one imaginary part differs.
  EXPECT_FALSE(
      compare_tensors("c", Tensor::from<C>({C(1, 0)}, {1}), Tensor::from<C>({C(1, -0.0f)}, {1}))
          .equal);

  const TensorComparison mixed = compare_tensors("m", Tensor::from<float>({1, 2}, {2}),
                                                 Tensor::from<C>({C(1, 0), C(2, 0)}, {2}));
  EXPECT_EQ(mixed.check, ValueCheck::complex_real);
  EXPECT_FALSE(mixed.equal);
  EXPECT_EQ(mixed.a.description(), "F32[2]");
  EXPECT_EQ(mixed.b.description(), "C64[2]");
}

TEST(Compare, NonContiguousViewsAndEmptyTensors) {
  const Tensor m = Tensor::from<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor t = m.transpose(0, 1);  // [3, 2], a view
  ASSERT_FALSE(t.is_contiguous());
  EXPECT_TRUE(compare_tensors("t", t, Tensor::from<float>({1, 4, 2, 5, 3, 6}, {3, 2})).equal);
  const TensorComparison off =
      compare_tensors("t", t, Tensor::from<float>({1, 4, 2, 5, 3, 7}, {3, 2}));
  EXPECT_EQ(off.first_mismatch, 5u);  // C order of the view
  const TensorComparison empty =
      compare_tensors("e", Tensor::zeros(DType::F32, {0, 3}), Tensor::zeros(DType::F32, {0, 3}));
  EXPECT_TRUE(empty.equal);
  EXPECT_EQ(empty.numel, 0u);
}

TEST(Compare, ManyChunks) {
  // More elements than one chunk of the comparison: indices stay global.
  const std::size_t n = (1u << 16) * 2 + 5;
  std::vector<float> x(n, 1.0f);
  std::vector<float> y = x;
  y[n - 2] = 2.0f;
  const TensorComparison d = compare_tensors(
      "big", Tensor::from(std::span<const float>(x), {static_cast<std::int64_t>(n)}),
      Tensor::from(std::span<const float>(y), {static_cast<std::int64_t>(n)}));
  EXPECT_EQ(d.numel, n);
  EXPECT_EQ(d.mismatched, 1u);
  EXPECT_EQ(d.first_mismatch, n - 2);
}

std::shared_ptr<Quantization> per_tensor(double scale, std::int64_t zero_point) {
  auto q = std::make_shared<Quantization>();
  q->scale = scale;
  q->zero_point = zero_point;
  return q;
}

TEST(Compare, QuantizedByRealValues) {
  const Tensor ints = Tensor::from<std::int8_t>({1, 2, 3, 4}, {4});
  const Tensor q = ints.with_quantization(per_tensor(0.5, 1));
  const TensorComparison self = compare_tensors("q", q, q);
  EXPECT_TRUE(self.equal);
  EXPECT_TRUE(self.a.quantized);
  EXPECT_EQ(self.a.dtype, DType::F32);
  EXPECT_EQ(self.a.stored_dtype, DType::I8);
  // A changed scale is a difference.
  const TensorComparison scaled =
      compare_tensors("q", q, ints.with_quantization(per_tensor(0.25, 1)));
  EXPECT_FALSE(scaled.equal);
  EXPECT_EQ(scaled.mismatched, 3u);  // all but the zero point
  // The same real values in another integer dtype are equal: both sides are F32.
  const Tensor u =
      Tensor::from<std::uint8_t>({2, 3, 4, 5}, {4}).with_quantization(per_tensor(0.5, 2));
  const TensorComparison other = compare_tensors("q", q, u);
  EXPECT_FALSE(other.dtype_differs());
  EXPECT_EQ(other.b.stored_dtype, DType::U8);
  EXPECT_TRUE(other.equal);
  // Against a plain tensor of its real values.
  EXPECT_TRUE(compare_tensors("q", q, Tensor::from<float>({0, 0.5f, 1, 1.5f}, {4})).equal);
  // A quantized tensor whose shape differs is not dequantized, only described.
  const TensorComparison shaped = compare_tensors("q", q, Tensor::from<float>({0, 0.5f}, {2}));
  EXPECT_EQ(shaped.check, ValueCheck::shape_differs);
  EXPECT_EQ(shaped.a.description(), "F32[4]");
}

std::shared_ptr<SparseParts> coo(std::vector<std::int64_t> rows_cols, std::vector<float> values) {
  auto p = std::make_shared<SparseParts>();
  p->layout = SparseParts::Layout::coo;
  p->size = {2, 2};
  const auto nnz = static_cast<std::int64_t>(values.size());
  p->indices = Tensor::from(std::span<const std::int64_t>(rows_cols), {2, nnz});
  p->values = Tensor::from(std::span<const float>(values), {nnz});
  return p;
}

TEST(Compare, SparseByDenseValues) {
  const Tensor s = Tensor::sparse_tensor(coo({0, 1, 1, 0}, {1.0f, 2.0f}));  // (0,1)=1, (1,0)=2
  const Tensor dense = Tensor::from<float>({0, 1, 2, 0}, {2, 2});
  const TensorComparison d = compare_tensors("s", s, dense);
  EXPECT_TRUE(d.equal);
  EXPECT_TRUE(d.a.sparse);
  EXPECT_FALSE(d.b.sparse);
  EXPECT_EQ(d.a.dtype, DType::F32);
  const TensorComparison changed =
      compare_tensors("s", s, Tensor::sparse_tensor(coo({0, 1, 1, 1}, {1.0f, 2.0f})));
  EXPECT_FALSE(changed.equal);
  EXPECT_EQ(changed.mismatched, 2u);
  EXPECT_EQ(changed.first_mismatch, 2u);
  // Unreadable parts: an Error naming the tensor.
  try {
    compare(catalog({{"bad", Tensor::sparse_tensor(coo({0, 5}, {1.0f}))}}),
            catalog({{"bad", dense}}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.key(), "bad");
  }
}

TEST(Compare, InvalidTolerancesAreRefused) {
  const Tensor a = Tensor::from<float>({1}, {1});
  for (const CompareOptions& o : {tolerance(-1), tolerance(0, -1e-9), tolerance(std::nan(""), 0),
                                  tolerance(0, std::nan(""))}) {
    EXPECT_THROW(o.validate(), Error);
    EXPECT_THROW(compare_tensors("x", a, a, o), Error);
    try {
      compare(TensorCatalog{}, TensorCatalog{}, o);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
      EXPECT_EQ(e.message(), "tolerances must be non-negative numbers");
    }
  }
  EXPECT_NO_THROW(tolerance(std::numeric_limits<double>::infinity()).validate());
  EXPECT_TRUE(compare_tensors("x", a, Tensor::from<float>({1e30f}, {1}),
                              tolerance(std::numeric_limits<double>::infinity()))
                  .equal);
}

}  // namespace
