#pragma once
// torchvision's ResNet-18/34/50/101/152 as torchport records, with their
// forward pass: the same names as torchvision's state_dict(), so a
// torchvision checkpoint loads with no remapping.

#include <stdexcept>
#include <string>
#include <vector>

#include <torchport/nn/modules.hpp>
#include <torchport/nn/ops.hpp>
#include <torchport/record/fields.hpp>

namespace resnet {

namespace nn = torchport::nn;
using torchport::Tensor;

// torchvision's `downsample = nn.Sequential(conv1x1, BatchNorm2d)`.
struct Downsample {
  nn::Conv2d conv;
  nn::BatchNorm2d norm;
  TORCHPORT_NAMED_FIELDS((conv, "0"), (norm, "1"))
};

// BasicBlock (conv1, conv2: 3x3) or Bottleneck (conv1 1x1, conv2 3x3 with the
// stride, conv3 1x1 expanding by 4), as torchvision builds them.
struct Block {
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  std::optional<nn::Conv2d> conv3;
  std::optional<nn::BatchNorm2d> bn3;
  std::optional<Downsample> downsample;
  TORCHPORT_FIELDS(conv1, bn1, conv2, bn2, conv3, bn3, downsample)

  Tensor forward(const Tensor& x) const {
    Tensor y = nn::relu(bn1.forward(conv1.forward(x)));
    y = bn2.forward(conv2.forward(y));
    if (conv3) y = bn3->forward(conv3->forward(nn::relu(y)));
    const Tensor identity = downsample ? downsample->norm.forward(downsample->conv.forward(x)) : x;
    return nn::relu(nn::add(y, identity));
  }
};

struct ResNet {
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  std::vector<Block> layer1, layer2, layer3, layer4;
  nn::Linear fc;
  TORCHPORT_FIELDS(conv1, bn1, layer1, layer2, layer3, layer4, fc)

  // Builds an architecture with zero parameters of torchvision's shapes.
  static ResNet make(const std::string& arch, std::int64_t num_classes = 1000) {
    std::vector<int> depths;
    bool bottleneck = true;
    if (arch == "resnet18")
      depths = {2, 2, 2, 2}, bottleneck = false;
    else if (arch == "resnet34")
      depths = {3, 4, 6, 3}, bottleneck = false;
    else if (arch == "resnet50")
      depths = {3, 4, 6, 3};
    else if (arch == "resnet101")
      depths = {3, 4, 23, 3};
    else if (arch == "resnet152")
      depths = {3, 8, 36, 3};
    else
      throw std::invalid_argument("unknown architecture '" + arch +
                                  "' (resnet18, 34, 50, 101, 152)");
    const std::int64_t expansion = bottleneck ? 4 : 1;
    ResNet r;
    r.conv1 = nn::Conv2d(3, 64, 7, 2, 3, 1, 1, false);
    r.bn1 = nn::BatchNorm2d(64);
    std::int64_t in = 64;
    std::vector<Block>* layers[] = {&r.layer1, &r.layer2, &r.layer3, &r.layer4};
    for (int l = 0; l < 4; ++l) {
      const std::int64_t width = 64 << l;
      for (int b = 0; b < depths[static_cast<std::size_t>(l)]; ++b) {
        const std::int64_t stride = (b == 0 && l > 0) ? 2 : 1;
        Block blk;
        if (bottleneck) {
          blk.conv1 = nn::Conv2d(in, width, 1, 1, 0, 1, 1, false);
          blk.conv2 = nn::Conv2d(width, width, 3, stride, 1, 1, 1, false);
          blk.conv3 = nn::Conv2d(width, width * 4, 1, 1, 0, 1, 1, false);
          blk.bn3 = nn::BatchNorm2d(width * 4);
        } else {
          blk.conv1 = nn::Conv2d(in, width, 3, stride, 1, 1, 1, false);
          blk.conv2 = nn::Conv2d(width, width, 3, 1, 1, 1, 1, false);
        }
        blk.bn1 = nn::BatchNorm2d(width);
        blk.bn2 = nn::BatchNorm2d(width);
        if (stride != 1 || in != width * expansion)
          blk.downsample = Downsample{nn::Conv2d(in, width * expansion, 1, stride, 0, 1, 1, false),
                                      nn::BatchNorm2d(width * expansion)};
        in = width * expansion;
        layers[l]->push_back(std::move(blk));
      }
    }
    r.fc = nn::Linear(512 * expansion, num_classes);
    return r;
  }

  // [N, 3, H, W] -> [N, num_classes] logits.
  Tensor forward(const Tensor& x) const {
    Tensor y = nn::relu(bn1.forward(conv1.forward(x)));
    y = nn::max_pool2d(y, 3, {.stride = 2, .padding = 1});
    for (const auto* layer : {&layer1, &layer2, &layer3, &layer4})
      for (const auto& blk : *layer) y = blk.forward(y);
    y = nn::flatten(nn::adaptive_avg_pool2d(y, 1), 1);
    return fc.forward(y);
  }
};

}  // namespace resnet
