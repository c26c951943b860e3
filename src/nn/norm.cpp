#include "torchport/nn/norm.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include "nn/common.hpp"

namespace torchport::nn {
namespace {

using detail::cdata;
using detail::mdata;

void check_param(std::string_view op, const Tensor& p, std::string_view name, std::int64_t count,
                 const Tensor& x) {
  if (p.defined() && p.numel() != count)
    detail::fail(ErrorCode::shape_mismatch, op,
                 std::string(name) + " " + detail::str(p.shape()) + " has " +
                     std::to_string(p.numel()) + " elements; input " + detail::str(x.shape()) +
                     " has " + std::to_string(count) + " channels");
}

// The number of elements of the trailing `normalized_shape` of x, checked.
std::int64_t trailing(std::string_view op, const Tensor& x, const Dims& normalized_shape,
                      const Tensor& weight, const Tensor& bias) {
  const std::size_t k = normalized_shape.size();
  bool ok = k >= 1 && static_cast<std::size_t>(x.dim()) >= k;
  for (std::size_t i = 0; ok && i < k; ++i)
    ok = x.shape()[x.shape().size() - k + i] == normalized_shape[i];
  if (!ok)
    detail::fail(ErrorCode::shape_mismatch, op,
                 "input " + detail::str(x.shape()) + " does not end in normalized_shape " +
                     detail::str(normalized_shape));
  for (const auto& [p, name] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}})
    if (p->defined() && p->shape() != normalized_shape)
      detail::fail(ErrorCode::shape_mismatch, op,
                   std::string(name) + " " + detail::str(p->shape()) + " is not normalized_shape " +
                       detail::str(normalized_shape));
  return shape_numel(normalized_shape);
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, double eps) {
  constexpr std::string_view op = "batch_norm";
  detail::require_defined(op, x, "input");
  detail::require_defined(op, running_mean, "running_mean");
  detail::require_defined(op, running_var, "running_var");
  const DType dt = detail::compute_dtype(op, {{&x, "input"},
                                              {&running_mean, "running_mean"},
                                              {&running_var, "running_var"},
                                              {&weight, "weight"},
                                              {&bias, "bias"}});
  if (x.dim() < 2)
    detail::fail(ErrorCode::invalid_argument, op,
                 "input " + detail::str(x.shape()) + " needs at least 2 dimensions [N, C, ...]");
  const std::int64_t channels = x.size(1);
  check_param(op, running_mean, "running_mean", channels, x);
  check_param(op, running_var, "running_var", channels, x);
  check_param(op, weight, "weight", channels, x);
  check_param(op, bias, "bias", channels, x);
  const Tensor src = x.to(dt);
  Tensor out = Tensor::empty(dt, src.shape());
  detail::dispatch(dt, [&]<class T>() {
    const Tensor rm = running_mean.to(dt), rv = running_var.to(dt);
    const Tensor w = weight.defined() ? weight.to(dt) : Tensor(),
                 b = bias.defined() ? bias.to(dt) : Tensor();
    // Per channel: y = x * scale + shift, folded in double.
    std::vector<T> scale(static_cast<std::size_t>(channels)),
        shift(static_cast<std::size_t>(channels));
    for (std::int64_t c = 0; c < channels; ++c) {
      const double inv = 1.0 / std::sqrt(static_cast<double>(cdata<T>(rv)[c]) + eps);
      const double g = w.defined() ? static_cast<double>(cdata<T>(w)[c]) : 1.0;
      const double be = b.defined() ? static_cast<double>(cdata<T>(b)[c]) : 0.0;
      scale[static_cast<std::size_t>(c)] = static_cast<T>(g * inv);
      shift[static_cast<std::size_t>(c)] =
          static_cast<T>(be - static_cast<double>(cdata<T>(rm)[c]) * g * inv);
    }
    if (src.numel() == 0) return;
    const T* in = src.data<T>();
    T* o = out.mutable_data<T>();
    const std::int64_t n = x.size(0), inner = src.numel() / (n * channels);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t c = 0; c < channels; ++c) {
        const T s = scale[static_cast<std::size_t>(c)], t = shift[static_cast<std::size_t>(c)];
        const std::int64_t base = (i * channels + c) * inner;
        for (std::int64_t j = 0; j < inner; ++j) o[base + j] = in[base + j] * s + t;
      }
  });
  return out;
}

