#include "torchport/detail/parallel_copy.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <thread>

namespace torchport::detail {

namespace {

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels refuse it (EINVAL), harmlessly
#endif

// Pieces end at 2 MiB boundaries of the destination, the span one page
// table page maps; a thread takes 16 MiB of destination at a time (aligned:
// two threads never fault pages under the same page-table lock) and faults
// it in 2 MiB at a time. Cold, 16 MiB of file in order per thread keeps the
// kernel's readahead going: with 2 MiB units the two threads' interleaved
// reads defeated it (15.6 s against 3.4 s for 6.1 GB, docs/loading.md).
constexpr std::uintptr_t kPage = std::uintptr_t{2} << 20;
constexpr std::uintptr_t kWindow = std::uintptr_t{16} << 20;

std::uintptr_t window_of(const std::byte* p, std::uintptr_t size) {
  return reinterpret_cast<std::uintptr_t>(p) / size;
}

// Faults in the pages under [first, last) for writing, in one call. Whole
// pages around it: a neighbour's bytes in the same page are ours too (one
// arena, or a heap page they already share). Failure is harmless (kernels
// before 5.14 refuse the advice): the copy then faults the pages itself.
void populate(const std::byte* first, const std::byte* last) noexcept {
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(first) & ~(page - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(last) + page - 1) & ~(page - 1);
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

}  // namespace

void split_copy(const Storage& src, std::span<std::byte> dst, std::vector<CopyJob>& jobs) {
  std::size_t at = 0;
  while (at < dst.size()) {
    const auto addr = reinterpret_cast<std::uintptr_t>(dst.data() + at);
    const std::size_t n = std::min<std::size_t>(kPage - addr % kPage, dst.size() - at);
    jobs.push_back({&src, at, dst.subspan(at, n)});
    at += n;
  }
}

void run_copies(const std::vector<CopyJob>& jobs, const CopyProgress& progress) {
  // Small windows are faulted by the copy itself: a system call costs more.
  constexpr std::size_t kPopulateFrom = std::size_t{64} << 10;
  std::uint64_t total = 0;
  for (const auto& j : jobs) total += j.dst.size();
  // Below ~64 MiB a second thread costs more than it saves.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const unsigned threads = total < (std::uint64_t{64} << 20) ? 1u : std::min<unsigned>(cores, 8);
  // Consecutive jobs in one window go to one thread together. The last
  // `threads` windows' worth of destination goes in 2 MiB shares, so that
  // no thread is left alone with a whole 16 MiB at the end.
  const std::byte* last_end =
      jobs.empty() ? nullptr : jobs.back().dst.data() + jobs.back().dst.size();
  const auto tail =
      reinterpret_cast<std::uintptr_t>(last_end) -
      std::min<std::uintptr_t>(reinterpret_cast<std::uintptr_t>(last_end), threads * kWindow);
  auto key = [&](const std::byte* p) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    return a < tail ? a / kWindow * 2 : a / kPage * 2 + 1;
  };
  std::vector<std::size_t> groups;  // first job of each group, then jobs.size()
  for (std::size_t i = 0; i < jobs.size(); ++i)
    if (i == 0 || key(jobs[i].dst.data()) != key(jobs[i - 1].dst.data())) groups.push_back(i);
  groups.push_back(jobs.size());
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> done{0};
  std::exception_ptr failure;
  std::atomic<bool> failed{false};
  // `report`: the calling thread's loop, the one that calls `progress`.
  auto work = [&](bool report) {
    for (std::size_t g; (g = next.fetch_add(1)) + 1 < groups.size();) {
      if (failed.load()) return;
      if (report && progress) progress(done.load(), total);
      try {
        for (std::size_t i = groups[g]; i < groups[g + 1]; ++i) {
          // Entering a 2 MiB span: fault in what this window's jobs write of it.
          const std::byte* at = jobs[i].dst.data();
          if (i == groups[g] || window_of(at, kPage) != window_of(jobs[i - 1].dst.data(), kPage)) {
            std::size_t k = i;
            while (k + 1 < groups[g + 1] &&
                   window_of(jobs[k + 1].dst.data(), kPage) == window_of(at, kPage))
              ++k;
            const std::byte* end = jobs[k].dst.data() + jobs[k].dst.size();
            if (static_cast<std::size_t>(end - at) >= kPopulateFrom) populate(at, end);
          }
          jobs[i].src->read_into(jobs[i].offset, jobs[i].dst);
          done += jobs[i].dst.size();
        }
      } catch (...) {
        if (!failed.exchange(true)) failure = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work, false);
  work(true);
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  if (progress) progress(total, total);
}

}  // namespace torchport::detail
