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

/// Appends the pieces that copy all of `src` into `dst` (pieces of at most
/// 16 MiB, so threads share large storages too).
void split_copy(const Storage& src, std::span<std::byte> dst, std::vector<CopyJob>& jobs);

/// Runs the copies (`Storage::read_into`: pread for mapped files), on up to
/// as many threads as there are cores when there is enough work to share.
void run_copies(const std::vector<CopyJob>& jobs);

}  // namespace torchport::detail
