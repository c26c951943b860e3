#include "torchport/formats/slice.hpp"

#include <string>

#include "torchport/core/error.hpp"
#include "torchport/detail/checked.hpp"

namespace torchport {
namespace {

std::string ranges_text(std::span<const SliceRange> ranges) {
  std::string s;
  for (const auto& r : ranges)
    s += (s.empty() ? "[" : ", [") + std::to_string(r.start) + ", +" + std::to_string(r.length) +
         ")";
  return s.empty() ? "(no range)" : s;
}

// The dimension index `dim` names, checked, and the total length of the ranges.
std::size_t check_ranges(const Tensor& t, std::int64_t dim, std::span<const SliceRange> ranges,
                         std::int64_t& total) {
  if (!t.defined()) throw Error(ErrorCode::invalid_argument, "slice of an undefined tensor");
  const std::int64_t nd = t.dim();
  if (nd == 0) throw Error(ErrorCode::invalid_argument, "slice of a 0-d tensor " + t.description());
  if (dim < -nd || dim >= nd)
    throw Error(ErrorCode::invalid_argument,
                "slice along dimension " + std::to_string(dim) + " of " + t.description() +
                    ", which has " + std::to_string(nd) + " dimension" + (nd == 1 ? "" : "s"));
  const auto d = static_cast<std::size_t>(dim < 0 ? dim + nd : dim);
  const std::int64_t n = t.shape()[d];
  total = 0;
  for (const auto& r : ranges) {
    if (r.start < 0 || r.length < 0 || r.start > n || r.length > n - r.start)
      throw Error(ErrorCode::invalid_argument, "slice " + ranges_text(ranges) + " of dimension " +
                                                   std::to_string(d) + " lies outside its size " +
                                                   std::to_string(n) + " in " + t.description());
    if (!detail::add_ok(total, r.length, total))
      throw Error(ErrorCode::invalid_argument, "slice lengths overflow 64 bits");
  }
  return d;
}

// Copies the elements of `src` (a strided view) into memory at `dst` laid out
// with `dst_strides` (elements): runs of elements consecutive in both are
// read with one `read_into` each (a pread for a file mapping), and runs
// adjacent in both are merged.
void gather(const Tensor& src, std::byte* dst, std::span<const std::int64_t> dst_strides,
            ReadCounter* counter) {
  if (src.numel() == 0) return;
  const Shape& shape = src.shape();
  const Shape& ss = src.strides();
  const std::size_t es = dtype_size(src.dtype());
  // Trailing dimensions that are consecutive in both make one run.
  std::size_t inner = shape.size();
  std::int64_t run = 1;
  while (inner > 0) {
    const std::size_t k = inner - 1;
    if (shape[k] == 1) {
      --inner;
      continue;
    }
    if (ss[k] != run || dst_strides[k] != run) break;
    run *= shape[k];
    --inner;
  }
  const Storage& storage = *src.storage();
  std::vector<std::int64_t> idx(inner, 0);
  std::int64_t pend_src = -1, pend_dst = 0, pend_len = 0;  // a run not yet read
  // The runs are read together at the end: a remote storage fetches them
  // in parallel (a column slice is a run a row), a local one with one
  // pread each.
  std::vector<RangeRead> runs;
  auto flush = [&] {
    if (pend_len == 0) return;
    const auto nbytes = static_cast<std::size_t>(pend_len) * es;
    runs.push_back({static_cast<std::uint64_t>(pend_src) * es,
                    {dst + static_cast<std::size_t>(pend_dst) * es, nbytes}});
    if (counter) counter->add(nbytes);
    pend_len = 0;
  };
  auto finish = [&] {
    flush();
    storage.read_many(runs);
  };
  for (;;) {
    std::int64_t so = src.storage_offset(), dof = 0;
    for (std::size_t i = 0; i < inner; ++i) {
      so += idx[i] * ss[i];
      dof += idx[i] * dst_strides[i];
    }
    if (pend_len != 0 && so == pend_src + pend_len && dof == pend_dst + pend_len) {
      pend_len += run;
    } else {
      flush();
      pend_src = so;
      pend_dst = dof;
      pend_len = run;
    }
    // Next outer index (odometer over dimensions [0, inner)).
    std::size_t i = inner;
    while (i > 0) {
      --i;
      if (++idx[i] < shape[i]) break;
      idx[i] = 0;
      if (i == 0) {
        finish();
        return;
      }
    }
    if (inner == 0) {
      finish();
      return;
    }
  }
}

[[noreturn]] void not_addressable(const Tensor& t) {
  throw Error(ErrorCode::unsupported,
              "the bytes of " + t.description() +
                  " are not stored as they are in the file (a deflated zip entry, a byte-swapped "
                  "big-endian "
                  "record, or a storage view of the tar format): a slice would decode the whole "
                  "storage. Store "
                  "the checkpoint uncompressed (torchport convert) or load the tensor whole");
}

Tensor gathered(const Tensor& t, std::size_t d, std::vector<SliceRange> ranges, std::int64_t total,
                const std::shared_ptr<ReadCounter>& counter) {
  Tensor out = Tensor::empty(t.dtype(), [&] {
    Shape s = t.shape();
    s[d] = total;
    return s;
  }());
  const Shape strides = out.strides();
  std::byte* base = out.mutable_bytes().data();
  std::int64_t at = 0;
  for (const auto& r : ranges) {
    if (r.length == 0) continue;
    const Tensor piece = t.narrow(static_cast<std::int64_t>(d), r.start, r.length);
    gather(piece, base + static_cast<std::size_t>(at * strides[d]) * dtype_size(t.dtype()), strides,
           counter.get());
    at += r.length;
  }
  return out;
}

}  // namespace

void check_sliceable_format(std::string_view format) {
  if (format.ends_with(".gz"))
    throw Error(ErrorCode::unsupported,
                "a gzipped record (" + std::string(format) +
                    ") was inflated whole when opened: its tensors cannot be read in "
                    "slices. Save the record without gzip to load it in slices");
}

std::uint64_t slice_nbytes(const Tensor& t, std::int64_t dim, std::span<const SliceRange> ranges) {
  std::int64_t total = 0;
  const std::size_t d = check_ranges(t, dim, ranges, total);
  std::uint64_t n = static_cast<std::uint64_t>(total) * dtype_size(t.dtype());
  for (std::size_t i = 0; i < t.shape().size(); ++i)
    if (i != d && !detail::mul_ok(n, static_cast<std::uint64_t>(t.shape()[i]), n))
      throw Error(ErrorCode::invalid_argument, "slice size overflows 64 bits");
  return n;
}

Tensor read_slice(const Tensor& t, std::int64_t dim, std::span<const SliceRange> ranges,
                  const SliceOptions& options) {
  std::int64_t total = 0;
  const std::size_t d = check_ranges(t, dim, ranges, total);
  // Drop empty ranges and merge adjacent ones.
  std::vector<SliceRange> merged;
  for (const auto& r : ranges) {
    if (r.length == 0) continue;
    if (!merged.empty() && merged.back().start + merged.back().length == r.start)
      merged.back().length += r.length;
    else
      merged.push_back(r);
  }
  if (t.slicer() != nullptr) {
    // Stored as pieces (a distributed checkpoint's chunks): read the
    // pieces the ranges overlap, and nothing else.
    std::vector<std::pair<std::int64_t, std::int64_t>> rs;
    for (const auto& r : merged) rs.emplace_back(r.start, r.length);
    const auto read = [t, d, rs, counter = options.counter] {
      return t.slicer()->read(d, rs, [&counter](std::uint64_t n) {
        if (counter) counter->add(n);
      });
    };
    if (!options.lazy) return read();
    Shape shape = t.shape();
    shape[d] = total;
    const std::uint64_t nbytes = slice_nbytes(t, static_cast<std::int64_t>(d), merged);
    auto st = Storage::deferred(nbytes, [read] { return read().storage(); });
    return Tensor(t.dtype(), shape, contiguous_strides(shape), 0, std::move(st));
  }
  const Storage& storage = *t.storage();
  if (!storage.addressable()) not_addressable(t);
  if (merged.size() <= 1) {
    const SliceRange r = merged.empty() ? SliceRange{0, 0} : merged.front();
    Tensor view = t.narrow(static_cast<std::int64_t>(d), r.start, r.length);
    // Zero copy: a contiguous view of memory or of a mapping (a deferred copy
    // would make its whole storage on first access: gather from it instead).
    if (view.is_contiguous() && !storage.pending()) {
      if (options.counter && view.nbytes() != 0) options.counter->add(view.nbytes());
      return view;
    }
  }
  if (!options.lazy) return gathered(t, d, std::move(merged), total, options.counter);
  Shape shape = t.shape();
  shape[d] = total;
  const std::uint64_t nbytes = slice_nbytes(t, static_cast<std::int64_t>(d), merged);
  auto st = Storage::deferred(nbytes, [t, d, merged, total, counter = options.counter] {
    return gathered(t, d, merged, total, counter).storage();
  });
  return Tensor(t.dtype(), shape, contiguous_strides(shape), 0, std::move(st));
}

Tensor read_slice(const Tensor& t, std::int64_t dim, std::int64_t start, std::int64_t length,
                  const SliceOptions& options) {
  const SliceRange r{start, length};
  return read_slice(t, dim, std::span<const SliceRange>(&r, 1), options);
}

Tensor read_slice(const TensorCatalog& catalog, std::string_view name, std::int64_t dim,
                  std::span<const SliceRange> ranges, const SliceOptions& options) {
  const Tensor* t = catalog.find(name);
  if (t == nullptr)
    throw Error(
        ErrorCode::missing_key,
        "no tensor of this name in the " + std::string(catalog.format_name()) + " checkpoint",
        std::string(name));
  try {
    check_sliceable_format(catalog.format_name());
    return read_slice(*t, dim, ranges, options);
  } catch (const Error& e) {
    throw e.at_key(name);
  }
}

Tensor read_slice(const TensorCatalog& catalog, std::string_view name, std::int64_t dim,
                  std::int64_t start, std::int64_t length, const SliceOptions& options) {
  const SliceRange r{start, length};
  return read_slice(catalog, name, dim, std::span<const SliceRange>(&r, 1), options);
}

}  // namespace torchport
