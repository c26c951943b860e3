#include "torchport/nn/elementwise.hpp"

#include <cmath>

#include "nn/elementwise.hpp"

namespace torchport::nn {
namespace {

using detail::dispatch;

template <class F>
Tensor binary(std::string_view op, const Tensor& a, const Tensor& b, F f) {
  detail::require_defined(op, a, "first operand");
  detail::require_defined(op, b, "second operand");
  const DType dt = detail::compute_dtype(op, {{&a, "first operand"}, {&b, "second operand"}});
  const Shape shape = detail::broadcast_shapes(op, a.shape(), b.shape());
  // Operands already in the compute dtype are read through their strides;
  // others are converted (which makes them contiguous).
  const Tensor x = a.dtype() == dt ? a : a.to(dt);
  const Tensor y = b.dtype() == dt ? b : b.to(dt);
  Tensor out = Tensor::empty(dt, shape);
  if (out.numel() == 0) return out;
  dispatch(dt, [&]<class T>() {
    detail::binary_kernel<T>(
        detail::view_data<T>(x), detail::broadcast_strides(x.shape(), x.strides(), shape),
        detail::view_data<T>(y), detail::broadcast_strides(y.shape(), y.strides(), shape),
        out.mutable_data<T>(), shape, f);
  });
  return out;
}

template <class F>
Tensor with_scalar(std::string_view op, const Tensor& a, double s, F f) {
  detail::require_defined(op, a, "input");
  const DType dt = detail::compute_dtype(op, {{&a, "input"}});
  const Tensor x = a.to(dt);
  Tensor out = Tensor::empty(dt, x.shape());
  dispatch(dt, [&]<class T>() {
    const T v = static_cast<T>(s);
    const T* in = detail::cdata<T>(x);
    T* o = detail::mdata<T>(out);
    for (std::int64_t i = 0; i < x.numel(); ++i) o[i] = f(in[i], v);
  });
  return out;
}

const auto kAdd = [](auto p, auto q) { return p + q; };
const auto kSub = [](auto p, auto q) { return p - q; };
const auto kMul = [](auto p, auto q) { return p * q; };
const auto kDiv = [](auto p, auto q) { return p / q; };

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return binary("add", a, b, kAdd);
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return binary("sub", a, b, kSub);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return binary("mul", a, b, kMul);
}
Tensor div(const Tensor& a, const Tensor& b) {
  return binary("div", a, b, kDiv);
}

Tensor add(const Tensor& a, double s) {
  return with_scalar("add", a, s, kAdd);
}
Tensor sub(const Tensor& a, double s) {
  return with_scalar("sub", a, s, kSub);
}
Tensor mul(const Tensor& a, double s) {
  return with_scalar("mul", a, s, kMul);
}
Tensor div(const Tensor& a, double s) {
  return with_scalar("div", a, s, kDiv);
}

Tensor neg(const Tensor& x) {
  return detail::unary_map("neg", x, [](auto v) { return -v; });
}
Tensor exp(const Tensor& x) {
  return detail::unary_map("exp", x, [](auto v) { return std::exp(v); });
}
Tensor log(const Tensor& x) {
  return detail::unary_map("log", x, [](auto v) { return std::log(v); });
}
Tensor sqrt(const Tensor& x) {
  return detail::unary_map("sqrt", x, [](auto v) { return std::sqrt(v); });
}
Tensor rsqrt(const Tensor& x) {
  return detail::unary_map("rsqrt", x, [](auto v) { return decltype(v)(1) / std::sqrt(v); });
}

Tensor pow(const Tensor& x, double exponent) {
  // torch special-cases these exponents (aten/src/ATen/native/Pow.cpp); the
  // products are also what std::pow rounds to, only faster.
  if (exponent == 2.0) return detail::unary_map("pow", x, [](auto v) { return v * v; });
  if (exponent == 0.5) return detail::unary_map("pow", x, [](auto v) { return std::sqrt(v); });
  if (exponent == 1.0) return detail::unary_map("pow", x, [](auto v) { return v; });
  return detail::unary_map(
      "pow", x, [exponent](auto v) { return std::pow(v, static_cast<decltype(v)>(exponent)); });
}

}  // namespace torchport::nn
