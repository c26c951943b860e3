#pragma once
// A one-line progress bar on stderr, shown only when stderr is a terminal
// and the work has already taken more than a second.

#include <chrono>
#include <cstdint>
#include <string>

namespace torchport::cli {

class ProgressBar {
 public:
  /// `label` prefixes the line ("writing").
  explicit ProgressBar(std::string label);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  /// Redraws (at most ten times a second) once a second has passed.
  void update(std::uint64_t done, std::uint64_t total);
  /// Erases the line if one was drawn.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  std::string label_;
  bool tty_ = false;
  bool shown_ = false;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_{};
};

}  // namespace torchport::cli
