// Slices of checkpoint tensors (read_slice): every dtype, format and
// dimension against torch's narrow() (hashes written by
// make_slice_fixtures.py), views and shared storages, zero copy where the
// bytes allow it, only the needed bytes read, and the formats that cannot be
// sliced refused.

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "conversion_helpers.hpp"
#include "support/fixtures.hpp"
#include "support/sha256.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/record_file.hpp"
#include "torchport/formats/slice.hpp"

namespace fs = std::filesystem;
using namespace torchport;
using test::expect_error;

namespace {

fs::path slices_dir() {
  return fs::path(TORCHPORT_SLICE_FIXTURES);
}

const nlohmann::json& expected() {
  static const nlohmann::json j = test::read_json(slices_dir() / "slices.expected.json");
  return j;
}

// Every expected slice of every listed tensor of `cat` hashes as torch's
// narrow(), lazily and eagerly, and reads exactly its bytes.
void check_catalog(const TensorCatalog& cat, const nlohmann::json& names,
                   const nlohmann::json& table, const std::string& what) {
  std::size_t checked = 0;
  for (const auto& n : names) {
    const std::string name = n.get<std::string>();
    SCOPED_TRACE(what + " " + name);
    ASSERT_NE(cat.find(name), nullptr);
    for (const auto& row : table.at(name)) {
      const auto dim = row[0].get<std::int64_t>(), start = row[1].get<std::int64_t>(),
                 len = row[2].get<std::int64_t>();
      const std::string want = row[3].get<std::string>();
      SCOPED_TRACE("dim " + std::to_string(dim) + " [" + std::to_string(start) + ", +" +
                   std::to_string(len) + ")");
      const SliceRange r{start, len};
      const std::uint64_t nbytes =
          slice_nbytes(*cat.find(name), dim, std::span<const SliceRange>(&r, 1));
      auto counter = std::make_shared<ReadCounter>();
      const Tensor lazy = read_slice(cat, name, dim, start, len, {counter});
      EXPECT_EQ(test::tensor_sha256(lazy), want);
      EXPECT_EQ(counter->bytes(), nbytes);
      EXPECT_EQ(lazy.nbytes(), nbytes);
      auto counter2 = std::make_shared<ReadCounter>();
      const Tensor now =
          read_slice(cat, name, dim - cat.find(name)->dim(), start, len, {counter2, false});
      EXPECT_EQ(test::tensor_sha256(now), want);
      EXPECT_EQ(counter2->bytes(), nbytes);
      ++checked;
    }
  }
  EXPECT_GT(checked, 0u);
}

void check_file(const fs::path& path, const std::string& list) {
  check_catalog(open(path), expected().at("files").at(list), expected().at("tensors"), list);
}

// Bytes this process has read with read/pread so far (Linux's rchar), if
// the kernel reports it.
std::optional<std::uint64_t> bytes_read_by_process() {
  std::ifstream io("/proc/self/io");
  std::string key;
  std::uint64_t value = 0;
  while (io >> key >> value)
    if (key == "rchar:") return value;
  return std::nullopt;
}

}  // namespace

TEST(Slice, TorchZipEveryDtypeViewAndDimension) {
  check_file(slices_dir() / "slices.pt", "slices.pt");
}
TEST(Slice, LegacyFile) {
  check_file(slices_dir() / "slices_legacy.pt", "slices_legacy.pt");
}
TEST(Slice, Safetensors) {
  check_file(slices_dir() / "slices.safetensors", "slices.safetensors");
}
TEST(Slice, ShardedCheckpoint) {
  check_file(slices_dir() / "sharded", "sharded");
}

TEST(Slice, TarFormat) {
  const TensorCatalog cat = open(test::fixture("tar.pt"));
  nlohmann::json names = nlohmann::json::array();
  for (const auto& [name, rows] : expected().at("tar").items()) names.push_back(name);
  check_catalog(cat, names, expected().at("tar"), "tar");
}