Tensor layer_norm(const Tensor& x, const Dims& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  constexpr std::string_view op = "layer_norm";
  detail::require_defined(op, x, "input");
  const DType dt = detail::compute_dtype(op, {{&x, "input"}, {&weight, "weight"}, {&bias, "bias"}});
  const std::int64_t d = trailing(op, x, normalized_shape, weight, bias);
  const Tensor src = x.to(dt);
  Tensor out = Tensor::empty(dt, src.shape());
  if (src.numel() == 0) return out;
  detail::dispatch(dt, [&]<class T>() {
    const Tensor w = weight.defined() ? weight.to(dt) : Tensor(),
                 b = bias.defined() ? bias.to(dt) : Tensor();
    const T* pw = w.defined() ? w.data<T>() : nullptr;
    const T* pb = b.defined() ? b.data<T>() : nullptr;
    const T* in = src.data<T>();
    T* o = out.mutable_data<T>();
    const std::int64_t rows = src.numel() / d;
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* row = in + r * d;
      T* dst = o + r * d;
      double s = 0;
      for (std::int64_t j = 0; j < d; ++j) s += static_cast<double>(row[j]);
      const double mu = s / static_cast<double>(d);
      double v = 0;
      for (std::int64_t j = 0; j < d; ++j) {
        const double t = static_cast<double>(row[j]) - mu;
        v += t * t;
      }
      const double rstd = 1.0 / std::sqrt(v / static_cast<double>(d) + eps);
      for (std::int64_t j = 0; j < d; ++j) {
        double y = (static_cast<double>(row[j]) - mu) * rstd;
        if (pw) y *= static_cast<double>(pw[j]);
        if (pb) y += static_cast<double>(pb[j]);
        dst[j] = static_cast<T>(y);
      }
    }
  });
  return out;
}

Tensor group_norm(const Tensor& x, std::int64_t num_groups, const Tensor& weight,
                  const Tensor& bias, double eps) {
  constexpr std::string_view op = "group_norm";
  detail::require_defined(op, x, "input");
  const DType dt = detail::compute_dtype(op, {{&x, "input"}, {&weight, "weight"}, {&bias, "bias"}});
  if (x.dim() < 2)
    detail::fail(ErrorCode::invalid_argument, op,
                 "input " + detail::str(x.shape()) + " needs at least 2 dimensions [N, C, ...]");
  const std::int64_t channels = x.size(1);
  if (num_groups <= 0 || channels % num_groups != 0)
    detail::fail(ErrorCode::invalid_argument, op,
                 "input " + detail::str(x.shape()) + " has " + std::to_string(channels) +
                     " channels, not divisible into " + std::to_string(num_groups) + " groups");
  check_param(op, weight, "weight", channels, x);
  check_param(op, bias, "bias", channels, x);
  const Tensor src = x.to(dt);
  Tensor out = Tensor::empty(dt, src.shape());
  if (src.numel() == 0) return out;
  detail::dispatch(dt, [&]<class T>() {
    const Tensor w = weight.defined() ? weight.to(dt) : Tensor(),
                 b = bias.defined() ? bias.to(dt) : Tensor();
    const T* pw = w.defined() ? w.data<T>() : nullptr;
    const T* pb = b.defined() ? b.data<T>() : nullptr;
    const T* in = src.data<T>();
    T* o = out.mutable_data<T>();
    const std::int64_t n = x.size(0), inner = src.numel() / (n * channels);
    const std::int64_t per_group = channels / num_groups, block = per_group * inner;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t g = 0; g < num_groups; ++g) {
        const std::int64_t base = (i * num_groups + g) * block;
        double s = 0;
        for (std::int64_t j = 0; j < block; ++j) s += static_cast<double>(in[base + j]);
        const double mu = s / static_cast<double>(block);
        double v = 0;
        for (std::int64_t j = 0; j < block; ++j) {
          const double t = static_cast<double>(in[base + j]) - mu;
          v += t * t;
        }
        const double rstd = 1.0 / std::sqrt(v / static_cast<double>(block) + eps);
        for (std::int64_t c = 0; c < per_group; ++c) {
          const std::int64_t ch = g * per_group + c;
          const double sc = rstd * (pw ? static_cast<double>(pw[ch]) : 1.0);
          const double sh = (pb ? static_cast<double>(pb[ch]) : 0.0) - mu * sc;
          const std::int64_t cb = base + c * inner;
          for (std::int64_t j = 0; j < inner; ++j)
            o[cb + j] = static_cast<T>(static_cast<double>(in[cb + j]) * sc + sh);
        }
      }
  });
  return out;
}

Tensor rms_norm(const Tensor& x, const Dims& normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  constexpr std::string_view op = "rms_norm";
  detail::require_defined(op, x, "input");
  const DType dt = detail::compute_dtype(op, {{&x, "input"}, {&weight, "weight"}});
  const std::int64_t d = trailing(op, x, normalized_shape, weight, Tensor());
  const Tensor src = x.to(dt);
  Tensor out = Tensor::empty(dt, src.shape());
  if (src.numel() == 0) return out;
  detail::dispatch(dt, [&]<class T>() {
    const double e = eps ? *eps : static_cast<double>(std::numeric_limits<T>::epsilon());
    const Tensor w = weight.defined() ? weight.to(dt) : Tensor();
    const T* pw = w.defined() ? w.data<T>() : nullptr;
    const T* in = src.data<T>();
    T* o = out.mutable_data<T>();
    const std::int64_t rows = src.numel() / d;
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* row = in + r * d;
      double ss = 0;
      for (std::int64_t j = 0; j < d; ++j)
        ss += static_cast<double>(row[j]) * static_cast<double>(row[j]);
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(d) + e);
      for (std::int64_t j = 0; j < d; ++j) {
        double y = static_cast<double>(row[j]) * inv;
        if (pw) y *= static_cast<double>(pw[j]);
        o[r * d + j] = static_cast<T>(y);
      }
    }
  });
  return out;
}

}  // namespace torchport::nn
