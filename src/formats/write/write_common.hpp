#pragma once
// What the writers share: streaming tensor bytes to a file in bounded
// chunks (with progress and page release), and checks on names.

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "torchport/core/tensor.hpp"
#include "torchport/detail/page_release.hpp"
#include "torchport/formats/save.hpp"

namespace torchport::formats {

/// Where a writer's data bytes go (a file, or the open entry of a zip).
using ByteSink = std::function<void(std::span<const std::byte>)>;

/// Streams tensor data and reports progress across all files of one save.
class DataStreamer {
 public:
  DataStreamer(const SaveOptions& options, std::uint64_t total)
      : options_(options), total_(total) {}

  /// Writes `t`'s elements in C order: a contiguous tensor straight from its
  /// storage (a mapped file, zero copy), a strided view through one buffer
  /// of its size. Returns the bytes written (`t.nbytes()`).
  std::uint64_t write_tensor(const Tensor& t, const ByteSink& sink);
  /// Writes a whole storage's bytes.
  std::uint64_t write_storage(const Storage& storage, const ByteSink& sink);

  std::uint64_t done() const noexcept { return done_; }
  std::uint64_t total() const noexcept { return total_; }

 private:
  // Writes `bytes`, which start at `offset` in `storage` (whose pages are
  // released as they stream when `storage` is given).
  void write_bytes(std::span<const std::byte> bytes, const Storage* storage, std::uint64_t offset,
                   const ByteSink& sink);

  const SaveOptions& options_;
  // The mapped pages written out, dropped a few large ranges at a time
  // (not one madvise per tensor).
  detail::PageReleaser released_;
  std::uint64_t total_ = 0;
  std::uint64_t done_ = 0;
  std::uint64_t reported_ = 0;
};

/// True when the storage's bytes are a read-only view of someone else's
/// memory (in practice, a mapped file): the pages we may ask to drop.
bool is_mapped(const Storage& storage) noexcept;
/// Drops this process's pages of `[offset, offset + n)` of a mapped storage:
/// `Storage::release_pages` (MADV_DONTNEED, the page cache keeps the data)
/// when it is known to be file-backed, else MADV_PAGEOUT, which is safe on
/// any memory (it never loses data) but also evicts the file's page cache.
/// Does nothing for storages that are not mapped.
void release_storage_pages(const Storage& storage, std::uint64_t offset, std::uint64_t n,
                           detail::PageReleaser* batch = nullptr) noexcept;
/// `release_storage_pages` over the bytes `t` can reach; pages of a mapped
/// file go through `batch` when one is given (see `detail::PageReleaser`).
void release_view_pages(const Tensor& t, detail::PageReleaser* batch = nullptr) noexcept;
/// \throws Error(invalid_argument) naming the tensor when its name is not UTF-8.
void check_name(std::string_view name, std::string_view format);

}  // namespace torchport::formats
