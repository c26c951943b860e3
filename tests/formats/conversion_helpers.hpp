#pragma once
// Helpers for the conversion tests: catalogues built in C++ (every dtype,
// views, tied weights, 0-d and empty tensors), hand-made safetensors bytes,
// and error expectations.

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "torchport/core/error.hpp"
#include "torchport/formats/catalog.hpp"

namespace torchport::test {

/// A contiguous tensor of `dtype` and `shape` whose bytes are a
/// deterministic pattern seeded by `seed` (any bit pattern: float NaNs and
/// infinities included, which round trips must keep bit-exact).
inline Tensor patterned(DType dtype, Shape shape, unsigned seed) {
  Tensor t = Tensor::empty(dtype, std::move(shape));
  auto b = t.mutable_bytes();
  std::uint32_t x = 2463534242u + seed * 7919u;
  for (auto& byte : b) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    byte = static_cast<std::byte>(x & 0xFF);
  }
  if (dtype == DType::BOOL)
    for (auto& byte : b) byte = static_cast<std::byte>(static_cast<unsigned>(byte) & 1u);
  return t;
}

/// One tensor of every dtype torchport knows, named after it ("F32", ...),
/// shaped [2, 3] (the dtypes safetensors cannot hold are skipped when
/// `safetensors_only`).
inline std::vector<NamedTensor> every_dtype(bool safetensors_only) {
  std::vector<NamedTensor> out;
  for (int i = 0; i < kDTypeCount; ++i) {
    const auto d = static_cast<DType>(i);
    if (safetensors_only && (d == DType::C32 || d == DType::C128 || d == DType::BC32 ||
                             d == DType::F8_E4M3FNUZ || d == DType::F8_E5M2FNUZ || is_bits(d)))
      continue;
    out.push_back({std::string(dtype_name(d)), patterned(d, {2, 3}, static_cast<unsigned>(i))});
  }
  return out;
}

/// Views, tied weights, a 0-d and empty tensors over shared storages.
inline std::vector<NamedTensor> views_and_ties() {
  const Tensor base = patterned(DType::F32, {4, 6}, 99);
  const Tensor halfs = patterned(DType::F16, {10}, 7);
  return {
      {"fc.weight", base},
      {"fc.weight_t", base.transpose(0, 1)},         // non-contiguous view
      {"fc.rows", base.narrow(0, 1, 2)},             // offset view, contiguous
      {"fc.cols", base.narrow(1, 2, 3)},             // offset, strided
      {"tied.weight", base},                         // tied: the same storage and view
      {"half.tail", halfs.narrow(0, 3, 7)},          // offset into a 2-byte storage
      {"scalar", Tensor::scalar(3.25f)},             // 0-d
      {"empty", Tensor::zeros(DType::I64, {0, 5})},  // no elements
      {"empty_1d", Tensor::zeros(DType::BF16, {0})},
  };
}

/// The two catalogues hold the same names (in any order when `any_order`),
/// dtypes, shapes and bytes.
inline void expect_same_tensors(const TensorCatalog& got, const std::vector<NamedTensor>& want,
                                bool any_order = false) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    const Tensor* t = any_order ? got.find(want[i].name) : &got.tensors()[i].tensor;
    ASSERT_NE(t, nullptr);
    if (!any_order) {
      EXPECT_EQ(got.tensors()[i].name, want[i].name);
    }
    EXPECT_EQ(t->dtype(), want[i].tensor.dtype());
    EXPECT_EQ(t->shape(), want[i].tensor.shape());
    EXPECT_TRUE(t->equal(want[i].tensor));
  }
}

/// Runs `f`, which must throw an Error of `code` whose what() contains
/// every one of `parts`; returns it for further checks.
inline Error expect_error(const std::function<void()>& f, ErrorCode code,
                          std::initializer_list<std::string> parts) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "'" << p << "' not in: " << e.what();
    return e;
  }
  ADD_FAILURE() << "no Error thrown";
  return Error(ErrorCode::io, "none");
}

/// Safetensors bytes: the 8-byte length, `header` verbatim, then `data`.
inline std::vector<std::byte> safetensors_bytes(const std::string& header, std::size_t data_bytes,
                                                std::uint64_t declared = UINT64_MAX) {
  const std::uint64_t n = declared == UINT64_MAX ? header.size() : declared;
  std::vector<std::byte> out(8 + header.size() + data_bytes);
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  for (std::size_t i = 0; i < data_bytes; ++i)
    out[8 + header.size() + i] = static_cast<std::byte>(i * 7 + 1);
  return out;
}

/// Files in `dir` (names only), to check that no temporary was left behind.
inline std::vector<std::string> files_in(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace torchport::test
