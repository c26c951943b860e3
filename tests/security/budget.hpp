#pragma once
// Runs a piece of work in a forked child and measures it: CPU time (user +
// system, so a loaded machine cannot fail a correct program), and
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
  double seconds = 0;     ///< CPU time of the work, user + system
  double peak_mb = 0;     ///< VmHWM minus the RSS before the work
};

/// Runs `work` in a child process; its return value becomes `outcome`. A
/// child still running `deadline_seconds` of wall time after it started is
/// killed (a hang: sleeping or blocked, it may spend no CPU time at all).
Measured run_measured(const std::function<std::string()>& work, double deadline_seconds);

/// The budgets of the hardening tests: 3 s of CPU time and 256 MB, scaled by 4 and 3
/// when built with sanitizers (ASan's quarantine and shadow memory count
/// as resident; its checks slow everything down).
double time_budget();
double memory_budget_mb();
/// The process's CPU time so far (user + system), in seconds.
double process_cpu_seconds();

}  // namespace torchport::test
