// One way of loading a checkpoint, timed and measured in fresh processes.
//
//   load_bench METHOD FILE [RUNS] [ARCH]
//
// METHOD: open (directory and pickle only), owned (every tensor copied into
// memory: `torchport load`), mapped (tensors left in the mapped file:
// `torchport load --mmap`), typed (into the C++ ResNet, zero-copy where
// dtype and layout match), typed-owned (the same, copying), pread (the
// floor: the file's bytes, or every file's in a directory, read by one
// thread into fresh 4 KiB pages), fresh (what fresh memory costs: a
// buffer of the tensor bytes allocated as an owned load allocates its
// arena, first written once a page by two threads taking 2 MiB at a time;
// nothing is read. The owned load faults each 2 MiB in with one
// MADV_POPULATE_WRITE, which after idle can cost less than these faults).
// Each run forks a child that measures its resident set before loading
// (baseline) and its peak after (VmHWM). The page cache is left as the
// caller set it (bench/regimes.py: warm, or dropped for a cold run).
// Prints one JSON object: {"method", "file", "seconds": [..], "median",
// "bytes", "peak_above_baseline"}.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <torchport/torchport.hpp>

#include "../examples/resnet/resnet.hpp"

namespace {

std::uint64_t status_bytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stoull(line.substr(std::strlen(field) + 1)) * 1024;
  return 0;
}

// The floor: one thread reads the file into fresh 4 KiB pages (the memory
// stays mapped until the process exits, as a load's would).
std::uint64_t pread_fresh(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY);
  if (fd < 0) return 0;
  struct stat st {};
  ::fstat(fd, &st);
  const auto n = static_cast<std::size_t>(st.st_size);
  if (n == 0) {
    ::close(fd);
    return 0;
  }
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ::madvise(p, n, MADV_NOHUGEPAGE);
  std::size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, static_cast<char*>(p) + done, n - done, static_cast<off_t>(done));
    if (r <= 0) break;
    done += static_cast<std::size_t>(r);
  }
  ::close(fd);
  return done;
}

struct Sample {
  double seconds = 0;
  double peak = 0;  // bytes above the baseline
  std::uint64_t bytes = 0;
};

Sample measure(const std::string& method, const std::string& file, const std::string& arch) {
  // Build what is not part of the load before the baseline (a typed load's
  // module exists before it is loaded).
  std::optional<resnet::ResNet> net;
  if (method.starts_with("typed")) net = resnet::ResNet::make(arch);
  std::ofstream("/proc/self/clear_refs") << "5";  // reset VmHWM
  const std::uint64_t baseline = status_bytes("VmRSS:");
  Sample s;
  // What was loaded outlives the timing, as a user's model does (and as
  // torch.load's result does in compare.py): freeing it is not the load.
  torchport::TensorCatalog cat;
  const auto t0 = std::chrono::steady_clock::now();
  if (method == "open") {
    cat = torchport::open(file);
    s.bytes = cat.total_bytes();
  } else if (method == "owned" || method == "mapped") {
    torchport::MaterializeStats st;
    cat = torchport::materialize(
        torchport::open(file),
        method == "owned" ? torchport::Residence::owned : torchport::Residence::mapped, &st);
    s.bytes = st.bytes;
  } else if (method == "typed" || method == "typed-owned") {
    const auto r = torchport::load(
        *net, file,
        torchport::LoadArgs{}.residence(method == "typed" ? torchport::Residence::mapped
                                                          : torchport::Residence::owned));
    s.bytes = r.bytes;
  } else if (method == "fresh") {
    s.bytes = torchport::open(file).total_bytes();
    std::ofstream("/proc/self/clear_refs") << "5";
    const std::uint64_t opened = status_bytes("VmRSS:");
    const auto t1 = std::chrono::steady_clock::now();
    const auto buffer = torchport::Storage::allocate(s.bytes);
    std::byte* data = buffer->mutable_bytes().data();
    std::atomic<std::uint64_t> next{0};
    auto work = [&] {
      constexpr std::uint64_t kSpan = std::uint64_t{2} << 20;
      for (std::uint64_t at; (at = next.fetch_add(kSpan)) < s.bytes;)
        for (std::uint64_t b = at; b < std::min(s.bytes, at + kSpan); b += 4096)
          data[b] = std::byte{1};
    };
    std::thread other(work);
    work();
    other.join();
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    s.peak = static_cast<double>(status_bytes("VmHWM:")) - static_cast<double>(opened);
    return s;
  } else if (method == "pread") {
    // A directory (sharded checkpoint): every file in it, in name order.
    std::vector<std::string> files;
    if (std::filesystem::is_directory(file)) {
      for (const auto& e : std::filesystem::directory_iterator(file))
        if (e.is_regular_file()) files.push_back(e.path().string());
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(file);
    }
    for (const auto& f : files) s.bytes += pread_fresh(f);
  } else {
    std::fprintf(stderr, "unknown method %s\n", method.c_str());
    std::exit(2);
  }
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.peak = static_cast<double>(status_bytes("VmHWM:")) - static_cast<double>(baseline);
  return s;
}

Sample in_child(const std::string& method, const std::string& file, const std::string& arch) {
  int fds[2];
  if (pipe(fds) != 0) std::abort();
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const Sample s = measure(method, file, arch);
    if (write(fds[1], &s, sizeof s) != sizeof s) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  Sample s;
  if (read(fds[0], &s, sizeof s) != sizeof s) {
    std::fprintf(stderr, "load_bench: the %s run failed\n", method.c_str());
    std::exit(1);
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(
        stderr,
        "usage: load_bench open|owned|mapped|typed|typed-owned|pread|fresh FILE [RUNS] [ARCH]\n");
    return 2;
  }
  const std::string method = argv[1], file = argv[2];
  const int runs = argc > 3 ? std::atoi(argv[3]) : 1;
  const std::string arch = argc > 4 ? argv[4] : "resnet152";
  std::vector<double> seconds;
  double peak = 0;
  std::uint64_t bytes = 0;
  for (int i = 0; i < runs; ++i) {
    const Sample s = in_child(method, file, arch);
    seconds.push_back(s.seconds);
    peak = std::max(peak, s.peak);
    bytes = s.bytes;
  }
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  std::printf("{\"method\": \"%s\", \"file\": \"%s\", \"seconds\": [", method.c_str(),
              file.c_str());
  for (std::size_t i = 0; i < seconds.size(); ++i) std::printf("%s%.6f", i ? ", " : "", seconds[i]);
  std::printf("], \"median\": %.6f, \"bytes\": %llu, \"peak_above_baseline\": %.0f}\n", median,
              static_cast<unsigned long long>(bytes), peak);
  return 0;
}
