#include "torchport/io/atomic_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "torchport/core/error.hpp"

namespace torchport {
namespace {

constexpr std::size_t kBufferBytes = std::size_t{1} << 20;

// The process umask without changing it (umask(2) can only be read by
// setting it, which races with other threads creating files).
mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Umask:", 0) == 0)
      return static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8));
  return 022;
}

// The permissions the new file should have: those of the file it replaces,
// else what open(..., 0666) would give a new file.
mode_t target_mode(const std::filesystem::path& target) {
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return st.st_mode & 07777;
  return 0666 & ~current_umask();
}

// The temporaries a signal handler removes: a fixed table of path pointers
// (a handler may neither lock nor allocate). A path is published after it
// is complete and withdrawn before it is freed; once a handler has started
// (g_exiting), withdrawn paths are never freed, so the handler cannot read
// freed memory.
//
// The signal may be delivered to any thread, not only to the one creating a
// temporary (a program has threads of its own; so do sanitizer runtimes). A
// thread creating one blocks the signals for itself and counts itself in
// g_creating from before mkstemp until the path is published; a sweep
// waits for that count to reach zero, and a creation waits while a sweep is
// under way (g_sweeping), so a file is either in the table when a sweep
// reads it or created after the sweep (and its process) ended. On the
// handler's way to dying, g_sweeping stays raised: no thread starts a file
// the dying process would leave behind. The two counters are sequentially
// consistent: of "count myself, then look at the other", at least one side
// sees the other.
constexpr std::size_t kSlots = 4096;
std::atomic<char*> g_temporaries[kSlots];
std::atomic<bool> g_exiting{false};
std::atomic<int> g_creating{0};
std::atomic<int> g_sweeping{0};

void pause_briefly() noexcept {
  struct timespec ts {
    0, 1000000
  };  // 1 ms; nanosleep is async-signal-safe
  ::nanosleep(&ts, nullptr);
}

// Puts `copy` (the complete path, allocated by the caller: the creating
// thread must not allocate while a handler on another thread may hold the
// allocator's lock and wait for it) in a free slot. Returns the slot, or
// kSlots when the table is full (the file is then untracked).
std::size_t publish(char* copy) noexcept {
  for (std::size_t i = 0; i < kSlots; ++i) {
    char* none = nullptr;
    if (g_temporaries[i].compare_exchange_strong(none, copy)) return i;
  }
  return kSlots;
}

void withdraw(std::size_t slot) noexcept {
  if (slot >= kSlots) return;
  char* p = g_temporaries[slot].exchange(nullptr);
  if (!g_exiting.load()) std::free(p);
}

struct sigaction g_previous[3];
constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};

void on_signal(int sig) {
  const int saved_errno = errno;
  g_sweeping.fetch_add(1);  // held while dying: no new temporary after the sweep
  AtomicFile::remove_temporaries();
  for (int i = 0; i < 3; ++i) {
    if (kSignals[i] != sig) continue;
    const struct sigaction& prev = g_previous[i];
    if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
      prev.sa_handler(sig);
      g_sweeping.fetch_sub(1);  // the program goes on
      errno = saved_errno;
      return;
    }
  }
  // Die of the signal, as without this handler.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

}  // namespace

void AtomicFile::remove_temporaries() noexcept {
  g_exiting.store(true);
  g_sweeping.fetch_add(1);
  // Wait for the files being created on other threads to be published
  // (bounded: two seconds, should a creating thread never be scheduled).
  for (int i = 0; i < 2000 && g_creating.load() != 0; ++i) pause_briefly();
  for (auto& slot : g_temporaries)
    if (const char* p = slot.load()) ::unlink(p);
  g_sweeping.fetch_sub(1);
}

void AtomicFile::remove_temporaries_on_signals() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;  // once: a second call would chain to itself
  for (int i = 0; i < 3; ++i) {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(kSignals[i], &sa, &g_previous[i]);
    if (g_previous[i].sa_handler == SIG_IGN && !(g_previous[i].sa_flags & SA_SIGINFO))
      ::sigaction(kSignals[i], &g_previous[i], nullptr);  // ignored (nohup): stays ignored
  }
}

