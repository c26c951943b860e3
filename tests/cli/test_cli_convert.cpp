// torchport convert and torchport diff, run as a user runs them: inputs
// are written with the library, outputs checked with it and with diff.

#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <span>

#include <sys/stat.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/conversion_helpers.hpp"
#include "support/fixtures.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/save.hpp"
#include "torchport/io/atomic_file.hpp"

namespace fs = std::filesystem;
using namespace torchport;
using test::run_command;

namespace {

// The entry of `name` in diff --json's "tensors".
nlohmann::json entry(const nlohmann::json& j, const std::string& name) {
  for (const auto& t : j["tensors"])
    if (t["name"] == name) return t;
  ADD_FAILURE() << "no tensor " << name << " in " << j.dump();
  return nlohmann::json::object();
}

class CliConvert : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir(std::string("cli-") +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string p(const std::string& name) const { return "'" + (dir_ / name).string() + "'"; }
  int tool(const std::string& args, std::string* out = nullptr) const {
    std::string local;
    const int rc = run_command(std::string(TORCHPORT_TOOL) + " " + args, out ? out : &local);
    return rc;
  }
  void write(const std::string& name, std::vector<NamedTensor> ts, SaveFormat f) const {
    save(TensorCatalog::from_tensors(Format::state_dict, std::move(ts)), dir_ / name, f);
  }
  fs::path dir_;
};

TEST_F(CliConvert, PytorchToSafetensorsAndBackIsBitExact) {
  auto want = test::views_and_ties();
  auto all = test::every_dtype(true);
  want.insert(want.end(), all.begin(), all.end());
  write("in.pt", want, SaveFormat::pytorch);
  std::string out;
  ASSERT_EQ(tool("convert " + p("in.pt") + " " + p("out.safetensors"), &out), 0) << out;
  EXPECT_NE(out.find("wrote"), std::string::npos) << out;
  EXPECT_NE(out.find(std::to_string(want.size()) + " tensors"), std::string::npos) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos);  // no progress bar without a terminal
  test::expect_same_tensors(open(dir_ / "out.safetensors"), want, true);
  ASSERT_EQ(tool("convert " + p("out.safetensors") + " " + p("back.pth"), &out), 0) << out;
  test::expect_same_tensors(open(dir_ / "back.pth"), want, true);
  // diff compares values as torch converts them, and torch converts
  // float4_e2m1fn_x2 to nothing: refused by name (exit 2). Without it, equal.
  EXPECT_EQ(tool("diff " + p("in.pt") + " " + p("back.pth"), &out), 2) << out;
  EXPECT_NE(out.find("float4_e2m1fn_x2"), std::string::npos) << out;
  for (const char* f : {"in.pt", "back.pth"})
    ASSERT_EQ(
        tool("convert " + p(f) + " " + p(std::string("no_f4_") + f) + " --exclude '^F4$'", &out), 0)
        << out;
  ASSERT_EQ(tool("diff " + p("no_f4_in.pt") + " " + p("no_f4_back.pth"), &out), 0) << out;
  EXPECT_NE(out.find("equal:"), std::string::npos) << out;
}

