#pragma once
/// \file
/// Slices of checkpoint tensors that read only their own bytes: what a rank
/// of a tensor-parallel model loads.
///
/// \code
/// const auto cat = torchport::open("model.safetensors");
/// auto counter = std::make_shared<torchport::ReadCounter>();
/// // Rows [1024, 2048) of a [4096, 4096] weight: a zero-copy view of the mapping.
/// torchport::Tensor rows = torchport::read_slice(cat, "q_proj.weight", 0, 1024, 1024, {counter});
/// // Columns [1024, 2048): 4096 pieces of 1024 elements, gathered with pread.
/// torchport::Tensor cols = torchport::read_slice(cat, "o_proj.weight", 1, 1024, 1024, {counter});
/// \endcode

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "torchport/core/tensor.hpp"
#include "torchport/formats/catalog.hpp"

namespace torchport {

/// A range `[start, start + length)` of one dimension, in elements.
struct SliceRange {
  std::int64_t start = 0;   ///< first index
  std::int64_t length = 0;  ///< number of indices
  /// Ranges compare equal when start and length do.
  bool operator==(const SliceRange&) const = default;
};

/// Counts the bytes slices read (thread-safe; share one between slices).
class ReadCounter {
 public:
  /// Adds one read of `n` bytes.
  void add(std::uint64_t n) noexcept {
    bytes_.fetch_add(n, std::memory_order_relaxed);
    reads_.fetch_add(1, std::memory_order_relaxed);
  }
  /// Bytes read so far.
  std::uint64_t bytes() const noexcept { return bytes_.load(std::memory_order_relaxed); }
  /// Pieces read so far (one `pread` or copy each; a zero-copy view is one).
  std::uint64_t reads() const noexcept { return reads_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> bytes_{0};
  std::atomic<std::uint64_t> reads_{0};
};

/// How to read a slice.
struct SliceOptions {
  /// Counts the bytes read (may be null). A zero-copy view counts its bytes
  /// when it is made (they are read when used); a gathered slice when its
  /// pieces are read.
  std::shared_ptr<ReadCounter> counter;
  /// True (default): a slice that is not a zero-copy view reads its pieces
  /// on first use (a lazy tensor, like the catalogue's). False: now.
  bool lazy = true;
};

/// Bytes a slice of `t` reads: the elements of the ranges along `dim`,
/// times the element size. \throws Error(invalid_argument) as `read_slice`.
std::uint64_t slice_nbytes(const Tensor& t, std::int64_t dim, std::span<const SliceRange> ranges);

/// The concatenation along `dim` (negative counts from the end) of
/// `t.narrow(dim, r.start, r.length)` for each range `r`, reading only those
/// elements' bytes:
/// - one range whose elements are contiguous in a storage that is memory or
///   a file mapping (dim 0 of a contiguous tensor, say): a zero-copy view;
/// - otherwise a contiguous tensor gathered from the storage in runs of
///   consecutive elements, each run one `pread` of the file when the storage
///   is a file mapping (or an unaligned record of one), a copy from memory
///   otherwise.
///
/// Views, offsets and storages shared between tensors are read as torch's
/// `narrow()` reads them. Bytes compressed or transformed in the file (a
/// deflated zip entry, a big-endian record, a storage view of the old tar
/// format) cannot be sliced without decoding everything: an error.
///
/// \throws Error(invalid_argument) for a bad dimension or a range outside
/// it, Error(unsupported) for bytes that are not addressable, and what
/// reading the file throws.
Tensor read_slice(const Tensor& t, std::int64_t dim, std::span<const SliceRange> ranges,
                  const SliceOptions& options = {});

/// `read_slice` of one range `[start, start + length)` of `dim`.
Tensor read_slice(const Tensor& t, std::int64_t dim, std::int64_t start, std::int64_t length,
                  const SliceOptions& options = {});

/// `read_slice` of the tensor `name` of `catalog`; errors name the key and
/// the file. A gzipped record (format "*.gz") is refused: its bytes were
/// inflated whole when it was opened.
/// \throws Error(missing_key) when the catalogue has no such tensor, and
/// what the tensor form throws.
Tensor read_slice(const TensorCatalog& catalog, std::string_view name, std::int64_t dim,
                  std::span<const SliceRange> ranges, const SliceOptions& options = {});

/// `read_slice` of one range of the tensor `name` of `catalog`.
Tensor read_slice(const TensorCatalog& catalog, std::string_view name, std::int64_t dim,
                  std::int64_t start, std::int64_t length, const SliceOptions& options = {});

/// Throws Error(unsupported) when the tensors of a catalogue of `format`
/// cannot be sliced in place (gzipped records, inflated whole when opened).
void check_sliceable_format(std::string_view format);

}  // namespace torchport