void check_output_path(const std::filesystem::path& target) {
  struct stat st {};
  if (::lstat(target.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
  const char* what = S_ISLNK(st.st_mode)                          ? "a symbolic link"
                     : S_ISFIFO(st.st_mode)                       ? "a FIFO"
                     : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                     : S_ISSOCK(st.st_mode)                       ? "a socket"
                     : S_ISDIR(st.st_mode)                        ? "a directory"
                                                                  : "not a regular file";
  throw Error(ErrorCode::invalid_argument,
              std::string("the output is ") + what +
                  "; torchport writes regular files only (it would replace it, not write into "
                  "it): remove it or name another file",
              {}, std::nullopt, target.string());
}

AtomicFile::AtomicFile(std::filesystem::path target) : target_(std::move(target)) {
  check_output_path(target_);
  std::filesystem::path dir = target_.parent_path();
  if (dir.empty()) dir = ".";
  if (target_.filename().empty())
    throw Error(ErrorCode::invalid_argument, "output path names a directory, not a file", {},
                std::nullopt, target_.string());
  std::string tmpl = (dir / ("." + target_.filename().string() + ".tmp-XXXXXX")).string();
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  char* published = static_cast<char*>(std::malloc(name.size()));  // freed by withdraw()
  // The handled signals wait on this thread while the file exists but is
  // not yet in the table (a handler here would miss it), then arrive and
  // remove it; a handler on another thread waits for g_creating to drop.
  sigset_t handled, before;
  sigemptyset(&handled);
  for (const int sig : kSignals) sigaddset(&handled, sig);
  ::pthread_sigmask(SIG_BLOCK, &handled, &before);
  for (;;) {
    g_creating.fetch_add(1);
    if (g_sweeping.load() == 0) break;
    g_creating.fetch_sub(1);  // a sweep is under way: let it finish (or the process end)
    pause_briefly();
  }
  fd_ = ::mkstemp(name.data());
  const int mkstemp_errno = errno;
  if (fd_ >= 0 && published != nullptr) {
    std::memcpy(published, name.data(), name.size());
    slot_ = publish(published);
  }
  g_creating.fetch_sub(1);
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  // Not in the table (no file, no memory for its entry, or the table full):
  // freed here, outside the window, where allocating is allowed again.
  if (slot_ >= kSlots) std::free(published);
  if (fd_ < 0) {
    throw Error(
        ErrorCode::io,
        "cannot create a temporary file in '" + dir.string() + "': " + std::strerror(mkstemp_errno),
        {}, std::nullopt, target_.string());
  }
  ::fcntl(fd_, F_SETFD, FD_CLOEXEC);
  temp_ = name.data();
  buffer_.reserve(kBufferBytes);
}

AtomicFile AtomicFile::stream(int fd, std::string name) {
  AtomicFile f;
  f.target_ = std::move(name);
  f.fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (f.fd_ < 0) {
    const int e = errno;
    throw Error(ErrorCode::io, std::string("cannot write to it: ") + std::strerror(e), {},
                std::nullopt, f.target_.string());
  }
  f.stream_ = true;
  f.buffer_.reserve(kBufferBytes);
  return f;
}

AtomicFile::~AtomicFile() {
  discard();
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept
    : target_(std::move(o.target_)),
      temp_(std::move(o.temp_)),
      fd_(o.fd_),
      size_(o.size_),
      buffer_(std::move(o.buffer_)),
      committed_(o.committed_),
      stream_(o.stream_),
      slot_(o.slot_) {
  o.fd_ = -1;
  o.temp_.clear();
  o.slot_ = SIZE_MAX;
}

AtomicFile& AtomicFile::operator=(AtomicFile&& o) noexcept {
  if (this != &o) {
    discard();
    target_ = std::move(o.target_);
    temp_ = std::move(o.temp_);
    fd_ = o.fd_;
    size_ = o.size_;
    buffer_ = std::move(o.buffer_);
    committed_ = o.committed_;
    stream_ = o.stream_;
    slot_ = o.slot_;
    o.fd_ = -1;
    o.temp_.clear();
    o.slot_ = SIZE_MAX;
  }
  return *this;
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  withdraw(slot_);
  slot_ = SIZE_MAX;
  temp_.clear();
  buffer_.clear();
}

void AtomicFile::fail(const char* what, int err) {
  throw Error(
      ErrorCode::io,
      std::string(what) + " '" + (stream_ ? target_ : temp_).string() + "': " + std::strerror(err),
      {}, size_, target_.string());
}

void AtomicFile::write_fd(const std::byte* data, std::size_t n) {
  while (n > 0) {
    // Linux transfers at most 0x7ffff000 bytes per call; loop on short writes.
    const ssize_t w = ::write(fd_, data, std::min<std::size_t>(n, std::size_t{1} << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("cannot write", errno);
    }
    if (w == 0) fail("cannot write", EIO);
    data += w;
    n -= static_cast<std::size_t>(w);
  }
}

void AtomicFile::flush() {
  if (!buffer_.empty()) write_fd(buffer_.data(), buffer_.size());
  buffer_.clear();
}

void AtomicFile::write(std::span<const std::byte> bytes) {
  if (fd_ < 0)
    throw Error(ErrorCode::invalid_argument, "write to a file that was committed or discarded", {},
                std::nullopt, target_.string());
  if (bytes.empty()) return;
  if (buffer_.size() + bytes.size() <= kBufferBytes) {
    buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
  } else {
    flush();
    if (bytes.size() < kBufferBytes)
      buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
    else
      write_fd(bytes.data(), bytes.size());
  }
  size_ += bytes.size();
}

void AtomicFile::write_at(std::uint64_t offset, std::span<const std::byte> bytes) {
  if (fd_ < 0)
    throw Error(ErrorCode::invalid_argument, "write to a file that was committed or discarded", {},
                std::nullopt, target_.string());
  if (stream_)
    throw Error(ErrorCode::unsupported,
                "this output must be patched after it is written, which a stream cannot do: "
                "write it to a file",
                {}, offset, target_.string());
  if (offset > size_ || bytes.size() > size_ - offset)
    throw Error(ErrorCode::invalid_argument,
                "write_at [" + std::to_string(offset) + ", +" + std::to_string(bytes.size()) +
                    ") is past the " + std::to_string(size_) + " bytes written",
                {}, offset, target_.string());
  flush();
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w =
        ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("cannot write", errno);
    }
    if (w == 0) fail("cannot write", EIO);
    done += static_cast<std::size_t>(w);
  }
}

void AtomicFile::commit() {
  if (committed_ || fd_ < 0)
    throw Error(ErrorCode::invalid_argument, "commit of a file that was committed or discarded", {},
                std::nullopt, target_.string());
  if (stream_) {
    flush();
    const int fd = fd_;
    fd_ = -1;
    committed_ = true;
    if (::close(fd) != 0) fail("cannot close", errno);
    return;
  }
  try {
    flush();
    if (::fchmod(fd_, target_mode(target_)) != 0) fail("cannot set the permissions of", errno);
    if (::fsync(fd_) != 0) fail("cannot sync", errno);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("cannot close", errno);
    if (::rename(temp_.c_str(), target_.c_str()) != 0) {
      const int e = errno;
      throw Error(ErrorCode::io,
                  "cannot rename '" + temp_.string() + "' over the target: " + std::strerror(e), {},
                  std::nullopt, target_.string());
    }
  } catch (...) {
    discard();
    throw;
  }
  withdraw(slot_);  // after the rename: a signal before it still removes the temporary
  slot_ = SIZE_MAX;
  temp_.clear();
  committed_ = true;
  // Make the rename itself durable. Failing here leaves the new file in
  // place, so it is not an error of the save.
  std::filesystem::path dir = target_.parent_path();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace torchport
