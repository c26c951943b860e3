// torch.export archives saved by torch 2.6's torch.export.save
// (tests/fixtures/export/make_export_fixtures.py): the catalogue holds the
// state dict's and the constants' tensors under the names
// torch.export.load gives them, bit for bit; the program is not read.

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "support/fixtures.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/scan.hpp"
#include "torchport/io/atomic_file.hpp"
#include "torchport/io/zip_writer.hpp"

using namespace torchport;

namespace {

class TorchExport : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchExport, ListsWhatTorchExportLoadGives) {
  const auto want = test::read_json(test::fixture("export/" + GetParam() + ".expected.json"));
  const auto path = test::fixture("export/" + GetParam() + ".pt2");
  const TensorCatalog cat = open(path);
  EXPECT_EQ(cat.format(), want["format"].get<std::string>());
  ASSERT_EQ(cat.size(), want["tensors"].size());
  for (std::size_t i = 0; i < cat.size(); ++i) {
    const auto& w = want["tensors"][i];
    const NamedTensor& t = cat.tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, w["name"].get<std::string>());
    EXPECT_EQ(dtype_name(t.tensor.dtype()), w["dtype"].get<std::string>());
    EXPECT_EQ(t.tensor.shape(), w["shape"].get<Shape>());
    EXPECT_EQ(test::tensor_sha256(t.tensor), w["sha256"].get<std::string>());
  }
  EXPECT_EQ(cat.metadata().at("torch_export.schema_version"),
            want["schema_version"].get<std::string>());
  // Its three pickles (weights, constants, example inputs) are judged.
  const ScanReport r = scan(path);
  EXPECT_EQ(r.verdict, ScanVerdict::clean) << scan_verdict_name(r.verdict);
}

INSTANTIATE_TEST_SUITE_P(Saved, TorchExport, ::testing::Values("conv_linear", "buffers"));

// An AOTInductor package (the PT2 archive layout: archive_format and
// compiled shared objects under data/aotinductor/): refused by name, and
// its shared object is code to a scan.
TEST(TorchExportLater, AotInductorPackageIsRefusedAndItsCodeListed) {
  const auto dir = test::temp_dir("aoti");
  const auto path = dir / "model.pt2";
  {
    AtomicFile f(path);
    ZipWriter z(f);
    const auto add = [&](std::string_view name, std::string_view text) {
      z.add_entry(name, std::as_bytes(std::span<const char>(text.data(), text.size())));
    };
    add("version", "0");
    add("archive_format", "pt2");
    add("data/aotinductor/model/model.so",
        "\x7f"
        "ELF (a shared object; it would run on load)");
    z.finish();
    f.commit();
  }
  try {
    (void)open(path);
    FAIL() << "an AOTInductor package was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("AOTInductor"), std::string::npos) << e.what();
  }
  const ScanReport r = scan(path);
  EXPECT_EQ(r.verdict, ScanVerdict::unsafe);
  bool listed = false;
  for (const auto& f : r.findings) listed = listed || f.reason == "compiled-code";
  EXPECT_TRUE(listed);
  std::filesystem::remove_all(dir);
}

// An export archive whose state dict is another export archive (each
// level would recurse, as deep as the file is long): refused at the
// second level. Each level ends with 70 KB of padding so that no inner end
// record lies in the last 64 KiB, where zip readers look for theirs.
TEST(TorchExportLater, NestedExportArchivesAreRefused) {
  const auto dir = test::temp_dir("pt2_nested");
  std::string inner = "not reached";
  const std::string pad(70000, 'p');
  for (int level = 0; level < 3; ++level) {
    const auto path = dir / "level.pt2";
    {
      AtomicFile f(path);
      ZipWriter z(f);
      const auto add = [&](std::string_view name, std::string_view text) {
        z.add_entry(name, std::as_bytes(std::span<const char>(text.data(), text.size())));
      };
      add("serialized_exported_program.json", "{}");
      add("serialized_state_dict.pt", inner);
      add("version", "8.2");
      add("extra_files/pad", pad);
      z.finish();
      f.commit();
    }
    std::ifstream in(path, std::ios::binary);
    inner.assign(std::istreambuf_iterator<char>(in), {});
  }
  try {
    (void)open(dir / "level.pt2");
    FAIL() << "nested export archives were read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::corrupt) << e.what();
    EXPECT_NE(std::string(e.what()).find("inside another"), std::string::npos) << e.what();
  }
  (void)scan(dir / "level.pt2");  // judged without recursing
  std::filesystem::remove_all(dir);
}

}  // namespace
