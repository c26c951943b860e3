#pragma once
// Runs a piece of work in a forked child and measures it: wall time, and
// peak resident memory above the child's baseline (VmHWM, reset through
// /proc/self/clear_refs before the work starts). A child that outlives its
// deadline is killed and reported as a hang.

#include <functional>
#include <string>

namespace torchport::test {

/// What happened in the child.
struct Measured {
  bool finished = false;  ///< false: killed at the deadline, or crashed
  int signal = 0;         ///< the signal that ended the child, if any
  std::string outcome;    ///< what the work returned ("ok", "corrupt: message", ...)
  double seconds = 0;
  double peak_mb = 0;  ///< VmHWM minus the RSS before the work
};

/// Runs `work` in a child process; its return value becomes `outcome`.
Measured run_measured(const std::function<std::string()>& work, double deadline_seconds);

/// The budgets of the hardening tests: 3 s and 256 MB, scaled by 4 and 3
/// when built with sanitizers (ASan's quarantine and shadow memory count
/// as resident; its checks slow everything down).
double time_budget();
double memory_budget_mb();

}  // namespace torchport::test
