// Every module of the nn suite round-trips through every recorder with
// identical outputs; half precision halves the files; metadata mismatches
// and damaged files get their errors.

#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "../record/burn_modules.hpp"
#include "support/expect_error.hpp"
#include "support/fixtures.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/record/export.hpp"
#include "torchport/record/files.hpp"
#include "torchport/record/load.hpp"

using namespace torchport;
using torchport::test::expect_error;
using namespace burn_cases;
namespace fs = std::filesystem;

namespace {

const std::vector<std::pair<std::string, Recorder>>& every_recorder() {
  static const std::vector<std::pair<std::string, Recorder>> r = {
      {"model.mpk", NamedMpk{}},    {"model.mpk.gz", NamedMpkGz{}},
      {"model.json", PrettyJson{}}, {"model.json.gz", PrettyJsonGz{}},
      {"model.tpb", CompactBin{}},  {"model.tpb.gz", CompactBinGz{}},
  };
  return r;
}

// Loads `M` from a case file, saves it in every recorder (and to bytes),
// loads each back into a fresh `M`, and checks the records are identical.
template <class M>
void round_trip(const std::string& case_name, M fresh = M{}) {
  M original = fresh;
  load(original, case_file(case_name + ".pt"));
  const fs::path dir = test::temp_dir("record-files-" + case_name);
  for (const auto& [name, recorder] : every_recorder()) {
    SCOPED_TRACE(case_name + " " + name);
    save_record(original, dir / name, recorder, Precision::Keep);
    EXPECT_EQ(recorder_for_path(dir / name)->format, recorder.format);
    M back = fresh;
    const LoadReport r = load(back, dir / name);
    EXPECT_TRUE(r.clean()) << r.summary();
    EXPECT_TRUE(records_equal(original, back));
    EXPECT_EQ(open(dir / name).format_name(), recorder_name(recorder));
  }
  const auto bytes = save_record_to_bytes(original, CompactBin{}, Precision::Keep);
  M from_bytes = fresh;
  load_record_from_bytes(from_bytes, bytes);
  EXPECT_TRUE(records_equal(original, from_bytes));
  fs::remove_all(dir);
}

TEST(Recorders, EveryCaseRoundTripsThroughEveryRecorder) {
  round_trip<BatchNormNet>("batch_norm");
  round_trip<BufferNet>("boolean");
  round_trip<BufferNet>("integer");
  round_trip<ComplexNet>("complex_nested", ComplexNet::make());
  round_trip<TwoConvs<nn::Conv1d>>("conv1d");
  round_trip<TwoConvs<nn::ConvTranspose2d>>("conv_transpose2d");
  round_trip<EmbeddingNet>("embedding");
  round_trip<EnumNet>("enum_depthwise_true");
  round_trip<EnumNet>("enum_depthwise_false");
  round_trip<GroupNormNet>("group_norm");
  round_trip<LayerNormNet>("layer_norm_no_bias");
  round_trip<LinearNet>("linear");
  round_trip<SequentialNet>("non_contiguous_indexes");
  round_trip<AttentionNet>("multihead_attention");
  round_trip<RecurrentNet>("lstm");
}

TEST(Recorders, ForwardOutputsAreIdenticalAfterARoundTrip) {
  ComplexNet net = ComplexNet::make();
  load(net, case_file("complex_nested.pt"));
  const TensorCatalog io = open(case_file("complex_nested.io.pt"));
  const Tensor x = *io.find("input");
  const Tensor want = net.forward(x);
  const fs::path dir = test::temp_dir("record-files-forward");
  for (const auto& [name, recorder] : every_recorder()) {
    save_record(net, dir / name, recorder);
    ComplexNet back = ComplexNet::make();
    load(back, dir / name);
    EXPECT_TRUE(back.forward(x).equal(want)) << name;
  }
  fs::remove_all(dir);
}

TEST(Recorders, HalfPrecisionHalvesTheFileAndLoadsWithinTolerance) {
  ComplexNet net = ComplexNet::make();
  load(net, case_file("complex_nested.pt"));
  const fs::path dir = test::temp_dir("record-files-half");
  // File sizes on a module big enough for the tensors to dominate the header.
  LinearNet big;
  big.fc1 = nn::Linear(512, 512);
  big.fc2 = nn::Linear(512, 256, false);
  for (const auto& [name, recorder] : every_recorder()) {
    if (name.ends_with(".gz")) continue;  // compression blurs the sizes
    save_record(big, dir / ("full-" + name), recorder, Precision::Full);
    save_record(big, dir / ("half-" + name), recorder, Precision::Half);
    const double ratio = static_cast<double>(fs::file_size(dir / ("half-" + name))) /
                         static_cast<double>(fs::file_size(dir / ("full-" + name)));
    EXPECT_GT(ratio, 0.49) << name;
    EXPECT_LT(ratio, 0.52) << name;
  }
  save_record(net, dir / "half.tpb", CompactBin{}, Precision::Half);
  EXPECT_EQ(open(dir / "half.tpb").find("fc1.weight")->dtype(), DType::F16);
  ComplexNet back = ComplexNet::make();  // F32 fields: the load converts
  load(back, dir / "half.tpb");
  EXPECT_EQ(back.fc1.weight.dtype(), DType::F32);
  const TensorCatalog io = open(case_file("complex_nested.io.pt"));
  const Tensor got = back.forward(*io.find("input"));
  const Tensor want = *io.find("output_half_params");
  const Tensor g = got.to(DType::F64), w = want.to(DType::F64);
  for (std::int64_t i = 0; i < g.numel(); ++i)
    EXPECT_NEAR(g.span<double>()[static_cast<std::size_t>(i)],
                w.span<double>()[static_cast<std::size_t>(i)],
                1e-3 * std::max(1.0, std::fabs(w.span<double>()[static_cast<std::size_t>(i)])));
  fs::remove_all(dir);
}

TEST(Recorders, FilesCarryTheirMetadata) {
  LinearNet net;
  load(net, case_file("linear.pt"));
  const fs::path dir = test::temp_dir("record-files-meta");
  save_record(net, dir / "m.mpk", NamedMpk{}, Precision::Half);
  const TensorCatalog cat = open(dir / "m.mpk");
  EXPECT_EQ(cat.format_name(), "torchport-mpk");
  EXPECT_EQ(cat.metadata().at("torchport.type"), type_name<LinearNet>());
  EXPECT_EQ(cat.metadata().at("torchport.precision"), "half");
  EXPECT_EQ(cat.metadata().at("torchport.version"), "1");
  EXPECT_FALSE(cat.metadata().at("torchport.library").empty());
  fs::remove_all(dir);
}

TEST(Recorders, ALoadThatFailsSaysHowTheFileDiffers) {
  LinearNet net;
  load(net, case_file("linear.pt"));
  const fs::path dir = test::temp_dir("record-files-differ");
  save_record(net, dir / "linear.mpk", NamedMpk{}, Precision::Half);
  EmbeddingNet other;
  expect_error([&] { load(other, dir / "linear.mpk"); }, ErrorCode::missing_key,
               "the file holds a '" + type_name<LinearNet>() + "', this module is a '" +
                   type_name<EmbeddingNet>() + "'; it was saved at half precision");
  fs::remove_all(dir);
}

TEST(Recorders, NewerFormatVersionsAreRefused) {
  LinearNet net;
  load(net, case_file("linear.pt"));
  auto bytes = save_record_to_bytes(net, CompactBin{});
  bytes[4] = std::byte{9};  // the format version
  LinearNet back;
  expect_error([&] { load_record_from_bytes(back, bytes); }, ErrorCode::unsupported,
               "format version 9");
  auto json = save_record_to_bytes(net, PrettyJson{});
  std::string text(reinterpret_cast<const char*>(json.data()), json.size());
  const auto at = text.find("\"version\": 1");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 12, "\"version\": 7");
  std::vector<std::byte> edited(text.size());
  std::memcpy(edited.data(), text.data(), text.size());
  expect_error([&] { load_record_from_bytes(back, edited); }, ErrorCode::unsupported,
               "record format version 7");
}

