#include "torchport/nn/conv.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "nn/common.hpp"
#include "nn/linalg.hpp"

namespace torchport::nn {
namespace {

using I2 = std::array<std::int64_t, 2>;

// Sizes of one 2-d (forward or transposed) convolution; 1-d ones have h = 1.
struct Geom {
  std::int64_t n = 0, c = 0, h = 0, w = 0;  // input
  std::int64_t o = 0, kh = 0, kw = 0;       // output channels, kernel
  I2 stride{}, pad{}, dil{};
  std::int64_t groups = 1;
  std::int64_t ho = 0, wo = 0;  // output
};

// [lo, hi): the i in [0, count) for which 0 <= i*stride + off < limit.
void valid_range(std::int64_t count, std::int64_t stride, std::int64_t off, std::int64_t limit,
                 std::int64_t& lo, std::int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
  const std::int64_t top = limit - 1 - off;
  hi = top < 0 ? 0 : top / stride + 1;
  lo = std::min(lo, count);
  hi = std::clamp(hi, lo, count);
}

// Unfolds output rows [oh0, oh0 + rows) of one group of one image, x [cg, h, w],
// into col [cg*kh*kw, rows*wo] (row (c, i, j) holds the input each output
// position sees through tap (i, j)).
template <class T>
void im2col(const T* x, std::int64_t cg, const Geom& g, std::int64_t oh0, std::int64_t rows,
            T* col) {
  const std::int64_t plane = rows * g.wo;
  for (std::int64_t c = 0; c < cg; ++c)
    for (std::int64_t ki = 0; ki < g.kh; ++ki)
      for (std::int64_t kj = 0; kj < g.kw; ++kj) {
        T* dst = col + ((c * g.kh + ki) * g.kw + kj) * plane;
        const std::int64_t off_w = kj * g.dil[1] - g.pad[1];
        std::int64_t lo, hi;
        valid_range(g.wo, g.stride[1], off_w, g.w, lo, hi);
        for (std::int64_t oh = oh0; oh < oh0 + rows; ++oh) {
          T* d = dst + (oh - oh0) * g.wo;
          const std::int64_t ih = oh * g.stride[0] - g.pad[0] + ki * g.dil[0];
          if (ih < 0 || ih >= g.h || lo == hi) {
            std::fill(d, d + g.wo, T(0));
            continue;
          }
          const T* row = x + (c * g.h + ih) * g.w;  // output column ow reads row[ow*stride + off_w]
          std::fill(d, d + lo, T(0));
          if (g.stride[1] == 1) {
            std::memcpy(d + lo, row + lo + off_w, static_cast<std::size_t>(hi - lo) * sizeof(T));
          } else {
            const std::int64_t sw = g.stride[1];
            for (std::int64_t ow = lo; ow < hi; ++ow) d[ow] = row[ow * sw + off_w];
          }
          std::fill(d + hi, d + g.wo, T(0));
        }
      }
}

// The most elements an im2col/col2im buffer holds (4 MB in F32): big
// images are processed in bands of rows so memory stays bounded — a whole
// 224x224 image with a 3x3x64 kernel would need 115 MB — while a band stays
// wide enough that BLAS gets few, large products.
constexpr std::int64_t kColumnBudget = std::int64_t{1} << 20;

// Adds col [og*kh*kw, rows*w], the contributions of input rows
// [ih0, ih0 + rows), into out [og, ho, wo]: the scatter that undoes im2col.
template <class T>
void col2im_add(const T* col, std::int64_t og, const Geom& g, std::int64_t ih0, std::int64_t rows,
                T* out) {
  const std::int64_t plane = rows * g.w;
  for (std::int64_t c = 0; c < og; ++c)
    for (std::int64_t ki = 0; ki < g.kh; ++ki)
      for (std::int64_t kj = 0; kj < g.kw; ++kj) {
        const T* src = col + ((c * g.kh + ki) * g.kw + kj) * plane;
        const std::int64_t off_w = kj * g.dil[1] - g.pad[1];
        std::int64_t lo, hi;
        valid_range(g.w, g.stride[1], off_w, g.wo, lo, hi);
        if (lo == hi) continue;
        for (std::int64_t ih = ih0; ih < ih0 + rows; ++ih) {
          const std::int64_t oh = ih * g.stride[0] - g.pad[0] + ki * g.dil[0];
          if (oh < 0 || oh >= g.ho) continue;
          T* row = out + (c * g.ho + oh) * g.wo;  // input column iw adds to row[iw*stride + off_w]
          const T* s = src + (ih - ih0) * g.w;
          const std::int64_t sw = g.stride[1];
          for (std::int64_t iw = lo; iw < hi; ++iw) row[iw * sw + off_w] += s[iw];
        }
      }
}

// out[n, oc] = bias[oc] (or 0) over whole planes.
template <class T>
void fill_bias(T* out, std::int64_t n, std::int64_t channels, std::int64_t plane, const T* bias) {
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t c = 0; c < channels; ++c) {
      T* p = out + (i * channels + c) * plane;
      std::fill(p, p + plane, bias ? bias[c] : T(0));
    }
}

template <class T>
void conv_forward(const T* x, const T* w, const T* bias, const Geom& g, T* out) {
  const std::int64_t cg = g.c / g.groups, og = g.o / g.groups;
  const std::int64_t k = cg * g.kh * g.kw, plane = g.ho * g.wo, in_plane = g.h * g.w;
  fill_bias(out, g.n, g.o, plane, bias);
  if (cg == 1) {
    // Depthwise (and depth-multiplier) convolution: each output channel sees
    // one input channel; a direct loop beats k = kh*kw gemms.
    for (std::int64_t i = 0; i < g.n; ++i)
      for (std::int64_t oc = 0; oc < g.o; ++oc) {
        const T* xp = x + (i * g.c + oc / og) * in_plane;
        T* op = out + (i * g.o + oc) * plane;
        for (std::int64_t ki = 0; ki < g.kh; ++ki)
          for (std::int64_t kj = 0; kj < g.kw; ++kj) {
            const T wv = w[(oc * g.kh + ki) * g.kw + kj];
            const std::int64_t off_w = kj * g.dil[1] - g.pad[1];
            std::int64_t lo, hi;
            valid_range(g.wo, g.stride[1], off_w, g.w, lo, hi);
            if (lo == hi) continue;
            for (std::int64_t oh = 0; oh < g.ho; ++oh) {
              const std::int64_t ih = oh * g.stride[0] - g.pad[0] + ki * g.dil[0];
              if (ih < 0 || ih >= g.h) continue;
              T* d = op + oh * g.wo;
              const std::int64_t sw = g.stride[1];
              if (sw == 1) {
                const T* s = xp + ih * g.w + lo + off_w;  // contiguous run of the input row
                for (std::int64_t ow = lo; ow < hi; ++ow) d[ow] += wv * s[ow - lo];
              } else {
                const T* row = xp + ih * g.w;
                for (std::int64_t ow = lo; ow < hi; ++ow) d[ow] += wv * row[ow * sw + off_w];
              }
            }
          }
      }
    return;
  }
  if (g.kh == 1 && g.kw == 1 && g.stride == I2{1, 1} && g.pad == I2{0, 0}) {
    // A 1x1 convolution is a matrix product with the image itself.
    for (std::int64_t i = 0; i < g.n; ++i)
      for (std::int64_t gr = 0; gr < g.groups; ++gr)
        detail::gemm<T>(false, false, og, plane, k, T(1), w + gr * og * k, k,
                        x + (i * g.c + gr * cg) * in_plane, plane, T(1),
                        out + (i * g.o + gr * og) * plane, plane);
    return;
  }
  // im2col a band of output rows at a time (see kColumnBudget).
  const std::int64_t band = std::clamp<std::int64_t>(kColumnBudget / (k * g.wo), 1, g.ho);
  std::vector<T> col(static_cast<std::size_t>(k * band * g.wo));
  for (std::int64_t i = 0; i < g.n; ++i)
    for (std::int64_t gr = 0; gr < g.groups; ++gr) {
      const T* xg = x + (i * g.c + gr * cg) * in_plane;
      T* og_out = out + (i * g.o + gr * og) * plane;
      for (std::int64_t oh0 = 0; oh0 < g.ho; oh0 += band) {
        const std::int64_t rows = std::min(band, g.ho - oh0), cols = rows * g.wo;
        im2col(xg, cg, g, oh0, rows, col.data());
        detail::gemm<T>(false, false, og, cols, k, T(1), w + gr * og * k, k, col.data(), cols, T(1),
                        og_out + oh0 * g.wo, plane);
      }
    }
}

template <class T>
void conv_transposed(const T* x, const T* w, const T* bias, const Geom& g, T* out) {
  const std::int64_t cg = g.c / g.groups, og = g.o / g.groups;
  const std::int64_t m = og * g.kh * g.kw, in_plane = g.h * g.w, plane = g.ho * g.wo;
  fill_bias(out, g.n, g.o, plane, bias);
  const std::int64_t band =
      std::clamp<std::int64_t>(kColumnBudget / (m * g.w), 1, g.h);  // input rows
  std::vector<T> col(static_cast<std::size_t>(m * band * g.w));
  for (std::int64_t i = 0; i < g.n; ++i)
    for (std::int64_t gr = 0; gr < g.groups; ++gr)
      for (std::int64_t ih0 = 0; ih0 < g.h; ih0 += band) {
        // col = W_g^T @ x_g(band) with W_g [cg, og*kh*kw] and x_g [cg, h*w].
        const std::int64_t rows = std::min(band, g.h - ih0), cols = rows * g.w;
        detail::gemm<T>(true, false, m, cols, cg, T(1), w + gr * cg * m, m,
                        x + (i * g.c + gr * cg) * in_plane + ih0 * g.w, in_plane, T(0), col.data(),
                        cols);
        col2im_add(col.data(), og, g, ih0, rows, out + (i * g.o + gr * og) * plane);
      }
}

struct Spec {
  int spatial = 2;  // 1 or 2
  bool transposed = false;
  I2 stride{1, 1}, pad{0, 0}, dil{1, 1}, out_pad{0, 0};
  std::int64_t groups = 1;
};

std::string pair_str(const I2& v, int spatial) {
  return spatial == 1 ? std::to_string(v[1])
                      : "(" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ")";
}

Tensor convolution(std::string_view op, const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const Spec& s) {
  detail::require_defined(op, x, "input");
  detail::require_defined(op, weight, "weight");
  const DType dt = detail::compute_dtype(op, {{&x, "input"}, {&weight, "weight"}, {&bias, "bias"}});
  const std::int64_t full = s.spatial + 2;
  if (x.dim() != full && x.dim() != full - 1)
    detail::fail(ErrorCode::invalid_argument, op,
                 "input " + detail::str(x.shape()) + " must be " + std::to_string(full) +
                     "-d (batched) or " + std::to_string(full - 1) + "-d (unbatched)");
  if (weight.dim() != full)
    detail::fail(
        ErrorCode::invalid_argument, op,
        "weight " + detail::str(weight.shape()) + " must be " + std::to_string(full) + "-d");
  for (int d = 2 - s.spatial; d < 2; ++d) {
    const std::size_t i = static_cast<std::size_t>(d);
    if (s.stride[i] < 1 || s.dil[i] < 1 || s.pad[i] < 0 || s.out_pad[i] < 0)
      detail::fail(ErrorCode::invalid_argument, op,
                   "stride " + pair_str(s.stride, s.spatial) + " and dilation " +
                       pair_str(s.dil, s.spatial) + " must be >= 1, padding " +
                       pair_str(s.pad, s.spatial) + " and output_padding " +
                       pair_str(s.out_pad, s.spatial) + " >= 0");
    if (s.transposed && s.out_pad[i] >= s.stride[i] && s.out_pad[i] >= s.dil[i])
      detail::fail(ErrorCode::invalid_argument, op,
                   "output_padding " + pair_str(s.out_pad, s.spatial) +
                       " must be smaller than the stride " + pair_str(s.stride, s.spatial) +
                       " or the dilation " + pair_str(s.dil, s.spatial));
  }
  if (s.groups < 1)
    detail::fail(ErrorCode::invalid_argument, op,
                 "groups " + std::to_string(s.groups) + " must be >= 1");

  // Everything becomes [N, C, H, W] in the compute dtype (1-d: H = 1).
  const bool batched = x.dim() == full;
  Shape xs = x.shape(), ws = weight.shape();
  if (!batched) xs.insert(xs.begin(), 1);
  if (s.spatial == 1) {
    xs.insert(xs.begin() + 2, 1);
    ws.insert(ws.begin() + 2, 1);
  }
  const Tensor xin = x.to(dt).reshape(xs);
  const Tensor win = weight.to(dt).reshape(ws);
  Geom g;
  g.n = xs[0], g.c = xs[1], g.h = xs[2], g.w = xs[3];
  g.kh = ws[2], g.kw = ws[3];
  g.stride = s.stride, g.pad = s.pad, g.dil = s.dil, g.groups = s.groups;
  const std::string in_desc =
      "input " + detail::str(x.shape()) + " and weight " + detail::str(weight.shape());
  if (!s.transposed) {
    if (ws[1] * s.groups != g.c || ws[0] % s.groups != 0)
      detail::fail(ErrorCode::shape_mismatch, op,
                   in_desc + " with groups " + std::to_string(s.groups) + ": expected " +
                       std::to_string(ws[1] * s.groups) + " input channels (weight's C_in/groups " +
                       std::to_string(ws[1]) + " x groups) and C_out " + std::to_string(ws[0]) +
                       " divisible by groups");
    g.o = ws[0];
    const std::int64_t eh = g.h + 2 * g.pad[0] - g.dil[0] * (g.kh - 1) - 1;
    const std::int64_t ew = g.w + 2 * g.pad[1] - g.dil[1] * (g.kw - 1) - 1;
    if (eh < 0 || ew < 0)
      detail::fail(ErrorCode::shape_mismatch, op,
                   in_desc + ": the padded input (padding " + pair_str(s.pad, s.spatial) +
                       ") is smaller than the dilated kernel (dilation " +
                       pair_str(s.dil, s.spatial) + ")");
    g.ho = eh / g.stride[0] + 1;
    g.wo = ew / g.stride[1] + 1;
  } else {
    if (ws[0] != g.c || g.c % s.groups != 0)
      detail::fail(ErrorCode::shape_mismatch, op,
                   in_desc + " with groups " + std::to_string(s.groups) +
                       ": expected the weight's first size (C_in) to equal the input's channels, "
                       "divisible by groups");
    g.o = ws[1] * s.groups;
    g.ho = (g.h - 1) * g.stride[0] - 2 * g.pad[0] + g.dil[0] * (g.kh - 1) + s.out_pad[0] + 1;
    g.wo = (g.w - 1) * g.stride[1] - 2 * g.pad[1] + g.dil[1] * (g.kw - 1) + s.out_pad[1] + 1;
    if (g.ho <= 0 || g.wo <= 0)
      detail::fail(ErrorCode::shape_mismatch, op,
                   in_desc + ": padding " + pair_str(s.pad, s.spatial) +
                       " leaves an empty output (" + std::to_string(g.ho) + " x " +
                       std::to_string(g.wo) + ")");
  }
  if (bias.defined() && (bias.dim() != 1 || bias.numel() != g.o))
    detail::fail(ErrorCode::shape_mismatch, op,
                 "bias " + detail::str(bias.shape()) + " must have one value per output channel (" +
                     std::to_string(g.o) + ")");
  const Tensor bin = bias.defined() ? bias.to(dt) : Tensor();
  Tensor out = Tensor::empty(dt, {g.n, g.o, g.ho, g.wo});
  if (out.numel() > 0) {
    detail::dispatch(dt, [&]<class T>() {
      const T* pb = bin.defined() ? detail::cdata<T>(bin) : nullptr;
      if (xin.numel() == 0 || win.numel() == 0) {
        fill_bias(out.mutable_data<T>(), g.n, g.o, g.ho * g.wo, pb);
      } else if (s.transposed) {
        conv_transposed(xin.data<T>(), win.data<T>(), pb, g, out.mutable_data<T>());
      } else {
        conv_forward(xin.data<T>(), win.data<T>(), pb, g, out.mutable_data<T>());
      }
    });
  }
  Shape os = out.shape();
  if (s.spatial == 1) os.erase(os.begin() + 2);
  if (!batched) os.erase(os.begin());
  return out.reshape(os);
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dOptions& o) {
  Spec s;
  s.stride = {o.stride.h, o.stride.w};
  s.pad = {o.padding.h, o.padding.w};
  s.dil = {o.dilation.h, o.dilation.w};
  s.groups = o.groups;
  return convolution("conv2d", x, weight, bias, s);
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv1dOptions& o) {
  Spec s;
  s.spatial = 1;
  s.stride = {1, o.stride};
  s.pad = {0, o.padding};
  s.dil = {1, o.dilation};
  s.groups = o.groups;
  return convolution("conv1d", x, weight, bias, s);
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvTranspose2dOptions& o) {
  Spec s;
  s.transposed = true;
  s.stride = {o.stride.h, o.stride.w};
  s.pad = {o.padding.h, o.padding.w};
  s.out_pad = {o.output_padding.h, o.output_padding.w};
  s.dil = {o.dilation.h, o.dilation.w};
  s.groups = o.groups;
  return convolution("conv_transpose2d", x, weight, bias, s);
}

Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const ConvTranspose1dOptions& o) {
  Spec s;
  s.spatial = 1;
  s.transposed = true;
  s.stride = {1, o.stride};
  s.pad = {0, o.padding};
  s.out_pad = {0, o.output_padding};
  s.dil = {1, o.dilation};
  s.groups = o.groups;
  return convolution("conv_transpose1d", x, weight, bias, s);
}

}  // namespace torchport::nn
