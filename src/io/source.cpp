#include "torchport/io/source.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "torchport/core/error.hpp"
#include "torchport/detail/work.hpp"

namespace torchport {
namespace {

// A read-only private mapping of a file. It keeps the descriptor open, so
// copies can pread the file rather than fault the mapping page by page.
struct Mapping : FileBacking {
  void* addr = nullptr;
  std::size_t len = 0;
  int fd = -1;
  bool copy_on_write = false;  // pages may hold a caller's private writes
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
      detail::count(detail::work().file_reads);
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
  bool read_run(const std::byte* at,
                std::span<const std::span<std::byte>> pieces) const noexcept override {
    const auto* base = static_cast<const std::byte*>(addr);
    std::size_t total = 0;
    for (const auto& p : pieces) total += p.size();
    if (at < base || total > len || at - base > static_cast<std::ptrdiff_t>(len - total))
      return false;
    // preadv takes at most IOV_MAX pieces a call; a short read resumes
    // inside the piece it stopped in.
    constexpr std::size_t kMaxPieces = 1024;
    iovec iov[kMaxPieces];
    auto offset = static_cast<off_t>(at - base);
    std::size_t next = 0, skip = 0;  // the first piece not read in full, and its bytes read
    while (next < pieces.size()) {
      std::size_t k = 0;
      for (std::size_t i = next; i < pieces.size() && k < kMaxPieces; ++i, ++k) {
        const std::size_t from = i == next ? skip : 0;
        iov[k] = {pieces[i].data() + from, pieces[i].size() - from};
      }
      detail::count(detail::work().file_reads);
      const ssize_t n = ::preadv(fd, iov, static_cast<int>(k), offset);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {  // as read(): copy the rest from memory
        const std::byte* src = base + offset;
        for (std::size_t i = next; i < pieces.size(); ++i) {
          const std::size_t from = i == next ? skip : 0;
          std::memcpy(pieces[i].data() + from, src, pieces[i].size() - from);
          src += pieces[i].size() - from;
        }
        return true;
      }
      offset += n;
      auto got = static_cast<std::size_t>(n);
      while (got > 0) {
        const std::size_t left = pieces[next].size() - skip;
        if (got < left) {
          skip += got;
          got = 0;
        } else {
          got -= left;
          ++next;
          skip = 0;
        }
      }
      while (next < pieces.size() && pieces[next].size() == skip) {  // empty pieces
        ++next;
        skip = 0;
      }
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
    if (copy_on_write) return;  // a page may hold writes: dropping it would lose them
    constexpr std::uintptr_t kBlock = std::uintptr_t{2} << 20;
    const auto base = reinterpret_cast<std::uintptr_t>(addr);
    auto from = reinterpret_cast<std::uintptr_t>(begin);
    auto to = reinterpret_cast<std::uintptr_t>(end);
    if (from < base || to > base + len || to <= from) return;
    from = base + ((from - base) & ~(kBlock - 1));
    to = base + std::min<std::uintptr_t>(len, (to - base + kBlock - 1) & ~(kBlock - 1));
    if (to > from) {
      detail::count(detail::work().page_advice);
      ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
    }
  }
};

[[noreturn]] void os_error(const std::string& what, const std::filesystem::path& p, int err) {
  throw Error(ErrorCode::io, what + ": " + std::strerror(err), {}, std::nullopt, p.string());
}

// A file read with pread: nothing is mapped, each range is read when asked for.
class PreadFile final : public ByteSource {
 public:
  PreadFile(int fd, std::uint64_t size, std::string name) : fd_(fd), size_(size), name_(name) {}
  ~PreadFile() override { ::close(fd_); }
  std::uint64_t size() const noexcept override { return size_; }
  std::string_view kind() const noexcept override { return "file (pread)"; }
  void read(std::uint64_t offset, std::span<std::byte> dst) const override {
    std::size_t done = 0;
    while (done < dst.size()) {
      detail::count(detail::work().file_reads);
      const ssize_t n =
          ::pread(fd_, dst.data() + done, std::min<std::size_t>(dst.size() - done, 1u << 30),
                  static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        throw Error(ErrorCode::io, std::string("cannot read: ") + std::strerror(errno), {},
                    offset + done, name_);
      if (n == 0)  // never a range of zeros where the file ended
        throw Error(ErrorCode::truncated,
                    "the file ended at byte " + std::to_string(offset + done) + " while reading [" +
                        std::to_string(offset) + ", +" + std::to_string(dst.size()) + ") of its " +
                        std::to_string(size_) + " bytes (it shrank?)",
                    {}, offset + done, name_);
      done += static_cast<std::size_t>(n);
    }
  }

 private:
  int fd_;
  std::uint64_t size_;
  std::string name_;
};

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
  if (options.pread) {
    s.ranged_ = std::make_shared<PreadFile>(fd, len, s.name_);
    s.size_ = len;
    s.owner_ = s.ranged_;
    return s;
  }
  s.size_ = len;
  if (len == 0) {
    ::close(fd);
    s.owner_ = std::make_shared<int>(0);
    return s;
  }
  int flags = MAP_PRIVATE;
  if (options.populate) flags |= MAP_POPULATE;
  const int prot = options.copy_on_write ? PROT_READ | PROT_WRITE : PROT_READ;
  void* addr = ::mmap(nullptr, len, prot, flags, fd, 0);
  const int e = errno;
  if (addr == MAP_FAILED) {
    ::close(fd);
    os_error("cannot map", path, e);
  }
  auto m = std::make_shared<Mapping>();
  m->addr = addr;
  m->len = len;
  m->fd = fd;
  m->copy_on_write = options.copy_on_write;
  s.bytes_ = {static_cast<const std::byte*>(addr), len};
  s.file_ = m;
  s.owner_ = std::move(m);
  return s;
}

Source Source::from_buffer(std::vector<std::byte> bytes, std::string name) {
  auto owned = std::make_shared<std::vector<std::byte>>(std::move(bytes));
  Source s;
  s.bytes_ = {owned->data(), owned->size()};
  s.size_ = s.bytes_.size();
  s.owner_ = std::move(owned);
  s.name_ = std::move(name);
  return s;
}

Source Source::from_storage(std::shared_ptr<Storage> storage, std::string name) {
  Source s;
  s.bytes_ = storage->bytes();
  s.size_ = s.bytes_.size();
  s.owner_ = std::move(storage);
  s.name_ = std::move(name);
  return s;
}

Source Source::borrow(std::span<const std::byte> bytes, std::string name) {
  Source s;
  s.bytes_ = bytes;
  s.size_ = bytes.size();
  s.owner_ = std::make_shared<int>(0);
  s.name_ = std::move(name);
  return s;
}

bool is_url(std::string_view s) noexcept {
  const auto starts = [&](std::string_view scheme) {
    if (s.size() < scheme.size()) return false;
    for (std::size_t i = 0; i < scheme.size(); ++i)
      if ((s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]) != scheme[i]) return false;
    return true;
  };
  return starts("http://") || starts("https://") || starts("s3://");
}

Source Source::from(std::shared_ptr<const ByteSource> bytes, std::string name) {
  Source s;
  s.size_ = bytes->size();
  s.ranged_ = std::move(bytes);
  s.owner_ = s.ranged_;
  s.name_ = std::move(name);
  return s;
}

void Source::whole_bytes_refused() const {
  throw Error(ErrorCode::unsupported,
              "the whole bytes of a source read by ranges (" + std::string(ranged_->kind()) +
                  ") were asked for; a reader must ask for the ranges it reads",
              {}, std::nullopt, name_);
}

void Source::check(std::uint64_t offset, std::uint64_t size) const {
  if (offset > size_ || size > size_ - offset)
    throw Error(ErrorCode::truncated,
                "range [" + std::to_string(offset) + ", +" + std::to_string(size) +
                    ") lies outside the " + std::to_string(size_) + " bytes of " + name_,
                {}, offset, name_);
}

Source Source::slice(std::uint64_t offset, std::uint64_t size, std::string name) const {
  check(offset, size);
  Source s = *this;
  if (ranged_)
    s.base_ = base_ + offset;
  else
    s.bytes_ = bytes_.subspan(static_cast<std::size_t>(offset), static_cast<std::size_t>(size));
  s.size_ = size;
  s.name_ = std::move(name);
  return s;
}

Source Source::fetch(std::uint64_t offset, std::uint64_t size) const {
  if (!ranged_) return slice(offset, size, name_);
  check(offset, size);
  std::vector<std::byte> buf(static_cast<std::size_t>(size));
  if (size != 0) ranged_->read(base_ + offset, buf);
  Source s = from_buffer(std::move(buf), name_);
  s.path_ = path_;
  return s;
}

Source Source::whole(std::uint64_t max_bytes, std::string_view limit_name,
                     std::string_view why) const {
  if (!ranged_) return *this;
  if (size_ > max_bytes)
    throw Error(ErrorCode::limit_exceeded,
                std::string(why) + " reads the whole file, which is read by ranges (" +
                    std::string(ranged_->kind()) + "): its " + std::to_string(size_) +
                    " bytes exceed " + std::string(limit_name) + " = " + std::to_string(max_bytes),
                {}, std::nullopt, name_);
  return fetch(0, size_);
}

void Source::read(std::uint64_t offset, std::span<std::byte> dst) const {
  check(offset, dst.size());
  if (dst.empty()) return;
  if (ranged_) return ranged_->read(base_ + offset, dst);
  if (file_ && file_->read(bytes_.data() + offset, dst)) return;
  std::memcpy(dst.data(), bytes_.data() + offset, dst.size());
}

void Source::read_many(std::span<const RangeRead> reads) const {
  for (const RangeRead& r : reads) check(r.offset, r.dst.size());
  if (!ranged_) {
    for (const RangeRead& r : reads) read(r.offset, r.dst);
    return;
  }
  std::vector<RangeRead> shifted(reads.begin(), reads.end());
  for (RangeRead& r : shifted) r.offset += base_;
  ranged_->read_many(shifted);
}

std::shared_ptr<Storage> Source::storage(std::uint64_t offset, std::uint64_t size) const {
  check(offset, size);
  if (ranged_) return Storage::ranged(ranged_, base_ + offset, size);
  const Source s = slice(offset, size, name_);
  return Storage::borrow(s.bytes_, owner_, file_);
}

}  // namespace torchport
