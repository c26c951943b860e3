#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <map>

#include "torchport/core/error.hpp"
#include "torchport/detail/parallel_copy.hpp"
#include "torchport/formats/open.hpp"

namespace torchport {

namespace detail {
// The names do not change as their storages are made ready: the index of
// the names goes over with them instead of being built again (a hash of
// every name; 1.5% of a load of 80,000 small tensors).
struct MaterializeAccess {
  static std::vector<std::uint32_t> take_index(TensorCatalog& c) { return std::move(c.slots_); }
  static void put(TensorCatalog& c, std::vector<NamedTensor> tensors,
                  std::vector<std::uint32_t> slots) {
    c.tensors_ = std::move(tensors);
    c.slots_ = std::move(slots);
    // (A catalogue whose index does not fit its tensors gets a new one.)
    if (c.slots_.size() < 2 * c.tensors_.size()) c.index("two tensors have the same name");
  }
};
}  // namespace detail

namespace {

__extension__ typedef unsigned __int128 SortKey;

// Sorts keys that start in the order of their low 32 bits (each key's
// place) by their upper 96 bits, ties in that order: a stable LSD radix
// sort over the bytes that differ between keys (an address within one file
// differs in 3 or 4). std::sort of 80,000 128-bit keys took 70 M
// instructions, 4% of a whole `load` of them; this takes a few M.
void sort_keys(std::vector<SortKey>& keys) {
  if (keys.size() < 2) return;
  SortKey varying = 0;
  for (const SortKey k : keys) varying |= k ^ keys.front();
  std::vector<SortKey> out(keys.size());
  for (unsigned shift = 32; shift < 128; shift += 8) {
    if (((varying >> shift) & 0xFF) == 0) continue;
    std::array<std::size_t, 257> start{};
    for (const SortKey k : keys) ++start[static_cast<std::size_t>((k >> shift) & 0xFF) + 1];
    for (std::size_t d = 1; d < start.size(); ++d) start[d] += start[d - 1];
    for (const SortKey k : keys) out[start[static_cast<std::size_t>((k >> shift) & 0xFF)]++] = k;
    keys.swap(out);
  }
}

// Makes the storages of `tensors` ready and points the tensors at them, in
// place (a file storage is released when its last view moves off it).
void materialize_tensors(std::vector<NamedTensor>& tensors, Residence residence,
                         MaterializeStats& st, const MaterializeProgress& progress) {
  st = {};
  // Distinct storages, in first-use order (a storage's number is its place
  // here), found by address in one open-addressed table of numbers; each
  // tensor's storage number (kNone: sparse or meta, no dense storage).
  constexpr std::uint32_t kNone = UINT32_MAX;
  if (tensors.size() >= kNone / 2)
    throw Error(ErrorCode::limit_exceeded, "2^31 tensors or more in one catalogue");
  std::vector<const std::shared_ptr<Storage>*> order;
  std::vector<std::uint32_t> number(tensors.size(), kNone);
  {
    std::size_t cap = 16;
    while (cap < 2 * tensors.size()) cap *= 2;
    std::vector<std::uint32_t> slots(cap, kNone);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i].tensor;
      if (t.is_sparse() || t.is_meta()) continue;
      const Storage* key = t.storage().get();
      std::size_t h = std::hash<const Storage*>()(key) * 0x9E3779B97F4A7C15ULL >> 7;
      for (;; ++h) {
        std::uint32_t& slot = slots[h & (cap - 1)];
        if (slot == kNone) {
          slot = static_cast<std::uint32_t>(order.size());
          order.push_back(&t.storage());
        } else if (order[slot]->get() != key) {
          continue;
        }
        number[i] = slot;
        break;
      }
    }
  }
  // What each storage becomes: a view of the arena (`slice` of `arena`),
  // made only as its first tensor moves onto it, so that the storage it
  // leaves is freed first (one of the two lives at a time, not both); or,
  // for a mapped load, the storage as it is (`storage`, set at once).
  struct Replacement {
    std::span<std::byte> slice;
    std::shared_ptr<Storage> storage;
  };
  std::vector<Replacement> replaced(order.size());
  std::shared_ptr<Storage> arena;