// `-` as output streams safetensors to standard output (the summary goes
// to standard error): the same bytes as written to a file. A PyTorch file
// (patched after each entry), shards, or a terminal are refused.
TEST_F(CliConvert, DashStreamsSafetensorsToStandardOutput) {
  write("in.pt", test::views_and_ties(), SaveFormat::pytorch);
  std::string out;
  ASSERT_EQ(tool("convert " + p("in.pt") + " " + p("file.safetensors"), &out), 0) << out;
  ASSERT_EQ(run_command("( " + std::string(TORCHPORT_TOOL) + " convert " + p("in.pt") + " - > " +
                            p("piped.safetensors") + " )",
                        &out),
            0)
      << out;
  EXPECT_NE(out.find("wrote <stdout> (safetensors)"), std::string::npos) << out;  // on stderr
  auto bytes = [&](const std::string& name) {
    std::ifstream f(dir_ / name, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(bytes("piped.safetensors"), bytes("file.safetensors"));
  // Standard input to standard output.
  ASSERT_EQ(run_command("( " + std::string(TORCHPORT_TOOL) + " convert - - -q < " + p("in.pt") +
                            " > " + p("both.safetensors") + " )",
                        &out),
            0)
      << out;
  EXPECT_EQ(bytes("both.safetensors"), bytes("file.safetensors"));
  EXPECT_EQ(tool("convert " + p("in.pt") + " - --format pytorch", &out), 2) << out;
  EXPECT_NE(out.find("cannot be written to standard output"), std::string::npos) << out;
  EXPECT_EQ(tool("convert " + p("in.pt") + " - --max-shard-size 1MB", &out), 2) << out;
}

// The library's stream: no temporary, in order; what must be patched
// afterwards (a PyTorch zip) is refused.
TEST_F(CliConvert, SaveStreamRefusesWhatMustBePatched) {
  try {
    save_stream(TensorCatalog::from_tensors(Format::state_dict, test::views_and_ties()), 1,
                "<stdout>", SaveFormat::pytorch);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported) << e.what();
  }
  AtomicFile s = AtomicFile::stream(1, "<stdout>");
  EXPECT_TRUE(s.is_stream());
  EXPECT_THROW(s.write_at(0, {}), Error);
}

TEST_F(CliConvert, SelectFilterRemapAndCast) {
  Value sd = Value::dict();
  const Tensor w = test::patterned(DType::F32, {3, 2}, 1);
  sd.insert(Value::str("model.layers.0.attn.weight"), Value::tensor(w));
  sd.insert(Value::str("model.layers.0.attn.bias"),
            Value::tensor(Tensor::from<float>({1, 2, 3}, {3})));
  sd.insert(Value::str("model.layers.1.mlp.weight"), Value::tensor(w.transpose(0, 1)));
  sd.insert(Value::str("model.rotary.inv_freq"), Value::tensor(Tensor::from<float>({1}, {1})));
  sd.insert(Value::str("model.ids"), Value::tensor(Tensor::from<std::int64_t>({7, 8}, {2})));
  Value root = Value::dict();
  root.insert(Value::str("state_dict"), sd);
  root.insert(Value::str("epoch"), Value::integer(4));
  save(TensorCatalog::from_value(Format::state_dict, root), dir_ / "ckpt.pt", SaveFormat::pytorch);

  std::string out;
  ASSERT_EQ(
      tool("convert " + p("ckpt.pt") + " " + p("m.safetensors") +
               " --top-level-key state_dict --include '^model\\.(layers|ids)' --exclude 'bias$'"
               " --remap '^model\\.' '' --remap 'layers\\.(\\d+)' 'h.$1' --dtype bf16",
           &out),
      0)
      << out;
  const auto got = open(dir_ / "m.safetensors");
  ASSERT_EQ(got.size(), 3u);
  ASSERT_NE(got.find("h.0.attn.weight"), nullptr);
  ASSERT_NE(got.find("h.1.mlp.weight"), nullptr);
  ASSERT_NE(got.find("ids"), nullptr);
  EXPECT_TRUE(got.find("h.0.attn.weight")->equal(w.to(DType::BF16)));
  EXPECT_TRUE(got.find("h.1.mlp.weight")->equal(w.transpose(0, 1).to(DType::BF16)));
  EXPECT_EQ(got.find("ids")->dtype(), DType::I64);  // --dtype casts floating tensors only
}

// safetensors keeps the state_dict's order (it was sorted by alignment,
// then name: num_batches_tracked first), so .pt -> safetensors -> .pt gives
// torch the names in their order, unaligned data and all.
TEST_F(CliConvert, SafetensorsKeepsTheStateDictsOrder) {
  const std::vector<NamedTensor> want = {
      {"conv.weight", test::patterned(DType::F32, {3, 1, 1, 1}, 1)},
      {"bn.weight", test::patterned(DType::F32, {3}, 2)},
      {"bn.num_batches_tracked", Tensor::from<std::int64_t>({5}, {})},  // at byte 24
      {"bn.half", test::patterned(DType::F16, {3}, 3)},                 // 6 bytes
      {"fc.weight", test::patterned(DType::F32, {2, 3}, 4)},            // at byte 38: unaligned
      {"a.bias", test::patterned(DType::F64, {2}, 5)},
  };
  write("in.pt", want, SaveFormat::pytorch);
  std::string out;
  ASSERT_EQ(tool("convert " + p("in.pt") + " " + p("m.safetensors"), &out), 0) << out;
  ASSERT_EQ(tool("convert " + p("m.safetensors") + " " + p("back.pt"), &out), 0) << out;
  for (const char* f : {"m.safetensors", "back.pt"}) {
    const TensorCatalog cat = open(dir_ / f);
    ASSERT_EQ(cat.size(), want.size()) << f;
    for (std::size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(cat.tensors()[i].name, want[i].name) << f;
      EXPECT_TRUE(cat.tensors()[i].tensor.equal(want[i].tensor)) << f << " " << want[i].name;
    }
  }
  EXPECT_EQ(tool("diff " + p("in.pt") + " " + p("back.pt"), &out), 0) << out;
}

TEST_F(CliConvert, ShardedOutAndInAgain) {
  std::vector<NamedTensor> want;
  for (unsigned i = 0; i < 6; ++i)
    want.push_back(
        {"l" + std::to_string(i), test::patterned(DType::F32, {64}, i)});  // 256 bytes each
  write("in.safetensors", want, SaveFormat::safetensors);
  fs::create_directory(dir_ / "shards");
  std::string out;
  ASSERT_EQ(tool("convert " + p("in.safetensors") + " " + p("shards/pytorch_model.bin") +
                     " --max-shard-size 600B",
                 &out),
            0)
      << out;
  EXPECT_NE(out.find("3 shards"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(dir_ / "shards" / "pytorch_model-00003-of-00003.bin"));
  EXPECT_TRUE(fs::exists(dir_ / "shards" / "pytorch_model.bin.index.json"));
  ASSERT_EQ(tool("convert " + p("shards") + " " + p("single.safetensors"), &out), 0) << out;
  ASSERT_EQ(tool("diff " + p("in.safetensors") + " " + p("single.safetensors"), &out), 0) << out;
  ASSERT_EQ(
      tool("diff " + p("in.safetensors") + " " + p("shards/pytorch_model.bin.index.json"), &out), 0)
      << out;
}

TEST_F(CliConvert, DirectoryOutputGetsHuggingFaceNames) {
  write("in.pt", {{"w", Tensor::scalar(1.5f)}}, SaveFormat::pytorch);
  fs::create_directory(dir_ / "o");
  std::string out;
  ASSERT_EQ(tool("convert " + p("in.pt") + " " + p("o"), &out), 0);
  EXPECT_TRUE(fs::exists(dir_ / "o" / "model.safetensors"));
  // The summary names what was written (one tensor: singular).
  EXPECT_NE(out.find("o/model.safetensors (safetensors; the names chosen in the directory): 1 "
                     "tensor, "),
            std::string::npos)
      << out;
  // Shards: the message names the shards and their index, never a
  // 'model.safetensors' that was not written.
  write("two.pt",
        {{"a", test::patterned(DType::F32, {64}, 1)}, {"b", test::patterned(DType::F32, {64}, 2)}},
        SaveFormat::pytorch);
  fs::create_directory(dir_ / "s");
  ASSERT_EQ(tool("convert " + p("two.pt") + " " + p("s") + " --max-shard-size 300B", &out), 0);
  EXPECT_NE(out.find("wrote 2 shards + "), std::string::npos) << out;
  EXPECT_NE(out.find("s/model.safetensors.index.json"), std::string::npos) << out;
  EXPECT_EQ(out.find("writing"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "s" / "model.safetensors"));
  ASSERT_EQ(tool("convert " + p("in.pt") + " " + p("o") + " --format pytorch"), 0);
  EXPECT_TRUE(fs::exists(dir_ / "o" / "pytorch_model.bin"));
  EXPECT_EQ(open(dir_ / "o" / "pytorch_model.bin").format_name(), "pytorch-zip");
}

TEST_F(CliConvert, RecordOutputsByExtension) {
  const auto want = test::views_and_ties();
  write("in.pt", want, SaveFormat::pytorch);
  for (const char* name : {"r.tpb", "r.mpk.gz", "r.json"}) {
    SCOPED_TRACE(name);
    std::string out;
    ASSERT_EQ(tool("convert " + p("in.pt") + " " + p(name), &out), 0) << out;
    EXPECT_NE(out.find("torchport-"), std::string::npos) << out;
    ASSERT_EQ(tool("diff " + p("in.pt") + " " + p(name), &out), 0) << out;
  }
  std::string out;
  EXPECT_EQ(tool("convert " + p("in.pt") + " " + p("r2.tpb") + " --max-shard-size 1MB", &out), 2)
      << out;
}

TEST_F(CliConvert, UsageErrorsExitTwo) {
  write("in.pt", {{"w", Tensor::scalar(1.5f)}}, SaveFormat::pytorch);
  const std::string in = p("in.pt");
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"convert " + in + " " + p("out.xyz"), "cannot tell the output format"},
      {"convert " + in + " " + p("o.pt") + " --format onnx", "--format"},
      {"convert " + in + " " + p("o.pt") + " --dtype float99", "unknown dtype 'float99'"},
      {"convert " + in + " " + p("o.pt") + " --dtype int32", "only floating dtypes"},
      {"convert " + in + " " + p("o.pt") + " --remap '(' x", "invalid regular expression '('"},
      {"convert " + in + " " + p("o.pt") + " --remap '(a)' '$2'", "group 2"},
      {"convert " + in + " " + p("o.pt") + " --include '['", "invalid regular expression '['"},
      {"convert " + in + " " + p("o.pt") + " --max-shard-size 5XB", "size '5XB'"},
      {"convert " + p("missing.pt") + " " + p("o.pt"), "missing.pt"},
      {"convert " + in, "out"},
      {"diff " + in + " " + in + " --atol -1", "non-negative"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    std::string out;
    EXPECT_EQ(tool(c.args, &out), 2) << out;
    EXPECT_NE(out.find(c.message), std::string::npos) << out;
  }
  EXPECT_EQ(test::files_in(dir_), (std::vector<std::string>{"in.pt"}));
}

TEST_F(CliConvert, BadInputExitsOneAndKeepsTheOldOutput) {
  write("old.safetensors", {{"w", Tensor::scalar(2.5f)}}, SaveFormat::safetensors);
  const auto before = test::read_bytes(dir_ / "old.safetensors");
  test::write_bytes(
      dir_ / "bad.safetensors",
      test::safetensors_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,9]}})", 9));
  std::string out;
  EXPECT_EQ(tool("convert --force " + p("bad.safetensors") + " " + p("old.safetensors"), &out), 1)
      << out;
  EXPECT_NE(out.find("F32[2] needs 8 bytes"), std::string::npos) << out;
  EXPECT_EQ(test::read_bytes(dir_ / "old.safetensors"), before);
  EXPECT_EQ(test::files_in(dir_), (std::vector<std::string>{"bad.safetensors", "old.safetensors"}));
}

