#include "torchport/io/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
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

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path target) : target_(std::move(target)) {
  std::filesystem::path dir = target_.parent_path();
  if (dir.empty()) dir = ".";
  if (target_.filename().empty())
    throw Error(ErrorCode::invalid_argument, "output path names a directory, not a file", {},
                std::nullopt, target_.string());
  std::string tmpl = (dir / ("." + target_.filename().string() + ".tmp-XXXXXX")).string();
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  fd_ = ::mkstemp(name.data());
  if (fd_ < 0) {
    const int e = errno;
    throw Error(ErrorCode::io,
                "cannot create a temporary file in '" + dir.string() + "': " + std::strerror(e), {},
                std::nullopt, target_.string());
  }
  ::fcntl(fd_, F_SETFD, FD_CLOEXEC);
  temp_ = name.data();
  buffer_.reserve(kBufferBytes);
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
      committed_(o.committed_) {
  o.fd_ = -1;
  o.temp_.clear();
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
    o.fd_ = -1;
    o.temp_.clear();
  }
  return *this;
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
  buffer_.clear();
}

void AtomicFile::fail(const char* what, int err) {
  throw Error(ErrorCode::io, std::string(what) + " '" + temp_.string() + "': " + std::strerror(err),
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
