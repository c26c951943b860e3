#pragma once
/// \file
/// Copies of storages into memory, spread over threads (internal).

#include <cstdint>
#include <functional>
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
/// A thread takes 16 MiB of destination at a time (the consecutive jobs in
/// one aligned 16 MiB window; 2 MiB near the end, so the threads finish
/// together). Before copying into each 2 MiB of it, the thread faults
/// those pages in with one call (MADV_POPULATE_WRITE): fresh memory is
/// faulted by every core at once, without a trap per page, and each thread
/// reads 16 MiB of file in order (docs/loading.md).
/// Bytes copied so far and in all, reported by the calling thread now and
/// then, and once at the end.
using CopyProgress = std::function<void(std::uint64_t done, std::uint64_t total)>;
void run_copies(const std::vector<CopyJob>& jobs, const CopyProgress& progress = {});

}  // namespace torchport::detail