TEST_F(CliConvert, BareTensorIsWrittenUnderItsDocumentedName) {
  // torch.save(tensor): the catalogue names it "tensor" (kRootTensorName),
  // which formats that store tensors by name write.
  for (const char* in : {"bare_zip.pt", "bare_legacy.pt", "legacy_protocol1_bare.pt"}) {
    SCOPED_TRACE(in);
    const std::string src =
        "'" + test::fixture(std::string("pickle_semantics/") + in).string() + "'";
    std::string out;
    ASSERT_EQ(tool("inspect " + src, &out), 0) << out;
    EXPECT_NE(out.find("tensor"), std::string::npos) << out;
    for (const char* to : {"o.safetensors", "o.pt", "o.mpk"}) {
      ASSERT_EQ(tool("convert --force " + src + " " + p(to), &out), 0) << to << ": " << out;
      const TensorCatalog cat = open(dir_ / to);
      ASSERT_EQ(cat.size(), 1u) << to;
      EXPECT_EQ(cat.tensors()[0].name, "tensor") << to;
      ASSERT_EQ(tool("diff " + src + " " + p(to), &out), 0) << to << ": " << out;
    }
  }
}

TEST_F(CliConvert, ContentErrorsExitOneWhateverTheirCode) {
  // Exit status 2 is for a command line the tool cannot act on; what a
  // file holds is exit status 1, also when it conflicts with the options.
  write("in.pt", {{"a", Tensor::scalar(1.5f)}, {"b", Tensor::scalar(2.5f)}}, SaveFormat::pytorch);
  std::string out;
  EXPECT_EQ(tool("convert " + p("in.pt") + " " + p("o.safetensors") + " --remap '^a$' ''", &out), 1)
      << out;
  EXPECT_NE(out.find("empty name"), std::string::npos) << out;
  EXPECT_EQ(tool("convert " + p("in.pt") + " " + p("o.safetensors") + " --remap '^[ab]$' c", &out),
            1)
      << out;
  EXPECT_NE(out.find("are renamed to 'c'"), std::string::npos) << out;
  const std::string p0 = "'" + test::fixture("pickle_semantics/legacy_protocol0.pt").string() + "'";
  EXPECT_EQ(tool("inspect " + p0, &out), 1) << out;
  EXPECT_NE(out.find("pickle protocol 0"), std::string::npos) << out;
  EXPECT_EQ(tool("convert " + p0 + " " + p("o.safetensors"), &out), 1) << out;
  EXPECT_EQ(
      tool("convert " + p("in.pt") + " " + p("o.safetensors") + " --top-level-key nope", &out), 1)
      << out;
}

