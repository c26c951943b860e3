#include <cstring>
#include <unordered_map>

#include "torchport/core/error.hpp"
#include "torchport/detail/parallel_copy.hpp"
#include "torchport/formats/open.hpp"

namespace torchport {

namespace {

// Makes the storages of `tensors` ready and points the tensors at them, in
// place (a file storage is released when its last view moves off it).
void materialize_tensors(std::vector<NamedTensor>& tensors, Residence residence,
                         MaterializeStats& st, const MaterializeProgress& progress) {
  st = {};
  // Distinct storages, in first-use order.
  std::vector<const std::shared_ptr<Storage>*> order;
  std::unordered_map<const Storage*, std::shared_ptr<Storage>> replaced;
  for (const auto& t : tensors)
    if (!t.tensor.is_sparse() && !t.tensor.is_meta() &&
        replaced.emplace(t.tensor.storage().get(), nullptr).second)
      order.push_back(&t.tensor.storage());

  // One arena for the given storages (huge pages when the kernel has them),
  // filled by reading the file straight into it, in pieces spread over the
  // cores. Deferred storages are made by the copies that need them
  // (thread-safe, once each), except deferred copies of unaligned records,
  // which read the file straight into the arena and are never made.
  const auto fill_arena = [&](const std::vector<const std::shared_ptr<Storage>*>& storages) {
    constexpr std::uint64_t kAlign = 64;
    std::uint64_t total = 0;
    for (const auto* s : storages) total += ((*s)->nbytes() + kAlign - 1) / kAlign * kAlign;
    if (storages.empty()) return;
    auto arena = Storage::allocate(total);
    auto dst = arena->mutable_bytes();
    std::vector<detail::CopyJob> jobs;
    std::uint64_t at = 0;
    for (const auto* s : storages) {
      const std::uint64_t n = (*s)->nbytes();
      auto slice = dst.subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(n));
      detail::split_copy(**s, slice, jobs);
      replaced[s->get()] = Storage::borrow_mutable(slice, arena);
      at += (n + kAlign - 1) / kAlign * kAlign;
    }
    detail::run_copies(jobs, progress);
  };
  for (const auto* s : order) st.bytes += (*s)->nbytes();
  if (residence == Residence::owned) {
    fill_arena(order);
  } else {
    // Mapped storages stay views. Deferred copies of unaligned records (a
    // MessagePack record's tensors, say) need memory either way: they share
    // one arena as an owned load's storages do, rather than each taking an
    // allocation of 4 KiB pages filled by one thread. Other deferred
    // storages (inflated, byte-swapped) are made where they are, once.
    std::vector<const std::shared_ptr<Storage>*> copies;
    for (const auto* s : order) {
      if ((*s)->pending() && (*s)->addressable()) {
        copies.push_back(s);
        continue;
      }
      (*s)->bytes();
      replaced[s->get()] = *s;
      if ((*s)->borrowed()) st.mapped_bytes += (*s)->nbytes();
    }
    fill_arena(copies);
  }
  st.storages = order.size();

  // `order` points into the tensors: not used past here. A storage a
  // tensor leaves may be freed; the storages still looked up are alive
  // (later tensors view them), so no key is reused.
  order.clear();
  for (auto& t : tensors) {
    Tensor& x = t.tensor;
    if (x.is_sparse() || x.is_meta()) continue;  // no dense storage (sparse: its parts stay)
    Tensor y(x.dtype(), x.shape(), x.strides(), x.storage_offset(), replaced[x.storage().get()]);
    x = x.is_quantized() ? y.with_quantization(x.quantization()) : std::move(y);
  }
}

}  // namespace

TensorCatalog materialize(const TensorCatalog& catalog, Residence residence,
                          MaterializeStats* stats, const MaterializeProgress& progress) try {
  MaterializeStats local;
  std::vector<NamedTensor> tensors = catalog.tensors();
  materialize_tensors(tensors, residence, stats ? *stats : local, progress);
  return TensorCatalog::from_tensors(catalog.format(), std::move(tensors), catalog.metadata());
} catch (...) {
  rethrow_as_error("materialize");  // no bare std:: exception leaves the library
}

TensorCatalog materialize(TensorCatalog&& catalog, Residence residence, MaterializeStats* stats,
                          const MaterializeProgress& progress) try {
  MaterializeStats local;
  std::string format = catalog.format();
  std::map<std::string, std::string> metadata = catalog.metadata();
  std::vector<NamedTensor> tensors = std::move(catalog).take_tensors();
  materialize_tensors(tensors, residence, stats ? *stats : local, progress);
  return TensorCatalog::from_tensors(std::move(format), std::move(tensors), std::move(metadata));
} catch (...) {
  rethrow_as_error("materialize");  // no bare std:: exception leaves the library
}

}  // namespace torchport
