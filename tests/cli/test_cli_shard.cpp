// torchport inspect --shard RANK/WORLD --plan FILE: what a rank of a
// tensor-parallel model reads of each tensor, and every rank's bytes.

#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/fixtures.hpp"
#include "torchport/formats/save.hpp"

namespace fs = std::filesystem;
using namespace torchport;
using torchport::test::run_command;

namespace {

std::string tool() {
  return TORCHPORT_TOOL;
}

class CliShard : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir("cli-shard");
    save(TensorCatalog::from_tensors(Format::state_dict,
                                     {{"a.weight", Tensor::zeros(DType::F32, {8, 4})},
                                      {"b.weight", Tensor::zeros(DType::BF16, {4, 8})},
                                      {"norm", Tensor::zeros(DType::F32, {4})}}),
         dir_ / "m.safetensors", SaveFormat::safetensors);
    std::ofstream(dir_ / "tp.plan")
        << "# test plan\n^a\\.weight$ -> column(0)\n^b\\.weight$ -> row(1)\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string args(const std::string& shard) const {
    return " inspect '" + (dir_ / "m.safetensors").string() + "' --shard " + shard + " --plan '" +
           (dir_ / "tp.plan").string() + "'";
  }
  fs::path dir_;
};

}  // namespace

TEST_F(CliShard, JsonListsEachTensorsPartAndEveryRanksBytes) {
  std::string out;
  ASSERT_EQ(run_command(tool() + args("1/2") + " --json 2>/dev/null", &out), 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["rank"], 1);
  EXPECT_EQ(j["world"], 2);
  EXPECT_EQ(j["total_bytes"], 8 * 4 * 4 + 4 * 8 * 2 + 4 * 4);
  // Half of a (64 of 128 bytes) and of b (32 of 64), norm whole (16).
  EXPECT_EQ(j["bytes"], 64 + 32 + 16);
  EXPECT_EQ(j["bytes_per_rank"], nlohmann::json::array({112, 112}));
  for (const auto& t : j["tensors"]) {
    if (t["name"] == "b.weight") {
      EXPECT_EQ(t["kind"], "row");
      EXPECT_EQ(t["part"], nlohmann::json::array({4, 4}));
      EXPECT_EQ(t["bytes"], 32);
    } else if (t["name"] == "norm") {
      EXPECT_EQ(t["kind"], "replicate");
      EXPECT_EQ(t["rule"], "");
    }
  }
}

TEST_F(CliShard, TextShowsTheRanksShareAndEveryRank) {
  std::string out;
  ASSERT_EQ(run_command(tool() + args("0/4"), &out), 0) << out;
  EXPECT_NE(out.find("rank 0 of 4"), std::string::npos) << out;
  EXPECT_NE(out.find("[8, 4] -> [2, 4]"), std::string::npos) << out;
  EXPECT_NE(out.find("(no rule: whole)"), std::string::npos) << out;
  EXPECT_NE(out.find("bytes per rank: 0=64 1=64 2=64 3=64"), std::string::npos) << out;
}

TEST_F(CliShard, BadShardsAndPlansAreErrors) {
  std::string out;
  EXPECT_NE(run_command(tool() + args("2/2"), &out), 0);
  EXPECT_NE(out.find("RANK/WORLD"), std::string::npos) << out;
  EXPECT_NE(run_command(tool() + args("0/3"), &out), 0);  // 8 rows do not divide by 3
  EXPECT_NE(out.find("a.weight"), std::string::npos) << out;
  std::ofstream(dir_ / "tp.plan") << "a -> sideways\n";
  EXPECT_NE(run_command(tool() + args("0/2"), &out), 0);
  EXPECT_NE(out.find("line 1"), std::string::npos) << out;
}
