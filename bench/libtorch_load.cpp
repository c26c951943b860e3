// libtorch's own loader, for the side-by-side comparison: reads a file that
// torch.save wrote and unpickles it with torch::pickle_load, in fresh
// processes, measuring time and peak resident memory above the baseline.
//
//   libtorch_load FILE [RUNS]
//
// torch::pickle_load cannot read an ordinary state_dict() file: it knows no
// collections.OrderedDict. compare.py gives it a copy saved as a plain dict.

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <torch/serialize.h>

namespace {

std::uint64_t status_bytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stoull(line.substr(std::strlen(field) + 1)) * 1024;
  return 0;
}

struct Sample {
  double seconds = 0;
  double peak = 0;
};

Sample measure(const std::string& file) {
  std::ofstream("/proc/self/clear_refs") << "5";
  const std::uint64_t baseline = status_bytes("VmRSS:");
  const auto t0 = std::chrono::steady_clock::now();
  std::ifstream in(file, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const c10::IValue v = torch::pickle_load(bytes);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!v.isGenericDict()) std::fprintf(stderr, "libtorch_load: not a dict\n");
  return {s, static_cast<double>(status_bytes("VmHWM:")) - static_cast<double>(baseline)};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: libtorch_load FILE [RUNS]\n");
    return 2;
  }
  const std::string file = argv[1];
  const int runs = argc > 2 ? std::atoi(argv[2]) : 5;
  std::vector<double> seconds;
  double peak = 0;
  for (int i = 0; i < runs; ++i) {
    int fds[2];
    if (pipe(fds) != 0) return 1;
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      Sample s{};
      try {
        s = measure(file);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "libtorch_load: %s\n", e.what());
        _exit(1);
      }
      if (write(fds[1], &s, sizeof s) != sizeof s) _exit(1);
      _exit(0);
    }
    close(fds[1]);
    Sample s{};
    const bool ok = read(fds[0], &s, sizeof s) == sizeof s;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!ok) return 1;
    seconds.push_back(s.seconds);
    peak = std::max(peak, s.peak);
  }
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  std::printf("{\"method\": \"libtorch\", \"file\": \"%s\", \"seconds\": [", file.c_str());
  for (std::size_t i = 0; i < seconds.size(); ++i) std::printf("%s%.6f", i ? ", " : "", seconds[i]);
  std::printf("], \"median\": %.6f, \"peak_above_baseline\": %.0f}\n", sorted[sorted.size() / 2],
              peak);
  return 0;
}
