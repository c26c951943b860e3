// The PyTorch layouts the nn modules declare: each module loads from the
// state_dict names and layout PyTorch gives it, and saves back to exactly
// those names, shapes and values.

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "torchport/formats/catalog.hpp"
#include "torchport/nn/modules.hpp"
#include "torchport/record/export.hpp"
#include "torchport/record/load.hpp"

using namespace torchport;

namespace {

static_assert(DeclaresPyTorchLayout<nn::Linear>);
static_assert(DeclaresPyTorchLayout<nn::BatchNorm2d>);
static_assert(DeclaresPyTorchLayout<nn::MultiheadAttention>);
static_assert(DeclaresPyTorchLayout<nn::LSTM>);
static_assert(!DeclaresPyTorchLayout<nn::Conv2d>);  // PyTorch's layout is ours
static_assert(!DeclaresPyTorchLayout<nn::Embedding>);

// A [n] or [rows, cols] F32 tensor holding start, start + 1, ...
Tensor counting(Shape shape, float start) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return Tensor::from(std::span<const float>(v), std::move(shape));
}

struct Entry {
  std::string name;
  Shape shape;
};

// A state_dict with PyTorch's names and shapes, distinct values per tensor.
TensorCatalog state_dict(const std::vector<Entry>& entries) {
  std::vector<NamedTensor> t;
  float start = 0;
  for (const auto& e : entries) {
    t.push_back({e.name, counting(e.shape, start)});
    start += 1000;
  }
  return TensorCatalog::from_tensors(Format::pytorch_zip, std::move(t));
}

// Loads `torch` into `m` (clean: every key used, nothing missing) and saves
// it back: the same names, in the same order, with equal values.
template <class M>
M round_trip(M m, const TensorCatalog& torch, const std::vector<std::string>& saved_order) {
  const LoadReport r = load(m, torch, LoadArgs{}.layout(Layout::PyTorch));
  EXPECT_TRUE(r.clean()) << r.summary();
  const TensorCatalog back = to_pytorch_state_dict(m);
  std::vector<std::string> names;
  for (const auto& t : back.tensors()) names.push_back(t.name);
  EXPECT_EQ(names, saved_order);
  for (const auto& t : torch.tensors()) {
    const Tensor* mine = back.find(t.name);
    if (mine == nullptr) {
      ADD_FAILURE() << "not saved: " << t.name;
      continue;
    }
    EXPECT_TRUE(mine->equal(t.tensor)) << t.name << ": " << mine->description();
  }
  return m;
}

TEST(NnLayouts, LinearIsTransposed) {
  const auto torch = state_dict({{"weight", {3, 2}}, {"bias", {3}}});
  const auto m = round_trip(nn::Linear{}, torch, {"weight", "bias"});
  EXPECT_EQ(m.weight.shape(), (Shape{2, 3}));
  EXPECT_TRUE(m.weight.equal(torch.find("weight")->transpose(0, 1).contiguous()));
}

