// Every reader over a source read by ranges (MapOptions::pread, and bytes
// in memory read through a counting ByteSource) reads every committed
// fixture exactly as over the mapped file: the same tensors, bytes and
// values, or the same error. Opening reads only what the readers parse
// (directories, headers, pickles), never the tensors' bytes.

#include <filesystem>
#include <mutex>
#include <set>

#include <gtest/gtest.h>

#include "support/fixtures.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/save.hpp"
#include "torchport/formats/slice.hpp"

namespace fs = std::filesystem;
using namespace torchport;
using torchport::test::fixture;

namespace {

// Bytes in memory read by ranges, counting what is read.
class Counting final : public ByteSource {
 public:
  explicit Counting(std::vector<std::byte> b) : b_(std::move(b)) {}
  std::uint64_t size() const noexcept override { return b_.size(); }
  std::string_view kind() const noexcept override { return "counting"; }
  void read(std::uint64_t offset, std::span<std::byte> dst) const override {
    ASSERT_LE(offset + dst.size(), b_.size());
    std::memcpy(dst.data(), b_.data() + offset, dst.size());
    std::lock_guard lock(m_);
    bytes_ += dst.size();
    ++reads_;
  }
  std::uint64_t bytes() const {
    std::lock_guard lock(m_);
    return bytes_;
  }

 private:
  std::vector<std::byte> b_;
  mutable std::mutex m_;
  mutable std::uint64_t bytes_ = 0, reads_ = 0;
};

// What open() gives: every tensor (name, dtype, shape, bytes) and the
// object's repr, or the error's code and message.
std::string outcome(const std::function<TensorCatalog()>& open_it) {
  try {
    const TensorCatalog cat = open_it();
    std::string s = std::string(cat.format_name()) + "\n" + cat.root().repr(64) + "\n";
    for (const auto& [name, t] : cat.tensors()) {
      s += name + " " + t.description() + " ";
      if (!t.is_sparse() && !t.is_meta() && !t.is_quantized()) s += test::tensor_sha256(t);
      s += "\n";
    }
    return s;
  } catch (const Error& e) {
    return "error " + std::string(error_code_name(e.code())) + ": " + e.message();
  }
}

std::vector<fs::path> inputs() {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(fixture(""))) {
    const std::string n = e.path().filename().string();
    if (e.is_regular_file() && !n.ends_with(".json") && !n.ends_with(".py") && !n.ends_with(".md"))
      out.push_back(e.path());
    if (e.is_directory()) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(RangedSources, EveryFixtureReadsAsOverTheMappedFile) {
  std::size_t files = 0, catalogues = 0;
  for (const fs::path& p : inputs()) {
    SCOPED_TRACE(p.string());
    OpenOptions mapped, pread;
    pread.map.pread = true;
    const std::string want = outcome([&] { return open(p, mapped); });
    EXPECT_EQ(outcome([&] { return open(p, pread); }), want);
    if (fs::is_regular_file(p)) {
      auto counting = std::make_shared<Counting>(test::read_bytes(p));
      EXPECT_EQ(
          outcome([&] { return open(Source::from(counting, p.filename().string()), mapped); }),
          outcome([&] { return open(Source::map_file(p), mapped); }));
    }
    ++files;
    catalogues += !want.starts_with("error");
  }
  EXPECT_GT(files, 300u);
  EXPECT_GT(catalogues, 150u);
}

// Opening a checkpoint reads its directory, local headers and pickle (or
// its header): not one tensor byte until a tensor is used, then that
// tensor's bytes alone.
TEST(RangedSources, OpeningReadsNoTensorBytes) {
  const fs::path dir = test::temp_dir("ranged_open");
  std::vector<NamedTensor> tensors;
  for (int i = 0; i < 16; ++i) {
    Tensor t = Tensor::empty(DType::F32, {256, 1024});
    auto b = t.mutable_bytes();
    for (std::size_t k = 0; k < b.size(); ++k) b[k] = static_cast<std::byte>(k * 7 + i);
    tensors.push_back({"layers." + std::to_string(i) + ".weight", t});
  }
  const TensorCatalog made = TensorCatalog::from_tensors(Format::state_dict, tensors);
  for (const SaveFormat f : {SaveFormat::pytorch, SaveFormat::safetensors}) {
    const fs::path p = dir / (f == SaveFormat::pytorch ? "m.pt" : "m.safetensors");
    save(made, p, f);
    auto counting = std::make_shared<Counting>(test::read_bytes(p));
    const TensorCatalog cat = open(Source::from(counting, p.filename().string()));
    const std::uint64_t opened = counting->bytes();
    // 16 MiB of tensors: the 64 KiB the dispatch sniffs, the 64 KiB window
    // at the end where the zip's end record is looked for, 3 KB of pickle
    EXPECT_LT(opened, counting->size() / 50) << p;
    ASSERT_EQ(cat.size(), 16u);
    const Tensor& t = *cat.find("layers.3.weight");
    EXPECT_EQ(test::tensor_sha256(t), test::tensor_sha256(tensors[3].tensor));
    EXPECT_EQ(counting->bytes() - opened, t.nbytes()) << p;
    // A slice of rows reads those rows alone.
    const std::uint64_t before = counting->bytes();
    const Tensor rows = cat.find("layers.5.weight")->narrow(0, 64, 32);
    std::vector<std::byte> buf(rows.nbytes());
    rows.copy_to(buf);
    EXPECT_EQ(counting->bytes() - before, rows.nbytes()) << p;
    // A slice of columns reads its piece of each row, nothing between.
    const std::uint64_t before_cols = counting->bytes();
    SliceOptions now;
    now.lazy = false;
    const Tensor cols = read_slice(*cat.find("layers.6.weight"), 1, 256, 256, now);
    EXPECT_EQ(counting->bytes() - before_cols, cols.nbytes()) << p;
  }
}

}  // namespace
