#include "torchport/nn/activation.hpp"

#include <cmath>
#include <numbers>

#include "nn/elementwise.hpp"

namespace torchport::nn {

Tensor relu(const Tensor& x) {
  // `v > 0 ? v : 0` would turn NaN into 0; torch's relu keeps it.
  return detail::unary_map("relu", x,
                           [](auto v) { return v < decltype(v)(0) ? decltype(v)(0) : v; });
}

Tensor gelu(const Tensor& x, GeluApproximation approximate) {
  if (approximate == GeluApproximation::tanh) {
    // aten/src/ATen/native/cpu/Activation.cpp: kBeta = sqrt(2) * 2/sqrt(pi) / 2.
    return detail::unary_map("gelu", x, [](auto v) {
      using T = decltype(v);
      constexpr T kBeta = static_cast<T>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);
      constexpr T kKappa = static_cast<T>(0.044715);
      const T inner = kBeta * (v + kKappa * v * v * v);
      return T(0.5) * v * (T(1) + std::tanh(inner));
    });
  }
  return detail::unary_map("gelu", x, [](auto v) {
    using T = decltype(v);
    constexpr T kAlpha = static_cast<T>(1.0 / std::numbers::sqrt2);
    return v * T(0.5) * (T(1) + std::erf(v * kAlpha));
  });
}

Tensor silu(const Tensor& x) {
  return detail::unary_map("silu", x, [](auto v) { return v / (decltype(v)(1) + std::exp(-v)); });
}

Tensor sigmoid(const Tensor& x) {
  return detail::unary_map("sigmoid", x,
                           [](auto v) { return decltype(v)(1) / (decltype(v)(1) + std::exp(-v)); });
}

Tensor tanh(const Tensor& x) {
  return detail::unary_map("tanh", x, [](auto v) { return std::tanh(v); });
}

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  return detail::unary_map("leaky_relu", x, [negative_slope](auto v) {
    using T = decltype(v);
    return v > T(0) ? v : v * static_cast<T>(negative_slope);
  });
}

Tensor prelu(const Tensor& x, const Tensor& weight) {
  constexpr std::string_view op = "prelu";
  detail::require_defined(op, x, "input");
  detail::require_defined(op, weight, "weight");
  const DType dt = detail::compute_dtype(op, {{&x, "input"}, {&weight, "weight"}});
  const std::int64_t channels = x.dim() >= 2 ? x.size(1) : 1;
  if (weight.numel() != 1 && weight.numel() != channels)
    detail::fail(ErrorCode::shape_mismatch, op,
                 "weight " + detail::str(weight.shape()) + " has " +
                     std::to_string(weight.numel()) + " values; input " + detail::str(x.shape()) +
                     " needs 1 or " + std::to_string(channels) + " (one per channel, dimension 1)");
  const Tensor src = x.to(dt);
  const Tensor w = weight.to(dt);
  Tensor out = Tensor::empty(dt, src.shape());
  detail::dispatch(dt, [&]<class T>() {
    const T* in = detail::cdata<T>(src);
    const T* wp = detail::cdata<T>(w);
    T* o = detail::mdata<T>(out);
    if (src.numel() == 0) return;
    // [outer, channels, inner] with the channel dimension in the middle.
    const std::int64_t outer = x.dim() >= 2 ? x.size(0) : 1;
    const std::int64_t inner = src.numel() / (outer * channels);
    const bool shared = weight.numel() == 1;
    for (std::int64_t n = 0; n < outer; ++n)
      for (std::int64_t c = 0; c < channels; ++c) {
        const T a = wp[shared ? 0 : c];
        const std::int64_t base = (n * channels + c) * inner;
        for (std::int64_t i = 0; i < inner; ++i) {
          const T v = in[base + i];
          o[base + i] = v > T(0) ? v : a * v;
        }
      }
  });
  return out;
}

}  // namespace torchport::nn
