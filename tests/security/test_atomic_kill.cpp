// A `torchport convert` killed (SIGKILL) while writing a large output leaves
// no file under the output's name: outputs are written to a temporary file
// beside them (".<name>.tmp-XXXXXX") and renamed when complete. The killed
// run's temporary file may remain; the test checks that it is the only
// thing left, and that an unkilled run leaves no temporary file at all.
// Interrupted (SIGINT, SIGTERM, SIGHUP) at several points of the write, it
// leaves nothing: the old output intact and no temporary; also when the
// signal lands on another thread than the one creating the temporary.

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include <torchport/torchport.hpp>

#include "support/fixtures.hpp"

namespace torchport::test {
namespace {

namespace fs = std::filesystem;

// A safetensors file of one U8 tensor of `bytes` zeros (sparse on disk).
void write_big_safetensors(const fs::path& path, std::uint64_t bytes) {
  const std::string header = R"({"big":{"dtype":"U8","shape":[)" + std::to_string(bytes) +
                             R"(],"data_offsets":[0,)" + std::to_string(bytes) + "]}}";
  std::ofstream out(path, std::ios::binary);
  const std::uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header;
  out.close();
  fs::resize_file(path, 8 + header.size() + bytes);
}

std::vector<fs::path> temporaries(const fs::path& dir, const std::string& target) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().starts_with("." + target + ".tmp-")) out.push_back(e.path());
  return out;
}

pid_t spawn_convert(const fs::path& in, const fs::path& out) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    // --force: the output may exist already (the old output the test
    // expects to survive an interrupted convert).
    ::execl(TORCHPORT_TOOL, TORCHPORT_TOOL, "convert", "--force", in.c_str(), out.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

TEST(AtomicWrite, KilledConvertLeavesNoOutput) {
  const fs::path dir = temp_dir("atomic_kill");
  const fs::path in = dir / "big.safetensors";
  write_big_safetensors(in, 512ull << 20);
  for (const char* target : {"out.safetensors", "out.pt"}) {
    const fs::path out = dir / target;
    const pid_t pid = spawn_convert(in, out);
    ASSERT_GT(pid, 0);
    // Kill it once its temporary file holds some data, but not all.
    bool killed = false;
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120)) {
      const auto tmp = temporaries(dir, target);
      std::error_code ec;
      if (!tmp.empty() && fs::file_size(tmp.front(), ec) > (1u << 20) && !ec) {
        ::kill(pid, SIGKILL);
        killed = true;
        break;
      }
      int status;
      if (::waitpid(pid, &status, WNOHANG) == pid) break;  // finished before we saw it write
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    int status = 0;
    if (killed) ::waitpid(pid, &status, 0);
    ASSERT_TRUE(killed) << target << ": the convert ended before it could be killed mid-write";
    ASSERT_TRUE(WIFSIGNALED(status)) << target;
    EXPECT_FALSE(fs::exists(out)) << target << " exists after a killed convert";
    const auto left = temporaries(dir, target);
    EXPECT_EQ(left.size(), 1u) << target;  // the killed run's temporary, documented
    for (const auto& t : left) fs::remove(t);
  }
  // Unkilled, the output appears whole and no temporary remains.
  const fs::path out = dir / "done.safetensors";
  const pid_t pid = spawn_convert(in, out);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(temporaries(dir, "done.safetensors").empty());
  const TensorCatalog cat = open(out);
  ASSERT_EQ(cat.size(), 1u);
  EXPECT_EQ(cat.tensors().front().tensor.nbytes(), 512ull << 20);
  fs::remove_all(dir);
}

TEST(AtomicWrite, InterruptedConvertLeavesTheOldOutputAndNoTemporary) {
  const fs::path dir = temp_dir("atomic_signal");
  const fs::path in = dir / "big.safetensors";
  write_big_safetensors(in, 512ull << 20);
  const fs::path out = dir / "out.safetensors";
  const std::string old = "the previous output";
  for (const int sig : {SIGINT, SIGTERM, SIGHUP})
    // When the temporary appears, after 1 MiB, after 128 MiB of its 512.
    for (const std::uintmax_t at :
         {std::uintmax_t{0}, std::uintmax_t{1} << 20, std::uintmax_t{128} << 20}) {
      SCOPED_TRACE(std::string(strsignal(sig)) + " at " + std::to_string(at) + " bytes");
      {
        std::ofstream o(out, std::ios::binary | std::ios::trunc);
        o << old;
      }
      const pid_t pid = spawn_convert(in, out);
      ASSERT_GT(pid, 0);
      bool sent = false;
      int status = 0;
      const auto t0 = std::chrono::steady_clock::now();
      while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120)) {
        const auto tmp = temporaries(dir, "out.safetensors");
        std::error_code ec;
        if (!tmp.empty() && fs::file_size(tmp.front(), ec) >= at && !ec) {
          ::kill(pid, sig);
          sent = true;
          break;
        }
        if (::waitpid(pid, &status, WNOHANG) == pid) break;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      ASSERT_TRUE(sent) << "the convert ended before the signal";
      ::waitpid(pid, &status, 0);
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << status;
      EXPECT_TRUE(temporaries(dir, "out.safetensors").empty());
      std::ifstream back(out, std::ios::binary);
      const std::string now((std::istreambuf_iterator<char>(back)),
                            std::istreambuf_iterator<char>());
      EXPECT_EQ(now, old);
      for (const auto& t : temporaries(dir, "out.safetensors")) fs::remove(t);
    }
  fs::remove_all(dir);
}

// A signal is delivered to any thread that does not block it. Here the
// main thread waits in pause() while two threads create and drop temporary
// files as fast as they can, so the signal usually lands on the idle thread
// while another is between mkstemp and the table the handler reads. Each
// round kills the process with SIGTERM once it has made a few files; none
// may be left behind.
TEST(AtomicWrite, SignalOnAnotherThreadLeavesNoTemporary) {
  const fs::path dir = temp_dir("atomic_threads");
  constexpr int kRounds = 60;
  int left_behind = 0;
  for (int round = 0; round < kRounds; ++round) {
    const fs::path counter = dir / "made";
    fs::remove(counter);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      AtomicFile::remove_temporaries_on_signals();
      auto churn = [&](int id) {
        const fs::path target = dir / ("t" + std::to_string(id));
        for (std::uint64_t made = 0;; ++made) {
          AtomicFile f(target);
          f.write(std::as_bytes(std::span<const char>("x", 1)));
          if (id == 0 && made == 64) std::ofstream(counter) << "64";  // under way
        }
      };
      std::thread a(churn, 0), b(churn, 1);
      for (;;) ::pause();
    }
    for (int polls = 0; polls < 200000 && !fs::exists(counter); ++polls)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    ::kill(pid, SIGTERM);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "round " << round;
    for (const char* t : {"t0", "t1"}) {
      const auto left = temporaries(dir, t);
      left_behind += static_cast<int>(left.size());
      for (const auto& p : left) fs::remove(p);
    }
  }
  EXPECT_EQ(left_behind, 0) << "temporary files left by " << kRounds << " interrupted processes";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace torchport::test
