#include "security/budget.hpp"

#include <cstdlib>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

namespace torchport::test {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

double status_kb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stod(line.substr(std::strlen(field)));
  return 0;
}

void write_all(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// The process's CPU time so far, user and system: what the work costs,
// whatever else the machine runs.
double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  const auto secs = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

}  // namespace

// 3 s of CPU time (12 s sanitized): every case takes well under 0.3 s.
// CPU time, not wall time: a 2-core machine shared with parallel builds
// stretched wall times tenfold (two cases of 3.09 s and 3.90 s failed on a
// fresh machine's first run), which says nothing about the program.
// TORCHPORT_BUDGET_SCALE multiplies it further.
double time_budget() {
  double scale = 1;
  if (const char* s = std::getenv("TORCHPORT_BUDGET_SCALE"); s && std::atof(s) > 0)
    scale = std::atof(s);
  return (kSanitized ? 12.0 : 3.0) * scale;
}
double process_cpu_seconds() {
  return cpu_seconds();
}

double memory_budget_mb() {
  return kSanitized ? 768.0 : 256.0;
}

Measured run_measured(const std::function<std::string()>& work, double deadline_seconds) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    { std::ofstream("/proc/self/clear_refs") << "5"; }  // reset VmHWM to the current RSS
    const double base = status_kb("VmRSS:");
    const double t0 = cpu_seconds();
    std::string outcome;
    try {
      outcome = work();
    } catch (const std::exception& e) {
      outcome = std::string("exception: ") + e.what();
    }
    const double secs = cpu_seconds() - t0;
    const double peak = status_kb("VmHWM:") - base;
    write_all(fds[1], std::to_string(secs) + "\n" + std::to_string(peak / 1024.0) + "\n" + outcome);
    ::close(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  Measured m;
  std::string out;
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >
        deadline_seconds) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ::close(fds[0]);
      m.outcome = "killed after " + std::to_string(deadline_seconds) + " s (hang)";
      return m;
    }
    // Drain the pipe so a long outcome cannot block the child.
    char buf[4096];
    ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
      out.append(buf, static_cast<std::size_t>(n));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  if (WIFSIGNALED(status)) {
    m.signal = WTERMSIG(status);
    m.outcome = std::string("crashed: ") + ::strsignal(m.signal);
    return m;
  }
  const auto nl1 = out.find('\n');
  const auto nl2 = nl1 == std::string::npos ? std::string::npos : out.find('\n', nl1 + 1);
  if (nl2 == std::string::npos) {
    m.outcome = "the child exited without a report";
    return m;
  }
  m.finished = true;
  m.seconds = std::stod(out.substr(0, nl1));
  m.peak_mb = std::stod(out.substr(nl1 + 1, nl2 - nl1 - 1));
  m.outcome = out.substr(nl2 + 1);
  return m;
}

}  // namespace torchport::test
