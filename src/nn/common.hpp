#pragma once
// Private helpers of the nn ops: dtype resolution, argument checks,
// broadcasting, strided row iteration and raw element access.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "torchport/core/error.hpp"
#include "torchport/core/tensor.hpp"

namespace torchport::nn::detail {

/// Throws Error(code) with the message prefixed by "[op] ".
[[noreturn]] void fail(ErrorCode code, std::string_view op, const std::string& message);

/// "[2, 3]".
inline std::string str(const Shape& s) {
  return shape_to_string(s);
}
/// "F32[2, 3]".
inline std::string str(const Tensor& t) {
  return t.description();
}

/// Throws invalid_argument when `t` is undefined (a required operand).
void require_defined(std::string_view op, const Tensor& t, std::string_view name);

/// The dtype an op computes in: F64 when any defined operand is F64, else F32
/// (F16, BF16 and F32 operands compute in F32). Undefined tensors (absent
/// optional operands) are skipped. \throws invalid_argument on a non-floating
/// operand, naming it.
DType compute_dtype(std::string_view op,
                    std::initializer_list<std::pair<const Tensor*, std::string_view>> operands);

/// Calls `f.template operator()<T>()` with T = double for F64 and float otherwise.
template <class F>
decltype(auto) dispatch(DType dt, F&& f) {
  if (dt == DType::F64) return std::forward<F>(f).template operator()<double>();
  return std::forward<F>(f).template operator()<float>();
}

/// `d` wrapped into [0, ndim) (a 0-d tensor accepts 0 and -1, as torch).
/// \throws invalid_argument naming the op.
std::int64_t wrap_dim(std::string_view op, std::int64_t d, std::int64_t ndim);

/// torch's broadcast of two shapes. \throws shape_mismatch naming both.
Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b);

/// True when `shape` broadcasts to exactly `target` (torch's expand rule).
bool broadcasts_to(const Shape& shape, const Shape& target);

/// Strides that walk a view of `shape`/`strides` as if broadcast to `out`
/// (leading dims added, broadcast dims get stride 0). `shape` must broadcast.
Shape broadcast_strides(const Shape& shape, const Shape& strides, const Shape& out);

/// The first element of a (possibly strided) view whose dtype is `T`'s,
/// materialising the storage; nullptr for an empty view.
template <class T>
const T* view_data(const Tensor& t) {
  if (t.numel() == 0) return nullptr;
  const auto all = t.storage()->bytes();
  return reinterpret_cast<const T*>(all.data()) + t.storage_offset();
}

/// Typed data of a contiguous tensor whose dtype matches T; nullptr when empty.
template <class T>
const T* cdata(const Tensor& t) {
  return t.numel() == 0 ? nullptr : t.data<T>();
}
template <class T>
T* mdata(Tensor& t) {
  return t.numel() == 0 ? nullptr : t.mutable_data<T>();
}

/// Merges adjacent dimensions that every operand walks as one (after
/// dropping size-1 dimensions), so dense loops become one long loop.
template <std::size_t K>
void collapse_dims(Shape& shape, std::array<Shape, K>& strides) {
  Shape sh;
  std::array<Shape, K> st;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    bool merge = !sh.empty();
    for (std::size_t k = 0; k < K && merge; ++k) merge = st[k].back() == strides[k][i] * shape[i];
    if (merge) {
      sh.back() *= shape[i];
      for (std::size_t k = 0; k < K; ++k) st[k].back() = strides[k][i];
    } else {
      sh.push_back(shape[i]);
      for (std::size_t k = 0; k < K; ++k) st[k].push_back(strides[k][i]);
    }
  }
  shape = std::move(sh);
  strides = std::move(st);
}

/// Calls `f(offsets)` once per index of all dimensions of `shape` but the
/// last (once for a 0- or 1-d shape), where offsets[k] = sum(idx[d] *
/// strides[k][d]). Nothing is called when the shape holds no element.
template <std::size_t K, class F>
void for_each_row(const Shape& shape, const std::array<Shape, K>& strides, F&& f) {
  std::array<std::int64_t, K> off{};
  for (std::int64_t s : shape)
    if (s == 0) return;
  if (shape.size() <= 1) {
    f(std::as_const(off));
    return;
  }
  const std::size_t outer = shape.size() - 1;
  std::vector<std::int64_t> idx(outer, 0);
  for (;;) {
    f(std::as_const(off));
    std::size_t d = outer;
    for (;;) {
      if (d == 0) return;
      --d;
      ++idx[d];
      for (std::size_t k = 0; k < K; ++k) off[k] += strides[k][d];
      if (idx[d] < shape[d]) break;
      for (std::size_t k = 0; k < K; ++k) off[k] -= strides[k][d] * shape[d];
      idx[d] = 0;
    }
  }
}

/// Reads a boolean-or-float mask element as an additive term: for a boolean
/// mask (BOOL/U8) `masked_when` says which value blocks a position (-inf).
struct MaskView {
  enum class Kind { none, boolean, additive } kind = Kind::none;
  Tensor values;  // contiguous: BOOL/U8 for boolean masks, the compute dtype otherwise
  Shape strides;  // of `values`, broadcast to the scores' shape
  bool masked_when = true;
};

/// Prepares `mask` (undefined = none) to be added to scores of `shape`
/// computed in `dt`; \throws shape_mismatch when it does not broadcast and
/// invalid_argument when its dtype is neither boolean nor floating.
MaskView make_mask(std::string_view op, std::string_view name, const Tensor& mask,
                   const Shape& shape, DType dt, bool masked_when);

/// Adds a prepared mask to contiguous `scores` of `shape`.
template <class T>
void add_mask(T* scores, const Shape& shape, const MaskView& m);

extern template void add_mask<float>(float*, const Shape&, const MaskView&);
extern template void add_mask<double>(double*, const Shape&, const MaskView&);

}  // namespace torchport::nn::detail
