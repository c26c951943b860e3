// Weights converted at build time and linked into the program: this binary
// classifies the digits with no checkpoint file present, touching no file.
//
// examples/CMakeLists.txt does:
//   torchport_embed_weights(embedded_demo digits_weights ${digits}/digits_cnn.pt)
//   torchport_embed_weights(embedded_demo digits_test_set ${digits}/test_images.pt)
// which runs `torchport convert` at build time and links the records.

#include <cstdio>

#include <torchport/torchport.hpp>

#include "../digits/digits_cnn.hpp"
#include "digits_test_set.hpp"
#include "digits_weights.hpp"

int main() {
  try {
    digits::DigitsCNN net;
    // The record is converted from PyTorch's state_dict and says so: the
    // PyTorch adapter runs here as it would on the .pt file itself.
    const torchport::LoadReport report = torchport::load_record_from_bytes(net, digits_weights());
    std::printf("weights: %zu bytes embedded in the binary; %s", digits_weights().size(),
                report.summary().c_str());

    const torchport::TensorCatalog test =
        torchport::open(torchport::Source::borrow(digits_test_set(), "test set"));
    const torchport::Tensor logits = net.forward(*test.find("images"));
    const torchport::Tensor predicted = torchport::nn::argmax(logits, 1).to(torchport::DType::I64);
    const torchport::Tensor torch_pred = test.find("torch_predictions")->to(torchport::DType::I64);
    const auto a = predicted.span<std::int64_t>();
    const auto b = torch_pred.span<std::int64_t>();
    std::size_t agree = 0;
    for (std::size_t i = 0; i < a.size(); ++i) agree += a[i] == b[i];
    std::printf("agreement with torch on %zu embedded test digits: %zu/%zu\n", a.size(), agree,
                a.size());
    return agree == a.size() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "embedded_demo: error: %s\n", e.what());
    return 1;
  }
}
