// Unit tests of torchport::nn without files: hand-computed values, the dtype
// and ownership contract, strided inputs, and every validation branch.

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "nn/parity.hpp"
#include "support/expect_error.hpp"
#include "torchport/core/error.hpp"
#include "torchport/nn/ops.hpp"

namespace torchport::test {
namespace {

namespace nn = torchport::nn;

constexpr Tolerance kExact{0, 0};
constexpr Tolerance kTight{1e-6, 1e-6};

Tensor iota(Shape shape, float start = 0, float step = 1) {
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = start + step * static_cast<float>(i);
  return Tensor::from(std::span<const float>(v), std::move(shape));
}

// Deterministic values in [-1, 1) (a linear congruential generator).
Tensor noise(Shape shape, std::uint32_t seed) {
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return Tensor::from(std::span<const float>(v), std::move(shape));
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// ------------------------------------------------------------- the comparator

TEST(NnComparator, CatchesWhatItMust) {
  const Tensor e = f32({1, 100, kNaN}, {3});
  expect_close(f32({1.00001f, 100.0009f, kNaN}, {3}), e, {1e-5, 1e-6}, "within");
  EXPECT_NONFATAL_FAILURE(expect_close(f32({1.0001f, 100, kNaN}, {3}), e, {1e-5, 1e-6}, "x"),
                          "1 of 3 elements");
  EXPECT_NONFATAL_FAILURE(expect_close(f32({1, 100, 0}, {3}), e, {1e-5, 1e-6}, "x"), "outside");
  EXPECT_FATAL_FAILURE(expect_close(f32({1, 100}, {2}), f32({1, 100}, {1, 2}), {1, 1}, "x"),
                       "shape");
  EXPECT_FATAL_FAILURE(expect_close(f32({1}, {1}).to(DType::F64), f32({1}, {1}), {1, 1}, "x"),
                       "dtype");
}

// ------------------------------------------------------------- contract

TEST(NnContract, DtypePromotion) {
  const Tensor a = iota({2, 2});
  EXPECT_EQ(nn::add(a, a.to(DType::F16)).dtype(), DType::F32);
  EXPECT_EQ(nn::add(a.to(DType::BF16), a.to(DType::BF16)).dtype(), DType::F32);
  EXPECT_EQ(nn::mul(a, a.to(DType::F64)).dtype(), DType::F64);
  EXPECT_EQ(nn::relu(a.to(DType::F16)).dtype(), DType::F32);
  EXPECT_EQ(nn::exp(a.to(DType::F64)).dtype(), DType::F64);
  EXPECT_EQ(nn::matmul(a.to(DType::BF16), a).dtype(), DType::F32);
  expect_close(nn::add(a.to(DType::F16), 1.0), f32({1, 2, 3, 4}, {2, 2}), kExact,
               "f16 + scalar in f32");
}

TEST(NnContract, RefusesNonFloatingAndUndefined) {
  const Tensor i = Tensor::from<std::int64_t>({1, 2}, {2});
  expect_error([&] { nn::add(i, i); }, ErrorCode::invalid_argument, "I64[2]");
  expect_error([&] { nn::relu(i); }, ErrorCode::invalid_argument, "floating");
  expect_error([&] { nn::matmul(i, i); }, ErrorCode::invalid_argument, "[matmul]");
  expect_error([&] { nn::softmax(Tensor(), 0); }, ErrorCode::invalid_argument, "undefined");
  expect_error([&] { nn::linear(iota({2}), Tensor()); }, ErrorCode::invalid_argument,
               "weight is undefined");
}

TEST(NnContract, ResultsAreFreshAndOwned) {
  const Tensor x = iota({2, 3});
  for (const Tensor& y :
       {nn::flatten(x), nn::slice(x, 0, 0), nn::concat({x}, 0), nn::relu(x), nn::add(x, 0.0),
        nn::softmax(x, 1), nn::repeat_kv(x.reshape({1, 1, 2, 3}), 1)}) {
    EXPECT_NE(y.storage().get(), x.storage().get());
    EXPECT_TRUE(y.is_contiguous());
    EXPECT_TRUE(y.storage()->writable());
  }
}

// ------------------------------------------------------------- elementwise

TEST(NnElementwise, BroadcastsStridedOperands) {
  const Tensor a = iota({3, 2});        // [[0,1],[2,3],[4,5]]
  const Tensor at = a.transpose(0, 1);  // [[0,2,4],[1,3,5]], strided
  const Tensor col = f32({10, 20}, {2, 1});
  expect_close(nn::add(at, col), f32({10, 12, 14, 21, 23, 25}, {2, 3}), kExact,
               "transposed + column");
  expect_close(nn::mul(col, at), f32({0, 20, 40, 20, 60, 100}, {2, 3}), kExact,
               "column * transposed");
  expect_close(nn::sub(Tensor::scalar(1.0f), at), f32({1, -1, -3, 0, -2, -4}, {2, 3}), kExact,
               "0-d - tensor");
  expect_close(nn::div(f32({1, -1, 0}, {3}), f32({0}, {1})), f32({kInf, -kInf, kNaN}, {3}), kExact,
               "x / 0");
}

TEST(NnElementwise, ShapeMismatchNamesShapes) {
  expect_error(
      [] {
        nn::add(iota({2, 3}), iota({4}));
      },
      ErrorCode::shape_mismatch, "[2, 3] and [4]");
  expect_error([] { nn::mul(iota({2, 3, 1}), iota({4, 2})); }, ErrorCode::shape_mismatch, "[mul]");
}

TEST(NnElementwise, Unary) {
  const Tensor x = f32({0, 1, 4}, {3});
  expect_close(nn::sqrt(x), f32({0, 1, 2}, {3}), kExact, "sqrt");
  expect_close(nn::rsqrt(x), f32({kInf, 1, 0.5f}, {3}), kExact, "rsqrt");
  expect_close(nn::log(x), f32({-kInf, 0, std::log(4.0f)}, {3}), kExact, "log");
  expect_close(nn::pow(x, 2.0), f32({0, 1, 16}, {3}), kExact, "pow 2");
  expect_close(nn::neg(x), f32({-0.0f, -1, -4}, {3}), kExact, "neg");
}

// ------------------------------------------------------------- matmul

TEST(NnMatmul, HandComputed) {
  const Tensor a = iota({2, 3}, 1);  // [[1,2,3],[4,5,6]]
  const Tensor b = iota({3, 2}, 1);  // [[1,2],[3,4],[5,6]]
  expect_close(nn::matmul(a, b), f32({22, 28, 49, 64}, {2, 2}), kExact, "[2,3] @ [3,2]");
  expect_close(nn::matmul(a.transpose(0, 1), a), f32({17, 22, 27, 22, 29, 36, 27, 36, 45}, {3, 3}),
               kExact, "a^T @ a through a transposed view");
  const Tensor dot = nn::matmul(f32({1, 2, 3}, {3}), f32({4, 5, 6}, {3}));
  EXPECT_EQ(dot.dim(), 0);
  EXPECT_EQ(dot.span<float>()[0], 32.0f);
  // Empty inner dimension: a sum of nothing is 0.
  expect_close(nn::matmul(Tensor::zeros(DType::F32, {2, 0}), Tensor::zeros(DType::F32, {0, 3})),
               Tensor::zeros(DType::F32, {2, 3}), kExact, "K = 0");
}

TEST(NnMatmul, ExpandedRowsAreNotFolded) {
  // A [3, 1, 2] operand whose batch stride is 0 (one row, expanded): the
  // batch cannot be folded into the rows of one gemm.
  const Tensor row = f32({1, 2}, {1, 2});
  const Tensor expanded(DType::F32, {3, 1, 2}, {0, 2, 1}, 0, row.storage());
  const Tensor b = iota({2, 2}, 1);  // [[1,2],[3,4]]
  expect_close(nn::matmul(expanded, b), f32({7, 10, 7, 10, 7, 10}, {3, 1, 2}), kExact,
               "stride-0 batch");
  // Stride-0 columns are copied before BLAS sees them.
  const Tensor cols(DType::F32, {2, 2}, {1, 0}, 0, row.storage());  // [[1,1],[2,2]]
  expect_close(nn::matmul(cols, b), f32({4, 6, 8, 12}, {2, 2}), kExact, "stride-0 columns");
}

TEST(NnMatmul, Errors) {
  expect_error(
      [] {
        nn::matmul(iota({2, 3}), iota({4, 2}));
      },
      ErrorCode::shape_mismatch, "inner sizes 3 and 4");
  expect_error(
      [] {
        nn::matmul(iota({2, 2, 3}), iota({3, 3, 2}));
      },
      ErrorCode::shape_mismatch, "broadcast");
  expect_error([] { nn::matmul(Tensor::scalar(1.0f), iota({2})); }, ErrorCode::invalid_argument,
               "at least one");
}

TEST(NnLinear, HandComputedAndErrors) {
  const Tensor x = f32({1, 2}, {1, 2});
  const Tensor w = f32({1, 0, -1, 0, 1, 2}, {2, 3});  // [in 2, out 3]
  expect_close(nn::linear(x, w, f32({10, 20, 30}, {3})), f32({11, 22, 33}, {1, 3}), kExact,
               "x @ W + b");
  expect_error([&] { nn::linear(x, w.transpose(0, 1)); }, ErrorCode::shape_mismatch, "[in, out]");
  expect_error([&] { nn::linear(x, w, f32({1, 2}, {2})); }, ErrorCode::shape_mismatch, "bias [2]");
  expect_error([&] { nn::linear(x, iota({2, 3, 1})); }, ErrorCode::invalid_argument, "not 2-d");
}

// ------------------------------------------------------------- shape ops

TEST(NnShape, ConcatRules) {
  const Tensor i = Tensor::from<std::int64_t>({1, 2}, {2});
  const Tensor c = nn::concat({i, i}, 0);
  EXPECT_EQ(c.dtype(), DType::I64);
  EXPECT_TRUE(c.equal(Tensor::from<std::int64_t>({1, 2, 1, 2}, {4})));
  const Tensor mixed = nn::concat({f32({1}, {1}), f32({2}, {1}).to(DType::F16)}, 0);
  EXPECT_EQ(mixed.dtype(), DType::F32);
  expect_error([] { nn::concat({}, 0); }, ErrorCode::invalid_argument, "no tensors");
  expect_error([&] { nn::concat({i, f32({1}, {1})}, 0); }, ErrorCode::invalid_argument, "floating");
  expect_error(
      [] {
        nn::concat({iota({2, 3}), iota({3, 3})}, 1);
      },
      ErrorCode::shape_mismatch, "tensor 1 [3, 3]");
  expect_error([] { nn::concat({iota({2, 3}), iota({6})}, 0); }, ErrorCode::shape_mismatch, "[6]");
  expect_error([] { nn::concat({iota({2})}, 1); }, ErrorCode::invalid_argument, "out of range");
}

TEST(NnShape, SliceClampsLikePython) {
  const Tensor x = iota({5});
  expect_close(nn::slice(x, 0, -100, 100, 2), f32({0, 2, 4}, {3}), kExact, "x[-100:100:2]");
  expect_close(nn::slice(x, 0, -2), f32({3, 4}, {2}), kExact, "x[-2:]");
  EXPECT_EQ(nn::slice(x, 0, 4, 1).numel(), 0);
  expect_error([&] { nn::slice(x, 0, 0, 5, 0); }, ErrorCode::invalid_argument, "step 0");
  expect_error([&] { nn::slice(x, 1, 0); }, ErrorCode::invalid_argument, "out of range");
}

TEST(NnShape, Flatten) {
  EXPECT_EQ(nn::flatten(Tensor::scalar(2.0f)).shape(), (Shape{1}));
  EXPECT_EQ(nn::flatten(iota({2, 3, 4, 5}), 1, -2).shape(), (Shape{2, 12, 5}));
  expect_error([] { nn::flatten(iota({2, 3}), 1, 0); }, ErrorCode::invalid_argument, "comes after");
}

// ------------------------------------------------------------- reductions

TEST(NnReduce, EdgeCases) {
  const Tensor x = iota({2, 3});
  expect_close(nn::sum(x, {0, -1}, true), f32({15}, {1, 1}), kExact, "sum all, keepdim");
  expect_close(nn::var(x, {1}, false), f32({2.0f / 3, 2.0f / 3}, {2}), kTight, "biased var");
  expect_error([&] { nn::sum(x, {1, -1}); }, ErrorCode::invalid_argument, "more than once");
  expect_error([&] { nn::mean(x, {2}); }, ErrorCode::invalid_argument, "out of range");
  const Tensor empty = Tensor::zeros(DType::F32, {2, 0});
  expect_close(nn::sum(empty, {1}), f32({0, 0}, {2}), kExact, "empty sum");
  expect_close(nn::mean(empty, {1}), f32({kNaN, kNaN}, {2}), kExact, "empty mean");
  expect_error([&] { nn::max(empty, {1}); }, ErrorCode::invalid_argument, "empty dimension");
  expect_error([&] { nn::argmax(empty); }, ErrorCode::invalid_argument, "empty dimension");
  expect_close(nn::var(f32({3}, {1})), Tensor::scalar(kNaN), kExact, "unbiased var of one value");
}

TEST(NnReduce, NaNPropagates) {
  const Tensor x = f32({1, kNaN, 3, 5, 4, 2}, {2, 3});
  expect_close(nn::max(x, {1}), f32({kNaN, 5}, {2}), kExact, "amax with NaN");
  EXPECT_TRUE(nn::argmax(x, 1).equal(Tensor::from<std::int64_t>({1, 0}, {2})));
  expect_close(nn::relu(x), f32({1, kNaN, 3, 5, 4, 2}, {2, 3}), kExact, "relu keeps NaN");
}

TEST(NnReduce, Softmax) {
  const Tensor x = f32({-kInf, -kInf, 0, 1000}, {2, 2});
  expect_close(nn::softmax(x, 1), f32({kNaN, kNaN, 0, 1}, {2, 2}), kExact,
               "all -inf row and a huge logit");
  expect_close(nn::softmax(Tensor::scalar(3.0f), 0), Tensor::scalar(1.0f), kExact, "0-d");
  expect_close(nn::log_softmax(f32({0, 0}, {2}), 0), f32({-std::log(2.0f), -std::log(2.0f)}, {2}),
               kTight, "log_softmax uniform");
}

// ------------------------------------------------------------- activations

TEST(NnActivation, PreluChecksWeight) {
  expect_error(
      [] {
        nn::prelu(iota({2, 3, 4}), f32({1, 2}, {2}));
      },
      ErrorCode::shape_mismatch, "1 or 3");
  expect_error(
      [] {
        nn::prelu(iota({4}), f32({1, 2, 3, 4}, {4}));
      },
      ErrorCode::shape_mismatch, "needs 1 or 1");
  expect_close(nn::prelu(f32({-2, 2}, {2}), f32({0.5f}, {1})), f32({-1, 2}, {2}), kExact,
               "1-d, one weight");
}

// ------------------------------------------------------------- conv

TEST(NnConv, HandComputed) {
  const Tensor x = iota({1, 1, 3, 3}, 1);  // 1..9
  const Tensor ones = f32({1, 1, 1, 1}, {1, 1, 2, 2});
  expect_close(nn::conv2d(x, ones), f32({12, 16, 24, 28}, {1, 1, 2, 2}), kExact, "2x2 box sums");
  expect_close(nn::conv2d(x, ones, f32({1}, {1}), {.stride = 2, .padding = 1}),
               f32({2, 6, 12, 29}, {1, 1, 2, 2}), kExact, "padded, strided, bias");
  // Transposed: each input value stamps the kernel at stride 2.
  expect_close(nn::conv_transpose1d(f32({1, 2}, {1, 1, 2}), f32({1, 10}, {1, 1, 2}), Tensor(),
                                    {.stride = 2}),
               f32({1, 10, 2, 20}, {1, 1, 4}), kExact, "transposed stamp");
  expect_close(nn::conv_transpose1d(f32({1, 2}, {1, 1, 2}), f32({1, 10, 100}, {1, 1, 3})),
               f32({1, 12, 120, 200}, {1, 1, 4}), kExact, "transposed overlap");
}

// Direct convolution in double: the reference for inputs too large for a fixture.
Tensor naive_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, std::int64_t stride,
                    std::int64_t pad) {
  const std::int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
  const std::int64_t o = w.size(0), kh = w.size(2), kw = w.size(3);
  const std::int64_t ho = (h + 2 * pad - kh) / stride + 1, wo = (wd + 2 * pad - kw) / stride + 1;
  const auto xs = x.span<float>(), ws = w.span<float>(), bs = b.span<float>();
  std::vector<float> out(static_cast<std::size_t>(n * o * ho * wo));
  std::size_t idx = 0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t oc = 0; oc < o; ++oc)
      for (std::int64_t y = 0; y < ho; ++y)
        for (std::int64_t z = 0; z < wo; ++z) {
          double acc = bs[static_cast<std::size_t>(oc)];
          for (std::int64_t ic = 0; ic < c; ++ic)
            for (std::int64_t ki = 0; ki < kh; ++ki)
              for (std::int64_t kj = 0; kj < kw; ++kj) {
                const std::int64_t iy = y * stride - pad + ki, iz = z * stride - pad + kj;
                if (iy < 0 || iy >= h || iz < 0 || iz >= wd) continue;
                acc += static_cast<double>(
                           xs[static_cast<std::size_t>(((i * c + ic) * h + iy) * wd + iz)]) *
                       ws[static_cast<std::size_t>(((oc * c + ic) * kh + ki) * kw + kj)];
              }
          out[idx++] = static_cast<float>(acc);
        }
  return Tensor::from(std::span<const float>(out), {n, o, ho, wo});
}

// Transposed convolution by scattering, in double (groups 1, dilation 1).
Tensor naive_conv_transpose2d(const Tensor& x, const Tensor& w, std::int64_t stride,
                              std::int64_t pad) {
  const std::int64_t c = x.size(1), h = x.size(2), wd = x.size(3);
  const std::int64_t o = w.size(1), kh = w.size(2), kw = w.size(3);
  const std::int64_t ho = (h - 1) * stride - 2 * pad + kh, wo = (wd - 1) * stride - 2 * pad + kw;
  const auto xs = x.span<float>(), ws = w.span<float>();
  std::vector<double> acc(static_cast<std::size_t>(o * ho * wo), 0.0);
  for (std::int64_t ic = 0; ic < c; ++ic)
    for (std::int64_t y = 0; y < h; ++y)
      for (std::int64_t z = 0; z < wd; ++z)
        for (std::int64_t oc = 0; oc < o; ++oc)
          for (std::int64_t ki = 0; ki < kh; ++ki)
            for (std::int64_t kj = 0; kj < kw; ++kj) {
              const std::int64_t oy = y * stride - pad + ki, oz = z * stride - pad + kj;
              if (oy < 0 || oy >= ho || oz < 0 || oz >= wo) continue;
              acc[static_cast<std::size_t>((oc * ho + oy) * wo + oz)] +=
                  static_cast<double>(xs[static_cast<std::size_t>((ic * h + y) * wd + z)]) *
                  ws[static_cast<std::size_t>(((ic * o + oc) * kh + ki) * kw + kj)];
            }
  std::vector<float> out(acc.begin(), acc.end());
  return Tensor::from(std::span<const float>(out), {1, o, ho, wo});
}

TEST(NnConv, LargeImagesAreUnfoldedInBands) {
  // 576 x 2025 (and 576 x 2116) columns exceed the 2^20-element im2col
  // budget, so the output is computed in two bands of rows.
  for (const auto& [size, stride] : {std::pair{45, 1}, std::pair{91, 2}}) {
    SCOPED_TRACE("input " + std::to_string(size) + ", stride " + std::to_string(stride));
    const Tensor x = noise({1, 64, size, size}, 1);
    const Tensor w = nn::mul(noise({3, 64, 3, 3}, 2), 0.05);
    const Tensor b = f32({0.5f, -1, 2}, {3});
    expect_close(nn::conv2d(x, w, b, {.stride = stride, .padding = 1}),
                 naive_conv2d(x, w, b, stride, 1), {1e-5, 1e-5}, "banded conv vs direct");
  }
  // Transposed: 64*4*4 = 1024 column rows x 40*40 input positions: two bands.
  const Tensor x = noise({1, 8, 40, 40}, 3);
  const Tensor w = nn::mul(noise({8, 64, 4, 4}, 4), 0.2);
  expect_close(nn::conv_transpose2d(x, w, Tensor(), {.stride = 2, .padding = 1}),
               naive_conv_transpose2d(x, w, 2, 1), {1e-5, 1e-5},
               "banded transposed conv vs scatter");
}

TEST(NnConv, Errors) {
  const Tensor x = iota({1, 4, 5, 5});
  expect_error(
      [&] {
        nn::conv2d(x, iota({2, 3, 3, 3}));
      },
      ErrorCode::shape_mismatch, "weight [2, 3, 3, 3]");
  expect_error(
      [&] {
        nn::conv2d(x, iota({3, 2, 3, 3}), Tensor(), {.groups = 2});
      },
      ErrorCode::shape_mismatch, "divisible by groups");
  expect_error(
      [&] {
        nn::conv2d(x, iota({2, 4, 7, 3}));
      },
      ErrorCode::shape_mismatch, "smaller than the dilated");
  expect_error(
      [&] {
        nn::conv2d(x, iota({2, 4, 3, 3}), Tensor(), {.stride = {1, 0}});
      },
      ErrorCode::invalid_argument, "stride (1, 0)");
  expect_error(
      [&] {
        nn::conv2d(x, iota({2, 4, 3, 3}), Tensor(), {.padding = -1});
      },
      ErrorCode::invalid_argument, "padding (-1, -1)");
  expect_error(
      [&] {
        nn::conv2d(x, iota({2, 4, 3, 3}), f32({1}, {1}));
      },
      ErrorCode::shape_mismatch, "bias [1]");
  expect_error(
      [&] {
        nn::conv2d(iota({4, 5}), iota({2, 4, 3, 3}));
      },
      ErrorCode::invalid_argument, "4-d");
  expect_error(
      [&] {
        nn::conv1d(iota({1, 4, 5}), iota({2, 4, 3, 3}));
      },
      ErrorCode::invalid_argument, "3-d");
  expect_error(
      [&] {
        nn::conv_transpose2d(x, iota({4, 2, 3, 3}), Tensor(), {.stride = 2, .output_padding = 2});
      },
      ErrorCode::invalid_argument, "output_padding (2, 2)");
  expect_error(
      [&] {
        nn::conv_transpose2d(x, iota({3, 2, 3, 3}));
      },
      ErrorCode::shape_mismatch, "C_in");
  expect_error(
      [&] {
        nn::conv_transpose1d(iota({1, 1, 1}), iota({1, 1, 1}), Tensor(), {.padding = 1});
      },
      ErrorCode::shape_mismatch, "empty output");
}

// ------------------------------------------------------------- norms

TEST(NnNorm, Errors) {
  const Tensor x = iota({2, 6, 3});
  expect_error([&] { nn::layer_norm(x, {6}); }, ErrorCode::shape_mismatch,
               "does not end in normalized_shape [6]");
  expect_error(
      [&] {
        nn::layer_norm(x, {3}, iota({1, 3}));
      },
      ErrorCode::shape_mismatch, "weight [1, 3]");
  expect_error([&] { nn::group_norm(x, 4); }, ErrorCode::invalid_argument,
               "not divisible into 4 groups");
  expect_error([&] { nn::batch_norm(x, iota({5}), iota({6})); }, ErrorCode::shape_mismatch,
               "running_mean [5]");
  expect_error([&] { nn::batch_norm(iota({6}), iota({6}), iota({6})); },
               ErrorCode::invalid_argument, "at least 2");
  expect_error([&] { nn::rms_norm(x, {2, 3}); }, ErrorCode::shape_mismatch, "[2, 3]");
}

TEST(NnNorm, HandComputed) {
  // layer_norm of [1, 3]: mean 2, biased var 2/3.
  const float r = 1.0f / std::sqrt(2.0f / 3 + 1e-5f);
  expect_close(nn::layer_norm(f32({1, 2, 3}, {1, 3}), {3}), f32({-r, 0, r}, {1, 3}), kTight,
               "layer_norm");
  expect_close(nn::rms_norm(f32({3, 4}, {2}), {2}, f32({1, 2}, {2}), 0.0),
               f32({3 / std::sqrt(12.5f), 8 / std::sqrt(12.5f)}, {2}), kTight, "rms_norm");
}

// ------------------------------------------------------------- embedding

TEST(NnEmbedding, Errors) {
  const Tensor w = iota({4, 2});
  expect_error(
      [&] {
        nn::embedding(Tensor::from<std::int64_t>({0, 4}, {2}), w);
      },
      ErrorCode::invalid_argument, "index 4 at position 1");
  expect_error([&] { nn::embedding(Tensor::from<std::int32_t>({-1}, {1}), w); },
               ErrorCode::invalid_argument, "index -1");
  expect_error([&] { nn::embedding(f32({0}, {1}), w); }, ErrorCode::invalid_argument, "I64 or I32");
  expect_error([&] { nn::embedding(Tensor::from<std::int64_t>({0}, {1}), iota({4})); },
               ErrorCode::invalid_argument, "not 2-d");
  expect_close(nn::embedding(Tensor::from<std::int64_t>({3, 0}, {2}), w), f32({6, 7, 0, 1}, {2, 2}),
               kExact, "rows 3 and 0");
}

// ------------------------------------------------------------- pooling

TEST(NnPool, HandComputedAndErrors) {
  const Tensor x = iota({1, 1, 2, 2}, 1);  // [[1,2],[3,4]]
  expect_close(nn::max_pool2d(x, 2), f32({4}, {1, 1, 1, 1}), kExact, "max 2x2");
  expect_close(nn::avg_pool2d(x, 2, {.stride = 1, .padding = 1}),
               f32({0.25f, 0.75f, 0.5f, 1.0f, 2.5f, 1.5f, 0.75f, 1.75f, 1.0f}, {1, 1, 3, 3}),
               kExact, "avg with pad counted");
  expect_close(nn::adaptive_avg_pool2d(x, 1), f32({2.5f}, {1, 1, 1, 1}), kExact, "global average");
  expect_error([&] { nn::max_pool2d(x, 2, {.padding = 2}); }, ErrorCode::invalid_argument,
               "at most half");
  expect_error([&] { nn::max_pool2d(x, 3); }, ErrorCode::invalid_argument, "too small");
  expect_error([&] { nn::avg_pool2d(x, 0); }, ErrorCode::invalid_argument, "must be >= 1");
  expect_error([&] { nn::avg_pool2d(x, 1, {.divisor_override = 0}); }, ErrorCode::invalid_argument,
               "divisor");
  expect_error(
      [&] {
        nn::adaptive_avg_pool2d(iota({2, 2}), 1);
      },
      ErrorCode::invalid_argument, "[C, H, W]");
}

// ------------------------------------------------------------- attention

TEST(NnAttention, SdpaMasksAndErrors) {
  // One query, two keys with equal scores: the mask alone picks the value.
  const Tensor q = f32({0, 0}, {1, 2}), k = f32({1, 0, 0, 1}, {2, 2}), v = f32({10, 20}, {2, 1});
  expect_close(nn::scaled_dot_product_attention(q, k, v), f32({15}, {1, 1}), kTight, "uniform");
  const Tensor allow_second = Tensor::from<bool>({false, true}, {1, 2});
  expect_close(nn::scaled_dot_product_attention(q, k, v, allow_second), f32({20}, {1, 1}), kExact,
               "bool mask: true attends");
  expect_close(nn::scaled_dot_product_attention(q, k, v, Tensor::from<bool>({false, false}, {2})),
               f32({kNaN}, {1, 1}), kExact, "all keys blocked");
  expect_error(
      [&] {
        nn::scaled_dot_product_attention(q, iota({2, 3}), v);
      },
      ErrorCode::shape_mismatch, "same E");
  expect_error([&] { nn::scaled_dot_product_attention(q, k, v, iota({3})); },
               ErrorCode::shape_mismatch, "does not broadcast");
  expect_error(
      [&] {
        nn::scaled_dot_product_attention(q, k, v, Tensor::from<std::int64_t>({1, 1}, {2}));
      },
      ErrorCode::invalid_argument, "BOOL");
  expect_error([&] { nn::scaled_dot_product_attention(f32({1}, {1}), k, v); },
               ErrorCode::invalid_argument, "at least 2");
}

TEST(NnAttention, MhaErrors) {
  const Tensor x = iota({3, 1, 4}), w = iota({4, 4}), none;
  auto run = [&](nn::MultiheadAttentionOptions o) {
    return nn::multi_head_attention(x, x, x, w, w, w, none, none, none, w, none, o);
  };
  expect_error([&] { run({.num_heads = 3}); }, ErrorCode::invalid_argument, "does not divide");
  expect_error(
      [&] {
        run({.num_heads = 2, .attn_mask = Tensor::zeros(DType::BOOL, {3, 2})});
      },
      ErrorCode::shape_mismatch, "attn_mask [3, 2]");
  expect_error([&] { run({.num_heads = 2, .key_padding_mask = Tensor::zeros(DType::BOOL, {3})}); },
               ErrorCode::shape_mismatch, "key_padding_mask [3] must be [1, 3]");
  expect_error(
      [&] {
        nn::multi_head_attention(x, x, x, w, iota({4, 2}), w, none, none, none, w, none, {});
      },
      ErrorCode::shape_mismatch, "embedding size");
  EXPECT_EQ(run({.num_heads = 2}).output.shape(), (Shape{3, 1, 4}));
}

TEST(NnAttention, RotaryAndRepeatKv) {
  // D = 2: out = [x0 c0 - x1 s0, x1 c1 + x0 s1], a plain 2-d rotation.
  const Tensor x = f32({1, 0}, {1, 2});
  const float c = std::cos(0.5f), s = std::sin(0.5f);
  expect_close(nn::apply_rotary(x, f32({c, c}, {1, 2}), f32({s, s}, {1, 2})), f32({c, s}, {1, 2}),
               kTight, "rotation");
  expect_error(
      [] {
        nn::apply_rotary(iota({2, 3}), iota({3}), iota({3}));
      },
      ErrorCode::invalid_argument, "even");
  expect_error(
      [] {
        nn::apply_rotary(iota({2, 4}), iota({3, 4}), iota({4}));
      },
      ErrorCode::shape_mismatch, "cos [3, 4]");
  const Tensor kv = Tensor::from<std::int32_t>({1, 2}, {1, 2, 1, 1});
  EXPECT_TRUE(nn::repeat_kv(kv, 2).equal(Tensor::from<std::int32_t>({1, 1, 2, 2}, {1, 4, 1, 1})));
  expect_error(
      [] {
        nn::repeat_kv(iota({2, 2}), 2);
      },
      ErrorCode::invalid_argument, "[N, H_kv, S, D]");
  expect_error(
      [] {
        nn::repeat_kv(iota({1, 1, 1, 1}), 0);
      },
      ErrorCode::invalid_argument, "n_rep 0");
}

// ------------------------------------------------------------- LSTM

nn::LstmLayerWeights lstm_layer(std::int64_t in, std::int64_t hidden, float value) {
  nn::LstmLayerWeights lw;
  for (std::size_t g = 0; g < 4; ++g) {
    lw.w_ih[g] = nn::add(Tensor::zeros(DType::F32, {in, hidden}), static_cast<double>(value));
    lw.w_hh[g] = Tensor::zeros(DType::F32, {hidden, hidden});
  }
  return lw;
}

TEST(NnLstm, HandComputedStep) {
  // One step, one unit, weights 1, x = 1, h0 = c0 = 0:
  // i = f = o = sigmoid(1), g = tanh(1), c = i g, h = o tanh(c).
  const std::vector<nn::LstmLayerWeights> layers{lstm_layer(1, 1, 1.0f)};
  const auto r = nn::lstm(f32({1}, {1, 1, 1}), layers);
  const float sg = 1 / (1 + std::exp(-1.0f)), cc = sg * std::tanh(1.0f);
  expect_close(r.c_n, f32({cc}, {1, 1, 1}), kTight, "c");
  expect_close(r.h_n, f32({sg * std::tanh(cc)}, {1, 1, 1}), kTight, "h");
  expect_close(r.output, r.h_n, kExact, "output = h at the only step");
}

TEST(NnLstm, Errors) {
  const Tensor x = iota({2, 1, 3});
  std::vector<nn::LstmLayerWeights> layers{lstm_layer(3, 2, 0.1f), lstm_layer(3, 2, 0.1f)};
  expect_error([&] { nn::lstm(x, {}); }, ErrorCode::invalid_argument, "no layers");
  expect_error([&] { nn::lstm(x, layers); }, ErrorCode::shape_mismatch,
               "layer 1 w_ih[i] is [3, 2], expected [2, 2]");
  layers.pop_back();
  expect_error(
      [&] {
        nn::lstm(x, layers, {.h0 = iota({1, 2})});
      },
      ErrorCode::shape_mismatch, "h0 [1, 2]");
  layers[0].b_hh[2] = iota({3});
  expect_error([&] { nn::lstm(x, layers); }, ErrorCode::shape_mismatch, "b_hh[g]");
  layers[0].b_hh[2] = Tensor();
  layers[0].w_hh[3] = Tensor();
  expect_error([&] { nn::lstm(x, layers); }, ErrorCode::invalid_argument, "w_hh[o] is undefined");
  expect_error([&] { nn::lstm(iota({3}), layers); }, ErrorCode::invalid_argument, "input [3]");
}

}  // namespace
}  // namespace torchport::test