TEST(Slice, OurRecords) {
  const fs::path dir = test::temp_dir("slice-records");
  const TensorCatalog src = open(slices_dir() / "slices.pt");
  const std::pair<Recorder, std::string> kinds[] = {{CompactBin{}, ".tpb"}, {NamedMpk{}, ".mpk"}};
  for (const auto& [rec, ext] : kinds) {
    const fs::path p = dir / ("slices" + ext);
    write_record(src, p, rec);
    check_catalog(open(p), expected().at("files").at("slices.pt"), expected().at("tensors"),
                  p.filename().string());
  }
  fs::remove_all(dir);
}

TEST(Slice, DimZeroOfAMappedTensorIsAZeroCopyView) {
  const TensorCatalog cat = open(slices_dir() / "slices.safetensors");
  auto counter = std::make_shared<ReadCounter>();
  const Tensor s = read_slice(cat, "wide", 0, 2, 4, {counter});
  EXPECT_EQ(s.storage().get(), cat.find("wide")->storage().get());  // the same mapping
  EXPECT_EQ(s.storage_offset(), cat.find("wide")->storage_offset() + 2 * 16);
  EXPECT_EQ(counter->bytes(), 4u * 16 * 2);
  EXPECT_EQ(counter->reads(), 1u);
}

TEST(Slice, OtherDimensionsGatherOneReadPerRun) {
  const TensorCatalog cat = open(slices_dir() / "slices.safetensors");
  auto counter = std::make_shared<ReadCounter>();
  const Tensor s = read_slice(cat, "wide", 1, 4, 8, {counter});  // BF16[8, 16] -> [8, 8]
  EXPECT_EQ(s.shape(), (Shape{8, 8}));
  EXPECT_NE(s.storage().get(), cat.find("wide")->storage().get());
  EXPECT_EQ(counter->reads(), 0u);  // lazy: nothing read yet
  EXPECT_EQ(test::tensor_sha256(s),
            test::tensor_sha256(cat.find("wide")->narrow(1, 4, 8).contiguous()));
  EXPECT_EQ(counter->reads(), 8u);  // one pread per row
  EXPECT_EQ(counter->bytes(), 8u * 8 * 2);
}

TEST(Slice, TheProcessReadsOnlyTheSlicesBytes) {
  // Counted by the kernel, not by us: the preads of a gathered slice, and
  // the copy of a zero-copy view, read exactly the slice's bytes (plus the
  // read of /proc/self/io itself, measured first).
  const TensorCatalog cat = open(slices_dir() / "slices.safetensors");
  if (!bytes_read_by_process()) GTEST_SKIP() << "no /proc/self/io";
  const Tensor& whole = *cat.find("wide");  // BF16[8, 16]
  const auto read_during = [](const auto& f) {
    const std::uint64_t a = *bytes_read_by_process(), b = *bytes_read_by_process();
    f();
    const std::uint64_t c = *bytes_read_by_process();
    return static_cast<double>(c - b) -
           static_cast<double>(b - a);  // minus one read of /proc/self/io
  };
  Tensor cols, rows;
  EXPECT_NEAR(read_during([&] {
                cols = read_slice(cat, "wide", 1, 4, 8, {nullptr, false});
              }),
              8 * 8 * 2, 4);
  EXPECT_NEAR(read_during([&] { rows = read_slice(cat, "wide", 0, 2, 3).clone(); }), 3 * 16 * 2, 4);
  EXPECT_TRUE(cols.equal(whole.narrow(1, 4, 8).contiguous()));
  EXPECT_TRUE(rows.equal(whole.narrow(0, 2, 3)));
}

TEST(Slice, UnalignedRecordsAreReadInPartNotMadeWhole) {
  // Legacy records follow an 8-byte count: deferred copies, made whole on
  // first access. A slice reads its part with pread and leaves them pending.
  const TensorCatalog cat = open(slices_dir() / "slices_legacy.pt");
  std::size_t checked = 0;
  for (const auto& [name, whole] : cat.tensors()) {
    if (!whole.storage()->pending() || whole.dim() != 2 || !whole.is_contiguous()) continue;
    SCOPED_TRACE(name);
    auto counter = std::make_shared<ReadCounter>();
    const Tensor s = read_slice(cat, name, 0, 1, 1, {counter, false});
    EXPECT_EQ(counter->bytes(), whole.nbytes() / static_cast<std::uint64_t>(whole.size(0)));
    EXPECT_TRUE(whole.storage()->pending());  // the record was not made whole
    EXPECT_EQ(test::tensor_sha256(s), test::tensor_sha256(whole.narrow(0, 1, 1).contiguous()));
    ++checked;
  }
  EXPECT_GT(checked, 0u) << "no unaligned record in the legacy fixture";
}

