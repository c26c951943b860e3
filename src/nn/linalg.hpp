#pragma once
// Private matrix-product helpers: typed cblas gemm and a scaled matmul.

#include <cstdint>
#include <string_view>

#include "nn/common.hpp"

namespace torchport::nn::detail {

/// C = alpha * op(A) @ op(B) + beta * C, row-major, where op transposes when
/// the flag is set. A is [M, K] after op, B [K, N], C [M, N].
/// \throws Error(limit_exceeded) when a size or leading dimension exceeds
/// BLAS's integer type.
template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
          const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
          std::int64_t ldc);

extern template void gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float,
                                 const float*, std::int64_t, const float*, std::int64_t, float,
                                 float*, std::int64_t);
extern template void gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double,
                                  const double*, std::int64_t, const double*, std::int64_t, double,
                                  double*, std::int64_t);

/// torch.matmul semantics (see nn::matmul) computed in `dt`, times `alpha`.
Tensor matmul_scaled(std::string_view op, const Tensor& a, const Tensor& b, double alpha, DType dt);

}  // namespace torchport::nn::detail
