#pragma once
/// \file
/// Copies of storages into memory, spread over threads (internal).

#include <cstdint>
#include <span>
#include <vector>

#include "torchport/core/storage.hpp"

namespace torchport::detail {

/// One piece of a copy: `dst.size()` bytes of `src` from `offset`.
struct CopyJob {
  const Storage* src;
  std::uint64_t offset;
  std::span<std::byte> dst;
};

/// Appends the pieces that copy all of `src` into `dst`, cut at the 2 MiB
/// boundaries of the destination's addresses (so threads share large
/// storages too, and never fault pages of the same page table).
void split_copy(const Storage& src, std::span<std::byte> dst, std::vector<CopyJob>& jobs);

/// Runs the copies (`Storage::read_into`: pread for mapped files), on up to
/// as many threads as there are cores when there is enough work to share.
/// Jobs are handed out by 2 MiB window of destination (consecutive jobs in
/// one window go together); each thread first faults in the pages of its
/// window in one call (MADV_POPULATE_WRITE), so fresh memory is faulted by
/// every core at once and without a trap per page.
void run_copies(const std::vector<CopyJob>& jobs);

}  // namespace torchport::detail
