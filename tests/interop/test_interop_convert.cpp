// torch 1.13 (Debian's python3-torch) against torchport convert: checkpoints
// saved by torch are converted, and torch (or a pure-Python safetensors
// reader) must find exactly the original tensors in the output.

#include <gtest/gtest.h>

#include "io/zip_writer.hpp"
#include "support/fixtures.hpp"
#include "torchport/io/atomic_file.hpp"

namespace fs = std::filesystem;
using torchport::test::run_command;

namespace {

const std::string kPython = torchport::test::python();
const fs::path kHere = TORCHPORT_INTEROP_DIR;

class Interop : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(torchport::test::temp_dir("interop"));
    std::string out;
    const int rc = run_command(
        kPython + " -W ignore " + (kHere / "make_checkpoints.py").string() + " " + dir_->string(),
        &out);
    ASSERT_EQ(rc, 0) << out;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string p(const std::string& name) { return "'" + (*dir_ / name).string() + "'"; }

  // Runs the tool, then check.py; both must succeed.
  static void convert_and_check(const std::string& convert_args, const std::string& check_args) {
    std::string out;
    ASSERT_EQ(run_command(std::string(TORCHPORT_TOOL) + " convert " + convert_args, &out), 0)
        << out;
    check(check_args);
  }
  static void check(const std::string& check_args) {
    std::string out;
    EXPECT_EQ(run_command(
                  "cd '" + kHere.string() + "' && " + kPython + " -W ignore check.py " + check_args,
                  &out),
              0)
        << check_args << "\n"
        << out;
  }
  static fs::path* dir_;
};

fs::path* Interop::dir_ = nullptr;

TEST_F(Interop, TorchToPytorchLoadsBitExactWithWeightsOnly) {
  convert_and_check(p("state.pt") + " " + p("state_out.pt"),
                    "torch " + p("state.pt") + " " + p("state_out.pt"));
  check("zip " + p("state_out.pt") + " 64");
}

TEST_F(Interop, NestedCheckpointTopLevelKey) {
  convert_and_check(p("ckpt.pt") + " " + p("ckpt_out.pth") + " --top-level-key state_dict",
                    "torch " + p("ckpt.pt") + " " + p("ckpt_out.pth") + " --key state_dict");
}

// A training checkpoint converted to .pt is the same object to torch: the
// model, the optimizer's state and param_groups, numbers, strings, bytes,
// sets, big integers, OrderedDicts, shared references and views of one
// storage (loaded with weights_only=True in torch 2.6).
TEST_F(Interop, TrainingCheckpointKeepsEveryValue) {
  convert_and_check(p("train.pt") + " " + p("train_out.pt"),
                    "tree " + p("train.pt") + " " + p("train_out.pt"));
}

// A distributed checkpoint (saved by 1, 2 and 4 ranks, and with optimizer
// state) converted to .pt is what torch's dcp_to_torch_save makes of it
// (torch 2.6; torch 1.13 has no such function and skips the comparison).
TEST_F(Interop, DistributedCheckpointIsWhatTorchReassembles) {
  for (const char* name : {"single", "tp2", "tp4", "optim"}) {
    const std::string folder =
        "'" + (fs::path(TORCHPORT_FIXTURES_DIR) / "dcp" / name).string() + "'";
    const std::string out = p(std::string("dcp_") + name + ".pt");
    convert_and_check(folder + " " + out, "dcp " + folder + " " + out);
  }
}

TEST_F(Interop, LegacyFormatAndWholeModule) {
  convert_and_check(p("legacy.pt") + " " + p("legacy_out.pt"),
                    "torch " + p("state.pt") + " " + p("legacy_out.pt"));
  convert_and_check(p("module.pt") + " " + p("module_out.bin"),
                    "torch " + p("module.pt") + " " + p("module_out.bin"));
}