  // One arena for the given storages (huge pages when the kernel has them),
  // filled by reading the file straight into it, in pieces spread over the
  // cores. Deferred storages are made by the copies that need them
  // (thread-safe, once each), except deferred copies of unaligned records,
  // which read the file straight into the arena and are never made.
  // `storages`: numbers of storages.
  const auto fill_arena = [&](std::vector<std::uint32_t> storages) {
    // In the order of the files' bytes: neighbouring records are then
    // read together, with one system call for many small ones (torch
    // writes records in the order of their keys as strings, "data/10"
    // before "data/2", not in the order the tensors are listed).
    // (A mapped file by address, a file read by ranges by offset; the
    // rest after them, in their order.)
    // Sorted as one 128-bit number each: the rank of its (kind, source),
    // its address or offset, its place (a comparison of three fields cost
    // more than the rest of the load of a small tensor).
    struct Group {
      int kind;
      const void* source;
      bool operator<(const Group& o) const noexcept {
        return kind != o.kind ? kind < o.kind : std::less<>()(source, o.source);
      }
      bool operator==(const Group& o) const noexcept = default;
    };
    std::vector<Group> groups;  // few: one a file or remote source, and the rest
    std::vector<std::uint32_t> group_of(storages.size());
    std::vector<std::uint64_t> where(storages.size());
    for (std::size_t i = 0; i < storages.size(); ++i) {
      const Storage& x = **order[storages[i]];
      Group g{2, nullptr};
      if (x.reads_file()) {
        g = {0, x.file().get()};
        where[i] = reinterpret_cast<std::uintptr_t>(x.file_data());
      } else if (const RangeReader* r = x.range_reader()) {
        g = {1, r};
        where[i] = x.range_offset();
      }
      auto it = std::find(groups.begin(), groups.end(), g);
      if (it == groups.end()) it = groups.insert(groups.end(), g);
      group_of[i] = static_cast<std::uint32_t>(it - groups.begin());
    }
    std::vector<std::uint32_t> rank(groups.size());
    {
      std::vector<std::uint32_t> by(groups.size());
      for (std::uint32_t g = 0; g < by.size(); ++g) by[g] = g;
      std::sort(by.begin(), by.end(),
                [&](std::uint32_t a, std::uint32_t b) { return groups[a] < groups[b]; });
      for (std::uint32_t r = 0; r < by.size(); ++r) rank[by[r]] = r;
    }
    std::vector<SortKey> keys(storages.size());
    for (std::size_t i = 0; i < storages.size(); ++i)
      keys[i] = (SortKey{rank[group_of[i]]} << 96) | (SortKey{where[i]} << 32) | SortKey{i};
    if (!std::is_sorted(keys.begin(), keys.end())) sort_keys(keys);
    {
      std::vector<std::uint32_t> sorted(storages.size());
      for (std::size_t i = 0; i < keys.size(); ++i)
        sorted[i] = storages[static_cast<std::size_t>(keys[i] & 0xFFFFFFFFu)];
      storages = std::move(sorted);
    }
    constexpr std::uint64_t kAlign = 64;
    std::uint64_t total = 0;
    for (const std::uint32_t k : storages)
      total += ((*order[k])->nbytes() + kAlign - 1) / kAlign * kAlign;
    if (storages.empty()) return;
    arena = Storage::allocate(total);
    auto dst = arena->mutable_bytes();
    std::vector<detail::CopyJob> jobs;
    jobs.reserve(storages.size());  // one a storage under 2 MiB
    // Storages read from a remote source: handed to it in one batch per
    // source (it coalesces neighbours and fetches them in parallel,
    // straight into the arena).
    std::map<const RangeReader*, std::vector<RangeRead>> batches;
    std::uint64_t at = 0;
    for (const std::uint32_t k : storages) {
      const std::shared_ptr<Storage>* s = order[k];
      const std::uint64_t n = (*s)->nbytes();
      auto slice = dst.subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(n));
      if (const RangeReader* r = (*s)->range_reader(); r != nullptr && r->batches() && n != 0)
        batches[r].push_back({(*s)->range_offset(), slice});
      else
        detail::split_copy(**s, slice, jobs);
      replaced[k].slice = slice;
      at += (n + kAlign - 1) / kAlign * kAlign;
    }
    detail::run_copies(jobs, progress);
    for (const auto& [reader, reads] : batches) reader->read_many(reads);
    if (!batches.empty() && progress) progress(total, total);
  };
  for (const auto* s : order) st.bytes += (*s)->nbytes();
  if (residence == Residence::owned) {
    std::vector<std::uint32_t> all(order.size());
    for (std::uint32_t k = 0; k < all.size(); ++k) all[k] = k;
    fill_arena(std::move(all));
  } else {
    // Mapped storages stay views. Deferred copies of unaligned records (a
    // MessagePack record's tensors, say) need memory either way: they share
    // one arena as an owned load's storages do, rather than each taking an
    // allocation of 4 KiB pages filled by one thread. Other deferred
    // storages (inflated, byte-swapped) are made where they are, once.
    std::vector<std::uint32_t> copies;
    for (std::uint32_t k = 0; k < order.size(); ++k) {
      const std::shared_ptr<Storage>* s = order[k];
      if ((*s)->pending() && (*s)->addressable()) {
        copies.push_back(k);
        continue;
      }
      (*s)->bytes();
      replaced[k].storage = *s;
      if ((*s)->borrowed()) st.mapped_bytes += (*s)->nbytes();
    }
    fill_arena(copies);
  }
  st.storages = order.size();

  // `order` points into the tensors: not used past here (a storage a
  // tensor leaves may be freed).
  order.clear();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    Tensor& x = tensors[i].tensor;
    if (number[i] == kNone) continue;  // no dense storage (sparse: its parts stay)
    Replacement& r = replaced[number[i]];
    if (!r.storage) r.storage = Storage::borrow_mutable(r.slice, arena);
    x = std::move(x).with_storage(r.storage);
  }
}

}  // namespace

