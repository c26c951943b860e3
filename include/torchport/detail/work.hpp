#pragma once
/// \file
/// Process-wide work counters (internal): what the cost tests count instead
/// of seconds. Each is a relaxed atomic, bumped where the work is done.

#include <atomic>
#include <cstdint>

namespace torchport::detail {

/// Counters of work done since the process started (or the last `reset`).
struct WorkCounters {
  std::atomic<std::uint64_t> values_printed{
      0};                                       ///< nodes visited by repr / to_json / prune_tensors
  std::atomic<std::uint64_t> chars_printed{0};  ///< characters repr / to_json produced
  std::atomic<std::uint64_t> items_inserted{0};  ///< items and pairs put into containers
  std::atomic<std::uint64_t> items_moved{0};     ///< items copied or moved when a container grew
  std::atomic<std::uint64_t> bytes_inflated{
      0};  ///< bytes zlib produced (zip entries, gzip streams)
  std::atomic<std::uint64_t> bytes_materialized{
      0};  ///< bytes owned loads and conversions allocated for tensors
  std::atomic<std::uint64_t> bytes_zero_filled{
      0};  ///< output room made ready for a decoder (gzip, bz2, xz streams)
  /// Steps of `scan`: opcodes walked or run, pickles listed or folded,
  /// globals judged or merged, findings, and the bytes of the names its
  /// folder walk hands the OS.
  std::atomic<std::uint64_t> scan_steps{0};
  /// System calls the library makes on files and memory it reads: reads of
  /// a mapped file (pread, preadv) and advice on pages (madvise).
  std::atomic<std::uint64_t> file_reads{0};   ///< pread / preadv calls
  std::atomic<std::uint64_t> page_advice{0};  ///< madvise calls

  /// Sets every counter to 0.
  void reset() noexcept {
    for (auto* c :
         {&values_printed, &chars_printed, &items_inserted, &items_moved, &bytes_inflated,
          &bytes_materialized, &bytes_zero_filled, &scan_steps, &file_reads, &page_advice})
      c->store(0, std::memory_order_relaxed);
  }
};

/// The process's counters.
inline WorkCounters& work() noexcept {
  static WorkCounters w;
  return w;
}

/// Adds `n` to counter `c` (relaxed).
inline void count(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) noexcept {
  c.fetch_add(n, std::memory_order_relaxed);
}

}  // namespace torchport::detail
