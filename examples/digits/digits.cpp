// The demo: a CNN trained in PyTorch (train.py) classifies handwritten digits
// in C++. It loads the state_dict() through the PyTorch adapter, checks every
// prediction against torch's own, draws a few digits, then saves the module
// in the compact recorder, reloads it and checks the predictions again.
//
//   digits_demo [DATA_DIR] [OUT_DIR]
//
// Exit status 0 only when the C++ model agrees with torch on every image.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include <torchport/torchport.hpp>

#include "digits_cnn.hpp"

namespace nn = torchport::nn;
using digits::DigitsCNN;
using torchport::Tensor;

namespace {

std::vector<std::int64_t> argmax_rows(const Tensor& logits) {
  const Tensor a = nn::argmax(logits, 1);
  const Tensor i = a.to(torchport::DType::I64);
  const auto s = i.span<std::int64_t>();
  return {s.begin(), s.end()};
}

// The first eight test digits, four per row, in shades of ASCII, with what
// the C++ model says they are.
void draw(const Tensor& images, const std::vector<std::int64_t>& predicted,
          const std::vector<std::int64_t>& truth) {
  const char* shades = " .:-=+*#%@";
  const Tensor img = images.contiguous();
  const auto px = img.span<float>();
  for (std::size_t first = 0; first < 8; first += 4) {
    for (int row = 0; row < 8; ++row) {
      std::string line;
      for (std::size_t k = first; k < first + 4; ++k) {
        for (int col = 0; col < 8; ++col) {
          const float v = px[k * 64 + static_cast<std::size_t>(row * 8 + col)];
          line.append(2, shades[std::clamp(static_cast<int>(v * 9.0f + 0.5f), 0, 9)]);
        }
        line += "    ";
      }
      std::printf("    %s\n", line.c_str());
    }
    std::string labels;
    for (std::size_t k = first; k < first + 4; ++k) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "  C++ says %lld%s", static_cast<long long>(predicted[k]),
                    predicted[k] == truth[k] ? "" : " (wrong)");
      labels += buf;
      labels.resize((k - first + 1) * 20, ' ');
    }
    std::printf("    %s\n\n", labels.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const fs::path data = argc > 1 ? fs::path(argv[1]) : fs::path(DIGITS_DATA_DIR);
  const fs::path out = argc > 2 ? fs::path(argv[2]) : fs::temp_directory_path();
  try {
    std::printf("torchport digits demo: a CNN trained in PyTorch, running in C++\n\n");
    DigitsCNN net;
    const torchport::LoadReport report = torchport::load(net, data / "digits_cnn.pt");
    std::fputs(report.summary().c_str(), stdout);

    const torchport::TensorCatalog test = torchport::open(data / "test_images.pt");
    const Tensor& images = *test.find("images");
    const Tensor truth_t = test.find("labels")->to(torchport::DType::I64);
    const Tensor torch_pred_t = test.find("torch_predictions")->to(torchport::DType::I64);
    const auto truth = truth_t.span<std::int64_t>();
    const auto torch_pred = torch_pred_t.span<std::int64_t>();

    const Tensor logits = net.forward(images);
    const std::vector<std::int64_t> predicted = argmax_rows(logits);
    const std::size_t n = predicted.size();
    std::size_t correct = 0, agree = 0;
    for (std::size_t i = 0; i < n; ++i) {
      correct += predicted[i] == truth[i];
      agree += predicted[i] == torch_pred[i];
    }
    const Tensor diff = nn::sub(logits, *test.find("torch_logits"));
    const Tensor max_diff = nn::max(nn::mul(diff, diff));
    std::printf("accuracy on %zu held-out digits:  %.2f%% (%zu/%zu)\n", n, 100.0 * correct / n,
                correct, n);
    std::printf("agreement with torch's predictions: %.2f%% (%zu/%zu)\n", 100.0 * agree / n, agree,
                n);
    std::printf("max |logit difference| vs torch:   %.2e\n\n",
                std::sqrt(max_diff.span<float>()[0]));
    draw(images, predicted, {truth.begin(), truth.end()});

    // Our own format: saved, reloaded, same predictions.
    const fs::path saved = out / "digits_cnn.tpb";
    torchport::save_record(net, saved, torchport::CompactBin{});
    DigitsCNN again;
    torchport::load(again, saved);
    const std::vector<std::int64_t> reloaded = argmax_rows(again.forward(images));
    const bool same = reloaded == predicted;
    std::printf("saved in the compact recorder: %s (%llu bytes); reloaded: %s predictions\n",
                saved.c_str(), static_cast<unsigned long long>(fs::file_size(saved)),
                same ? "identical" : "DIFFERENT");
    return agree == n && same ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "digits_demo: error: %s\n", e.what());
    return 1;
  }
}
