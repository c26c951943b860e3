#pragma once
// Private softmax kernel, shared with attention.

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace torchport::nn::detail {

/// In-place softmax of each of `rows` contiguous rows of `cols` values.
template <class T>
void softmax_rows(T* p, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r, p += cols) {
    if (cols == 0) continue;
    T m = p[0];
    for (std::int64_t j = 1; j < cols; ++j) m = std::max(m, p[j]);
    double s = 0;
    for (std::int64_t j = 0; j < cols; ++j) {
      p[j] = std::exp(p[j] - m);
      s += p[j];
    }
    const T inv = static_cast<T>(1.0 / s);
    for (std::int64_t j = 0; j < cols; ++j) p[j] *= inv;
  }
}

}  // namespace torchport::nn::detail
