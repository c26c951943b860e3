#pragma once
// Private elementwise kernels shared by the nn ops.

#include <string_view>

#include "nn/common.hpp"

namespace torchport::nn::detail {

/// out[i] = f(a[i], b[i]) over the broadcast of two strided views of T.
template <class T, class F>
void binary_kernel(const T* a, const Shape& sa, const T* b, const Shape& sb, T* out,
                   const Shape& shape, F f) {
  Shape sh = shape;
  std::array<Shape, 3> st{sa, sb, contiguous_strides(shape)};
  collapse_dims(sh, st);
  if (sh.empty()) {
    if (shape_numel(shape) == 1) out[0] = f(a[0], b[0]);
    return;
  }
  const std::int64_t n = sh.back();
  const std::int64_t ia = st[0].back(), ib = st[1].back(), io = st[2].back();
  for_each_row(sh, st, [&](const std::array<std::int64_t, 3>& off) {
    const T* pa = a + off[0];
    const T* pb = b + off[1];
    T* po = out + off[2];
    if (io == 1 && ia == 1 && ib == 1) {
      for (std::int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
    } else if (io == 1 && ia == 1 && ib == 0) {
      const T vb = *pb;
      for (std::int64_t i = 0; i < n; ++i) po[i] = f(pa[i], vb);
    } else if (io == 1 && ia == 0 && ib == 1) {
      const T va = *pa;
      for (std::int64_t i = 0; i < n; ++i) po[i] = f(va, pb[i]);
    } else {
      for (std::int64_t i = 0; i < n; ++i) po[i * io] = f(pa[i * ia], pb[i * ib]);
    }
  });
}

/// A fresh tensor of `f` applied to every element of `x` (computed in F32
/// or F64 per the dtype rule); `f` is a generic lambda taking and returning T.
template <class F>
Tensor unary_map(std::string_view op, const Tensor& x, F f) {
  require_defined(op, x, "input");
  const DType dt = compute_dtype(op, {{&x, "input"}});
  const Tensor src = x.to(dt);
  Tensor out = Tensor::empty(dt, src.shape());
  dispatch(dt, [&]<class T>() {
    const T* in = cdata<T>(src);
    T* o = mdata<T>(out);
    const std::int64_t n = src.numel();
    for (std::int64_t i = 0; i < n; ++i) o[i] = f(in[i]);
  });
  return out;
}

}  // namespace torchport::nn::detail
