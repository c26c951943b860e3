// torchvision's ResNets (torch 1.13, torchvision 0.14 under /usr/bin/python3)
// against examples/resnet: for each depth, resnet_parity.py makes a random
// model with perturbed BatchNorm statistics, its state_dict(), an input and
// torch's logits; resnet_infer runs the checkpoint in C++; resnet_parity.py
// reads resnet_infer's safetensors output with the pure-Python reader and
// compares. The files (up to 240 MB for resnet152) live in a temp directory
// for one depth at a time.

#include <iostream>

#include <gtest/gtest.h>

#include "support/fixtures.hpp"

namespace fs = std::filesystem;
using torchport::test::run_command;

namespace {

const std::string kPython = torchport::test::python();
const fs::path kHere = TORCHPORT_INTEROP_DIR;
const std::string kResnetInfer = TORCHPORT_RESNET_INFER;

// max|ours - torch| <= kLogitsRtol * max|torch's logits|: both compute in
// f32, but in different orders (im2col + sgemm against oneDNN/MKL-DNN
// convolutions), over up to 155 layers.
constexpr double kLogitsRtol = 1e-4;

class ResNetParity : public ::testing::TestWithParam<const char*> {};

TEST_P(ResNetParity, LogitsMatchTorchvision) {
  const std::string arch = GetParam();
  const fs::path dir = torchport::test::temp_dir("resnet-" + arch);
  const auto q = [&](const char* name) { return "'" + (dir / name).string() + "'"; };
  const std::string script =
      "cd '" + kHere.string() + "' && " + kPython + " -W ignore resnet_parity.py ";
  std::string out;
  ASSERT_EQ(run_command(script + "make " + arch + " '" + dir.string() + "'", &out), 0) << out;
  ASSERT_EQ(
      run_command(kResnetInfer + " --arch " + arch + " --weights " + q("weights.pt") + " --input " +
                      q("input.safetensors") + " --output " + q("output.safetensors"),
                  &out),
      0)
      << out;
  EXPECT_NE(out.find("every field found, every key used"), std::string::npos) << out;
  const int rc =
      run_command(script + "compare '" + dir.string() + "' " + std::to_string(kLogitsRtol), &out);
  EXPECT_EQ(rc, 0) << arch << ": " << out;
  std::cout << arch << ": " << out;
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Torchvision, ResNetParity,
                         ::testing::Values("resnet18", "resnet34", "resnet50", "resnet101",
                                           "resnet152"),
                         [](const auto& param_info) { return std::string(param_info.param); });

}  // namespace
