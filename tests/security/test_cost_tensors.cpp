// Cost per tensor (issue 28): checkpoints of 1k, 4k and 16k small tensors
// opened, materialized, scanned, printed and written to every format, with
// the work counted, not timed: heap allocations and bytes allocated (this
// executable replaces the global operator new) and the library's own work
// counters. Each must grow at most linearly with the tensor count, and
// allocations per tensor stay under a budget that catches a new
// per-tensor cost.

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <new>
#include <string>

#include <malloc.h>

#include <gtest/gtest.h>

#include <torchport/torchport.hpp>

#include "support/fixtures.hpp"
#include "torchport/detail/work.hpp"

namespace {
std::atomic<std::uint64_t> g_allocations{0};
std::atomic<std::uint64_t> g_allocated_bytes{0};
// Bytes held now and the most held since the last reset (the usable size
// of each block, as malloc counts it: what the process pays).
std::atomic<std::int64_t> g_live{0};
std::atomic<std::int64_t> g_peak{0};
void* note_new(void* p) noexcept {
  if (p == nullptr) return p;
  const auto n = static_cast<std::int64_t>(malloc_usable_size(p));
  const std::int64_t now = g_live.fetch_add(n, std::memory_order_relaxed) + n;
  std::int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  return p;
}
void note_free(void* p) noexcept {
  if (p != nullptr)
    g_live.fetch_sub(static_cast<std::int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}
}  // namespace

// Every allocation of the process goes through these (the library's too).
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  g_allocated_bytes.fetch_add(n, std::memory_order_relaxed);
  if (void* p = note_new(std::malloc(n == 0 ? 1 : n))) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  return operator new(n);
}
// The nothrow forms too (std::stable_sort's temporary buffer uses them): a
// sanitizer's own would not pair with the delete below.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  g_allocated_bytes.fetch_add(n, std::memory_order_relaxed);
  return note_new(std::malloc(n == 0 ? 1 : n));
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept {
  return operator new(n, t);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  note_free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  note_free(p);
}
void operator delete(void* p) noexcept {
  note_free(p);
}
void operator delete[](void* p) noexcept {
  note_free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  note_free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  note_free(p);
}

