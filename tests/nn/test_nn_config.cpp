// The nn modules' configuration (a convolution's stride and padding, a
// norm's eps, attention's heads): no checkpoint records it, so a
// default-constructed module whose tensors came from a file refuses to run
// until it is given, naming what to set; a constructed one runs.

#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "torchport/core/error.hpp"
#include "torchport/formats/catalog.hpp"
#include "torchport/nn/modules.hpp"
#include "torchport/record/load.hpp"

using namespace torchport;

namespace {

Tensor ramp(Shape shape) {
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7) * 0.125f - 0.25f;
  return Tensor::from(std::span<const float>(v), std::move(shape));
}

// Runs `f`, expecting Error(invalid_argument) whose message holds each of `parts`.
template <class F>
void expect_unset(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "ran with an unset configuration";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    for (const auto& p : parts) EXPECT_NE(e.message().find(p), std::string::npos) << e.what();
  }
}

struct Stem {
  nn::Conv2d conv1;
  TORCHPORT_FIELDS(conv1)
};

// A ResNet stem (torchvision's conv1: 7x7, stride 2, padding 3) loaded into
// a default-constructed Conv2d: every field is found, yet nothing in the
// file says stride 2 and padding 3. It ran with stride 1 and padding 0 and
// gave [1, 64, 26, 26] where torch gives [1, 64, 16, 16]; now it refuses
// until told.
TEST(NnConfig, ADefaultConstructedConvolutionRefusesToRunUntilConfigured) {
  const TensorCatalog file =
      TensorCatalog::from_tensors(Format::pytorch_zip, {{"conv1.weight", ramp({64, 3, 7, 7})}});
  Stem stem;
  const LoadReport r = load(stem, file);
  EXPECT_TRUE(r.clean()) << r.summary();
  const Tensor x = ramp({1, 3, 32, 32});
  expect_unset(
      [&] { (void)stem.conv1.forward(x); },
      {"Conv2d: stride, padding, dilation and groups are not set",
       "A checkpoint does not record them", "conv.configure({.stride = 2, .padding = 1})",
       "Conv2d(in_channels, out_channels, kernel, stride, padding, dilation, groups, bias)"});
  stem.conv1.stride = 2;  // one set: the message names the rest
  expect_unset([&] { (void)stem.conv1.forward(x); },
               {"Conv2d: padding, dilation and groups are not set"});
  stem.conv1.configure({.stride = 2, .padding = 3});
  EXPECT_EQ(stem.conv1.forward(x).shape(), (Shape{1, 64, 16, 16}));

  // Constructed with its configuration, as torch's nn.Conv2d(3, 64, 7, 2, 3, bias=False).
  Stem built{nn::Conv2d(3, 64, 7, 2, 3, 1, 1, false)};
  EXPECT_TRUE(load(built, file).clean());
  EXPECT_EQ(built.conv1.forward(x).shape(), (Shape{1, 64, 16, 16}));
  // Each setting alone, as a user sets them.
  nn::Conv2d by_hand;
  by_hand.weight = ramp({64, 3, 7, 7});
  by_hand.stride = {2, 2};
  by_hand.padding = 3;
  by_hand.dilation = 1;
  by_hand.groups = 1;
  EXPECT_EQ(by_hand.forward(x).shape(), (Shape{1, 64, 16, 16}));
}

TEST(NnConfig, EveryModuleWithAConfigurationNamesWhatIsUnset) {
  const Tensor x4 = ramp({2, 4, 5, 5});
  {
    nn::Conv1d c;
    c.weight = ramp({2, 4, 3});
    expect_unset([&] { (void)c.forward(ramp({1, 4, 9})); }, {"Conv1d: stride, padding"});
    c.configure({});
    EXPECT_EQ(c.forward(ramp({1, 4, 9})).shape(), (Shape{1, 2, 7}));
  }
  {
    nn::ConvTranspose2d c;
    c.weight = ramp({4, 2, 3, 3});
    expect_unset([&] { (void)c.forward(x4); },
                 {"ConvTranspose2d: stride, padding, output_padding, dilation and groups"});
    c.configure({.stride = 2});
    EXPECT_EQ(c.forward(x4).shape(), (Shape{2, 2, 11, 11}));
  }
  {
    nn::BatchNorm2d n;
    n.running_mean = ramp({4});
    n.running_var = nn::BatchNorm2d(4).running_var;
    expect_unset([&] { (void)n.forward(x4); }, {"BatchNorm2d: eps is not set", "norm.eps = 1e-5"});
    n.eps = 1e-5;
    EXPECT_EQ(n.forward(x4).shape(), x4.shape());
    EXPECT_EQ(nn::BatchNorm2d(4).forward(x4).shape(), x4.shape());
  }
  {
    nn::LayerNorm n;
    expect_unset([&] { (void)n.forward(x4); }, {"LayerNorm: eps and normalized_shape are not set"});
    n.gamma = ramp({5});
    expect_unset([&] { (void)n.forward(x4); }, {"LayerNorm: eps is not set"});
    n.eps = 1e-5;
    EXPECT_EQ(n.forward(x4).shape(), x4.shape());
  }
  {
    nn::GroupNorm n;
    n.gamma = ramp({4});
    n.beta = ramp({4});
    expect_unset([&] { (void)n.forward(x4); }, {"GroupNorm: num_groups and eps are not set"});
    n.num_groups = 2;
    n.eps = 1e-5;
    EXPECT_EQ(n.forward(x4).shape(), x4.shape());
  }
  {
    nn::RMSNorm n;
    n.gamma = ramp({5});
    expect_unset([&] { (void)n.forward(x4); }, {"RMSNorm: eps is not set", "rms_norm_eps"});
    n.eps = 1e-6;
    EXPECT_EQ(n.forward(x4).shape(), x4.shape());
  }
  {
    nn::MultiheadAttention a;
    const nn::MultiheadAttention sized(4, 2);
    a.query = sized.query;
    a.key = sized.key;
    a.value = sized.value;
    a.output = sized.output;
    const Tensor q = ramp({3, 1, 4});
    expect_unset([&] { (void)a.forward(q, q, q); },
                 {"MultiheadAttention: num_heads and batch_first are not set"});
    a.num_heads = 2;
    a.batch_first = false;
    EXPECT_EQ(a.forward(q, q, q).output.shape(), (Shape{3, 1, 4}));
  }
  {
    nn::LSTM l;
    l.layers = nn::LSTM(3, 2).layers;
    expect_unset([&] { (void)l.forward(ramp({5, 1, 3})); }, {"LSTM: batch_first is not set"});
    l.batch_first = false;
    EXPECT_EQ(l.forward(ramp({5, 1, 3})).output.shape(), (Shape{5, 1, 2}));
  }
  // A setting read before it is set.
  const nn::Conv2d c;
  expect_unset([&] { (void)c.stride->h; }, {"read before it was set"});
  EXPECT_FALSE(c.padding.is_set());
  EXPECT_TRUE(nn::Conv2d(1, 1, 1).padding.is_set());
}

}  // namespace