// --- diff ----------------------------------------------------------------------

TEST_F(CliConvert, DiffReportsEveryKindOfDifference) {
  const Tensor w = Tensor::from<float>({1, 2, 3, 4}, {2, 2});
  write("a.safetensors",
        {{"same", w}, {"changed", w}, {"reshaped", w}, {"retyped", w}, {"only_a", w}},
        SaveFormat::safetensors);
  write("b.pt",
        {{"same", w},
         {"changed", Tensor::from<float>({1, 2, 3, 4.5f}, {2, 2})},
         {"reshaped", w.reshape({4})},
         {"retyped", w.to(DType::F64)},
         {"only_b", w}},
        SaveFormat::pytorch);
  std::string out;
  EXPECT_EQ(tool("diff " + p("a.safetensors") + " " + p("b.pt"), &out), 1);
  EXPECT_NE(out.find("only in A: only_a"), std::string::npos) << out;
  EXPECT_NE(out.find("only in B: only_b"), std::string::npos) << out;
  EXPECT_NE(out.find("changed: 1 of 4 elements differ (first at [1, 1]: 4 vs 4.5), max abs 0.5, "
                     "max rel 0.111"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("reshaped: F32[2, 2] vs F32[4]: not compared (shapes differ)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("retyped: dtype F32 vs F64"), std::string::npos) << out;
  EXPECT_NE(out.find("different: 1 of 4 common tensors identical"), std::string::npos) << out;

  ASSERT_EQ(tool("diff --json " + p("a.safetensors") + " " + p("b.pt"), &out), 1);
  const auto j = nlohmann::json::parse(out);
  EXPECT_FALSE(j["equal"].get<bool>());
  EXPECT_EQ(j["only_in_a"], nlohmann::json::array({"only_a"}));
  EXPECT_EQ(j["only_in_b"], nlohmann::json::array({"only_b"}));
  ASSERT_EQ(j["tensors"].size(), 4u);
  const auto changed = entry(j, "changed");
  EXPECT_FALSE(changed["equal"].get<bool>());
  EXPECT_EQ(changed["mismatched"], 1);
  EXPECT_DOUBLE_EQ(changed["max_abs"].get<double>(), 0.5);
  EXPECT_EQ(changed["first_mismatch"]["index"], nlohmann::json::array({1, 1}));
  EXPECT_EQ(changed["first_mismatch"]["a"], "4");
  EXPECT_EQ(changed["first_mismatch"]["b"], "4.5");
  // --quiet: the exit status alone.
  EXPECT_EQ(tool("diff -q " + p("a.safetensors") + " " + p("b.pt"), &out), 1);
  EXPECT_EQ(out, "");
  EXPECT_EQ(entry(j, "reshaped")["shape_b"], nlohmann::json::array({4}));
  EXPECT_FALSE(entry(j, "reshaped").contains("max_abs"));
  EXPECT_EQ(entry(j, "retyped")["dtype_b"], "F64");
  EXPECT_TRUE(entry(j, "same")["equal"].get<bool>());
}

TEST_F(CliConvert, DiffTolerancesAndDtypes) {
  const Tensor a = Tensor::from<float>({1.0f, 100.0f, -3.0f}, {3});
  write("a.safetensors", {{"x", a}}, SaveFormat::safetensors);
  write("b.safetensors", {{"x", Tensor::from<float>({1.001f, 100.05f, -3.0f}, {3})}},
        SaveFormat::safetensors);
  write("bf.safetensors", {{"x", a.to(DType::BF16)}}, SaveFormat::safetensors);
  std::string out;
  EXPECT_EQ(tool("diff " + p("a.safetensors") + " " + p("b.safetensors"), &out), 1) << out;
  EXPECT_EQ(tool("diff " + p("a.safetensors") + " " + p("b.safetensors") + " --atol 0.01", &out), 1)
      << out;  // 0.05 off
  EXPECT_EQ(
      tool("diff " + p("a.safetensors") + " " + p("b.safetensors") + " --atol 0.01 --rtol 0.001",
           &out),
      0)
      << out;
  EXPECT_NE(out.find("within tolerance"), std::string::npos) << out;
  // The same values in another dtype: a difference when exact, equal within a tolerance.
  EXPECT_EQ(tool("diff " + p("a.safetensors") + " " + p("bf.safetensors"), &out), 1) << out;
  EXPECT_NE(out.find("dtype F32 vs BF16; values equal"), std::string::npos) << out;
  EXPECT_EQ(tool("diff " + p("a.safetensors") + " " + p("bf.safetensors") + " --atol 1e-9", &out),
            0)
      << out;
}

// With a tolerance, tensors within it are counted in one line (with the
// dtype changes they carry) instead of one line each; those beyond it are
// listed. (Every tensor of a BF16 copy printed its own "within tolerance".)
TEST_F(CliConvert, DiffSummarisesTensorsWithinTolerance) {
  std::vector<NamedTensor> a, b;
  for (unsigned i = 0; i < 20; ++i) {
    std::vector<float> v(8);
    for (unsigned k = 0; k < 8; ++k)
      v[k] = 0.1f * static_cast<float>(i) + 0.0123f * static_cast<float>(k);
    const Tensor t = Tensor::from(std::span<const float>(v), {8});
    a.push_back({"w" + std::to_string(i), t});
    b.push_back({"w" + std::to_string(i), t.to(DType::BF16)});
  }
  b[7].tensor = Tensor::from<float>({9, 9, 9, 9, 9, 9, 9, 9}, {8}).to(DType::BF16);
  write("a.safetensors", a, SaveFormat::safetensors);
  write("b.safetensors", b, SaveFormat::safetensors);
  std::string out;
  EXPECT_EQ(
      tool("diff " + p("a.safetensors") + " " + p("b.safetensors") + " --atol 1e-2 --rtol 1e-2",
           &out),
      1)
      << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3)
      << out;  // w7, the tolerance line, the verdict
  EXPECT_NE(out.find("w7: dtype F32 vs BF16; 8 of 8 elements differ"), std::string::npos) << out;
  EXPECT_NE(out.find("19 tensors within tolerance (max abs "), std::string::npos) << out;
  EXPECT_NE(out.find("; dtype F32 vs BF16 in 19; --json lists each"), std::string::npos) << out;
  EXPECT_NE(out.find("different: 19 of 20 common tensors within tolerance"), std::string::npos)
      << out;
  ASSERT_EQ(
      tool("diff --json " + p("a.safetensors") + " " + p("b.safetensors") + " --atol 1e-2", &out),
      1);
  EXPECT_EQ(nlohmann::json::parse(out)["tensors"].size(), 20u);
}

// A DataParallel checkpoint against a plain one: --remap gives both the
// same names (it compared 0 of 0 common tensors); --top-level-key selects
// in each input that has the key.
TEST_F(CliConvert, DiffRemapsAndSelectsBothInputs) {
  const Tensor w = test::patterned(DType::F32, {2, 3}, 1),
               bias = test::patterned(DType::F32, {2}, 2);
  write("plain.pt", {{"fc.weight", w}, {"fc.bias", bias}}, SaveFormat::pytorch);
  write("dp.pt", {{"module.fc.weight", w}, {"module.fc.bias", bias}}, SaveFormat::pytorch);
  Value ck = Value::dict();
  Value sd = Value::dict();
  sd.insert(Value::str("module.fc.weight"), Value::tensor(w));
  sd.insert(Value::str("module.fc.bias"), Value::tensor(bias));
  ck.insert(Value::str("epoch"), Value::integer(3));
  ck.insert(Value::str("state_dict"), sd);
  SaveOptions whole;
  whole.keep_tree = true;
  save(TensorCatalog::from_value(Format::state_dict, ck), dir_ / "ckpt.pt", SaveFormat::pytorch,
       whole);
  std::string out;
  EXPECT_EQ(tool("diff " + p("dp.pt") + " " + p("plain.pt"), &out), 1) << out;
  EXPECT_NE(out.find("0 of 0 common tensors"), std::string::npos) << out;
  EXPECT_EQ(tool("diff " + p("dp.pt") + " " + p("plain.pt") + " --remap '^module\\.' ''", &out), 0)
      << out;
  EXPECT_NE(out.find("equal: 2 of 2 common tensors identical"), std::string::npos) << out;
  EXPECT_EQ(tool("diff " + p("ckpt.pt") + " " + p("plain.pt") +
                     " --top-level-key state_dict --remap '^module\\.' ''",
                 &out),
            0)
      << out;
  EXPECT_NE(out.find("plain.pt: no 'state_dict' at the top: compared whole"), std::string::npos)
      << out;
  EXPECT_EQ(tool("diff " + p("dp.pt") + " " + p("plain.pt") + " --top-level-key nope", &out), 2)
      << out;
  EXPECT_EQ(out.rfind("torchport: " + (dir_ / "dp.pt").string() + ": neither input has 'nope'", 0),
            0u)
      << out;
  EXPECT_EQ(tool("diff " + p("dp.pt") + " " + p("plain.pt") + " --remap '(' x", &out), 2) << out;
}

// torch's bits dtypes hold raw bits: two of one dtype compare byte for byte
// (it exited 2: "cannot convert BITS8 to F64"), against numbers they are
// not compared.
TEST_F(CliConvert, DiffComparesRawBitsByteForByte) {
  const std::string bits = "'" + test::fixture("torch26/bits.pt").string() + "'";
  std::string out;
  EXPECT_EQ(tool("diff " + bits + " " + bits, &out), 0) << out;
  EXPECT_NE(out.find("equal: 2 of 2 common tensors identical"), std::string::npos) << out;
  EXPECT_EQ(tool("diff " + bits + " " + bits + " --atol 1", &out), 0) << out;
  const TensorCatalog cat = open(test::fixture("torch26/bits.pt"));
  write("other.pt", {{"b8", Tensor::zeros(DType::BITS8, {5})}, {"b16", *cat.find("b16")}},
        SaveFormat::pytorch);
  EXPECT_EQ(tool("diff " + bits + " " + p("other.pt"), &out), 1) << out;
  EXPECT_NE(out.find("b8: 4 of 5 elements differ (first at [1]: 1 vs 0)\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("1 of 2 common tensors identical"), std::string::npos) << out;
  EXPECT_EQ(tool("diff --atol 10 " + bits + " " + p("other.pt"), &out), 1)
      << out;  // bits have no tolerance
  write("numbers.pt", {{"b8", Tensor::zeros(DType::U8, {5})}, {"b16", *cat.find("b16")}},
        SaveFormat::pytorch);
  EXPECT_EQ(tool("diff " + bits + " " + p("numbers.pt"), &out), 1) << out;
  EXPECT_NE(
      out.find("b8: BITS8[5] vs U8[5]: not compared (raw bits against numbers or other bits)"),
      std::string::npos)
      << out;
}

TEST_F(CliConvert, DiffNaNsZerosAndInfinities) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  float other_nan;
  const std::uint32_t bits = 0x7fc00001u;  // a NaN with another payload
  std::memcpy(&other_nan, &bits, 4);
  write("a.safetensors",
        {{"nan", Tensor::from<float>({nan}, {1})},
         {"zero", Tensor::from<float>({0.0f}, {1})},
         {"inf", Tensor::from<float>({inf, -inf}, {2})}},
        SaveFormat::safetensors);
  write("same.safetensors",
        {{"nan", Tensor::from<float>({nan}, {1})},
         {"zero", Tensor::from<float>({0.0f}, {1})},
         {"inf", Tensor::from<float>({inf, -inf}, {2})}},
        SaveFormat::safetensors);
  write("b.safetensors",
        {{"nan", Tensor::from<float>({other_nan}, {1})},
         {"zero", Tensor::from<float>({-0.0f}, {1})},
         {"inf", Tensor::from<float>({inf, -inf}, {2})}},
        SaveFormat::safetensors);
  std::string out;
  EXPECT_EQ(tool("diff " + p("a.safetensors") + " " + p("same.safetensors"), &out), 0) << out;
  EXPECT_EQ(tool("diff " + p("a.safetensors") + " " + p("b.safetensors"), &out), 1) << out;
  EXPECT_NE(out.find("nan: 1 of 1 elements differ (first at [0]: nan vs nan)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("; NaN: 1 in A, 1 in B"), std::string::npos) << out;
  EXPECT_NE(out.find("zero: 1 of 1 elements differ"), std::string::npos)
      << out;  // -0 is not +0 bitwise
  EXPECT_EQ(out.find("inf:"), std::string::npos) << out;
  // With a tolerance -0 == +0, but a NaN still only equals the same NaN.
  EXPECT_EQ(
      tool("diff --json " + p("a.safetensors") + " " + p("b.safetensors") + " --rtol 0.5", &out), 1)
      << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_FALSE(entry(j, "nan")["equal"].get<bool>());
  EXPECT_EQ(entry(j, "nan")["nan_a"], 1);
  EXPECT_EQ(entry(j, "nan")["nan_b"], 1);
  EXPECT_EQ(entry(j, "inf")["inf_a"], 2);
  EXPECT_TRUE(entry(j, "zero")["equal"].get<bool>());
  EXPECT_TRUE(entry(j, "inf")["equal"].get<bool>());
}

// Outputs are regular files: a symlink, FIFO or device of the output's name
// is refused (exit 2, before the input is read), never replaced; a
// directory as output says the name it chose and does not overwrite a file
// of that name without --force.
TEST(CliOutputs, AreRegularFiles) {
  const fs::path dir = torchport::test::temp_dir("cli_outputs");
  const std::string in = test::fixture("checkpoint.pt").string();
  const std::string tool = TORCHPORT_TOOL;
  std::string out;
  fs::create_symlink(dir / "elsewhere.safetensors", dir / "link.safetensors");
  EXPECT_EQ(run_command(tool + " convert " + in + " " + (dir / "link.safetensors").string(), &out),
            2)
      << out;
  EXPECT_NE(out.find("symbolic link"), std::string::npos) << out;
  EXPECT_TRUE(fs::is_symlink(dir / "link.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "elsewhere.safetensors"));
  ASSERT_EQ(::mkfifo((dir / "fifo.pt").c_str(), 0600), 0);
  EXPECT_EQ(run_command(tool + " convert " + in + " " + (dir / "fifo.pt").string(), &out), 2)
      << out;
  EXPECT_NE(out.find("a FIFO"), std::string::npos) << out;
  EXPECT_TRUE(fs::is_fifo(dir / "fifo.pt"));
  EXPECT_EQ(run_command(tool + " convert " + in + " /dev/null", &out), 2) << out;
  EXPECT_NE(out.find("a device"), std::string::npos) << out;
  // A directory: the chosen name is said; a second convert does not replace it.
  const fs::path d = dir / "model";
  fs::create_directories(d);
  EXPECT_EQ(run_command(tool + " convert --tensors-only " + in + " " + d.string(), &out), 0) << out;
  EXPECT_NE(out.find("model.safetensors"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(d / "model.safetensors"));
  EXPECT_EQ(run_command(tool + " convert --tensors-only " + in + " " + d.string(), &out), 2) << out;
  EXPECT_NE(out.find("--force"), std::string::npos) << out;
  EXPECT_EQ(run_command(tool + " convert --tensors-only --force " + in + " " + d.string(), &out), 0)
      << out;
  fs::remove_all(dir);
}

// A TorchScript archive's object names TorchScript classes, which no
// torch.load can import: converting it whole to .pt is refused pointing at
// --tensors-only (which works), never at --allow of such a class.
TEST(CliOutputs, TorchScriptToPtSuggestsTensorsOnly) {
  const fs::path dir = torchport::test::temp_dir("cli_torchscript");
  const std::string tool = TORCHPORT_TOOL, in = test::fixture("torchscript.pt").string();
  const std::string pt = (dir / "weights.pt").string();
  std::string out;
  for (const std::string allow : {"", "--allow '__torch__.*' "}) {
    EXPECT_EQ(run_command(tool + " convert " + allow + in + " " + pt, &out), 1) << out;
    EXPECT_NE(out.find("TorchScript class __torch__.Net"), std::string::npos) << out;
    EXPECT_NE(out.find("--tensors-only"), std::string::npos) << out;
    EXPECT_EQ(out.find("--allow"), std::string::npos) << out;
    EXPECT_FALSE(fs::exists(pt));
  }
  EXPECT_EQ(run_command(tool + " convert --tensors-only " + in + " " + pt, &out), 0) << out;
  EXPECT_EQ(run_command(tool + " diff " + in + " " + pt, &out), 0) << out;
  fs::remove_all(dir);
}

// Our records hold a training checkpoint's values, which are trees: epoch,
// an argparse.Namespace of args (with a dtype global and a tuple), an
// optimizer's state keyed by integers and its param_groups with tuples, a
// NaN loss, the model's OrderedDict. Each record format keeps the whole
// object (it refused: "values besides tensors that the output would
// drop"), open() gives it back as it was, and a .pt written from the record
// holds the original object.
TEST(CliOutputs, RecordsHoldATrainingCheckpointsValues) {
  const fs::path dir = torchport::test::temp_dir("cli_record_values");
  const std::string tool = TORCHPORT_TOOL;
  const Tensor w = test::patterned(DType::F32, {2, 3}, 1);
  Value args = Value::object(Global{"argparse", "Namespace"}, Value::tuple());
  Value fields = Value::dict();
  fields.insert(Value::str("lr"), Value::real(0.001));
  fields.insert(Value::str("dtype"), Value::global("torch", "float32"));
  fields.insert(Value::str("sizes"), Value::tuple({Value::integer(1), Value::integer(2)}));
  fields.insert(Value::str("tags"), Value::set({Value::str("a")}));
  fields.insert(Value::str("scale"), Value::complex(1, -2));
  fields.insert(Value::str("blob"), Value::bytes("\x01\x02"));
  args.set_state(fields);
  Value model = Value::ordered_dict();
  model.insert(Value::str("fc.weight"), Value::tensor(w));
  Value slot = Value::dict();
  slot.insert(Value::str("step"), Value::tensor(Tensor::scalar(3.0f)));
  slot.insert(Value::str("exp_avg"), Value::tensor(w.to(DType::F64)));
  Value state = Value::dict();
  state.insert(Value::integer(0), slot);
  Value group = Value::dict();
  group.insert(Value::str("lr"), Value::real(0.001));
  group.insert(Value::str("betas"), Value::tuple({Value::real(0.9), Value::real(0.999)}));
  group.insert(Value::str("foreach"), Value());
  group.insert(Value::str("params"), Value::list({Value::integer(0)}));
  Value optimizer = Value::dict();
  optimizer.insert(Value::str("state"), state);
  optimizer.insert(Value::str("param_groups"), Value::list({group}));
  Value ck = Value::dict();
  ck.insert(Value::str("epoch"), Value::integer(7));
  ck.insert(Value::str("args"), args);
  ck.insert(Value::str("model"), model);
  ck.insert(Value::str("optimizer"), optimizer);
  ck.insert(Value::str("loss"), Value::real(std::numeric_limits<double>::quiet_NaN()));
  SaveOptions whole;
  whole.keep_tree = true;
  whole.allow = {"argparse.Namespace"};
  const fs::path in = dir / "train.pt";
  save(TensorCatalog::from_value(Format::state_dict, ck), in, SaveFormat::pytorch, whole);
  const TensorCatalog original = open(in);
  const std::string want = original.root().repr(64, 1u << 20);
  for (const char* ext : {"mpk", "json", "tpb", "mpk.gz"}) {
    SCOPED_TRACE(ext);
    const fs::path rec = dir / (std::string("train.") + ext);
    std::string out;
    ASSERT_EQ(run_command(tool + " convert " + in.string() + " " + rec.string(), &out), 0) << out;
    const TensorCatalog back = open(rec);
    EXPECT_EQ(back.root().repr(64, 1u << 20), want);
    EXPECT_TRUE(back.root().find("model")->is_ordered_dict());
    EXPECT_EQ(run_command(tool + " diff " + in.string() + " " + rec.string(), &out), 0) << out;
    const fs::path pt = dir / (std::string("back-") + ext + ".pt");
    ASSERT_EQ(
        run_command(
            tool + " convert --allow argparse.Namespace " + rec.string() + " " + pt.string(), &out),
        0)
        << out;
    EXPECT_EQ(open(pt).root().repr(64, 1u << 20), want);
  }
  // The record's own markers stay readable as the JSON they are.
  const auto bytes = test::read_bytes(dir / "train.json");
  const std::string json(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  EXPECT_NE(json.find("\"__tuple__\""), std::string::npos);
  EXPECT_NE(json.find("\"__object__\""), std::string::npos);
  EXPECT_NE(json.find("\"__dict__\""), std::string::npos);
  fs::remove_all(dir);
}

// An existing output file is replaced only with --force (as a directory's
// chosen name already was); the input is never the output, --force or not.
// Both are refused before the input is read (exit 2), naming the file.
TEST(CliOutputs, AnExistingFileNeedsForceAndTheInputIsNeverTheOutput) {
  const fs::path dir = torchport::test::temp_dir("cli_force");
  const std::string tool = TORCHPORT_TOOL;
  const std::string in = (dir / "in.pt").string(), st = (dir / "out.safetensors").string();
  fs::copy_file(test::fixture("views.pt"), in);
  std::string out;
  ASSERT_EQ(run_command(tool + " convert " + in + " " + st, &out), 0) << out;
  const auto first = test::read_bytes(st);
  EXPECT_EQ(run_command(tool + " convert " + in + " " + st, &out), 2) << out;
  EXPECT_EQ(out, "torchport: " + st +
                     ": exists: pass --force to replace it (a convert never writes over a file "
                     "unasked)\n");
  EXPECT_EQ(run_command(tool + " convert --force " + in + " " + st, &out), 0) << out;
  EXPECT_EQ(test::read_bytes(st), first);
  // The input as the output: refused even with --force, the input intact.
  const auto before = test::read_bytes(in);
  for (const std::string flags : {"", "--force "}) {
    EXPECT_EQ(run_command(tool + " convert " + flags + in + " " + in, &out), 2) << out;
    EXPECT_NE(out.find("is the input as well as the output"), std::string::npos) << out;
    // Another spelling of the same file.
    EXPECT_EQ(
        run_command(tool + " convert " + flags + in + " " + (dir / "." / "in.pt").string(), &out),
        2)
        << out;
  }
  EXPECT_EQ(test::read_bytes(in), before);
  // Shards: their index counts as the output.
  const fs::path shards = dir / "shards";
  fs::create_directories(shards);
  const std::string sharded = (shards / "model.safetensors").string();
  ASSERT_EQ(run_command(tool + " convert " + in + " " + sharded + " --max-shard-size 200B", &out),
            0)
      << out;
  EXPECT_NE(out.find(" shards + "), std::string::npos) << out;
  EXPECT_EQ(run_command(tool + " convert " + in + " " + sharded + " --max-shard-size 200B", &out),
            2)
      << out;
  EXPECT_NE(out.find("model.safetensors.index.json: exists"), std::string::npos) << out;
  fs::remove_all(dir);
}

// Nothing dropped silently: a checkpoint with values besides its tensors
// (epoch, loss, an optimizer's param_groups) keeps them in a .pt (the whole
// object, as torch.load returns it); a tensor format refuses it without
// --tensors-only, naming the first values and their count.
TEST(CliOutputs, ValuesAreNotDroppedSilently) {
  const std::string tool = TORCHPORT_TOOL;
  const std::string in = test::fixture("checkpoint.pt").string();
  const fs::path dir = torchport::test::temp_dir("cli_values");
  std::string out;
  const std::string st = (dir / "out.safetensors").string();
  EXPECT_EQ(run_command(tool + " convert " + in + " " + st, &out), 1) << out;
  EXPECT_NE(out.find("31 values besides tensors"), std::string::npos) << out;
  EXPECT_NE(out.find("epoch (3)"), std::string::npos) << out;
  EXPECT_NE(out.find("--tensors-only"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(st));
  EXPECT_EQ(run_command(tool + " convert --tensors-only " + in + " " + st, &out), 0) << out;

  // A .pt holds the same object: every value and tensor where it was.
  const std::string pt = (dir / "out.pt").string();
  EXPECT_EQ(run_command(tool + " convert " + in + " " + pt, &out), 0) << out;
  const TensorCatalog a = open(in), b = open(pt);
  EXPECT_EQ(to_json(a.root(), 1), to_json(b.root(), 1));
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a.tensors()[i].name, b.tensors()[i].name);
    EXPECT_TRUE(a.tensors()[i].tensor.equal(b.tensors()[i].tensor)) << a.tensors()[i].name;
  }
  // ... unless an option would change its tensors under it.
  EXPECT_EQ(run_command(tool + " convert --exclude epoch " + in + " " + pt + ".2.pt", &out), 1)
      << out;
  EXPECT_NE(out.find("need --tensors-only"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(pt + ".2.pt"));
  EXPECT_EQ(run_command(tool + " convert --tensors-only --force " + in + " " + pt, &out), 0) << out;
  EXPECT_EQ(open(pt).root().find("epoch"), nullptr);
  // numpy arrays among the values are written back as numpy arrays in the
  // whole object; a tensor file, which cannot hold an array, needs
  // --tensors-only, naming one.
  const std::string np = test::fixture("numpy/training_numpy.pt").string();
  EXPECT_EQ(run_command(tool + " convert " + np + " " + pt + ".np.pt", &out), 0) << out;
  {
    const TensorCatalog back = open(pt + ".np.pt");
    std::size_t arrays = 0;
    for (const auto& [k, v] : back.root().pairs()) arrays += v.is_numpy_array();
    EXPECT_GT(arrays, 0u);
  }
  EXPECT_EQ(run_command(tool + " convert " + np + " " + pt + ".np.safetensors", &out), 1) << out;
  EXPECT_NE(out.find("numpy array"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(pt + ".np.safetensors"));

  // A sub-tree of tensors alone needs nothing; values the filters exclude are dropped by the user.
  EXPECT_EQ(run_command(tool + " convert --top-level-key model_state_dict " + in + " " +
                            (dir / "m.safetensors").string(),
                        &out),
            0)
      << out;
  fs::remove_all(dir);
}

}  // namespace
