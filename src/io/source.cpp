#include "torchport/io/source.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "torchport/core/error.hpp"

namespace torchport {
namespace {

// A read-only private mapping of a file. It keeps the descriptor open, so
// copies can pread the file rather than fault the mapping page by page.
struct Mapping : FileBacking {
  void* addr = nullptr;
  std::size_t len = 0;
  int fd = -1;
  ~Mapping() override {
    if (addr != nullptr) ::munmap(addr, len);
    if (fd >= 0) ::close(fd);
  }
  bool read(const std::byte* at, std::span<std::byte> dst) const noexcept override {
    const auto* base = static_cast<const std::byte*>(addr);
    if (at < base || at + dst.size() > base + len) return false;
    auto offset = static_cast<off_t>(at - base);
    std::size_t done = 0;
    while (done < dst.size()) {
      const ssize_t n = ::pread(fd, dst.data() + done,
                                std::min<std::size_t>(dst.size() - done, 1u << 30), offset);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {  // the file shrank or cannot be read: copy the rest from memory
        std::memcpy(dst.data() + done, at + done, dst.size() - done);
        return true;
      }
      done += static_cast<std::size_t>(n);
      offset += n;
    }
    return true;
  }
  void release(const std::byte* begin, const std::byte* end) const noexcept override {
    // The page cache holds a file in folios of up to 2 MiB, aligned in the
    // file (the mapping starts at offset 0). Faulting one page maps its
    // folio, or the fault-around window, both inside one 2 MiB block; so
    // whole blocks go, or the neighbours a read brought in would stay. A
    // tensor read out of file order would otherwise leave most of a block
    // resident. MADV_DONTNEED on this private read-only file mapping only
    // unmaps our page table entries; nothing can be lost.
    constexpr std::uintptr_t kBlock = std::uintptr_t{2} << 20;
    const auto base = reinterpret_cast<std::uintptr_t>(addr);
    auto from = reinterpret_cast<std::uintptr_t>(begin);
    auto to = reinterpret_cast<std::uintptr_t>(end);
    if (from < base || to > base + len || to <= from) return;
    from = base + ((from - base) & ~(kBlock - 1));
    to = base + std::min<std::uintptr_t>(len, (to - base + kBlock - 1) & ~(kBlock - 1));
    if (to > from) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
  }
};

[[noreturn]] void os_error(const std::string& what, const std::filesystem::path& p, int err) {
  throw Error(ErrorCode::io, what + ": " + std::strerror(err), {}, std::nullopt, p.string());
}

}  // namespace

Source Source::map_file(const std::filesystem::path& path, MapOptions options) {
  // O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer; it
  // is refused below, before anything is read. O_NOCTTY: a terminal given
  // as the file never becomes our controlling terminal.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) os_error("cannot open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    os_error("cannot stat", path, e);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                                              : "not a regular file";
    throw Error(ErrorCode::io,
                std::string("not a regular file: ") + kind +
                    "; only regular files are read (and directories of sharded checkpoints)",
                {}, std::nullopt, path.string());
  }
  Source s;
  s.name_ = path.filename().string();
  s.path_ = path;
  const auto len = static_cast<std::size_t>(st.st_size);
  if (len == 0) {
    ::close(fd);
    s.owner_ = std::make_shared<int>(0);
    return s;
  }
  int flags = MAP_PRIVATE;
  if (options.populate) flags |= MAP_POPULATE;
  void* addr = ::mmap(nullptr, len, PROT_READ, flags, fd, 0);
  const int e = errno;
  if (addr == MAP_FAILED) {
    ::close(fd);
    os_error("cannot map", path, e);
  }
  auto m = std::make_shared<Mapping>();
  m->addr = addr;
  m->len = len;
  m->fd = fd;
  s.bytes_ = {static_cast<const std::byte*>(addr), len};
  s.file_ = m;
  s.owner_ = std::move(m);
  return s;
}

Source Source::from_buffer(std::vector<std::byte> bytes, std::string name) {
  auto owned = std::make_shared<std::vector<std::byte>>(std::move(bytes));
  Source s;
  s.bytes_ = {owned->data(), owned->size()};
  s.owner_ = std::move(owned);
  s.name_ = std::move(name);
  return s;
}

Source Source::from_storage(std::shared_ptr<Storage> storage, std::string name) {
  Source s;
  s.bytes_ = storage->bytes();
  s.owner_ = std::move(storage);
  s.name_ = std::move(name);
  return s;
}

Source Source::borrow(std::span<const std::byte> bytes, std::string name) {
  Source s;
  s.bytes_ = bytes;
  s.owner_ = std::make_shared<int>(0);
  s.name_ = std::move(name);
  return s;
}

Source Source::slice(std::uint64_t offset, std::uint64_t size, std::string name) const {
  if (offset > bytes_.size() || size > bytes_.size() - offset)
    throw Error(ErrorCode::truncated,
                "range [" + std::to_string(offset) + ", +" + std::to_string(size) +
                    ") lies outside the " + std::to_string(bytes_.size()) + " bytes of " + name_,
                {}, offset, name_);
  Source s = *this;
  s.bytes_ = bytes_.subspan(static_cast<std::size_t>(offset), static_cast<std::size_t>(size));
  s.name_ = std::move(name);
  return s;
}

std::shared_ptr<Storage> Source::storage(std::uint64_t offset, std::uint64_t size) const {
  const Source s = slice(offset, size, name_);
  return Storage::borrow(s.bytes_, owner_, file_);
}

}  // namespace torchport
