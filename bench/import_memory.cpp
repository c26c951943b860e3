// Peak memory of importing a torchvision ResNet checkpoint into the C++
// ResNet, above the process's baseline, as a multiple of the tensor bytes.
//
//   import_memory resnet152.pt [resnet152]
//
// Each way of loading runs in its own child process (fork), so one's peak
// cannot hide another's: the child reads its resident set after building
// the module (the baseline), loads, and reports the peak (VmHWM) above it.
// Burn's first importer peaked at ~5 GB for this 252 MB model (the seed
// thread); the target here is at most 1.1x the tensor bytes.

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <torchport/torchport.hpp>

#include "../examples/resnet/resnet.hpp"

namespace {

// A field of /proc/self/status, in bytes.
std::uint64_t status_bytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stoull(line.substr(std::strlen(field) + 1)) * 1024;
  return 0;
}

// Resets VmHWM to the current resident set (Linux >= 4.0).
void reset_peak() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

struct Result {
  double peak_above_baseline = 0;  // bytes
  double seconds = 0;
  std::uint64_t tensor_bytes = 0;
};

template <class F>
Result in_child(F&& body) {
  int fds[2];
  if (pipe(fds) != 0) std::abort();
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    Result r = body();
    if (write(fds[1], &r, sizeof r) != sizeof r) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  Result r;
  const bool ok = read(fds[0], &r, sizeof r) == sizeof r;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!ok) std::fprintf(stderr, "child failed\n");
  return r;
}

Result typed(const std::string& path, const std::string& arch, torchport::Residence residence) {
  resnet::ResNet net = resnet::ResNet::make(arch);
  reset_peak();
  const std::uint64_t baseline = status_bytes("VmRSS:");
  const auto t0 = std::chrono::steady_clock::now();
  const auto report = torchport::load(net, path, torchport::LoadArgs{}.residence(residence));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {static_cast<double>(status_bytes("VmHWM:")) - static_cast<double>(baseline), s,
          report.bytes};
}

Result catalog(const std::string& path, torchport::Residence residence) {
  reset_peak();
  const std::uint64_t baseline = status_bytes("VmRSS:");
  const auto t0 = std::chrono::steady_clock::now();
  torchport::MaterializeStats st;
  const auto cat = torchport::materialize(torchport::open(path), residence, &st);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {static_cast<double>(status_bytes("VmHWM:")) - static_cast<double>(baseline), s, st.bytes};
}

void row(const char* name, const Result& r) {
  std::printf("%-34s %8.3f s %10.1f MB %8.3fx\n", name, r.seconds, r.peak_above_baseline / 1e6,
              r.peak_above_baseline / static_cast<double>(r.tensor_bytes));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: import_memory resnet152.pt [resnet152]\n");
    return 2;
  }
  const std::string path = argv[1];
  const std::string arch = argc > 2 ? argv[2] : "resnet152";
  std::printf(
      "%s (%s), peak resident memory above the baseline, as a multiple of the tensor bytes\n",
      path.c_str(), arch.c_str());
  std::printf("%-34s %10s %13s %9s\n", "load", "time", "peak", "ratio");
  row("typed load, zero-copy (default)",
      in_child([&] { return typed(path, arch, torchport::Residence::mapped); }));
  row("typed load, owned copies",
      in_child([&] { return typed(path, arch, torchport::Residence::owned); }));
  row("catalogue, owned (torchport load)",
      in_child([&] { return catalog(path, torchport::Residence::owned); }));
  row("catalogue, mapped (load --mmap)",
      in_child([&] { return catalog(path, torchport::Residence::mapped); }));
  return 0;
}
