#include "nn/common.hpp"

#include <limits>

namespace torchport::nn::detail {

void fail(ErrorCode code, std::string_view op, const std::string& message) {
  throw Error(code, "[" + std::string(op) + "] " + message);
}

void require_defined(std::string_view op, const Tensor& t, std::string_view name) {
  if (!t.defined()) fail(ErrorCode::invalid_argument, op, std::string(name) + " is undefined");
}

DType compute_dtype(std::string_view op,
                    std::initializer_list<std::pair<const Tensor*, std::string_view>> operands) {
  DType dt = DType::F32;
  for (const auto& [t, name] : operands) {
    if (t == nullptr || !t->defined()) continue;
    switch (t->dtype()) {
      case DType::F64:
        dt = DType::F64;
        break;
      case DType::F32:
      case DType::F16:
      case DType::BF16:
        break;
      default:
        fail(ErrorCode::invalid_argument, op,
             std::string(name) + " is " + str(*t) +
                 "; expected a floating tensor (F32, F64, F16 or BF16)");
    }
  }
  return dt;
}

std::int64_t wrap_dim(std::string_view op, std::int64_t d, std::int64_t ndim) {
  const std::int64_t n = ndim == 0 ? 1 : ndim;
  if (d < -n || d >= n)
    fail(ErrorCode::invalid_argument, op,
         "dimension " + std::to_string(d) + " is out of range for a " + std::to_string(ndim) +
             "-d tensor (expected [" + std::to_string(-n) + ", " + std::to_string(n - 1) + "])");
  return d < 0 ? d + n : d;
}

Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1)
      fail(ErrorCode::shape_mismatch, op,
           "shapes " + str(a) + " and " + str(b) + " do not broadcast: dimension " +
               std::to_string(i) + " is " + std::to_string(x) + " vs " + std::to_string(y));
    out[i] = x == 1 ? y : x;
  }
  return out;
}

bool broadcasts_to(const Shape& shape, const Shape& target) {
  if (shape.size() > target.size()) return false;
  const std::size_t lead = target.size() - shape.size();
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1 && shape[i] != target[lead + i]) return false;
  return true;
}

Shape broadcast_strides(const Shape& shape, const Shape& strides, const Shape& out) {
  Shape st(out.size(), 0);
  const std::size_t lead = out.size() - shape.size();
  for (std::size_t i = 0; i < shape.size(); ++i) st[lead + i] = shape[i] == 1 ? 0 : strides[i];
  return st;
}

MaskView make_mask(std::string_view op, std::string_view name, const Tensor& mask,
                   const Shape& shape, DType dt, bool masked_when) {
  MaskView m;
  if (!mask.defined()) return m;
  if (!broadcasts_to(mask.shape(), shape))
    fail(ErrorCode::shape_mismatch, op,
         std::string(name) + " " + str(mask.shape()) + " does not broadcast to the scores' shape " +
             str(shape));
  if (mask.dtype() == DType::BOOL || mask.dtype() == DType::U8) {
    m.kind = MaskView::Kind::boolean;
    m.values = mask.contiguous();
  } else if (mask.dtype() == DType::F32 || mask.dtype() == DType::F64 ||
             mask.dtype() == DType::F16 || mask.dtype() == DType::BF16) {
    m.kind = MaskView::Kind::additive;
    m.values = mask.to(dt);
  } else {
    fail(ErrorCode::invalid_argument, op,
         std::string(name) + " is " + str(mask) + "; expected a BOOL (or U8) or floating mask");
  }
  m.strides = broadcast_strides(m.values.shape(), m.values.strides(), shape);
  m.masked_when = masked_when;
  return m;
}

template <class T>
void add_mask(T* scores, const Shape& shape, const MaskView& m) {
  if (m.kind == MaskView::Kind::none || m.values.numel() == 0) return;
  const Shape out_strides = contiguous_strides(shape);
  std::array<Shape, 2> st{m.strides, out_strides};
  Shape sh = shape;
  collapse_dims(sh, st);
  const std::int64_t inner = sh.empty() ? 1 : sh.back();
  const std::int64_t ms = sh.empty() ? 0 : st[0].back();
  const std::int64_t os = sh.empty() ? 1 : st[1].back();
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  if (m.kind == MaskView::Kind::boolean) {
    const auto* b = reinterpret_cast<const unsigned char*>(m.values.bytes().data());
    const unsigned char blocked = m.masked_when ? 1 : 0;
    for_each_row(sh, st, [&](const std::array<std::int64_t, 2>& off) {
      const unsigned char* mb = b + off[0];
      T* o = scores + off[1];
      for (std::int64_t i = 0; i < inner; ++i)
        if ((mb[i * ms] != 0 ? 1 : 0) == blocked) o[i * os] += ninf;  // torch adds -inf
    });
  } else {
    const T* v = m.values.data<T>();
    for_each_row(sh, st, [&](const std::array<std::int64_t, 2>& off) {
      const T* mv = v + off[0];
      T* o = scores + off[1];
      for (std::int64_t i = 0; i < inner; ++i) o[i * os] += mv[i * ms];
    });
  }
}

template void add_mask<float>(float*, const Shape&, const MaskView&);
template void add_mask<double>(double*, const Shape&, const MaskView&);

}  // namespace torchport::nn::detail