namespace torchport::test {
namespace {

namespace fs = std::filesystem;

constexpr std::array<int, 3> kScales = {1, 4, 16};
constexpr std::int64_t kBase = 1000;  // tensors at 1x

// N tensors of 16 floats, one storage each, named as a mixture-of-experts
// layer names them.
TensorCatalog many(std::int64_t n) {
  std::vector<NamedTensor> t;
  t.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    Tensor x = Tensor::zeros(DType::F32, {16});
    x.mutable_data<float>()[0] = static_cast<float>(i);
    t.push_back({"layers." + std::to_string(i / 64) + ".experts." + std::to_string(i % 64) + ".w",
                 std::move(x)});
  }
  return TensorCatalog::from_tensors(Format::state_dict, std::move(t));
}

struct Work {
  std::uint64_t allocations = 0, bytes = 0, items = 0;
  std::int64_t peak = 0;  // most bytes held at once above what was held before
  std::uint64_t io = 0;   // system calls on files and pages (pread, preadv, madvise)
};

Work measure(const std::function<void()>& f) {
  detail::work().reset();
  const std::uint64_t a0 = g_allocations.load(), b0 = g_allocated_bytes.load();
  const std::int64_t live0 = g_live.load();
  g_peak.store(live0);
  f();
  return {g_allocations.load() - a0, g_allocated_bytes.load() - b0,
          detail::work().items_inserted.load() + detail::work().items_moved.load() +
              detail::work().values_printed.load() + detail::work().chars_printed.load(),
          g_peak.load() - live0,
          detail::work().file_reads.load() + detail::work().page_advice.load()};
}

// System calls on files and pages (issue 40): at most one per MiB of
// tensor data plus this many, at every scale; one a tensor (a pread per
// record, a madvise per tensor) is thousands.
constexpr std::uint64_t kCallsConstant = 32;

// From 1x to 4x and 4x to 16x each count may grow at most 5 times (linear:
// 4, quadratic: 16); and at 16x at most `per_tensor` allocations a tensor.
void expect_linear(const std::string& what, const std::array<Work, 3>& w, double per_tensor) {
  for (int i = 0; i < 2; ++i) {
    EXPECT_LE(w[i + 1].allocations, 5 * w[i].allocations + 64) << what << " allocations";
    EXPECT_LE(w[i + 1].bytes, 5 * w[i].bytes + 65536) << what << " bytes allocated";
    EXPECT_LE(w[i + 1].items, 5 * w[i].items + 4096) << what << " items";
  }
  for (int i = 0; i < 3; ++i) {
    const std::uint64_t tensor_bytes = static_cast<std::uint64_t>(kBase * kScales[i]) * 16 * 4;
    EXPECT_LE(w[i].io, kCallsConstant + tensor_bytes / (1u << 20))
        << what << " system calls at " << kBase * kScales[i] << " tensors";
  }
  const double n = static_cast<double>(kBase * kScales[2]);
  EXPECT_LE(static_cast<double>(w[2].allocations) / n, per_tensor) << what;
  for (int i = 0; i < 3; ++i)
    std::printf(
        "%-34s %6lld tensors: %9llu allocations (%5.1f a tensor), %11llu bytes (%6.0f a "
        "tensor), %9llu items, peak %6.0f a tensor, %5llu system calls\n",
        what.c_str(), static_cast<long long>(kBase * kScales[i]),
        static_cast<unsigned long long>(w[i].allocations),
        static_cast<double>(w[i].allocations) / static_cast<double>(kBase * kScales[i]),
        static_cast<unsigned long long>(w[i].bytes),
        static_cast<double>(w[i].bytes) / static_cast<double>(kBase * kScales[i]),
        static_cast<unsigned long long>(w[i].items),
        static_cast<double>(w[i].peak) / static_cast<double>(kBase * kScales[i]),
        static_cast<unsigned long long>(w[i].io));
}

class CostPerTensor : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(temp_dir("cost_tensors"));
    for (int i = 0; i < 3; ++i) {
      const std::string n = std::to_string(kScales[static_cast<std::size_t>(i)]);
      save(many(kBase * kScales[static_cast<std::size_t>(i)]), *dir_ / (n + ".pt"),
           SaveFormat::pytorch);
      save(many(kBase * kScales[static_cast<std::size_t>(i)]), *dir_ / (n + ".safetensors"),
           SaveFormat::safetensors);
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static fs::path file(int i, const char* ext) {
    return *dir_ / (std::to_string(kScales[static_cast<std::size_t>(i)]) + ext);
  }
  // Runs `f(i)` at each scale and checks it.
  static void check(const std::string& what, double per_tensor, const std::function<void(int)>& f) {
    std::array<Work, 3> w;
    for (int i = 0; i < 3; ++i) w[static_cast<std::size_t>(i)] = measure([&] { f(i); });
    expect_linear(what, w, per_tensor);
  }
  static fs::path* dir_;
};
fs::path* CostPerTensor::dir_ = nullptr;

// The budgets (allocations a tensor at 16k tensors) are twice what each
// step needed when they were set (open .pt 26, .safetensors 17, owned load
// 30, typed load 38, scan 28, to_json 27, convert to .safetensors 31, to .pt
// 54, to shards 46): a new per-tensor allocation in a hot path shows up.
TEST_F(CostPerTensor, OpenPt) {
  check("open .pt", 52, [](int i) { (void)open(file(i, ".pt")); });
}

TEST_F(CostPerTensor, OpenSafetensors) {
  check("open .safetensors", 34, [](int i) { (void)open(file(i, ".safetensors")); });
}

TEST_F(CostPerTensor, LoadOwned) {
  check("open + materialize .pt", 60,
        [](int i) { (void)materialize(open(file(i, ".pt")), Residence::owned); });
}

TEST_F(CostPerTensor, LoadOwnedByRanges) {
  // The file read with pread rather than mapped (MapOptions::pread).
  OpenOptions o;
  o.map.pread = true;
  check("open + materialize .pt, pread", 60,
        [&](int i) { (void)materialize(open(file(i, ".pt"), o), Residence::owned); });
}

// A typed load into a module declaring every tensor (its fields built
// before the count starts, as a user's model exists before it is loaded).
struct Expert {
  Tensor w;
  TORCHPORT_FIELDS(w)
};
struct Layer {
  std::vector<Expert> experts;
  TORCHPORT_FIELDS(experts)
};
struct Experts {
  std::vector<Layer> layers;
  TORCHPORT_FIELDS(layers)
};

// The typed load holds at most this many bytes a tensor at its peak beyond
// what opening the file holds (its catalogue: the file, as read): issue 40.
// It held 544 (a tree of values for the adapters, the keys copied into the
// provenance, a value per leaf), then 125 (the key trie it walks, built
// while the catalogue's value tree was alive). A load from a path now
// releases that tree before building the trie: its peak is open()'s (0 at
// 1k, 4k and 16k tensors); the margin is for the allocator's rounding.
constexpr double kTypedBeyondOpen = 16;
// And open() itself at most this many bytes a tensor at its peak, the end
// of the pickle: the tree the pickle builds (a dict entry, a key string
// and a tensor node, 270 bytes a tensor) and the tensors in it (a tensor,
// its shape and strides, its storage: 250). At 16k tensors: 617 while
// from_value kept the tree beside its list, 605 since it takes a state
// dict apart as it lists it (and a convert's peak, later, went from 689 to
// 623), 500 since value nodes and tensor bodies count their own
// references (no control block: a value 24 bytes, a key's node 64, a
// tensor's node 40, a tensor's body 104) and a storage keeps a ranged
// reader's fields only when it has one (80 bytes with its control block,
// from 104). Issue 40 wants 200 with the typed load: tensors without their
// own shape and stride vectors, and a pickle that does not build a node a
// tensor.
constexpr double kOpenPeak = 550;

TEST_F(CostPerTensor, TypedLoad) {
  std::array<Experts, 3> modules;
  for (int i = 0; i < 3; ++i) {
    const std::int64_t n = kBase * kScales[static_cast<std::size_t>(i)];
    Experts& m = modules[static_cast<std::size_t>(i)];
    m.layers.resize(static_cast<std::size_t>((n + 63) / 64));
    for (std::int64_t t = 0; t < n; ++t)
      m.layers[static_cast<std::size_t>(t / 64)].experts.push_back(
          {Tensor::empty(DType::F32, {16})});
  }
  std::array<Work, 3> opened, typed;
  for (std::size_t i = 0; i < 3; ++i) {
    opened[i] = measure([&] { (void)open(file(static_cast<int>(i), ".pt")); });
    typed[i] = measure([&] {
      // Owned: the bytes are copied out of the mapped file (the pending
      // copies, read together, count against the peak).
      const LoadReport r = load(modules[i], file(static_cast<int>(i), ".pt"),
                                LoadArgs{}.strict().residence(Residence::owned));
      EXPECT_EQ(r.tensors, static_cast<std::uint64_t>(kBase * kScales[i]));
    });
  }
  expect_linear("typed load .pt into a module", typed, 76);
  for (std::size_t i = 0; i < 3; ++i) {
    const double n = static_cast<double>(kBase * kScales[i]);
    const double beyond = static_cast<double>(typed[i].peak - opened[i].peak) / n;
    std::printf("typed load: peak %.0f bytes a tensor beyond open()'s %.0f\n", beyond,
                static_cast<double>(opened[i].peak) / n);
    if (i == 2) {
      EXPECT_LE(beyond, kTypedBeyondOpen) << "bytes a tensor beyond open()'s peak";
      EXPECT_LE(static_cast<double>(opened[i].peak) / n, kOpenPeak) << "open()'s peak a tensor";
    }
  }
}

TEST_F(CostPerTensor, Scan) {
  check("scan .pt", 56, [](int i) { (void)scan(file(i, ".pt")); });
}

TEST_F(CostPerTensor, PrintJson) {
  check("to_json of the tree", 54, [](int i) {
    const TensorCatalog c = open(file(i, ".pt"));
    (void)to_json(c.root(), 2);
  });
}

TEST_F(CostPerTensor, ConvertToSafetensors) {
  check("convert .pt to .safetensors", 62, [](int i) {
    save(open(file(i, ".pt")), *dir_ / "out.safetensors", SaveFormat::safetensors);
  });
}

TEST_F(CostPerTensor, ConvertToPt) {
  check("convert .pt to .pt", 108,
        [](int i) { save(open(file(i, ".pt")), *dir_ / "out.pt", SaveFormat::pytorch); });
}

TEST_F(CostPerTensor, ConvertToShards) {
  SaveOptions o;
  o.max_shard_size = 16 * 1024;  // about 250 tensors a shard: 4, 16, 64 shards
  check("convert .safetensors to shards", 92, [&](int i) {
    fs::remove_all(*dir_ / "shards");
    fs::create_directories(*dir_ / "shards");
    save(open(file(i, ".safetensors")), *dir_ / "shards" / "model.safetensors",
         SaveFormat::safetensors, o);
  });
}

}  // namespace
}  // namespace torchport::test
