#include "torchport/nn/reduce.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "nn/common.hpp"
#include "nn/reduce.hpp"

namespace torchport::nn {
namespace {

// A reduction seen as [outer, red, inner] over a contiguous tensor: the
// reduced dimensions are `red`, kept ones before/after them `outer`/`inner`.
struct Plan {
  Tensor src;  // contiguous, compute dtype
  std::int64_t outer = 1, red = 1, inner = 1;
  Shape out_shape;
};

Plan plan_reduce(std::string_view op, const Tensor& x, const Dims& dims, bool keepdim, DType dt) {
  detail::require_defined(op, x, "input");
  Plan p;
  const std::int64_t nd = x.dim();
  std::vector<bool> reduced(static_cast<std::size_t>(std::max<std::int64_t>(nd, 1)), dims.empty());
  for (std::int64_t d : dims) {
    const std::size_t w = static_cast<std::size_t>(detail::wrap_dim(op, d, nd));
    if (reduced[w])
      detail::fail(
          ErrorCode::invalid_argument, op,
          "dimension " + std::to_string(d) + " appears more than once in the reduced dimensions");
    reduced[w] = true;
  }
  const Tensor src = x.to(dt);
  if (nd == 0) {  // one element; keepdim has nothing to keep
    p.src = src;
    return p;
  }
  Shape kept_order, red_order;
  for (std::int64_t i = 0; i < nd; ++i)
    (reduced[static_cast<std::size_t>(i)] ? red_order : kept_order).push_back(i);
  for (std::int64_t i = 0; i < nd; ++i) {
    const std::int64_t s = x.shape()[static_cast<std::size_t>(i)];
    if (!reduced[static_cast<std::size_t>(i)])
      p.out_shape.push_back(s);
    else if (keepdim)
      p.out_shape.push_back(1);
  }
  const bool range =
      red_order.back() - red_order.front() + 1 == static_cast<std::int64_t>(red_order.size());
  if (range) {
    p.src = src;
    for (std::int64_t i = 0; i < nd; ++i) {
      const std::int64_t s = x.shape()[static_cast<std::size_t>(i)];
      if (i < red_order.front())
        p.outer *= s;
      else if (i > red_order.back())
        p.inner *= s;
      else
        p.red *= s;
    }
  } else {
    // Move the reduced dimensions last and make that layout dense.
    Shape order = kept_order;
    order.insert(order.end(), red_order.begin(), red_order.end());
    p.src = src.permute(order).clone();
    for (std::int64_t i : kept_order) p.outer *= x.shape()[static_cast<std::size_t>(i)];
    for (std::int64_t i : red_order) p.red *= x.shape()[static_cast<std::size_t>(i)];
  }
  return p;
}

// Sums of each [o, :, i] slice into acc (outer * inner doubles).
template <class T>
std::vector<double> sums(const Plan& p) {
  std::vector<double> acc(static_cast<std::size_t>(p.outer * p.inner), 0.0);
  if (p.src.numel() == 0) return acc;
  const T* x = p.src.data<T>();
  for (std::int64_t o = 0; o < p.outer; ++o) {
    double* a = acc.data() + o * p.inner;
    const T* row = x + o * p.red * p.inner;
    if (p.inner == 1) {
      double s = 0;
      for (std::int64_t r = 0; r < p.red; ++r) s += static_cast<double>(row[r]);
      a[0] = s;
    } else {
      for (std::int64_t r = 0; r < p.red; ++r)
        for (std::int64_t i = 0; i < p.inner; ++i)
          a[i] += static_cast<double>(row[r * p.inner + i]);
    }
  }
  return acc;
}

template <class T>
Tensor from_acc(DType dt, const Shape& shape, const std::vector<double>& acc, double scale) {
  Tensor out = Tensor::empty(dt, shape);
  T* o = detail::mdata<T>(out);
  for (std::size_t i = 0; i < acc.size(); ++i) o[i] = static_cast<T>(acc[i] * scale);
  return out;
}

void require_nonempty(std::string_view op, const Tensor& x, std::int64_t red) {
  if (red == 0)
    detail::fail(ErrorCode::invalid_argument, op,
                 "cannot reduce an empty dimension of " + detail::str(x.shape()) +
                     " (no identity for this op)");
}

}  // namespace

Tensor sum(const Tensor& x, const Dims& dims, bool keepdim) {
  const DType dt = detail::compute_dtype("sum", {{&x, "input"}});
  const Plan p = plan_reduce("sum", x, dims, keepdim, dt);
  return detail::dispatch(dt,
                          [&]<class T>() { return from_acc<T>(dt, p.out_shape, sums<T>(p), 1.0); });
}

Tensor mean(const Tensor& x, const Dims& dims, bool keepdim) {
  const DType dt = detail::compute_dtype("mean", {{&x, "input"}});
  const Plan p = plan_reduce("mean", x, dims, keepdim, dt);
  const double scale =
      p.red == 0 ? std::numeric_limits<double>::quiet_NaN() : 1.0 / static_cast<double>(p.red);
  return detail::dispatch(
      dt, [&]<class T>() { return from_acc<T>(dt, p.out_shape, sums<T>(p), scale); });
}

Tensor var(const Tensor& x, const Dims& dims, bool unbiased, bool keepdim) {
  const DType dt = detail::compute_dtype("var", {{&x, "input"}});
  const Plan p = plan_reduce("var", x, dims, keepdim, dt);
  return detail::dispatch(dt, [&]<class T>() {
    // Two passes (mean, then squared deviations) in double.
    std::vector<double> mu = sums<T>(p);
    for (double& m : mu) m /= static_cast<double>(p.red);
    std::vector<double> acc(mu.size(), 0.0);
    const T* xs = detail::cdata<T>(p.src);
    for (std::int64_t o = 0; xs != nullptr && o < p.outer; ++o) {
      const T* row = xs + o * p.red * p.inner;
      for (std::int64_t r = 0; r < p.red; ++r)
        for (std::int64_t i = 0; i < p.inner; ++i) {
          const double dlt = static_cast<double>(row[r * p.inner + i]) -
                             mu[static_cast<std::size_t>(o * p.inner + i)];
          acc[static_cast<std::size_t>(o * p.inner + i)] += dlt * dlt;
        }
    }
    const double n = static_cast<double>(p.red) - (unbiased ? 1.0 : 0.0);
    if (p.red == 0) std::fill(acc.begin(), acc.end(), std::numeric_limits<double>::quiet_NaN());
    return from_acc<T>(dt, p.out_shape, acc, 1.0 / std::max(n, 0.0));
  });
}

Tensor max(const Tensor& x, const Dims& dims, bool keepdim) {
  const DType dt = detail::compute_dtype("max", {{&x, "input"}});
  const Plan p = plan_reduce("max", x, dims, keepdim, dt);
  if (p.outer * p.inner > 0) require_nonempty("max", x, p.red);
  return detail::dispatch(dt, [&]<class T>() {
    Tensor out = Tensor::empty(dt, p.out_shape);
    T* o = detail::mdata<T>(out);
    const T* xs = detail::cdata<T>(p.src);
    for (std::int64_t a = 0; a < p.outer; ++a) {
      const T* row = xs + a * p.red * p.inner;
      T* dst = o + a * p.inner;
      for (std::int64_t i = 0; i < p.inner; ++i) dst[i] = row[i];
      for (std::int64_t r = 1; r < p.red; ++r)
        for (std::int64_t i = 0; i < p.inner; ++i) {
          const T v = row[r * p.inner + i];
          if (v > dst[i] || std::isnan(v)) dst[i] = v;  // NaN propagates, as torch
        }
    }
    return out;
  });
}

Tensor argmax(const Tensor& x, std::optional<std::int64_t> dim, bool keepdim) {
  constexpr std::string_view op = "argmax";
  const DType dt = detail::compute_dtype(op, {{&x, "input"}});
  Plan p;
  if (dim) {
    p = plan_reduce(op, x, {*dim}, keepdim, dt);
  } else {
    detail::require_defined(op, x, "input");
    p.src = x.to(dt);
    p.red = x.numel();
    if (keepdim) p.out_shape.assign(static_cast<std::size_t>(x.dim()), 1);
  }
  if (p.outer * p.inner > 0) require_nonempty(op, x, p.red);
  Tensor out = Tensor::empty(DType::I64, p.out_shape);
  detail::dispatch(dt, [&]<class T>() {
    std::int64_t* o = detail::mdata<std::int64_t>(out);
    const T* xs = detail::cdata<T>(p.src);
    for (std::int64_t a = 0; a < p.outer; ++a) {
      const T* row = xs + a * p.red * p.inner;
      for (std::int64_t i = 0; i < p.inner; ++i) {
        std::int64_t best = 0;
        T bv = row[i];
        for (std::int64_t r = 1; r < p.red && !std::isnan(bv); ++r) {
          const T v = row[r * p.inner + i];
          if (v > bv || std::isnan(v)) {
            bv = v;
            best = r;
          }
        }
        o[a * p.inner + i] = best;
      }
    }
  });
  return out;
}

namespace {

template <bool kLog>
Tensor softmax_impl(std::string_view op, const Tensor& x, std::int64_t dim) {
  const DType dt = detail::compute_dtype(op, {{&x, "input"}});
  const Plan p = plan_reduce(op, x, {dim}, true, dt);
  return detail::dispatch(dt, [&]<class T>() {
    Tensor out = p.src.clone().reshape(x.shape());
    T* o = detail::mdata<T>(out);
    if (out.numel() == 0) return out;
    if (p.inner == 1 && !kLog) {
      detail::softmax_rows(o, p.outer, p.red);
      return out;
    }
    std::vector<T> mx(static_cast<std::size_t>(p.inner));
    std::vector<double> s(static_cast<std::size_t>(p.inner));
    for (std::int64_t a = 0; a < p.outer; ++a) {
      T* row = o + a * p.red * p.inner;
      for (std::int64_t i = 0; i < p.inner; ++i) {
        mx[static_cast<std::size_t>(i)] = row[i];
        s[static_cast<std::size_t>(i)] = 0;
      }
      for (std::int64_t r = 1; r < p.red; ++r)
        for (std::int64_t i = 0; i < p.inner; ++i)
          mx[static_cast<std::size_t>(i)] =
              std::max(mx[static_cast<std::size_t>(i)], row[r * p.inner + i]);
      for (std::int64_t r = 0; r < p.red; ++r)
        for (std::int64_t i = 0; i < p.inner; ++i) {
          T& v = row[r * p.inner + i];
          v -= mx[static_cast<std::size_t>(i)];
          const T e = std::exp(v);
          if constexpr (!kLog) v = e;
          s[static_cast<std::size_t>(i)] += e;
        }
      for (std::int64_t i = 0; i < p.inner; ++i) {
        double& si = s[static_cast<std::size_t>(i)];
        si = kLog ? std::log(si) : 1.0 / si;
      }
      for (std::int64_t r = 0; r < p.red; ++r)
        for (std::int64_t i = 0; i < p.inner; ++i) {
          T& v = row[r * p.inner + i];
          if constexpr (kLog)
            v -= static_cast<T>(s[static_cast<std::size_t>(i)]);
          else
            v *= static_cast<T>(s[static_cast<std::size_t>(i)]);
        }
    }
    return out;
  });
}

}  // namespace

Tensor softmax(const Tensor& x, std::int64_t dim) {
  return softmax_impl<false>("softmax", x, dim);
}
Tensor log_softmax(const Tensor& x, std::int64_t dim) {
  return softmax_impl<true>("log_softmax", x, dim);
}

}  // namespace torchport::nn
