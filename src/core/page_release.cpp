#include "torchport/detail/page_release.hpp"

#include <algorithm>

namespace torchport::detail {

namespace {

constexpr std::uintptr_t kBlock = std::uintptr_t{2} << 20;
constexpr std::uintptr_t kBatchBlocks = 2;  // 4 MiB

std::uintptr_t blocks_of(std::uintptr_t begin, std::uintptr_t end) noexcept {
  return (end - 1) / kBlock - begin / kBlock + 1;
}

}  // namespace

void PageReleaser::add(const Storage& storage, std::uint64_t offset, std::uint64_t n) noexcept {
  const std::byte* data = storage.file_data();
  if (data == nullptr || n == 0 || offset >= storage.nbytes()) return;
  n = std::min(n, storage.nbytes() - offset);
  const auto begin = reinterpret_cast<std::uintptr_t>(data + offset);
  const std::uintptr_t end = begin + n;
  const std::lock_guard<std::mutex> lock(mutex_);
  if (file_ != storage.file()) {
    flush_locked();
    file_ = storage.file();
  }
  // Join a run whose blocks it shares or adjoins (runs stay few: they are
  // released once they cover 16 MiB).
  bool merged = false;
  for (auto& r : runs_) {
    if (begin / kBlock > (r.second - 1) / kBlock + 1 || (end - 1) / kBlock + 1 < r.first / kBlock)
      continue;
    blocks_ -= blocks_of(r.first, r.second);
    r = {std::min(r.first, begin), std::max(r.second, end)};
    blocks_ += blocks_of(r.first, r.second);
    merged = true;
    break;
  }
  if (!merged) {
    runs_.emplace_back(begin, end);
    blocks_ += blocks_of(begin, end);
  }
  if (blocks_ >= kBatchBlocks) flush_locked();
}

void PageReleaser::flush() noexcept {
  const std::lock_guard<std::mutex> lock(mutex_);
  flush_locked();
}

void PageReleaser::flush_locked() noexcept {
  if (file_ && !runs_.empty()) {
    // Runs that came to share blocks after they were made are joined here.
    std::sort(runs_.begin(), runs_.end());
    std::size_t w = 0;
    for (std::size_t i = 1; i < runs_.size(); ++i) {
      if (runs_[i].first / kBlock <= (runs_[w].second - 1) / kBlock + 1)
        runs_[w].second = std::max(runs_[w].second, runs_[i].second);
      else
        runs_[++w] = runs_[i];
    }
    runs_.resize(w + 1);
    // The mapping drops every 2 MiB block of the file each run touches.
    for (const auto& [begin, end] : runs_)
      file_->release(reinterpret_cast<const std::byte*>(begin),
                     reinterpret_cast<const std::byte*>(end));
  }
  runs_.clear();
  blocks_ = 0;
  file_.reset();
}

}  // namespace torchport::detail