TensorCatalog materialize(const TensorCatalog& catalog, Residence residence,
                          MaterializeStats* stats, const MaterializeProgress& progress) try {
  MaterializeStats local;
  std::vector<NamedTensor> tensors = catalog.tensors();
  materialize_tensors(tensors, residence, stats ? *stats : local, progress);
  return catalog.with_tensors(std::move(tensors), catalog.metadata());
} catch (...) {
  rethrow_as_error("materialize");  // no bare std:: exception leaves the library
}

TensorCatalog materialize(TensorCatalog&& catalog, Residence residence, MaterializeStats* stats,
                          const MaterializeProgress& progress) try {
  MaterializeStats local;
  // The tensors are moved out (and the catalogue left empty) before their
  // storages are copied, so that a mapped one is released as it goes.
  TensorCatalog shell = catalog.with_tensors({}, {});
  std::map<std::string, std::string> metadata = catalog.metadata();
  std::vector<std::uint32_t> slots = detail::MaterializeAccess::take_index(catalog);
  std::vector<NamedTensor> tensors = std::move(catalog).take_tensors();
  materialize_tensors(tensors, residence, stats ? *stats : local, progress);
  TensorCatalog out = shell.with_tensors({}, std::move(metadata));
  detail::MaterializeAccess::put(out, std::move(tensors), std::move(slots));
  return out;
} catch (...) {
  rethrow_as_error("materialize");  // no bare std:: exception leaves the library
}

}  // namespace torchport
