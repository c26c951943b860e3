// Sparse tensors: the parts torch saves (indices and values) and
// to_dense(), which scatters the values into zeros as torch's to_dense()
// does (duplicate COO entries are summed).

#include <algorithm>
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

// torch's invariants, as torch.load checks them after loading
// (torch._utils._validate_loaded_sparse_tensors), with its messages: first
// the shapes sparse_coo_tensor / sparse_compressed_tensor check when they
// build the tensor, then torch._validate_sparse_coo_tensor_args or
// _validate_sparse_compressed_tensor_args (ATen's SparseTensor.cpp and
// ValidateCompressedIndicesCommon.h, in their order).
void SparseParts::validate(bool is_coalesced) const {
  const auto nd = size.size();
  if (layout == Layout::coo) {
    // indices [sparse_dim, nnz]; values [nnz, dense dims...]
    if (indices.dim() != 2) corrupt("COO indices of shape " + shape_to_string(indices.shape()));
    const auto sd = static_cast<std::size_t>(indices.size(0));
    const auto nnz = static_cast<std::size_t>(indices.size(1));
    if (sd > nd || values.dim() < 1 || static_cast<std::size_t>(values.size(0)) != nnz ||
        static_cast<std::size_t>(values.dim()) != 1 + nd - sd)
      corrupt("COO indices " + shape_to_string(indices.shape()) + " and values " +
              shape_to_string(values.shape()) + " do not fit the size " + shape_to_string(size));
    for (std::size_t d = 1; d < static_cast<std::size_t>(values.dim()); ++d)
      if (values.shape()[d] != size[sd + d - 1])
        corrupt("COO values " + shape_to_string(values.shape()) + " vs size " +
                shape_to_string(size));
    if (nnz == 0) return;
    const auto idx = longs(indices, "COO indices");
    for (std::size_t d = 0; d < sd; ++d) {
      const auto row = idx.begin() + static_cast<std::ptrdiff_t>(d * nnz);
      const auto [lo, hi] = std::minmax_element(row, row + static_cast<std::ptrdiff_t>(nnz));
      if (*lo < 0)
        corrupt("found negative index " + std::to_string(*lo) + " for dim " + std::to_string(d));
      if (*hi >= size[d])
        corrupt("size is inconsistent with indices: for dim " + std::to_string(d) + ", size is " +
                std::to_string(size[d]) + " but found index " + std::to_string(*hi));
    }
    // Saved as coalesced: the entries in increasing order, none repeated
    // (torch compares the flattened indices; with every index inside the
    // size that is the order of the index columns).
    if (is_coalesced)
      for (std::size_t i = 1; i < nnz; ++i) {
        std::size_t d = 0;
        while (d < sd && idx[d * nnz + i] == idx[d * nnz + i - 1]) ++d;
        if (d == sd || idx[d * nnz + i] < idx[d * nnz + i - 1])
          corrupt(
              "cannot set is_coalesced to true if indices correspond to uncoalesced COO tensor");
      }
    return;
  }
  // Compressed layouts, 2-D (no batch dimensions); blocks for BSR/BSC.
  const bool rows = layout == Layout::csr || layout == Layout::bsr;
  const bool blocked = layout == Layout::bsr || layout == Layout::bsc;
  if (nd != 2 || compressed_indices.dim() != 1 || plain_indices.dim() != 1)
    throw Error(ErrorCode::unsupported, std::string(layout_name(layout)) + " tensor of " +
                                            std::to_string(nd) +
                                            " dimensions or with batches (2-D ones are read)");
  std::int64_t bh = 1, bw = 1;
  if (blocked) {
    if (values.dim() != 3) corrupt("block values of shape " + shape_to_string(values.shape()));
    bh = values.size(1);
    bw = values.size(2);
  } else if (values.dim() != 1) {
    corrupt("values of shape " + shape_to_string(values.shape()) + " (1-D expected)");
  }
  const std::int64_t nnz = plain_indices.size(0);
  if (bh <= 0 || bw <= 0 || size[0] % bh != 0 || size[1] % bw != 0 || values.size(0) != nnz)
    corrupt("values " + shape_to_string(values.shape()) + " do not fit the size " +
            shape_to_string(size) + " and " + std::to_string(nnz) + " plain indices");
  const std::int64_t ncomp = rows ? size[0] / bh : size[1] / bw;
  const std::int64_t nplain = rows ? size[1] / bw : size[0] / bh;
  const char* cname = rows ? "crow_indices" : "ccol_indices";
  const char* pname = rows ? "col_indices" : "row_indices";
  if (compressed_indices.size(0) != ncomp + 1)
    corrupt(std::string(cname) + " have wrong shape: " + cname +
            ".shape[-1] = " + std::to_string(compressed_indices.size(0)) + " is not equal to " +
            (rows ? "nrows" : "ncols") + " + 1 = " + std::to_string(ncomp + 1));
  const auto comp = longs(compressed_indices, "compressed indices");
  const auto plain = longs(plain_indices, "plain indices");
  const auto unsatisfied = [&](const std::string& invariant) {
    corrupt("`" + invariant + "` is not satisfied.");
  };
  for (const std::int64_t q : plain)
    if (q < 0 || q >= nplain)
      unsatisfied(std::string("0 <= ") + pname + " < " + (rows ? "ncols" : "nrows"));
  if (comp.front() != 0) unsatisfied(std::string(cname) + "[..., 0] == 0");
  if (comp.back() != nnz) unsatisfied(std::string(cname) + "[..., -1] == nnz");
  for (std::int64_t c = 0; c < ncomp; ++c) {
    const std::int64_t from = comp[static_cast<std::size_t>(c)];
    const std::int64_t to = comp[static_cast<std::size_t>(c + 1)];
    if (to - from < 0 || to - from > nplain)
      unsatisfied(std::string("0 <= ") + cname + "[..., 1:] - " + cname +
                  "[..., :-1] <= " + (rows ? "ncols" : "nrows"));
    // (Bounds hold here: first == 0, last == nnz, nondecreasing.)
    for (std::int64_t k = from; k + 1 < to; ++k)
      if (plain[static_cast<std::size_t>(k)] >= plain[static_cast<std::size_t>(k + 1)])
        unsatisfied(std::string(pname) + "[..., " + cname + "[..., i - 1]:" + cname +
                    "[..., i]] for all i = 1, ..., " + (rows ? "nrows" : "ncols") +
                    " are sorted and distinct along the last dimension values");
  }
}

