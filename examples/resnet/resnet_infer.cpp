// resnet_infer --arch resnet50 --weights W.pt --input in.safetensors --output out.safetensors
//
// Loads a torchvision ResNet state_dict() (any format torchport reads) into
// the C++ ResNet, runs it on the tensor named "input" (NCHW, f32) and writes
// the logits as the tensor named "logits".

#include <chrono>
#include <cstdio>

#include <CLI/CLI.hpp>
#include <torchport/torchport.hpp>

#include "resnet.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Run a torchvision ResNet checkpoint in C++"};
  std::string arch = "resnet50", weights, input, output;
  bool quiet = false;
  app.add_option("--arch", arch, "resnet18, resnet34, resnet50, resnet101 or resnet152")
      ->capture_default_str();
  app.add_option("--weights", weights, "torchvision state_dict() file")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--input", input, "safetensors file with a tensor named 'input' [N, 3, H, W]")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--output", output, "safetensors file to write 'logits' [N, classes] to")
      ->required();
  app.add_flag("--quiet", quiet, "Print nothing on success");
  CLI11_PARSE(app, argc, argv);
  try {
    resnet::ResNet net = resnet::ResNet::make(arch);
    const auto t0 = std::chrono::steady_clock::now();
    const torchport::LoadReport report = torchport::load(net, weights);
    const auto t1 = std::chrono::steady_clock::now();
    const torchport::TensorCatalog in = torchport::open(input);
    const torchport::Tensor* x = in.find("input");
    if (x == nullptr)
      throw torchport::Error(torchport::ErrorCode::missing_key, "no tensor named 'input'", "input");
    const torchport::Tensor logits = net.forward(x->to(torchport::DType::F32));
    const auto t2 = std::chrono::steady_clock::now();
    torchport::save(
        torchport::TensorCatalog::from_tensors(torchport::Format::state_dict, {{"logits", logits}}),
        output, torchport::SaveFormat::safetensors);
    if (!quiet)
      std::printf("%s%s: load %.3f s, forward %.3f s, logits %s\n", report.summary().c_str(),
                  arch.c_str(), std::chrono::duration<double>(t1 - t0).count(),
                  std::chrono::duration<double>(t2 - t1).count(), logits.description().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resnet_infer: error: %s\n", e.what());
    return 1;
  }
}
