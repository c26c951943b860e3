#include "progress.hpp"

#include <unistd.h>
#include <cstdio>

#include <fmt/format.h>

#include "format.hpp"

namespace torchport::cli {

ProgressBar::ProgressBar(std::string label) : label_(std::move(label)), tty_(::isatty(2) == 1) {}

ProgressBar::~ProgressBar() {
  finish();
}

void ProgressBar::update(std::uint64_t done, std::uint64_t total) {
  if (!tty_ || total == 0) return;
  const auto now = Clock::now();
  if (now - start_ < std::chrono::seconds(1)) return;
  if (shown_ && now - last_ < std::chrono::milliseconds(100) && done < total) return;
  last_ = now;
  shown_ = true;
  const double f = static_cast<double>(done) / static_cast<double>(total);
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(f * kWidth);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, ' ');
  std::string eta =
      rate > 0 ? fmt::format("{:.0f} s left", static_cast<double>(total - done) / rate) : "";
  std::fprintf(stderr, "\r\033[K%s [%s] %3.0f%%  %s / %s  %s/s  %s", label_.c_str(), bar.c_str(),
               f * 100, human_bytes(done).c_str(), human_bytes(total).c_str(),
               human_bytes(static_cast<std::uint64_t>(rate)).c_str(), eta.c_str());
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (!shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

}  // namespace torchport::cli
