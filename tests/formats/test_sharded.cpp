// Hugging Face sharded checkpoints: writing shards + index, reading them
// back through open() (index path or directory), and every bad index
// refused with its code, message and key.

#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "conversion_helpers.hpp"
#include "support/fixtures.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/save.hpp"
#include "torchport/formats/scan.hpp"

namespace fs = std::filesystem;
using namespace torchport;
using test::expect_error;
using test::expect_same_tensors;

namespace {

class Sharded : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir(std::string("sharded-") +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_text(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  // A safetensors shard holding `names`, each a U8[4].
  void shard(const std::string& file, const std::vector<std::string>& names) {
    std::vector<NamedTensor> ts;
    for (const auto& n : names) ts.push_back({n, Tensor::from<std::uint8_t>({1, 2, 3, 4}, {4})});
    save(TensorCatalog::from_tensors(Format::state_dict, ts), dir_ / file, SaveFormat::safetensors);
  }
  fs::path dir_;
};

// 10 F32 tensors of 400 bytes each.
std::vector<NamedTensor> layers() {
  std::vector<NamedTensor> out;
  for (unsigned i = 0; i < 10; ++i)
    out.push_back(
        {"layers." + std::to_string(i) + ".weight", test::patterned(DType::F32, {100}, i)});
  return out;
}

TEST_F(Sharded, SafetensorsShardsAndIndexRoundTrip) {
  const auto want = layers();
  SaveOptions o;
  o.max_shard_size = 1000;  // two 400-byte tensors per shard
  const SaveResult r = save(TensorCatalog::from_tensors(Format::state_dict, want),
                            dir_ / "model.safetensors", SaveFormat::safetensors, o);
  ASSERT_EQ(r.files.size(), 5u);
  EXPECT_EQ(r.files[0].filename(), "model-00001-of-00005.safetensors");
  EXPECT_EQ(r.files[4].filename(), "model-00005-of-00005.safetensors");
  EXPECT_EQ(r.index.filename(), "model.safetensors.index.json");
  EXPECT_EQ(r.tensor_bytes, 4000u);
  EXPECT_FALSE(fs::exists(dir_ / "model.safetensors"));

  const auto index = test::read_json(r.index);
  EXPECT_EQ(index["metadata"]["total_size"], 4000);
  EXPECT_EQ(index["weight_map"]["layers.0.weight"], "model-00001-of-00005.safetensors");
  EXPECT_EQ(index["weight_map"]["layers.1.weight"], "model-00001-of-00005.safetensors");
  EXPECT_EQ(index["weight_map"]["layers.9.weight"], "model-00005-of-00005.safetensors");

  for (const fs::path& p : {r.index, dir_}) {
    SCOPED_TRACE(p.string());
    const auto got = open(p);
    EXPECT_EQ(got.format_name(), "sharded-safetensors");
    expect_same_tensors(got, want);  // shard order, then in-shard order: the original order
    EXPECT_EQ(got.metadata().at("format"), "pt");
  }
  // Shards are mapped: tensors are views of the files, nothing copied.
  EXPECT_TRUE(open(dir_).tensors().front().tensor.storage()->borrowed());
}

TEST_F(Sharded, PytorchShardsKeepStorageSharingWithinAShard) {
  const Tensor base = test::patterned(DType::F32, {100}, 1);
  const std::vector<NamedTensor> want = {{"a", base},
                                         {"a_view", base.narrow(0, 10, 20)},
                                         {"b", test::patterned(DType::F32, {100}, 2)},
                                         {"c", test::patterned(DType::F32, {100}, 3)}};
  SaveOptions o;
  o.max_shard_size = 800;  // base (400) + its view (free) + b (400); then c
  const SaveResult r = save(TensorCatalog::from_tensors(Format::state_dict, want),
                            dir_ / "pytorch_model.bin", SaveFormat::pytorch, o);
  ASSERT_EQ(r.files.size(), 2u);
  EXPECT_EQ(r.files[0].filename(), "pytorch_model-00001-of-00002.bin");
  EXPECT_EQ(r.index.filename(), "pytorch_model.bin.index.json");
  const auto got = open(r.index);
  EXPECT_EQ(got.format_name(), "sharded-pytorch");
  expect_same_tensors(got, want);
  EXPECT_EQ(got.find("a")->storage(), got.find("a_view")->storage());
  EXPECT_EQ(test::read_json(r.index)["weight_map"]["c"], "pytorch_model-00002-of-00002.bin");
}

TEST_F(Sharded, ATensorLargerThanTheLimitGetsItsOwnShard) {
  const std::vector<NamedTensor> want = {{"small", test::patterned(DType::U8, {10}, 1)},
                                         {"huge", test::patterned(DType::U8, {5000}, 2)},
                                         {"tail", test::patterned(DType::U8, {10}, 3)}};
  SaveOptions o;
  o.max_shard_size = 100;
  const SaveResult r = save(TensorCatalog::from_tensors(Format::state_dict, want),
                            dir_ / "m.safetensors", SaveFormat::safetensors, o);
  ASSERT_EQ(r.files.size(), 3u);
  EXPECT_EQ(open(r.files[1]).tensors().front().name, "huge");
  expect_same_tensors(open(r.index), want);
}

TEST_F(Sharded, EverythingInOneShardWritesOneFileAndNoIndex) {
  SaveOptions o;
  o.max_shard_size = parse_byte_size("5GB");
  const SaveResult r = save(TensorCatalog::from_tensors(Format::state_dict, layers()),
                            dir_ / "model.safetensors", SaveFormat::safetensors, o);
  EXPECT_TRUE(r.index.empty());
  EXPECT_EQ(test::files_in(dir_), (std::vector<std::string>{"model.safetensors"}));
}

TEST_F(Sharded, ResavingRemovesTheLeftoversOfAnEarlierSave) {
  const auto model = TensorCatalog::from_tensors(Format::state_dict, layers());
  SaveOptions five, two;
  five.max_shard_size = 1000;
  two.max_shard_size = 2000;
  write_text("model-notes.txt", "mine");
  write_text("model-00009-of-00009.bin", "another format's shard");
  save(model, dir_ / "model.safetensors", SaveFormat::safetensors, five);
  ASSERT_TRUE(fs::exists(dir_ / "model-00005-of-00005.safetensors"));
  save(model, dir_ / "model.safetensors", SaveFormat::safetensors, two);
  EXPECT_EQ(test::files_in(dir_),
            (std::vector<std::string>{
                "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                "model-00009-of-00009.bin", "model-notes.txt", "model.safetensors.index.json"}));
  expect_same_tensors(open(dir_), layers());
  save(model, dir_ / "model.safetensors", SaveFormat::safetensors);  // one file now
  EXPECT_EQ(test::files_in(dir_),
            (std::vector<std::string>{"model-00009-of-00009.bin", "model-notes.txt",
                                      "model.safetensors"}));
}

TEST_F(Sharded, AFailedShardedSaveLeavesNothing) {
  auto failing = Storage::deferred(
      400, []() -> std::shared_ptr<Storage> { throw Error(ErrorCode::io, "disk gone"); });
  auto ts = layers();
  ts.push_back({"broken", Tensor(DType::F32, {100}, {1}, 0, failing)});
  SaveOptions o;
  o.max_shard_size = 1000;
  expect_error(
      [&] {
        save(TensorCatalog::from_tensors(Format::state_dict, ts), dir_ / "model.safetensors",
             SaveFormat::safetensors, o);
      },
      ErrorCode::io, {"disk gone"});
  EXPECT_TRUE(test::files_in(dir_).empty());
}

// A folder without an index, as transformers, PEFT, sentence-transformers
// and timm's save_for_hf lay it out: its one weights file, safetensors before
// the pickle, as those libraries load it.
TEST_F(Sharded, AModelFolderIsItsWeightsFile) {
  shard("model.safetensors", {"a"});
  save(TensorCatalog::from_tensors(Format::state_dict, layers()), dir_ / "pytorch_model.bin",
       SaveFormat::pytorch);
  write_text("config.json", "{}");
  write_text("optimizer.pt", "not read");
  const TensorCatalog c = open(dir_);
  EXPECT_EQ(c.format_name(), "safetensors");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c.metadata().at("torchport.folder_file"), "model.safetensors");
  fs::remove(dir_ / "model.safetensors");
  const TensorCatalog bin = open(dir_);
  EXPECT_EQ(bin.format_name(), "pytorch-zip");
  EXPECT_EQ(bin.size(), 10u);
  // A PEFT adapter folder.
  fs::remove(dir_ / "pytorch_model.bin");
  shard("adapter_model.safetensors", {"lora_A", "lora_B"});
  EXPECT_EQ(open(dir_).size(), 2u);
  // A scan of the folder judges the file it reads.
  EXPECT_EQ(scan(dir_).verdict, ScanVerdict::clean);
}

TEST_F(Sharded, AFolderOfTwoLayoutsIsAmbiguous) {
  shard("model.safetensors", {"a"});
  shard("adapter_model.safetensors", {"b"});
  expect_error([&] { (void)open(dir_); }, ErrorCode::ambiguous, {"adapter_model.safetensors"});
}

TEST_F(Sharded, AFolderWithNoWeightsSaysWhatItLookedFor) {
  write_text("config.json", "{}");
  expect_error([&] { (void)open(dir_); }, ErrorCode::not_a_checkpoint, {"model.safetensors"});
}

TEST_F(Sharded, AFolderWeightsFileMayNotLeaveTheFolder) {
  const fs::path outside = test::temp_dir("sharded-outside");
  save(TensorCatalog::from_tensors(Format::state_dict, layers()), outside / "w.safetensors",
       SaveFormat::safetensors);
  fs::create_symlink(outside / "w.safetensors", dir_ / "model.safetensors");
  expect_error([&] { (void)open(dir_); }, ErrorCode::invalid_argument, {"outside"});
  fs::remove_all(outside);
}

TEST(ByteSize, ParsesHuggingFaceSpellings) {
  EXPECT_EQ(parse_byte_size("5GB"), 5000000000u);
  EXPECT_EQ(parse_byte_size("500MB"), 500000000u);
  EXPECT_EQ(parse_byte_size("2GiB"), 2147483648u);
  EXPECT_EQ(parse_byte_size("10kB"), 10000u);
  EXPECT_EQ(parse_byte_size("1.5gb"), 1500000000u);
  EXPECT_EQ(parse_byte_size("4096"), 4096u);
  EXPECT_EQ(parse_byte_size("3 MiB"), 3145728u);
  for (const char* bad : {"", "GB", "5XB", "-5GB", "0", "1.2.3MB", "0.1B", "99999999999TB"})
    expect_error([&] { parse_byte_size(bad); }, ErrorCode::invalid_argument,
                 {"size '" + std::string(bad) + "'"});
}

// --- bad indexes -------------------------------------------------------------

TEST_F(Sharded, IndexWithoutWeightMap) {
  write_text("m.index.json", R"({"metadata": {}})");
  expect_error([&] { open(dir_ / "m.index.json"); }, ErrorCode::corrupt, {"no \"weight_map\""});
  write_text("m.index.json", R"({"weight_map": []})");
  expect_error([&] { open(dir_ / "m.index.json"); }, ErrorCode::corrupt, {"no \"weight_map\""});
  write_text("m.index.json", R"([1])");
  expect_error([&] { open(dir_ / "m.index.json"); }, ErrorCode::corrupt, {"not an object"});
}

TEST_F(Sharded, IndexNotJson) {
  write_text("m.index.json", R"({"weight_map": {"a": "s.safetensors",}})");
  const auto e = expect_error([&] { open(dir_ / "m.index.json"); }, ErrorCode::corrupt,
                              {"index is not valid JSON"});
  EXPECT_TRUE(e.offset().has_value());
}

TEST_F(Sharded, DuplicateNameInTheWeightMap) {
  shard("s.safetensors", {"a"});
  write_text("m.index.json", R"({"weight_map": {"a": "s.safetensors", "a": "t.safetensors"}})");
  const auto e =
      expect_error([&] { open(dir_ / "m.index.json"); }, ErrorCode::corrupt, {"'a' twice"});
  EXPECT_EQ(e.key(), "a");
}

TEST_F(Sharded, ShardNamesMustBePlainFileNames) {
  for (const char* name :
       {"../s.safetensors", "sub/s.safetensors", "/etc/passwd", "..", ".", "", "a\\\\b"}) {
    SCOPED_TRACE(name);
    write_text("m.index.json", std::string(R"({"weight_map": {"w": ")") + name + "\"}}");
    const auto e = expect_error([&] { open(dir_ / "m.index.json"); }, ErrorCode::corrupt,
                                {"not a plain file name"});
    EXPECT_EQ(e.key(), "w");
  }
  write_text("m.index.json", R"({"weight_map": {"w": 3}})");
  expect_error([&] { open(dir_ / "m.index.json"); }, ErrorCode::corrupt, {"not a shard file name"});
}

TEST_F(Sharded, MissingShardFile) {
  write_text("m.index.json", R"({"weight_map": {"w": "gone.safetensors"}})");
  const auto e = expect_error([&] { open(dir_ / "m.index.json"); }, ErrorCode::io,
                              {"shard 'gone.safetensors'", "1 tensors, e.g. 'w'", "No such file"});
  EXPECT_NE(e.where().find("m.index.json"), std::string::npos);
}

TEST_F(Sharded, BadShardReportsItsOwnError) {
  write_text("s.safetensors", std::string("\x05\0\0\0\0\0\0\0{\"a\":", 13));
  write_text("m.index.json", R"({"weight_map": {"w": "s.safetensors"}})");
  expect_error([&] { open(dir_ / "m.index.json"); }, ErrorCode::corrupt,
               {"shard 's.safetensors'", "not valid JSON"});
}

TEST_F(Sharded, TensorOfTheMapMissingFromItsShard) {
  shard("s1.safetensors", {"a"});
  write_text("m.index.json", R"({"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors"}})");
  const auto e = expect_error(
      [&] { open(dir_ / "m.index.json"); }, ErrorCode::corrupt,
      {"assigns this tensor to shard 's1.safetensors'", "no such tensor", "stale index"});
  EXPECT_EQ(e.key(), "b");
}

TEST_F(Sharded, ShardHoldingATensorAssignedElsewhere) {
  shard("s1.safetensors", {"a", "b"});
  shard("s2.safetensors", {"b"});
  write_text("m.index.json", R"({"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})");
  const auto e =
      expect_error([&] { open(dir_ / "m.index.json"); }, ErrorCode::corrupt,
                   {"shard 's1.safetensors' holds this tensor", "assigns it to 's2.safetensors'"});
  EXPECT_EQ(e.key(), "b");
}

TEST_F(Sharded, ShardHoldingATensorTheIndexDoesNotList) {
  shard("s1.safetensors", {"a", "extra"});
  write_text("m.index.json", R"({"weight_map": {"a": "s1.safetensors"}})");
  const auto e =
      expect_error([&] { open(dir_ / "m.index.json"); }, ErrorCode::corrupt, {"does not list it"});
  EXPECT_EQ(e.key(), "extra");
}

TEST_F(Sharded, DirectoryNeedsExactlyOneIndex) {
  shard("s1.safetensors", {"a"});
  expect_error([&] { open(dir_); }, ErrorCode::not_a_checkpoint,
               {"no *.index.json", "open that file"});
  write_text("a.index.json", R"({"weight_map": {"a": "s1.safetensors"}})");
  EXPECT_EQ(open(dir_).size(), 1u);
  write_text("b.index.json", R"({"weight_map": {"a": "s1.safetensors"}})");
  expect_error([&] { open(dir_); }, ErrorCode::invalid_argument,
               {"2 indexes", "a.index.json, b.index.json"});
}

TEST_F(Sharded, IndexLimits) {
  shard("s1.safetensors", {"a", "b"});
  write_text("m.index.json", R"({"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors"}})");
  OpenOptions small;
  small.limits.max_header_bytes = 10;
  expect_error([&] { open(dir_ / "m.index.json", small); }, ErrorCode::limit_exceeded,
               {"max_header_bytes = 10"});
  OpenOptions few;
  few.limits.max_tensors = 1;
  expect_error([&] { open(dir_ / "m.index.json", few); }, ErrorCode::limit_exceeded,
               {"max_tensors = 1"});
}

TEST_F(Sharded, ForcedFormatAndBytesOnly) {
  shard("s1.safetensors", {"a"});
  write_text("weights.json", R"({"weight_map": {"a": "s1.safetensors"}})");
  OpenOptions o;
  o.format = Format::sharded_safetensors;
  EXPECT_EQ(open(dir_ / "weights.json", o).format_name(), "sharded-safetensors");
  expect_error([&] { open(Source::from_buffer({}, "x"), o); }, ErrorCode::invalid_argument,
               {"read from a path"});
}

}  // namespace
