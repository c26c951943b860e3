#include "torchport/io/source.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "torchport/core/error.hpp"

namespace torchport {
namespace {

struct Mapping {
  void* addr = nullptr;
  std::size_t len = 0;
  ~Mapping() {
    if (addr != nullptr) ::munmap(addr, len);
  }
};

[[noreturn]] void os_error(const std::string& what, const std::filesystem::path& p, int err) {
  throw Error(ErrorCode::io, what + ": " + std::strerror(err), {}, std::nullopt, p.string());
}

}  // namespace

Source Source::map_file(const std::filesystem::path& path, MapOptions options) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) os_error("cannot open", path, errno);
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    os_error("cannot stat", path, e);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorCode::io, "not a regular file", {}, std::nullopt, path.string());
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
  ::close(fd);  // the mapping keeps the file referenced
  if (addr == MAP_FAILED) os_error("cannot map", path, e);
  auto m = std::make_shared<Mapping>();
  m->addr = addr;
  m->len = len;
  s.bytes_ = {static_cast<const std::byte*>(addr), len};
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
  return Storage::borrow(s.bytes_, owner_, !path_.empty() && !bytes_.empty());
}

}  // namespace torchport
