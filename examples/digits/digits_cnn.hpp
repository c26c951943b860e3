#pragma once
// The demo's network, as train.py defines it, declared for torchport.

#include <torchport/torchport.hpp>

namespace digits {

namespace nn = torchport::nn;
using torchport::Tensor;

// train.py's `features = nn.Sequential(Conv2d, BatchNorm2d, ReLU, MaxPool2d,
// Conv2d, BatchNorm2d, ReLU, MaxPool2d)`: its parameters sit at indices 0,
// 1, 4 and 5. The loader compacts them in order, so the four layers with
// parameters are items 0 to 3 here.
struct Features {
  nn::Conv2d conv1{1, 16, 3, 1, 1};
  nn::BatchNorm2d norm1{16};
  nn::Conv2d conv2{16, 32, 3, 1, 1};
  nn::BatchNorm2d norm2{32};
  TORCHPORT_NAMED_FIELDS((conv1, "0"), (norm1, "1"), (conv2, "2"), (norm2, "3"))

  Tensor forward(const Tensor& x) const {
    Tensor y = nn::max_pool2d(nn::relu(norm1.forward(conv1.forward(x))), 2);
    return nn::max_pool2d(nn::relu(norm2.forward(conv2.forward(y))), 2);
  }
};

struct DigitsCNN {
  Features features;
  nn::Linear classifier{32 * 2 * 2, 10};
  TORCHPORT_FIELDS(features, classifier)

  Tensor forward(const Tensor& x) const {
    return classifier.forward(nn::flatten(features.forward(x), 1));
  }
};

}  // namespace digits