TEST_F(Interop, SafetensorsOutputMatchesTorchsTensors) {
  // complex128 has no safetensors dtype: leave it out.
  convert_and_check(
      p("state.pt") + " " + p("state.safetensors") + " --exclude complex128",
      "safetensors " + p("state.pt") + " " + p("state.safetensors") + " --exclude complex128");
  // Without complex64 too, which Debian 13's safetensors (0.4.5) does not
  // know: its safetensors.torch.load_file must read the file (torch2 run).
  convert_and_check(
      p("state.pt") + " " + p("state_real.safetensors") + " --exclude complex",
      "safetensors " + p("state.pt") + " " + p("state_real.safetensors") + " --exclude complex");
}

TEST_F(Interop, SafetensorsBackToPytorch) {
  convert_and_check(
      p("state.pt") + " " + p("st.safetensors") + " --exclude complex128",
      "safetensors " + p("state.pt") + " " + p("st.safetensors") + " --exclude complex128");
  // Back to a PyTorch zip: the same tensors, in the same order.
  std::string out;
  ASSERT_EQ(run_command(std::string(TORCHPORT_TOOL) + " convert " + p("st.safetensors") + " " +
                            p("st_back.pt"),
                        &out),
            0)
      << out;
  check("zip " + p("st_back.pt") + " 64");
  ASSERT_EQ(run_command(std::string(TORCHPORT_TOOL) + " diff " + p("st_back.pt") + " " +
                            p("st.safetensors"),
                        &out),
            0)
      << out;
  ASSERT_EQ(
      run_command(kPython + " -W ignore -c \"import torch; d = torch.load(" + p("st_back.pt") +
                      ", weights_only=True); assert len(d) == 22 and d['special'].isnan()[0]\"",
                  &out),
      0)
      << out;
}

TEST_F(Interop, CastMatchesTorchsRounding) {
  convert_and_check(p("state.pt") + " " + p("bf16.pt") + " --dtype bfloat16",
                    "torch " + p("state.pt") + " " + p("bf16.pt") + " --cast bfloat16");
  convert_and_check(
      p("state.pt") + " " + p("f16.safetensors") + " --dtype F16 --exclude complex128",
      "safetensors " + p("state.pt") + " " + p("f16.safetensors") +
          " --cast float16 --exclude complex128");
}

TEST_F(Interop, ShardedInSingleOutShardedBack) {
  convert_and_check(p("hf") + " " + p("hf_single.safetensors"),
                    "safetensors " + p("hf_model.pt") + " " + p("hf_single.safetensors"));
  convert_and_check(p("hf/pytorch_model.bin.index.json") + " " + p("hf_single.pt"),
                    "torch " + p("hf_model.pt") + " " + p("hf_single.pt"));
  fs::create_directories(*dir_ / "resharded");
  convert_and_check(
      p("hf_single.safetensors") + " " + p("resharded/pytorch_model.bin") + " --max-shard-size 3kB",
      "shards " + p("hf_model.pt") + " " + p("resharded/pytorch_model.bin.index.json"));
  // In the safetensors file's order (lm_head 640 B, then bias 64 B / weight
  // 1,024 B per layer), 3,000-byte shards of whole tensors make 3 shards.
  EXPECT_TRUE(fs::exists(*dir_ / "resharded" / "pytorch_model-00003-of-00003.bin"));
  EXPECT_FALSE(fs::exists(*dir_ / "resharded" / "pytorch_model.bin"));
}

TEST_F(Interop, ForcedZip64ArchiveReadsWithPythonsZipfile) {
  {
    torchport::AtomicFile f(*dir_ / "z64.zip");
    torchport::ZipWriter z(f, torchport::ZipWriterOptions{64, true});
    const std::string a = "payload one", b(100000, 'x');
    z.add_entry("z/a", std::as_bytes(std::span<const char>(a.data(), a.size())));
    z.add_entry("z/b", std::as_bytes(std::span<const char>(b.data(), b.size())));
    z.add_entry("z/empty", {});
    z.finish();
    f.commit();
  }
  check("zip " + p("z64.zip") + " 64");
}

}  // namespace