TEST(NnLayouts, NormsAndPReLURenameTheirParameters) {
  const auto bn =
      round_trip(nn::BatchNorm1d{},
                 state_dict({{"weight", {4}},
                             {"bias", {4}},
                             {"running_mean", {4}},
                             {"running_var", {4}},
                             {"num_batches_tracked", {}}}),
                 {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"});
  ASSERT_TRUE(bn.gamma && bn.beta);
  EXPECT_EQ(bn.gamma->shape(), (Shape{4}));
  EXPECT_EQ(bn.beta->data<float>()[0], 1000.f);
  const auto ln =
      round_trip(nn::LayerNorm{}, state_dict({{"weight", {5}}, {"bias", {5}}}), {"weight", "bias"});
  EXPECT_TRUE(ln.gamma && ln.beta);
  const auto gn =
      round_trip(nn::GroupNorm{}, state_dict({{"weight", {6}}, {"bias", {6}}}), {"weight", "bias"});
  EXPECT_TRUE(gn.gamma && gn.beta);
  const auto rms = round_trip(nn::RMSNorm{}, state_dict({{"weight", {5}}}), {"weight"});
  EXPECT_TRUE(rms.gamma);
  const auto prelu = round_trip(nn::PReLU(3), state_dict({{"weight", {3}}}), {"weight"});
  EXPECT_EQ(prelu.alpha.shape(), (Shape{3}));
}

TEST(NnLayouts, ConvolutionsAndEmbeddingsKeepPyTorchsLayout) {
  const auto torch = state_dict({{"weight", {2, 1, 3, 3}}, {"bias", {2}}});
  const auto conv = round_trip(nn::Conv2d{}, torch, {"weight", "bias"});
  EXPECT_TRUE(conv.weight.equal(*torch.find("weight")));
  const auto emb = round_trip(nn::Embedding{}, state_dict({{"weight", {7, 3}}}), {"weight"});
  EXPECT_EQ(emb.weight.shape(), (Shape{7, 3}));
}

TEST(NnLayouts, AttentionSplitsInProjAndKeepsSeparateProjectionsApart) {
  const auto fused = state_dict({{"in_proj_weight", {12, 4}},
                                 {"in_proj_bias", {12}},
                                 {"out_proj.weight", {4, 4}},
                                 {"out_proj.bias", {4}}});
  const auto m = round_trip(nn::MultiheadAttention{}, fused,
                            {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"});
  // key: rows 4..7 of in_proj_weight, transposed by Linear's own layout.
  EXPECT_TRUE(m.key.weight.equal(
      fused.find("in_proj_weight")->narrow(0, 4, 4).transpose(0, 1).contiguous()));
  ASSERT_TRUE(m.value.bias.has_value());
  EXPECT_TRUE(m.value.bias->equal(fused.find("in_proj_bias")->narrow(0, 8, 4).contiguous()));
  // kdim 3, vdim 2: PyTorch keeps the input projections apart.
  const auto apart = state_dict({{"q_proj_weight", {4, 4}},
                                 {"k_proj_weight", {4, 3}},
                                 {"v_proj_weight", {4, 2}},
                                 {"in_proj_bias", {12}},
                                 {"out_proj.weight", {4, 4}},
                                 {"out_proj.bias", {4}}});
  const auto cross = round_trip(nn::MultiheadAttention{}, apart,
                                {"q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias",
                                 "out_proj.weight", "out_proj.bias"});
  EXPECT_EQ(cross.value.weight.shape(), (Shape{2, 4}));
}

TEST(NnLayouts, RecurrentModulesSplitTheirGatesPerLayer) {
  std::vector<Entry> lstm_entries;
  std::vector<std::string> saved;
  for (int k = 0; k < 2; ++k) {
    const std::string l = "_l" + std::to_string(k);
    lstm_entries.push_back({"weight_ih" + l, {8, k == 0 ? 3 : 2}});
    lstm_entries.push_back({"weight_hh" + l, {8, 2}});
    lstm_entries.push_back({"bias_ih" + l, {8}});
    lstm_entries.push_back({"bias_hh" + l, {8}});
    for (const char* n : {"weight_ih", "bias_ih", "weight_hh", "bias_hh"}) saved.push_back(n + l);
  }
  const auto lstm_sd = state_dict(lstm_entries);
  const auto lstm = round_trip(nn::LSTM{}, lstm_sd, saved);
  ASSERT_EQ(lstm.layers.size(), 2u);
  // Gate f of layer 1: rows 2..3 of weight_hh_l1, transposed by its Linear.
  EXPECT_TRUE(lstm.layers[1].forget_gate.hidden_transform.weight.equal(
      lstm_sd.find("weight_hh_l1")->narrow(0, 2, 2).transpose(0, 1).contiguous()));
  ASSERT_TRUE(lstm.layers[0].output_gate.input_transform.bias.has_value());
  EXPECT_TRUE(lstm.layers[0].output_gate.input_transform.bias->equal(
      lstm_sd.find("bias_ih_l0")->narrow(0, 6, 2).contiguous()));

  const auto gru_sd = state_dict({{"weight_ih_l0", {6, 3}},
                                  {"weight_hh_l0", {6, 2}},
                                  {"bias_ih_l0", {6}},
                                  {"bias_hh_l0", {6}}});
  const auto gru =
      round_trip(nn::GRU{}, gru_sd, {"weight_ih_l0", "bias_ih_l0", "weight_hh_l0", "bias_hh_l0"});
  ASSERT_EQ(gru.layers.size(), 1u);
  EXPECT_TRUE(gru.layers[0].new_gate.input_transform.weight.equal(
      gru_sd.find("weight_ih_l0")->narrow(0, 4, 2).transpose(0, 1).contiguous()));
}

TEST(NnLayouts, ReverseDirectionEntriesStayUnused) {
  nn::LSTM m;
  const LoadReport r = load(m,
                            state_dict({{"weight_ih_l0", {8, 3}},
                                        {"weight_hh_l0", {8, 2}},
                                        {"weight_ih_l0_reverse", {8, 3}},
                                        {"weight_hh_l0_reverse", {8, 2}}}),
                            LoadArgs{}.layout(Layout::PyTorch));
  EXPECT_TRUE(r.missing.empty()) << r.summary();
  std::vector<std::string> unused = r.unused;
  std::sort(unused.begin(), unused.end());
  EXPECT_EQ(unused, (std::vector<std::string>{"weight_hh_l0_reverse", "weight_ih_l0_reverse"}))
      << r.summary();
}

}  // namespace
