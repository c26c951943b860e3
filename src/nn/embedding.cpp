#include "torchport/nn/embedding.hpp"

#include "torchport/core/convert.hpp"

#include "nn/common.hpp"

namespace torchport::nn {

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  constexpr std::string_view op = "embedding";
  detail::require_defined(op, indices, "indices");
  detail::require_defined(op, weight, "weight");
  if (indices.dtype() != DType::I64 && indices.dtype() != DType::I32)
    detail::fail(ErrorCode::invalid_argument, op,
                 "indices are " + detail::str(indices) + "; expected I64 or I32");
  const DType dt = detail::compute_dtype(op, {{&weight, "weight"}});
  if (weight.dim() != 2)
    detail::fail(
        ErrorCode::invalid_argument, op,
        "weight " + detail::str(weight.shape()) + " is not 2-d [num_embeddings, embedding_dim]");
  const std::int64_t rows = weight.size(0), dim = weight.size(1);
  Shape out_shape = indices.shape();
  out_shape.push_back(dim);
  Tensor out = Tensor::empty(dt, out_shape);
  const Tensor idx = indices.contiguous();
  const Tensor table = weight.contiguous();  // a view of a mapped file stays a view
  const std::size_t in_row = static_cast<std::size_t>(dim) * dtype_size(table.dtype());
  const std::size_t out_row = static_cast<std::size_t>(dim) * dtype_size(dt);
  const std::byte* src = table.numel() ? table.bytes().data() : nullptr;
  std::byte* dst = out.numel() ? out.mutable_bytes().data() : nullptr;
  const std::int64_t n = idx.numel();
  const bool wide = idx.dtype() == DType::I64;
  const std::int64_t* i64 = wide && n > 0 ? idx.data<std::int64_t>() : nullptr;
  const std::int32_t* i32 = !wide && n > 0 ? idx.data<std::int32_t>() : nullptr;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t k = wide ? i64[i] : static_cast<std::int64_t>(i32[i]);
    if (k < 0 || k >= rows)
      detail::fail(ErrorCode::invalid_argument, op,
                   "index " + std::to_string(k) + " at position " + std::to_string(i) +
                       " of indices " + detail::str(indices.shape()) +
                       " is out of range for a table of " + std::to_string(rows) + " rows");
    if (dim == 0) continue;
    convert_elements(src + static_cast<std::size_t>(k) * in_row, table.dtype(),
                     dst + static_cast<std::size_t>(i) * out_row, dt,
                     static_cast<std::size_t>(dim));
  }
  return out;
}

}  // namespace torchport::nn