TEST(Recorders, UntypedCheckpointsConvertLosslessly) {
  const TensorCatalog cat = open(test::fixture("dtypes.pt"));
  Value flat = Value::dict();
  for (const auto& t : cat.tensors()) flat.insert(Value::str(t.name), Value::tensor(t.tensor));
  const fs::path dir = test::temp_dir("record-files-untyped");
  for (const auto& [name, recorder] : every_recorder()) {
    write_record(flat, dir / name, recorder, {});
    const TensorCatalog back = open(dir / name);
    ASSERT_EQ(back.size(), cat.size()) << name;
    for (const auto& t : cat.tensors())
      EXPECT_TRUE(back.find(t.name)->equal(t.tensor)) << name << " " << t.name;
  }
  fs::remove_all(dir);
}

TEST(Recorders, CompactBinaryIsZeroCopyAndAligned) {
  ComplexNet net = ComplexNet::make();
  load(net, case_file("complex_nested.pt"));
  const fs::path dir = test::temp_dir("record-files-zero-copy");
  save_record(net, dir / "m.tpb", CompactBin{},
              Precision::Keep);  // the file's dtypes are the module's
  ComplexNet back = ComplexNet::make();
  const LoadReport r = load(back, dir / "m.tpb");
  EXPECT_EQ(r.zero_copy_bytes, r.bytes);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(back.fc1.weight.bytes().data()) % 64, 0u);
  fs::remove_all(dir);
}

