#pragma once
/// \file
/// Pages of mapped files dropped in batches (internal).

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "torchport/core/storage.hpp"

namespace torchport::detail {

/// Drops the pages a job has read from mapped files, a few large ranges at
/// a time rather than one system call per tensor: the 2 MiB blocks that the
/// noted ranges touch are collected, and released together (one madvise per
/// run of neighbouring blocks, `FileBacking::release`) once they cover
/// 16 MiB, when a range of another file comes, or at `flush()` (also run by
/// the destructor). Until then those pages stay resident: at most 16 MiB of
/// them, plus the range just noted. Thread-safe.
class PageReleaser {
 public:
  PageReleaser() = default;
  PageReleaser(const PageReleaser&) = delete;
  PageReleaser& operator=(const PageReleaser&) = delete;
  ~PageReleaser() { flush(); }

  /// Notes that `[offset, offset + n)` of `storage` is no longer needed.
  /// Storages that do not lie in a mapped file (`Storage::file()`) are ignored.
  void add(const Storage& storage, std::uint64_t offset, std::uint64_t n) noexcept;
  /// Releases what was noted.
  void flush() noexcept;

 private:
  void flush_locked() noexcept;

  std::mutex mutex_;
  std::shared_ptr<const FileBacking> file_;  // kept alive until its pages are released
  // Address ranges [begin, end) noted, each a run of neighbouring 2 MiB
  // blocks (of the address space; the mapping rounds to its own blocks).
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> runs_;
  std::uintptr_t blocks_ = 0;  // 2 MiB blocks the runs touch
};

}  // namespace torchport::detail