TEST(Slice, RangesConcatenateAlongTheDimension) {
  const TensorCatalog cat = open(slices_dir() / "slices.pt");
  const Tensor whole = cat.find("f32")->contiguous();  // F32[2, 3, 4]
  const std::vector<SliceRange> rs{{0, 1}, {3, 1}};
  auto counter = std::make_shared<ReadCounter>();
  const Tensor s = read_slice(cat, "f32", 2, rs, {counter});
  ASSERT_EQ(s.shape(), (Shape{2, 3, 2}));
  const auto a = whole.span<float>();
  const auto b = s.span<float>();
  for (std::int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(b[static_cast<std::size_t>(2 * i)], a[static_cast<std::size_t>(4 * i)]);
    EXPECT_EQ(b[static_cast<std::size_t>(2 * i + 1)], a[static_cast<std::size_t>(4 * i + 3)]);
  }
  EXPECT_EQ(counter->bytes(), 12u * 4);
  // Adjacent ranges merge into one: dim 0 of a contiguous tensor stays a view.
  const std::vector<SliceRange> adjacent{{0, 1}, {1, 1}};
  EXPECT_EQ(read_slice(cat, "f32", 0, adjacent).storage().get(), cat.find("f32")->storage().get());
}

TEST(Slice, SharedStoragesAndViewsReadTheirOwnElements) {
  const TensorCatalog cat = open(slices_dir() / "slices.pt");
  // tied_a and tied_b share a storage; the transposed view and the base too.
  const Tensor a = read_slice(cat, "tied_a", 0, 1, 2);
  const Tensor b = read_slice(cat, "tied_b", 0, 1, 2);
  EXPECT_TRUE(a.equal(b));
  const Tensor t = read_slice(cat, "transposed", 0, 2, 1);  // a column of base
  const Tensor c = read_slice(cat, "base", 1, 2, 1);
  EXPECT_TRUE(t.reshape({4}).equal(c.contiguous().reshape({4})));
}

TEST(Slice, DeflatedEntriesAreRefused) {
  const TensorCatalog cat = open(test::fixture("deflated.pt"));
  expect_error([&] { read_slice(cat, "weight", 0, 0, 1); }, ErrorCode::unsupported,
               {"weight", "deflated"});
}

TEST(Slice, BigEndianRecordsAreRefused) {
  const TensorCatalog cat = open(test::fixture("big_endian.pt"));
  expect_error([&] { read_slice(cat, "weight", 1, 0, 1); }, ErrorCode::unsupported,
               {"weight", "big-endian"});
}

TEST(Slice, GzippedRecordsAreRefused) {
  const fs::path dir = test::temp_dir("slice-gz");
  write_record(open(slices_dir() / "slices.pt"), dir / "r.tpb.gz", CompactBinGz{});
  const TensorCatalog cat = open(dir / "r.tpb.gz");
  expect_error([&] { read_slice(cat, "f32", 0, 0, 1); }, ErrorCode::unsupported, {"f32", "gzip"});
  fs::remove_all(dir);
}

TEST(Slice, BadArgumentsSayWhat) {
  const TensorCatalog cat = open(slices_dir() / "slices.pt");
  expect_error([&] { read_slice(cat, "f32", 3, 0, 1); }, ErrorCode::invalid_argument,
               {"f32", "dimension 3"});
  expect_error([&] { read_slice(cat, "f32", 0, 1, 2); }, ErrorCode::invalid_argument,
               {"outside its size 2"});
  expect_error([&] { read_slice(cat, "f32", 0, -1, 1); }, ErrorCode::invalid_argument, {"outside"});
  expect_error([&] { read_slice(cat, "nope", 0, 0, 1); }, ErrorCode::missing_key, {"nope"});
  const Tensor scalar = Tensor::scalar(1.0f);
  expect_error([&] { read_slice(scalar, 0, 0, 1); }, ErrorCode::invalid_argument, {"0-d"});
}
