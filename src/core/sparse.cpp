// Sparse tensors: the parts torch saves (indices and values) and
// to_dense(), which scatters the values into zeros as torch's to_dense()
// does (duplicate COO entries are summed).

#include <cstring>

#include "torchport/core/error.hpp"
#include "torchport/core/tensor.hpp"
#include "torchport/detail/checked.hpp"

namespace torchport {
namespace {

[[noreturn]] void corrupt(const std::string& what) {
  throw Error(ErrorCode::corrupt, "sparse tensor: " + what);
}

std::vector<std::int64_t> longs(const Tensor& t, const char* what) {
  if (!is_integer(t.dtype()))
    corrupt(std::string(what) + " are " + std::string(dtype_name(t.dtype())) + ", not integers");
  const Tensor c = t.to(DType::I64);
  const auto s = c.span<std::int64_t>();
  return {s.begin(), s.end()};
}

// dst[i] += src[i] for one element of `d` (bool: or).
void add_element(std::byte* dst, const std::byte* src, DType d) {
  auto add = [&]<class T>(T*) {
    T a, b;
    std::memcpy(&a, dst, sizeof(T));
    std::memcpy(&b, src, sizeof(T));
    a = static_cast<T>(a + b);
    std::memcpy(dst, &a, sizeof(T));
  };
  switch (d) {
    case DType::BOOL:
      dst[0] = dst[0] | src[0];
      break;
    case DType::U8:
      add(static_cast<std::uint8_t*>(nullptr));
      break;
    case DType::I8:
      add(static_cast<std::int8_t*>(nullptr));
      break;
    case DType::I16:
      add(static_cast<std::int16_t*>(nullptr));
      break;
    case DType::U16:
      add(static_cast<std::uint16_t*>(nullptr));
      break;
    case DType::I32:
      add(static_cast<std::int32_t*>(nullptr));
      break;
    case DType::U32:
      add(static_cast<std::uint32_t*>(nullptr));
      break;
    case DType::I64:
      add(static_cast<std::int64_t*>(nullptr));
      break;
    case DType::U64:
      add(static_cast<std::uint64_t*>(nullptr));
      break;
    case DType::F32:
      add(static_cast<float*>(nullptr));
      break;
    case DType::F64:
      add(static_cast<double*>(nullptr));
      break;
    case DType::C64:
      add(static_cast<float*>(nullptr));
      add_element(dst + 4, src + 4, DType::F32);
      break;
    case DType::C128:
      add(static_cast<double*>(nullptr));
      add_element(dst + 8, src + 8, DType::F64);
      break;
    case DType::F16:
    case DType::BF16: {
      std::uint16_t a, b;
      std::memcpy(&a, dst, 2);
      std::memcpy(&b, src, 2);
      const bool h = d == DType::F16;
      const float s =
          (h ? half_to_float(a) : bf16_to_float(a)) + (h ? half_to_float(b) : bf16_to_float(b));
      a = h ? float_to_half(s) : float_to_bf16(s);
      std::memcpy(dst, &a, 2);
      break;
    }
    default:
      throw Error(ErrorCode::unsupported,
                  "sparse tensor of " + std::string(dtype_name(d)) + " with duplicate entries");
  }
}

}  // namespace

std::string_view SparseParts::layout_name(Layout l) noexcept {
  switch (l) {
    case Layout::coo:
      return "sparse_coo";
    case Layout::csr:
      return "sparse_csr";
    case Layout::csc:
      return "sparse_csc";
    case Layout::bsr:
      return "sparse_bsr";
    case Layout::bsc:
      return "sparse_bsc";
  }
  return "?";
}

Tensor Tensor::sparse_tensor(std::shared_ptr<const SparseParts> parts) {
  if (!parts || !parts->values.defined())
    throw Error(ErrorCode::invalid_argument, "sparse tensor without values");
  const DType d = parts->values.dtype();
  // No dense storage: a view that repeats one element whose bytes cannot be
  // read, so nothing mistakes it for the dense values (to_dense() gives them).
  auto none = Storage::deferred(dtype_size(d), []() -> std::shared_ptr<Storage> {
    throw Error(ErrorCode::unsupported, "the elements of a sparse tensor are read with to_dense()");
  });
  Tensor t(d, parts->size, Shape(parts->size.size(), 0), 0, std::move(none));
  t.set_sparse(std::move(parts));
  return t;
}

Tensor Tensor::to_dense() const {
  if (!is_sparse()) return *this;
  const SparseParts& p = *sparse();
  const Tensor values = p.values.contiguous();
  Tensor out = zeros(body().dtype, body().shape);
  auto dst = out.mutable_bytes();
  const auto src = values.bytes();
  const std::size_t es = dtype_size(body().dtype);
  const Shape st = contiguous_strides(body().shape);
  const auto nd = body().shape.size();
  auto scatter = [&](std::int64_t dense_at, std::size_t value_at, std::size_t count) {
    for (std::size_t k = 0; k < count; ++k)
      add_element(dst.data() + (static_cast<std::size_t>(dense_at) + k) * es,
                  src.data() + (value_at + k) * es, body().dtype);
  };
  if (p.layout == SparseParts::Layout::coo) {
    // indices [sparse_dim, nnz]; values [nnz, dense dims...]
    if (p.indices.dim() != 2) corrupt("COO indices of shape " + shape_to_string(p.indices.shape()));
    const auto sd = static_cast<std::size_t>(p.indices.size(0));
    const auto nnz = static_cast<std::size_t>(p.indices.size(1));
    if (sd > nd || values.dim() < 1 || static_cast<std::size_t>(values.size(0)) != nnz ||
        static_cast<std::size_t>(values.dim()) != 1 + nd - sd)
      corrupt("COO indices " + shape_to_string(p.indices.shape()) + " and values " +
              shape_to_string(values.shape()) + " do not fit the size " +
              shape_to_string(body().shape));
    for (std::size_t d = 1; d < static_cast<std::size_t>(values.dim()); ++d)
      if (values.shape()[d] != body().shape[sd + d - 1])
        corrupt("COO values " + shape_to_string(values.shape()) + " vs size " +
                shape_to_string(body().shape));
    const std::size_t block = nnz == 0 ? 0 : static_cast<std::size_t>(values.numel()) / nnz;
    const auto idx = longs(p.indices, "COO indices");
    for (std::size_t i = 0; i < nnz; ++i) {
      std::int64_t at = 0;
      for (std::size_t d = 0; d < sd; ++d) {
        const std::int64_t x = idx[d * nnz + i];
        if (x < 0 || x >= body().shape[d])
          corrupt("COO index " + std::to_string(x) + " outside dimension " + std::to_string(d) +
                  " of " + shape_to_string(body().shape));
        at += x * st[d];
      }
      scatter(at, i * block, block);
    }
    return out;
  }
  // Compressed layouts, 2-D (no batch dimensions); blocks for BSR/BSC.
  const bool rows = p.layout == SparseParts::Layout::csr || p.layout == SparseParts::Layout::bsr;
  const bool blocked = p.layout == SparseParts::Layout::bsr || p.layout == SparseParts::Layout::bsc;
  if (nd != 2)
    throw Error(ErrorCode::unsupported, std::string(SparseParts::layout_name(p.layout)) +
                                            " tensor of " + std::to_string(nd) +
                                            " dimensions (2 are read)");
  const auto comp = longs(p.compressed_indices, "compressed indices");
  const auto plain = longs(p.plain_indices, "plain indices");
  const std::size_t nnz = plain.size();
  std::int64_t bh = 1, bw = 1;
  if (blocked) {
    if (values.dim() != 3) corrupt("block values of shape " + shape_to_string(values.shape()));
    bh = values.size(1);
    bw = values.size(2);
  } else if (values.dim() != 1) {
    corrupt("values of shape " + shape_to_string(values.shape()) + " (1-D expected)");
  }
  if (bh <= 0 || bw <= 0 || body().shape[0] % bh != 0 || body().shape[1] % bw != 0 ||
      static_cast<std::size_t>(values.size(0)) != nnz)
    corrupt("values " + shape_to_string(values.shape()) + " do not fit the size " +
            shape_to_string(body().shape));
  const std::int64_t ncomp = rows ? body().shape[0] / bh : body().shape[1] / bw;
  const std::int64_t nplain = rows ? body().shape[1] / bw : body().shape[0] / bh;
  if (static_cast<std::int64_t>(comp.size()) != ncomp + 1 || comp.front() != 0 ||
      comp.back() != static_cast<std::int64_t>(nnz))
    corrupt("compressed indices of length " + std::to_string(comp.size()) + " for " +
            std::to_string(ncomp) + " rows and " + std::to_string(nnz) + " values");
  for (std::int64_t c = 0; c < ncomp; ++c) {
    if (comp[static_cast<std::size_t>(c + 1)] < comp[static_cast<std::size_t>(c)])
      corrupt("compressed indices decrease");
    for (std::int64_t k = comp[static_cast<std::size_t>(c)];
         k < comp[static_cast<std::size_t>(c + 1)]; ++k) {
      const std::int64_t q = plain[static_cast<std::size_t>(k)];
      if (q < 0 || q >= nplain)
        corrupt("plain index " + std::to_string(q) + " outside " + std::to_string(nplain));
      const std::int64_t r0 = (rows ? c : q) * bh, c0 = (rows ? q : c) * bw;
      for (std::int64_t i = 0; i < bh; ++i)
        for (std::int64_t j = 0; j < bw; ++j)
          scatter((r0 + i) * st[0] + (c0 + j), static_cast<std::size_t>(k * bh * bw + i * bw + j),
                  1);
    }
  }
  return out;
}

}  // namespace torchport
