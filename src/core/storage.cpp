#include "torchport/core/storage.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <sys/mman.h>
#include <unistd.h>
#include <new>
#include <string>

#include "torchport/core/error.hpp"

namespace torchport {

struct Storage::Private {};

namespace {

struct AlignedFree {
  void operator()(void* p) const noexcept { std::free(p); }
};

}  // namespace

std::shared_ptr<Storage> Storage::allocate(std::uint64_t nbytes) {
  constexpr std::uint64_t kAlign = 64;
  if (nbytes > (std::uint64_t{1} << 62))
    throw Error(ErrorCode::limit_exceeded,
                "cannot allocate " + std::to_string(nbytes) + " bytes for a tensor");
  // aligned_alloc needs a size that is a multiple of the alignment, and a
  // non-null result even for zero bytes.
  const std::uint64_t rounded = (nbytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  if (p == nullptr)
    throw Error(ErrorCode::limit_exceeded,
                "out of memory allocating " + std::to_string(nbytes) + " bytes for a tensor");
  auto s = std::make_shared<Storage>(Private{});
  s->nbytes_ = nbytes;
  s->data_ = static_cast<std::byte*>(p);
  s->owner_ = std::shared_ptr<void>(p, AlignedFree{});
  s->writable_ = true;
  return s;
}

std::shared_ptr<Storage> Storage::borrow(std::span<const std::byte> bytes,
                                         std::shared_ptr<const void> owner, bool file_backed) {
  auto s = std::make_shared<Storage>(Private{});
  s->nbytes_ = bytes.size();
  s->data_ = const_cast<std::byte*>(bytes.data());  // never written: writable_ is false
  s->owner_ = std::move(owner);
  s->borrowed_ = true;
  s->file_backed_ = file_backed;
  return s;
}

void Storage::release_pages(std::uint64_t offset, std::uint64_t n) const noexcept {
  if (!file_backed_ || offset >= nbytes_ || n == 0) return;
  n = std::min(n, nbytes_ - offset);
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  // Only whole pages inside the range: a neighbour's bytes stay resident.
  const auto start = reinterpret_cast<std::uintptr_t>(data_ + offset);
  const auto begin = (start + page - 1) & ~(page - 1);
  const auto end = (start + n) & ~(page - 1);
  // MADV_DONTNEED on a private read-only file mapping only unmaps our page
  // table entries; it would zero anonymous memory, hence the file_backed check.
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

std::shared_ptr<Storage> Storage::borrow_mutable(std::span<std::byte> bytes,
                                                 std::shared_ptr<void> owner) {
  auto s = std::make_shared<Storage>(Private{});
  s->nbytes_ = bytes.size();
  s->data_ = bytes.data();
  s->owner_ = std::move(owner);
  s->writable_ = true;
  return s;
}

std::shared_ptr<Storage> Storage::deferred(std::uint64_t nbytes, Loader loader) {
  auto s = std::make_shared<Storage>(Private{});
  s->nbytes_ = nbytes;
  s->loader_ = std::move(loader);
  return s;
}

std::span<const std::byte> Storage::bytes() const {
  if (!loader_) return {data_, static_cast<std::size_t>(nbytes_)};
  std::call_once(once_, [this] {
    auto made = loader_();
    if (!made || made->nbytes() != nbytes_)
      throw Error(ErrorCode::corrupt, "storage produced " +
                                          std::to_string(made ? made->nbytes() : 0) +
                                          " bytes, expected " + std::to_string(nbytes_));
    made_ = std::move(made);
    done_.store(true, std::memory_order_release);
  });
  return made_->bytes();
}

std::span<std::byte> Storage::mutable_bytes() {
  if (!writable_)
    throw Error(ErrorCode::invalid_argument,
                "this storage is read-only (it views a mapped file or a loaded record); "
                "clone() the tensor to get writable memory");
  return {data_, static_cast<std::size_t>(nbytes_)};
}

bool Storage::pending() const noexcept {
  return loader_ && !done_.load(std::memory_order_acquire);
}

}  // namespace torchport
