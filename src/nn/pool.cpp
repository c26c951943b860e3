#include "torchport/nn/pool.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "nn/common.hpp"

namespace torchport::nn {
namespace {

std::string int2_str(Int2 v) {
  return "(" + std::to_string(v.h) + ", " + std::to_string(v.w) + ")";
}

// The input as [planes, H, W] in the compute dtype, plus how to shape the output.
struct Input {
  Tensor x;
  DType dt = DType::F32;
  std::int64_t planes = 0, h = 0, w = 0;
  bool batched = true;
};

Input prepare(std::string_view op, const Tensor& x) {
  detail::require_defined(op, x, "input");
  Input in;
  in.dt = detail::compute_dtype(op, {{&x, "input"}});
  if (x.dim() != 4 && x.dim() != 3)
    detail::fail(ErrorCode::invalid_argument, op,
                 "input " + detail::str(x.shape()) + " must be [N, C, H, W] or [C, H, W]");
  in.batched = x.dim() == 4;
  in.x = x.to(in.dt);
  in.h = x.size(-2);
  in.w = x.size(-1);
  in.planes = x.numel() == 0 ? 0 : x.numel() / (in.h * in.w);
  return in;
}

Shape out_shape(const Tensor& x, std::int64_t ho, std::int64_t wo) {
  Shape s = x.shape();
  s[s.size() - 2] = ho;
  s[s.size() - 1] = wo;
  return s;
}

// torch's pooling_output_shape (aten/src/ATen/native/Pool.h).
std::int64_t pooled_size(std::int64_t in, std::int64_t k, std::int64_t pad, std::int64_t stride,
                         std::int64_t dil, bool ceil_mode) {
  const std::int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  std::int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

struct Window {
  Int2 k, s, p, d;
  std::int64_t ho = 0, wo = 0;
};

Window check_window(std::string_view op, const Input& in, const Tensor& x, Int2 k,
                    const std::optional<Int2>& stride, Int2 pad, Int2 dil, bool ceil_mode) {
  Window w{k, stride.value_or(k), pad, dil};
  if (k.h < 1 || k.w < 1 || w.s.h < 1 || w.s.w < 1 || dil.h < 1 || dil.w < 1)
    detail::fail(ErrorCode::invalid_argument, op,
                 "kernel " + int2_str(k) + ", stride " + int2_str(w.s) + " and dilation " +
                     int2_str(dil) + " must be >= 1");
  if (pad.h < 0 || pad.w < 0 || pad.h > k.h / 2 || pad.w > k.w / 2)
    detail::fail(
        ErrorCode::invalid_argument, op,
        "padding " + int2_str(pad) + " must be >= 0 and at most half the kernel " + int2_str(k));
  w.ho = pooled_size(in.h, k.h, pad.h, w.s.h, dil.h, ceil_mode);
  w.wo = pooled_size(in.w, k.w, pad.w, w.s.w, dil.w, ceil_mode);
  if (w.ho < 1 || w.wo < 1)
    detail::fail(ErrorCode::invalid_argument, op,
                 "input " + detail::str(x.shape()) + " is too small for kernel " + int2_str(k) +
                     " with padding " + int2_str(pad) + " and dilation " + int2_str(dil) +
                     " (output " + std::to_string(w.ho) + " x " + std::to_string(w.wo) + ")");
  return w;
}

}  // namespace

Tensor max_pool2d(const Tensor& x, Int2 kernel_size, const MaxPool2dOptions& o) {
  constexpr std::string_view op = "max_pool2d";
  const Input in = prepare(op, x);
  const Window win =
      check_window(op, in, x, kernel_size, o.stride, o.padding, o.dilation, o.ceil_mode);
  Tensor out = Tensor::empty(in.dt, out_shape(x, win.ho, win.wo));
  if (out.numel() == 0) return out;
  detail::dispatch(in.dt, [&]<class T>() {
    const T* src = in.x.data<T>();
    T* dst = out.mutable_data<T>();
    for (std::int64_t p = 0; p < in.planes; ++p) {
      const T* plane = src + p * in.h * in.w;
      for (std::int64_t oh = 0; oh < win.ho; ++oh)
        for (std::int64_t ow = 0; ow < win.wo; ++ow) {
          T best = -std::numeric_limits<T>::infinity();
          for (std::int64_t i = 0; i < win.k.h; ++i) {
            const std::int64_t ih = oh * win.s.h - win.p.h + i * win.d.h;
            if (ih < 0 || ih >= in.h) continue;
            for (std::int64_t j = 0; j < win.k.w; ++j) {
              const std::int64_t iw = ow * win.s.w - win.p.w + j * win.d.w;
              if (iw < 0 || iw >= in.w) continue;
              const T v = plane[ih * in.w + iw];
              if (v > best || std::isnan(v)) best = v;
            }
          }
          *dst++ = best;
        }
    }
  });
  return out;
}

Tensor avg_pool2d(const Tensor& x, Int2 kernel_size, const AvgPool2dOptions& o) {
  constexpr std::string_view op = "avg_pool2d";
  const Input in = prepare(op, x);
  const Window win = check_window(op, in, x, kernel_size, o.stride, o.padding, 1, o.ceil_mode);
  if (o.divisor_override && *o.divisor_override == 0)
    detail::fail(ErrorCode::invalid_argument, op, "divisor_override must not be 0");
  Tensor out = Tensor::empty(in.dt, out_shape(x, win.ho, win.wo));
  if (out.numel() == 0) return out;
  detail::dispatch(in.dt, [&]<class T>() {
    const T* src = in.x.data<T>();
    T* dst = out.mutable_data<T>();
    // aten/src/ATen/native/cpu/AvgPoolKernel.cpp: the pool size counts the
    // padding but is clipped to the padded input before the window is.
    for (std::int64_t p = 0; p < in.planes; ++p) {
      const T* plane = src + p * in.h * in.w;
      for (std::int64_t oh = 0; oh < win.ho; ++oh)
        for (std::int64_t ow = 0; ow < win.wo; ++ow) {
          std::int64_t h0 = oh * win.s.h - win.p.h, w0 = ow * win.s.w - win.p.w;
          std::int64_t h1 = std::min(h0 + win.k.h, in.h + win.p.h),
                       w1 = std::min(w0 + win.k.w, in.w + win.p.w);
          const std::int64_t pool = (h1 - h0) * (w1 - w0);
          h0 = std::max<std::int64_t>(h0, 0), w0 = std::max<std::int64_t>(w0, 0);
          h1 = std::min(h1, in.h), w1 = std::min(w1, in.w);
          if (h0 >= h1 || w0 >= w1) {
            *dst++ = T(0);
            continue;
          }
          double s = 0;
          for (std::int64_t ih = h0; ih < h1; ++ih)
            for (std::int64_t iw = w0; iw < w1; ++iw)
              s += static_cast<double>(plane[ih * in.w + iw]);
          const std::int64_t div = o.divisor_override    ? *o.divisor_override
                                   : o.count_include_pad ? pool
                                                         : (h1 - h0) * (w1 - w0);
          *dst++ = static_cast<T>(s / static_cast<double>(div));
        }
    }
  });
  return out;
}

Tensor adaptive_avg_pool2d(const Tensor& x, Int2 output_size) {
  constexpr std::string_view op = "adaptive_avg_pool2d";
  const Input in = prepare(op, x);
  if (output_size.h < 1 || output_size.w < 1)
    detail::fail(ErrorCode::invalid_argument, op,
                 "output size " + int2_str(output_size) + " must be >= 1");
  if (in.h == 0 || in.w == 0)
    detail::fail(ErrorCode::invalid_argument, op,
                 "input " + detail::str(x.shape()) + " has an empty spatial dimension");
  Tensor out = Tensor::empty(in.dt, out_shape(x, output_size.h, output_size.w));
  if (out.numel() == 0) return out;
  detail::dispatch(in.dt, [&]<class T>() {
    const T* src = in.x.data<T>();
    T* dst = out.mutable_data<T>();
    const std::int64_t oh_n = output_size.h, ow_n = output_size.w;
    for (std::int64_t p = 0; p < in.planes; ++p) {
      const T* plane = src + p * in.h * in.w;
      for (std::int64_t oh = 0; oh < oh_n; ++oh) {
        const std::int64_t h0 = oh * in.h / oh_n, h1 = ((oh + 1) * in.h + oh_n - 1) / oh_n;
        for (std::int64_t ow = 0; ow < ow_n; ++ow) {
          const std::int64_t w0 = ow * in.w / ow_n, w1 = ((ow + 1) * in.w + ow_n - 1) / ow_n;
          double s = 0;
          for (std::int64_t ih = h0; ih < h1; ++ih)
            for (std::int64_t iw = w0; iw < w1; ++iw)
              s += static_cast<double>(plane[ih * in.w + iw]);
          *dst++ = static_cast<T>(s / static_cast<double>((h1 - h0) * (w1 - w0)));
        }
      }
    }
  });
  return out;
}

}  // namespace torchport::nn
