#include "formats/write/write_common.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#include "torchport/core/error.hpp"
#include "torchport/detail/utf8.hpp"
#include "torchport/detail/work.hpp"

namespace torchport::formats {
namespace {

// Data goes out in pieces of this size, so progress moves smoothly and the
// pages of one huge mapped tensor are dropped as it streams.
constexpr std::size_t kChunk = std::size_t{16} << 20;

}  // namespace

bool is_mapped(const Storage& storage) noexcept {
  return storage.borrowed() && !storage.writable();
}

void release_storage_pages(const Storage& storage, std::uint64_t offset, std::uint64_t n,
                           detail::PageReleaser* batch) noexcept {
  if (!is_mapped(storage) || n == 0 || offset >= storage.nbytes()) return;
  if (storage.file_backed()) {
    if (batch != nullptr)
      batch->add(storage, offset, n);
    else
      storage.release_pages(offset, n);
    return;
  }
#ifdef MADV_PAGEOUT
  // A borrowed read-only storage not known to be a file mapping (a record
  // view of a mapped checkpoint, say). MADV_DONTNEED would zero anonymous
  // memory; MADV_PAGEOUT cannot lose data (anonymous pages would be
  // swapped). Before Linux 5.4 it fails with EINVAL: the pages then stay.
  // Only whole pages inside the range, as Storage::release_pages does: a
  // page shared with the next tensor stays, so small neighbours are not
  // paged out and faulted in again one after another.
  static const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  n = std::min(n, storage.nbytes() - offset);
  const auto start = reinterpret_cast<std::uintptr_t>(storage.bytes().data() + offset);
  const auto begin = (start + page - 1) & ~(page - 1);
  const auto end = (start + n) & ~(page - 1);
  if (end > begin) {
    detail::count(detail::work().page_advice);
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
  }
#endif
}

void DataStreamer::write_bytes(std::span<const std::byte> bytes, const Storage* storage,
                               std::uint64_t offset, const ByteSink& sink) {
  while (!bytes.empty()) {
    const auto piece = bytes.first(std::min(bytes.size(), kChunk));
    sink(piece);
    if (storage && options_.release_pages)
      release_storage_pages(*storage, offset, piece.size(), &released_);
    bytes = bytes.subspan(piece.size());
    offset += piece.size();
    done_ += piece.size();
    if (options_.progress && (done_ - reported_ >= kChunk || done_ == total_)) {
      reported_ = done_;
      options_.progress(done_, total_);
    }
  }
}

std::uint64_t DataStreamer::write_tensor(const Tensor& t, const ByteSink& sink) {
  if (t.numel() == 0) return 0;
  if (t.is_contiguous()) {
    write_bytes(t.bytes(), t.storage().get(),
                static_cast<std::uint64_t>(t.storage_offset()) * dtype_size(t.dtype()), sink);
    return t.nbytes();
  }
  // A strided view: gather it into C order first.
  std::vector<std::byte> buf(static_cast<std::size_t>(t.nbytes()));
  t.copy_to(buf);
  write_bytes(buf, nullptr, 0, sink);
  if (options_.release_pages) release_view_pages(t, &released_);
  return t.nbytes();
}

void release_view_pages(const Tensor& t, detail::PageReleaser* batch) noexcept {
  if (!t.defined() || t.numel() == 0) return;
  // The view's footprint in its storage: [offset, last reachable element]
  // (the Tensor constructor checked that this lies inside the storage).
  std::int64_t last = t.storage_offset();
  for (std::size_t i = 0; i < t.shape().size(); ++i) last += (t.shape()[i] - 1) * t.strides()[i];
  const std::uint64_t elem = dtype_size(t.dtype());
  release_storage_pages(*t.storage(), static_cast<std::uint64_t>(t.storage_offset()) * elem,
                        static_cast<std::uint64_t>(last - t.storage_offset() + 1) * elem, batch);
}

std::uint64_t DataStreamer::write_storage(const Storage& storage, const ByteSink& sink) {
  if (storage.nbytes() == 0) return 0;
  write_bytes(storage.bytes(), &storage, 0, sink);
  return storage.nbytes();
}

void check_name(std::string_view name, std::string_view format) {
  if (!detail::is_utf8(name))
    throw Error(ErrorCode::invalid_argument,
                "tensor name is not valid UTF-8, which " + std::string(format) +
                    " needs; rename it (torchport convert --remap)",
                std::string(name));
}

}  // namespace torchport::formats
