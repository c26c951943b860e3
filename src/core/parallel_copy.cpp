#include "torchport/detail/parallel_copy.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

namespace torchport::detail {

void split_copy(const Storage& src, std::span<std::byte> dst, std::vector<CopyJob>& jobs) {
  constexpr std::size_t kPiece = std::size_t{16} << 20;
  for (std::size_t at = 0; at < dst.size(); at += kPiece) {
    const std::size_t n = std::min(kPiece, dst.size() - at);
    jobs.push_back({&src, at, dst.subspan(at, n)});
  }
}

void run_copies(const std::vector<CopyJob>& jobs) {
  std::uint64_t total = 0;
  for (const auto& j : jobs) total += j.dst.size();
  // Below ~64 MiB a second thread costs more than it saves.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const unsigned threads = total < (std::uint64_t{64} << 20) ? 1u : std::min<unsigned>(cores, 8);
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::atomic<bool> failed{false};
  auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < jobs.size();) {
      if (failed.load()) return;
      try {
        jobs[i].src->read_into(jobs[i].offset, jobs[i].dst);
      } catch (...) {
        if (!failed.exchange(true)) failure = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace torchport::detail
