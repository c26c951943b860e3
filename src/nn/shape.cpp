#include "torchport/nn/shape.hpp"

#include <algorithm>
#include <cstring>

#include "nn/common.hpp"

namespace torchport::nn {

Tensor concat(const std::vector<Tensor>& tensors, std::int64_t dim) {
  constexpr std::string_view op = "concat";
  if (tensors.empty()) detail::fail(ErrorCode::invalid_argument, op, "no tensors to join");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string name = "tensor " + std::to_string(i);
    detail::require_defined(op, tensors[i], name);
    if (tensors[i].dim() == 0)
      detail::fail(ErrorCode::invalid_argument, op, name + " is 0-d; 0-d tensors cannot be joined");
  }
  const Tensor& first = tensors.front();
  const std::int64_t d = detail::wrap_dim(op, dim, first.dim());
  DType dt = first.dtype();
  bool mixed = false;
  for (const Tensor& t : tensors) mixed = mixed || t.dtype() != dt;
  if (mixed) {
    dt = DType::F32;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const DType ti = tensors[i].dtype();
      if (ti != DType::F32 && ti != DType::F64 && ti != DType::F16 && ti != DType::BF16)
        detail::fail(ErrorCode::invalid_argument, op,
                     "tensor " + std::to_string(i) + " is " + detail::str(tensors[i]) +
                         "; tensors of different dtypes must all be floating to be promoted");
      if (ti == DType::F64) dt = DType::F64;
    }
  }
  Shape out_shape = first.shape();
  out_shape[static_cast<std::size_t>(d)] = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    bool fits = t.dim() == first.dim();
    for (std::int64_t j = 0; fits && j < t.dim(); ++j)
      fits = j == d ||
             t.shape()[static_cast<std::size_t>(j)] == first.shape()[static_cast<std::size_t>(j)];
    if (!fits)
      detail::fail(ErrorCode::shape_mismatch, op,
                   "tensor " + std::to_string(i) + " " + detail::str(t.shape()) +
                       " does not match tensor 0 " + detail::str(first.shape()) +
                       " outside dimension " + std::to_string(d));
    out_shape[static_cast<std::size_t>(d)] += t.shape()[static_cast<std::size_t>(d)];
  }
  Tensor out = Tensor::empty(dt, out_shape);
  if (out.numel() == 0) return out;
  const std::size_t elem = dtype_size(dt);
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t j = 0; j < d; ++j) outer *= out_shape[static_cast<std::size_t>(j)];
  for (std::size_t j = static_cast<std::size_t>(d) + 1; j < out_shape.size(); ++j)
    inner *= out_shape[j];
  // Each part contributes one chunk of size[d] * inner elements per outer index.
  std::vector<Tensor> parts;
  std::vector<std::pair<const std::byte*, std::size_t>> chunks;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) {
    parts.push_back(t.to(dt));
    const std::size_t chunk =
        static_cast<std::size_t>(t.shape()[static_cast<std::size_t>(d)] * inner) * elem;
    if (chunk > 0) chunks.emplace_back(parts.back().bytes().data(), chunk);
  }
  std::byte* dst = out.mutable_bytes().data();
  for (std::int64_t o = 0; o < outer; ++o)
    for (const auto& [src, chunk] : chunks) {
      std::memcpy(dst, src + static_cast<std::size_t>(o) * chunk, chunk);
      dst += chunk;
    }
  return out;
}

Tensor slice(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t end,
             std::int64_t step) {
  constexpr std::string_view op = "slice";
  detail::require_defined(op, x, "input");
  if (x.dim() == 0) detail::fail(ErrorCode::invalid_argument, op, "cannot slice a 0-d tensor");
  const std::int64_t d = detail::wrap_dim(op, dim, x.dim());
  if (step <= 0)
    detail::fail(ErrorCode::invalid_argument, op,
                 "step " + std::to_string(step) + " must be positive");
  const std::int64_t n = x.shape()[static_cast<std::size_t>(d)];
  auto clamp = [n](std::int64_t v) {
    if (v < 0) v = v < -n ? 0 : v + n;  // written so that v + n cannot overflow
    return std::min(v, n);
  };
  const std::int64_t lo = clamp(start);
  const std::int64_t hi = std::max(clamp(end), lo);
  const std::int64_t len = (hi - lo + step - 1) / step;
  Shape sh = x.shape(), st = x.strides();
  sh[static_cast<std::size_t>(d)] = len;
  const std::int64_t offset =
      x.storage_offset() + (len > 0 ? lo * st[static_cast<std::size_t>(d)] : 0);
  if (len > 1) st[static_cast<std::size_t>(d)] *= step;  // len > 1 implies step < n: no overflow
  return Tensor(x.dtype(), std::move(sh), std::move(st), offset, x.storage()).clone();
}

Tensor flatten(const Tensor& x, std::int64_t start_dim, std::int64_t end_dim) {
  constexpr std::string_view op = "flatten";
  detail::require_defined(op, x, "input");
  if (x.dim() == 0) {
    detail::wrap_dim(op, start_dim, 0);
    detail::wrap_dim(op, end_dim, 0);
    return x.clone().reshape({1});
  }
  const std::int64_t s = detail::wrap_dim(op, start_dim, x.dim());
  const std::int64_t e = detail::wrap_dim(op, end_dim, x.dim());
  if (s > e)
    detail::fail(ErrorCode::invalid_argument, op,
                 "start_dim " + std::to_string(start_dim) + " comes after end_dim " +
                     std::to_string(end_dim) + " for a " + std::to_string(x.dim()) + "-d tensor");
  Shape sh;
  std::int64_t merged = 1;
  for (std::int64_t i = 0; i < x.dim(); ++i) {
    const std::int64_t v = x.shape()[static_cast<std::size_t>(i)];
    if (i < s || i > e) {
      sh.push_back(v);
    } else {
      merged *= v;
      if (i == e) sh.push_back(merged);
    }
  }
  return x.clone().reshape(std::move(sh));
}

}  // namespace torchport::nn
