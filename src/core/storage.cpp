#include "torchport/core/storage.hpp"

#include <sys/mman.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "torchport/core/error.hpp"
#include "torchport/detail/work.hpp"

namespace torchport {

struct Storage::Private {};

struct Storage::Deferred {
  Loader loader;
  std::once_flag once;
  std::shared_ptr<Storage> made;
  std::atomic<bool> done{false};
  std::shared_ptr<const RangeReader> ranged;  // a ranged storage's reader
  std::uint64_t range_offset = 0;             // where the storage starts in what it reads
};

namespace {

struct AlignedFree {
  void operator()(void* p) const noexcept { std::free(p); }
};

}  // namespace

namespace {

// Large buffers come straight from mmap, 2 MiB aligned, so that freeing
// them returns the memory at once. Their first 256 MiB use 4 KiB pages and
// the rest transparent huge pages (docs/loading.md has the measurements):
// on a VM that hands idle memory back to its host, the kernel's free huge
// pages are the ones the host took back, and faulting them in again costs
// 5-30 ms per 2 MiB, while 4 KiB pages still come from the fragments the
// host never took, at about 1 ms per 2 MiB; past a few hundred MiB those
// fragments run out and both page sizes wait for the host alike, and when
// memory was freed just before (back-to-back loads), huge pages fill
// 2-3 times faster.
//
// Unless the host charges for every 4 KiB mapping: under shadow paging the
// first write to each page through a new mapping traps to the host (about
// 5 us), even after the kernel has faulted the page in, and a copy into
// 4 KiB pages ran 9-24 times slower than into huge pages, in every regime.
// The first large buffer of a process tells which host it runs on: its
// first 2 MiB is faulted in and then written once a page, and if that write
// costs over 1 us a page, huge pages are used throughout.
constexpr std::uint64_t kAlign2M = std::uint64_t{2} << 20;
constexpr std::uint64_t kMapFrom = std::uint64_t{8} << 20;
constexpr std::uint64_t kSmallPages = std::uint64_t{256} << 20;

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels refuse it (EINVAL)
#endif

struct Unmap {
  std::size_t length;
  void operator()(void* p) const noexcept { ::munmap(p, length); }
};

// Whether 4 KiB pages pay for the head of a buffer, decided once per
// process on the first buffer's first 2 MiB (in 4 KiB pages, zero): it is
// faulted in, then written once a page, in four timed quarters. The
// fastest quarter decides, so that one preemption cannot: over 150 us for
// 128 pages means huge pages throughout. A shadow-paging host measured
// about 600 us; under hardware nested paging a write to a page already
// faulted in is a TLB fill, a few us for 128 (the first host copied into
// fresh 4 KiB pages, faults included, at under 3 us a page). The written
// bytes are zeros, as they were.
bool small_pages_wanted(std::byte* head) {
  static std::atomic<int> verdict{0};  // 0 undecided, 1 small pages, 2 huge pages
  if (const int v = verdict.load(std::memory_order_relaxed); v != 0) return v == 1;
  bool small = true;
  detail::count(detail::work().page_advice);
  if (::madvise(head, kAlign2M, MADV_POPULATE_WRITE) == 0) {
    constexpr std::uint64_t kQuarter = kAlign2M / 4;
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    auto fastest = std::chrono::steady_clock::duration::max();
    for (std::uint64_t q = 0; q < kAlign2M; q += kQuarter) {
      const auto t0 = std::chrono::steady_clock::now();
      for (std::uint64_t b = q; b < q + kQuarter; b += page)
        *static_cast<volatile std::byte*>(head + b) = std::byte{0};
      fastest = std::min(fastest, std::chrono::steady_clock::now() - t0);
    }
    small = fastest < std::chrono::microseconds(150);
  }
  verdict.store(small ? 1 : 2, std::memory_order_relaxed);
  return small;
}

void* map_aligned(std::uint64_t nbytes, std::shared_ptr<void>& owner) {
  const std::uint64_t length = (nbytes + kAlign2M - 1) / kAlign2M * kAlign2M + kAlign2M;
  void* raw = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  // Trim to a 2 MiB aligned window.
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const auto aligned = (start + kAlign2M - 1) & ~(kAlign2M - 1);
  const std::uint64_t head = aligned - start;
  const std::uint64_t body = length - kAlign2M;
  if (head) ::munmap(raw, head);
  if (kAlign2M - head) ::munmap(reinterpret_cast<void*>(aligned + body), kAlign2M - head);
  void* p = reinterpret_cast<void*>(aligned);
  ::madvise(p, kAlign2M, MADV_NOHUGEPAGE);
  detail::count(detail::work().page_advice);
  const std::uint64_t small = small_pages_wanted(static_cast<std::byte*>(p))
                                  ? std::min(body, kSmallPages)
                                  : std::min(body, kAlign2M);
  if (small > kAlign2M) {
    ::madvise(static_cast<std::byte*>(p) + kAlign2M, small - kAlign2M, MADV_NOHUGEPAGE);
    detail::count(detail::work().page_advice);
  }
  if (body > small) {
    ::madvise(static_cast<std::byte*>(p) + small, body - small, MADV_HUGEPAGE);
    detail::count(detail::work().page_advice);
  }
  owner = std::shared_ptr<void>(p, Unmap{static_cast<std::size_t>(body)});
  return p;
}

}  // namespace

std::shared_ptr<Storage> Storage::allocate(std::uint64_t nbytes) {
  constexpr std::uint64_t kAlign = 64;
  if (nbytes > (std::uint64_t{1} << 62))
    throw Error(ErrorCode::limit_exceeded,
                "cannot allocate " + std::to_string(nbytes) + " bytes for a tensor");
  auto s = std::make_shared<Storage>(Private{});
  s->nbytes_ = nbytes;
  s->writable_ = true;
  std::shared_ptr<void> owner;
  void* p = nbytes >= kMapFrom ? map_aligned(nbytes, owner) : nullptr;
  if (p == nullptr) {
    // aligned_alloc needs a size that is a multiple of the alignment, and a
    // non-null result even for zero bytes.
    const std::uint64_t rounded = (nbytes + kAlign - 1) / kAlign * kAlign;
    p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
    if (p == nullptr)
      throw Error(ErrorCode::limit_exceeded,
                  "out of memory allocating " + std::to_string(nbytes) + " bytes for a tensor");
    owner = std::shared_ptr<void>(p, AlignedFree{});
  }
  s->data_ = static_cast<std::byte*>(p);
  s->owner_ = std::move(owner);
  return s;
}

std::shared_ptr<Storage> Storage::borrow(std::span<const std::byte> bytes,
                                         std::shared_ptr<const void> owner,
                                         std::shared_ptr<const FileBacking> file) {
  auto s = std::make_shared<Storage>(Private{});
  s->nbytes_ = bytes.size();
  s->data_ = const_cast<std::byte*>(bytes.data());  // never written: writable_ is false
  s->owner_ = std::move(owner);
  s->borrowed_ = true;
  s->file_ = std::move(file);
  return s;
}

void RangeReader::read_many(std::span<const RangeRead> reads) const {
  for (const RangeRead& r : reads)
    if (!r.dst.empty()) read(r.offset, r.dst);
}

namespace {
void check_range(std::uint64_t offset, std::uint64_t n, std::uint64_t nbytes) {
  if (offset > nbytes || n > nbytes - offset)
    throw Error(ErrorCode::invalid_argument, "read of [" + std::to_string(offset) + ", +" +
                                                 std::to_string(n) + ") from a storage of " +
                                                 std::to_string(nbytes) + " bytes");
}
}  // namespace

const RangeReader* Storage::range_reader() const noexcept {
  if (!deferred_ || !deferred_->ranged || deferred_->done.load(std::memory_order_acquire))
    return nullptr;
  return deferred_->ranged.get();
}

std::uint64_t Storage::range_offset() const noexcept {
  return deferred_ ? deferred_->range_offset : 0;
}

void Storage::read_many(std::span<const RangeRead> reads) const {
  for (const RangeRead& r : reads) check_range(r.offset, r.dst.size(), nbytes_);
  if (const RangeReader* reader = range_reader()) {
    std::vector<RangeRead> shifted(reads.begin(), reads.end());
    for (RangeRead& r : shifted) r.offset += deferred_->range_offset;
    reader->read_many(shifted);
    return;
  }
  for (const RangeRead& r : reads) read_into(r.offset, r.dst);
}

void Storage::read_into(std::uint64_t offset, std::span<std::byte> dst) const {
  check_range(offset, dst.size(), nbytes_);
  if (dst.empty()) return;
  if (const RangeReader* reader = range_reader()) {
    reader->read(deferred_->range_offset + offset, dst);
    return;
  }
  // A deferred copy reads its source (data_) until the copy is made.
  if (deferred_ && (data_ == nullptr || deferred_->done.load(std::memory_order_acquire))) {
    bytes();
    deferred_->made->read_into(offset, dst);
    return;
  }
  if (file_ && file_->read(data_ + offset, dst)) return;
  std::memcpy(dst.data(), data_ + offset, dst.size());
}

bool Storage::reads_file() const noexcept {
  if (!file_ || data_ == nullptr) return false;
  return !deferred_ || !deferred_->done.load(std::memory_order_acquire);
}

bool FileBacking::read_run(const std::byte* at,
                           std::span<const std::span<std::byte>> pieces) const noexcept {
  for (const auto& p : pieces) {
    if (!read(at, p)) return false;
    at += p.size();
  }
  return true;
}

void Storage::release_pages(std::uint64_t offset, std::uint64_t n) const noexcept {
  if (!file_ || data_ == nullptr || offset >= nbytes_ || n == 0) return;
  n = std::min(n, nbytes_ - offset);
  file_->release(data_ + offset, data_ + offset + n);
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

Storage::Storage(const Private&) {
  // A file of many small tensors has a storage a tensor.
  static_assert(sizeof(Storage) == 64 || sizeof(void*) != 8, "a storage grew");
}
Storage::~Storage() = default;

std::shared_ptr<Storage> Storage::deferred(std::uint64_t nbytes, Loader loader) {
  auto s = std::make_shared<Storage>(Private{});
  s->nbytes_ = nbytes;
  s->deferred_ = std::make_unique<Deferred>();
  s->deferred_->loader = std::move(loader);
  return s;
}

std::shared_ptr<Storage> Storage::deferred_copy(std::span<const std::byte> raw,
                                                std::shared_ptr<const void> owner,
                                                std::shared_ptr<const FileBacking> file) {
  auto s = std::make_shared<Storage>(Private{});
  s->nbytes_ = raw.size();
  s->data_ = const_cast<std::byte*>(raw.data());  // only read
  s->owner_ = std::move(owner);
  s->file_ = std::move(file);
  s->deferred_ = std::make_unique<Deferred>();
  const Storage* self = s.get();  // the loader lives inside *self: no cycle
  s->deferred_->loader = [self] {
    auto out = Storage::allocate(self->nbytes_);
    if (self->nbytes_ != 0) self->read_into(0, out->mutable_bytes());
    return out;
  };
  return s;
}

std::shared_ptr<Storage> Storage::ranged(std::shared_ptr<const RangeReader> reader,
                                         std::uint64_t offset, std::uint64_t nbytes) {
  auto s = std::make_shared<Storage>(Private{});
  s->nbytes_ = nbytes;
  s->deferred_ = std::make_unique<Deferred>();
  s->deferred_->ranged = std::move(reader);
  s->deferred_->range_offset = offset;
  const Storage* self = s.get();  // the loader lives inside *self: no cycle
  s->deferred_->loader = [self] {
    auto out = Storage::allocate(self->nbytes_);
    if (self->nbytes_ != 0)
      self->deferred_->ranged->read(self->deferred_->range_offset, out->mutable_bytes());
    return out;
  };
  return s;
}

std::span<const std::byte> Storage::bytes() const {
  if (!deferred_) return {data_, static_cast<std::size_t>(nbytes_)};
  Deferred& d = *deferred_;
  std::call_once(d.once, [&] {
    auto made = d.loader();
    if (!made || made->nbytes() != nbytes_)
      throw Error(ErrorCode::corrupt, "storage produced " +
                                          std::to_string(made ? made->nbytes() : 0) +
                                          " bytes, expected " + std::to_string(nbytes_));
    d.made = std::move(made);
    d.done.store(true, std::memory_order_release);
  });
  return d.made->bytes();
}

std::span<std::byte> Storage::mutable_bytes() {
  if (!writable_)
    throw Error(ErrorCode::invalid_argument,
                "this storage is read-only (it views a mapped file or a loaded record); "
                "clone() the tensor to get writable memory");
  return {data_, static_cast<std::size_t>(nbytes_)};
}

bool Storage::pending() const noexcept {
  return deferred_ && !deferred_->done.load(std::memory_order_acquire);
}

bool Storage::addressable() const noexcept {
  // A deferred copy knows where its bytes lie (data_), a ranged storage who
  // reads them; a made storage is memory.
  return !deferred_ || data_ != nullptr || deferred_->ranged ||
         deferred_->done.load(std::memory_order_acquire);
}

}  // namespace torchport