Tensor Tensor::to_dense() const {
  if (!is_sparse()) return *this;
  const SparseParts& p = *sparse();
  p.validate();
  const Tensor values = p.values.contiguous();
  Tensor out = zeros(body().dtype, body().shape);
  auto dst = out.mutable_bytes();
  const auto src = values.bytes();
  const std::size_t es = dtype_size(body().dtype);
  const Shape st = contiguous_strides(body().shape);
  auto scatter = [&](std::int64_t dense_at, std::size_t value_at, std::size_t count) {
    for (std::size_t k = 0; k < count; ++k)
      add_element(dst.data() + (static_cast<std::size_t>(dense_at) + k) * es,
                  src.data() + (value_at + k) * es, body().dtype);
  };
  if (p.layout == SparseParts::Layout::coo) {
    const auto sd = static_cast<std::size_t>(p.indices.size(0));
    const auto nnz = static_cast<std::size_t>(p.indices.size(1));
    const std::size_t block = nnz == 0 ? 0 : static_cast<std::size_t>(values.numel()) / nnz;
    const auto idx = longs(p.indices, "COO indices");
    for (std::size_t i = 0; i < nnz; ++i) {
      std::int64_t at = 0;
      for (std::size_t d = 0; d < sd; ++d) at += idx[d * nnz + i] * st[d];
      scatter(at, i * block, block);
    }
    return out;
  }
  const bool rows = p.layout == SparseParts::Layout::csr || p.layout == SparseParts::Layout::bsr;
  const bool blocked = p.layout == SparseParts::Layout::bsr || p.layout == SparseParts::Layout::bsc;
  const std::int64_t bh = blocked ? values.size(1) : 1, bw = blocked ? values.size(2) : 1;
  const auto comp = longs(p.compressed_indices, "compressed indices");
  const auto plain = longs(p.plain_indices, "plain indices");
  for (std::size_t c = 0; c + 1 < comp.size(); ++c)
    for (std::int64_t k = comp[c]; k < comp[c + 1]; ++k) {
      const std::int64_t q = plain[static_cast<std::size_t>(k)];
      const auto cc = static_cast<std::int64_t>(c);
      const std::int64_t r0 = (rows ? cc : q) * bh, c0 = (rows ? q : cc) * bw;
      for (std::int64_t i = 0; i < bh; ++i)
        for (std::int64_t j = 0; j < bw; ++j)
          scatter((r0 + i) * st[0] + (c0 + j), static_cast<std::size_t>(k * bh * bw + i * bw + j),
                  1);
    }
  return out;
}

}  // namespace torchport