TEST(Recorders, DamagedFilesAreRefused) {
  LinearNet net;
  load(net, case_file("linear.pt"));
  const auto bin = save_record_to_bytes(net, CompactBin{});
  LinearNet back;
  auto truncated = bin;
  truncated.resize(bin.size() - 70);
  expect_error([&] { load_record_from_bytes(back, truncated); }, ErrorCode::truncated, "runs past");
  auto bad_header = bin;
  bad_header.resize(20);
  expect_error([&] { load_record_from_bytes(back, bad_header); }, ErrorCode::truncated, "header");
  const auto mpk = save_record_to_bytes(net, NamedMpk{});
  auto cut = mpk;
  cut.resize(mpk.size() / 2);
  expect_error([&] { load_record_from_bytes(back, cut); }, ErrorCode::truncated,
               "MessagePack data ends early");
  const auto gz = save_record_to_bytes(net, NamedMpkGz{});
  auto gz_cut = gz;
  gz_cut.resize(gz.size() - 12);
  expect_error([&] { load_record_from_bytes(back, gz_cut); }, ErrorCode::truncated,
               "gzip stream ends early");
  auto json = save_record_to_bytes(net, PrettyJson{});
  std::string text(reinterpret_cast<const char*>(json.data()), json.size());
  const auto at = text.find("\"data\": \"");
  text[at + 9] = '*';
  std::vector<std::byte> edited(text.size());
  std::memcpy(edited.data(), text.data(), text.size());
  expect_error([&] { load_record_from_bytes(back, edited); }, ErrorCode::corrupt, "outside base64");
  // A number JSON cannot hold (found by fuzz_record: it escaped as a library exception).
  const std::string huge = "{\"format\": \"torchport-json\", \"version\": 5E555555527777342048}";
  std::vector<std::byte> overflow(huge.size());
  std::memcpy(overflow.data(), huge.data(), huge.size());
  expect_error([&] { load_record_from_bytes(back, overflow); }, ErrorCode::corrupt,
               "number overflow");
}

// The marker maps a record writes for kinds it has no native form for
// (docs/format.md) are checked when read: a malformed one is corrupt,
// naming the marker, never taken for something else.
TEST(Recorders, MalformedMarkersAreCorrupt) {
  const fs::path dir = test::temp_dir("record-files-markers");
  const auto json_record = [&](const std::string& record) {
    const fs::path p = dir / "m.json";
    std::FILE* f = std::fopen(p.c_str(), "wb");
    const std::string text =
        R"({"format": "torchport-json", "version": 1, "record": )" + record + "}";
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    return p;
  };
  for (const auto& [record, why] : std::vector<std::pair<std::string, std::string>>{
           {R"({"a": {"__object__": 5}})", "needs 'class' and 'args'"},
           {R"({"a": {"__object__": {"class": ["m"], "args": []}}})", "expected 2 items"},
           {R"({"a": {"__dict__": [[1]]}})", "expected 2 items"},
           {R"({"a": {"__dict__": 3}})", "expected a list"},
           {R"({"a": {"__int__": [300]}})", "0-255"},
           {R"({"a": {"__float__": "two"}})", "nan, inf or -inf"},
           {R"({"a": {"__global__": [1, 2]}})", "two strings"},
       }) {
    SCOPED_TRACE(record);
    const std::string& text = record;  // not a structured binding: the lambda captures it
    expect_error([&] { (void)open(json_record(text)); }, ErrorCode::corrupt, why);
  }
  // Well-formed, they read back as the values they stand for.
  const TensorCatalog ok = open(json_record(
      R"({"s": {"__dict__": [[0, {"__tuple__": [1, 2]}]]}, "g": {"__global__": ["torch", "float32"]}})"));
  EXPECT_EQ(ok.root().repr(), "{'s': {0: (1, 2)}, 'g': torch.float32}");
  fs::remove_all(dir);
}

TEST(Recorders, WritesAreAtomic) {
  LinearNet net;
  load(net, case_file("linear.pt"));
  const fs::path dir = test::temp_dir("record-files-atomic");
  save_record(net, dir / "m.mpk", NamedMpk{});
  const auto before = fs::file_size(dir / "m.mpk");
  // A record cannot hold a tensor as a dict key: the save fails mid-way...
  Value tree = Value::dict();
  tree.insert(Value::tensor(Tensor::scalar(1.0f)), Value::integer(1));
  EXPECT_THROW(write_record(tree, dir / "m.mpk", PrettyJson{}, {}), Error);
  // ...and the old file is intact, with no temporary left behind.
  EXPECT_EQ(fs::file_size(dir / "m.mpk"), before);
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u);
  fs::remove_all(dir);
}

}  // namespace
