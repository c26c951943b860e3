// Burn's pytorch-tests, ported: each case loads a file torch wrote (see
// tests/record/cases/<case>.py) into the equivalent C++ module, checks every
// tensor against the values torch holds (in our layout), and runs the
// forward pass against torch's output.

#include <algorithm>
#include <cmath>
#include <utility>

#include <gtest/gtest.h>

#include "burn_modules.hpp"
#include "support/expect_error.hpp"
#include "support/fixtures.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/nn/modules.hpp"
#include "torchport/nn/ops.hpp"
#include "torchport/record/export.hpp"
#include "torchport/record/load.hpp"

using namespace torchport;
using torchport::test::expect_error;
using namespace burn_cases;

namespace {

// Tolerances, named per use.
constexpr double kExact = 0.0;
constexpr double kF32 = 1e-5;   // a forward pass in f32 against torch's f32
constexpr double kHalf = 1e-3;  // parameters stored as f16

std::vector<double> as_doubles(const Tensor& t) {
  const Tensor d = t.to(t.dtype() == DType::BOOL ? DType::U8 : DType::F64);
  std::vector<double> out;
  if (d.dtype() == DType::U8) {
    for (auto v : d.span<std::uint8_t>()) out.push_back(v);
  } else {
    for (auto v : d.span<double>()) out.push_back(v);
  }
  return out;
}

// |got - want| <= rtol * max(1, |want|) elementwise, same shape.
void expect_close(const Tensor& got, const Tensor& want, double rtol, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const auto g = as_doubles(got), w = as_doubles(want);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double tol = rtol * std::max(1.0, std::fabs(w[i]));
    if (!(std::fabs(g[i] - w[i]) <= tol) && bad++ < 3)
      ADD_FAILURE() << what << "[" << i << "]: got " << g[i] << ", torch " << w[i];
  }
}

// Every tensor the module holds equals torch's (in our names and layout).
template <class M>
void expect_loaded(const M& module, const std::string& name, double rtol = kExact) {
  const TensorCatalog got = to_catalog(module);
  const TensorCatalog want = open(case_file(name + ".expected.pt"));
  std::vector<std::string> got_names, want_names;
  for (const auto& t : got.tensors()) got_names.push_back(t.name);
  for (const auto& t : want.tensors()) want_names.push_back(t.name);
  std::sort(got_names.begin(), got_names.end());
  std::sort(want_names.begin(), want_names.end());
  ASSERT_EQ(got_names, want_names);
  for (const auto& t : want.tensors()) expect_close(*got.find(t.name), t.tensor, rtol, t.name);
}

TensorCatalog io(const std::string& name) {
  return open(case_file(name + ".io.pt"));
}
const Tensor& at(const TensorCatalog& c, const char* name) {
  const Tensor* t = c.find(name);
  if (t == nullptr) throw std::runtime_error(std::string("fixture lacks ") + name);
  return *t;
}

// --- batch_norm ---------------------------------------------------------------

TEST(BurnCases, BatchNorm) {
  BatchNormNet net;
  const LoadReport r = load(net, case_file("batch_norm.pt"));
  EXPECT_TRUE(r.clean()) << r.summary();
  expect_loaded(net, "batch_norm");
  const auto f = io("batch_norm");
  expect_close(net.norm1.forward(at(f, "input")), at(f, "output"), kF32, "output");
}

TEST(BurnCases, ShapeMismatchIsAnError) {
  BatchNormNet net;
  net.norm1 = nn::BatchNorm2d(4);
  expect_error([&] { load(net, case_file("shape_mismatch.pt")); }, ErrorCode::shape_mismatch,
               "field 'norm1.gamma' expects [4], the file's 'norm1.weight' has [5]");
  // The error names the file it came from.
  expect_error([&] { load(net, case_file("shape_mismatch.pt")); }, ErrorCode::shape_mismatch,
               case_file("shape_mismatch.pt").string());
}

// A mismatch shows the file's shape as the file holds it, and the module's
// layout of it when an adapter changed it (torch's Linear is [out, in]).
TEST(BurnCases, ShapeMismatchShowsTheFilesShape) {
  LinearNet net;
  net.fc1 = nn::Linear(2, 5);
  expect_error([&] { load(net, case_file("linear.pt")); }, ErrorCode::shape_mismatch,
               "field 'fc1.weight' expects [2, 5], the file's 'fc1.weight' has [3, 2] ([2, 3] in "
               "the module's layout)");
}

// An optional field left empty while unused keys end like it: a warning
// with the remap rule that fixes it; strict() makes it an error.
struct OptionalConvs {
  std::optional<nn::Conv2d> conv1, conv2;
  TORCHPORT_FIELDS(conv1, conv2)
};

TEST(BurnCases, ForgottenRemapIsAWarning) {
  OptionalConvs net;
  const LoadReport r = load(net, case_file("key_remap.pt"));
  EXPECT_FALSE(net.conv1.has_value());
  EXPECT_EQ(r.absent, (std::vector<std::string>{"conv1", "conv2"}));
  ASSERT_EQ(r.warnings.size(), 2u) << r.summary();
  const LoadReport::Warning& w = r.warnings.front();
  EXPECT_EQ(w.path, "conv1");
  EXPECT_EQ(w.similar.front(), "conv.conv1.weight");
  EXPECT_EQ(w.remap_pattern, R"(^conv\.(.*)$)");
  EXPECT_EQ(w.remap_replacement, "$1");
  EXPECT_EQ(w.remap_covers, 3u);
  EXPECT_FALSE(r.clean());
  EXPECT_NE(r.summary().find("warnings 2:"), std::string::npos) << r.summary();
  expect_error([&] { load(net, case_file("key_remap.pt"), LoadArgs{}.strict()); },
               ErrorCode::unused_key,
               "the optional field 'conv1' was left empty, but the file's unused "
               "'conv.conv1.weight' ends like it (3 unused keys start with 'conv.')");
  // The rule it suggests loads the file.
  OptionalConvs fixed;
  const LoadReport ok = load(fixed, case_file("key_remap.pt"),
                             LoadArgs{}.remap(w.remap_pattern, w.remap_replacement));
  EXPECT_TRUE(ok.clean()) << ok.summary();
  EXPECT_TRUE(fixed.conv1.has_value() && fixed.conv2.has_value());
}

// --- boolean, buffer, integer --------------------------------------------------

TEST(BurnCases, Boolean) {
  BufferNet net;
  load(net, case_file("boolean.pt"));
  EXPECT_EQ(net.buffer.dtype(), DType::BOOL);
  expect_loaded(net, "boolean");
}

TEST(BurnCases, Buffer) {
  BufferNet net;
  load(net, case_file("buffer.pt"));
  expect_loaded(net, "buffer");
  const auto f = io("buffer");
  expect_close(nn::add(at(f, "input"), net.buffer), at(f, "output"), kF32, "output");
}

TEST(BurnCases, IntegerFullPrecisionIsI32) {
  BufferNet net;
  load(net, case_file("integer.pt"), LoadArgs{}.precision(Precision::Full));
  EXPECT_EQ(net.buffer.dtype(), DType::I32);
  expect_loaded(net, "integer");
  BufferNet keep;
  load(keep, case_file("integer.pt"), LoadArgs{}.precision(Precision::Keep));
  EXPECT_EQ(keep.buffer.dtype(), DType::I64);
}

// --- complex_nested -------------------------------------------------------------

TEST(BurnCases, ComplexNestedFullPrecision) {
  ComplexNet net = ComplexNet::make();
  const LoadReport r = load(net, case_file("complex_nested.pt"));
  EXPECT_TRUE(r.clean()) << r.summary();
  EXPECT_EQ(r.tensors, 23u);
  expect_loaded(net, "complex_nested");
  const auto f = io("complex_nested");
  expect_close(net.forward(at(f, "input")), at(f, "output"), kF32, "output");
}

TEST(BurnCases, ComplexNestedHalfPrecision) {
  ComplexNet net = ComplexNet::make(DType::F16);
  load(net, case_file("complex_nested.pt"), LoadArgs{}.precision(Precision::Half));
  EXPECT_EQ(net.fc1.weight.dtype(), DType::F16);
  EXPECT_EQ(net.conv_blocks[0].norm.num_batches_tracked->dtype(), DType::I16);
  expect_loaded(net, "complex_nested", kHalf);
  const auto f = io("complex_nested");
  // torch's output with the same f16-rounded parameters, computed in f32.
  expect_close(net.forward(at(f, "input")), at(f, "output_half_params"), kHalf, "output");
}

TEST(BurnCases, ComplexNestedDefaultConstructedTakesShapesFromTheFile) {
  ComplexNet net;  // no shapes, no blocks: everything comes from the file
  const LoadReport r = load(net, case_file("complex_nested.pt"));
  EXPECT_TRUE(r.clean()) << r.summary();
  ASSERT_EQ(net.conv_blocks.size(), 2u);
  EXPECT_EQ(net.fc1.weight.shape(), (Shape{120, 12}));
  expect_loaded(net, "complex_nested");
}

TEST(BurnCases, ComplexNestedPartialLoadingViaRemap) {
  PartialNet net;
  const LoadReport r = load(net, case_file("complex_nested.pt"),
                            LoadArgs{}.remap(R"(^conv_blocks\.0\.(.*))", "conv1.$1"));
  EXPECT_TRUE(r.missing.empty());
  EXPECT_EQ(r.tensors, 7u);        // conv weight, bias, norm gamma, beta, mean, var, count
  EXPECT_FALSE(r.unused.empty());  // the rest of the file
  const TensorCatalog want = open(case_file("complex_nested.expected.pt"));
  expect_close(net.conv1.conv.weight, *want.find("conv_blocks.0.conv.weight"), kExact,
               "conv1.conv.weight");
  expect_close(*net.conv1.norm.running_var, *want.find("conv_blocks.0.norm.running_var"), kExact,
               "running_var");
}

TEST(BurnCases, ComplexNestedExtraFieldAbsentFromTheFile) {
  // An empty optional module: the file decides, and has none.
  NetWithExtra net;
  const LoadReport r = load(net, case_file("complex_nested.pt"));
  EXPECT_TRUE(r.clean()) << r.summary();
  EXPECT_FALSE(net.extra.has_value());
  // Built with it: the module expects it, and the file lacking it is
  // missing fields (never a part of the model dropped silently).
  NetWithExtra built;
  built.extra = ConvBlock{nn::Conv2d(2, 2, 1), nn::BatchNorm2d(2)};
  expect_error([&] { load(built, case_file("complex_nested.pt")); }, ErrorCode::missing_key,
               "'extra.conv.weight'");
  const LoadReport partial =
      load(built, case_file("complex_nested.pt"), LoadArgs{}.allow_partial());
  EXPECT_EQ(partial.missing.size(), 7u) << partial.summary();  // conv: 2, norm: 5
  EXPECT_TRUE(built.extra.has_value());
}

// --- config ---------------------------------------------------------------------

// config.pt's "config", as torch saved it (tests/record/cases/config.py).
void expect_config(const ModelConfig& c) {
  EXPECT_EQ(c.n_head, 2);
  EXPECT_EQ(c.n_layer, 3);
  EXPECT_EQ(c.d_model, 512);
  EXPECT_DOUBLE_EQ(c.some_float, 0.1);
  EXPECT_EQ(c.some_int, 1);
  EXPECT_TRUE(c.some_bool);
  EXPECT_EQ(c.some_str, "hello");
  EXPECT_EQ(c.some_list_int, (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(c.some_list_str, (std::vector<std::string>{"hello", "world"}));
  EXPECT_EQ(c.some_list_float, (std::vector<double>{1.0, 2.0, 3.0}));
  EXPECT_EQ(c.some_dict.some_key, "some_value");
}

TEST(BurnCases, Config) {
  expect_config(load_config<ModelConfig>(case_file("config.pt"), "config"));
  expect_error([] { load_config<ModelConfig>(case_file("config.pt"), "nope"); },
               ErrorCode::missing_key, "nope");
}

// A typed load from a path releases the catalogue's value tree once it has
// taken the scalars from it (before the key trie is built): the scalars
// still load beside the tensors (and a selection's tensors load).
struct ConfigWeights {
  Tensor w = Tensor::empty(DType::F32, {2});
  TORCHPORT_FIELDS(w)
};
struct ConfigAndWeights {
  ModelConfig config;
  ConfigWeights weights;
  TORCHPORT_FIELDS(config, weights)
};

TEST(BurnCases, ScalarsLoadFromAPathBesideTensors) {
  ConfigAndWeights m;
  const LoadReport r = load(m, case_file("config.pt"), LoadArgs{}.strict());
  EXPECT_TRUE(r.clean()) << r.summary();
  expect_config(m.config);
  ASSERT_EQ(m.weights.w.numel(), 2);
  const Tensor w = m.weights.w.contiguous();
  for (float v : w.span<float>()) EXPECT_EQ(v, 1.0f);

  // A selection (made by the load, and released too).
  ConfigWeights selected;
  const LoadReport s =
      load(selected, case_file("config.pt"), LoadArgs{}.top_level_key("weights").strict());
  EXPECT_TRUE(s.clean()) << s.summary();
  const Tensor sw = selected.w.contiguous();
  EXPECT_EQ(sw.numel(), 2);
  for (float v : sw.span<float>()) EXPECT_EQ(v, 1.0f);
}

// --- convolutions ---------------------------------------------------------------

TEST(BurnCases, Conv1d) {
  TwoConvs<nn::Conv1d> net{nn::Conv1d(2, 2, 2), nn::Conv1d(2, 2, 2, 1, 0, 1, 1, false)};
  EXPECT_TRUE(load(net, case_file("conv1d.pt")).clean());
  expect_loaded(net, "conv1d");
  const auto f = io("conv1d");
  expect_close(net.forward(at(f, "input")), at(f, "output"), kF32, "output");
}

TEST(BurnCases, Conv2d) {
  TwoConvs<nn::Conv2d> net{nn::Conv2d(2, 2, 2), nn::Conv2d(2, 2, 2, 1, 0, 1, 1, false)};
  EXPECT_TRUE(load(net, case_file("conv2d.pt")).clean());
  expect_loaded(net, "conv2d");
  const auto f = io("conv2d");
  expect_close(net.forward(at(f, "input")), at(f, "output"), kF32, "output");
}

TEST(BurnCases, ConvTranspose1d) {
  TwoConvs<nn::ConvTranspose1d> net{nn::ConvTranspose1d(2, 2, 2),
                                    nn::ConvTranspose1d(2, 2, 2, 1, 0, 0, 1, 1, false)};
  EXPECT_TRUE(load(net, case_file("conv_transpose1d.pt")).clean());
  expect_loaded(net, "conv_transpose1d");
  const auto f = io("conv_transpose1d");
  expect_close(net.forward(at(f, "input")), at(f, "output"), kF32, "output");
}

TEST(BurnCases, ConvTranspose2d) {
  TwoConvs<nn::ConvTranspose2d> net{nn::ConvTranspose2d(2, 2, 2),
                                    nn::ConvTranspose2d(2, 2, 2, 1, 0, 0, 1, 1, false)};
  EXPECT_TRUE(load(net, case_file("conv_transpose2d.pt")).clean());
  expect_loaded(net, "conv_transpose2d");
  const auto f = io("conv_transpose2d");
  expect_close(net.forward(at(f, "input")), at(f, "output"), kF32, "output");
}

TEST(BurnCases, ConvWithoutBiasIntoAModuleWithBias) {
  // The file's conv2 has no bias, the module's was built with one: a missing
  // field (torch's load_state_dict says "Missing key(s): conv2.bias"), never
  // a bias dropped silently.
  TwoConvs<nn::Conv2d> net{nn::Conv2d(2, 2, 2), nn::Conv2d(2, 2, 2)};
  expect_error([&] { load(net, case_file("conv2d.pt")); }, ErrorCode::missing_key, "'conv2.bias'");
  const LoadReport r = load(net, case_file("conv2d.pt"), LoadArgs{}.allow_partial());
  EXPECT_FALSE(r.clean());
  ASSERT_EQ(r.missing.size(), 1u);
  EXPECT_EQ(r.missing[0].path, "conv2.bias");
  EXPECT_NE(r.summary().find("conv2.bias"), std::string::npos) << r.summary();
  ASSERT_TRUE(net.conv2.bias.has_value());  // kept as built, as torch keeps it
  // Built without a bias, the file's bias-less conv2 loads clean; a module
  // that leaves the bias open (default-constructed) takes the file's choice.
  TwoConvs<nn::Conv2d> exact{nn::Conv2d(2, 2, 2), nn::Conv2d(2, 2, 2, 1, 0, 1, 1, false)};
  EXPECT_TRUE(load(exact, case_file("conv2d.pt")).clean());
  TwoConvs<nn::Conv2d> open_net;
  EXPECT_TRUE(load(open_net, case_file("conv2d.pt")).clean());
  EXPECT_FALSE(open_net.conv2.bias.has_value());
  EXPECT_TRUE(open_net.conv1.bias.has_value());
}

// --- embedding ------------------------------------------------------------------

TEST(BurnCases, Embedding) {
  EmbeddingNet net;
  EXPECT_TRUE(load(net, case_file("embedding.pt")).clean());
  expect_loaded(net, "embedding");
  const auto f = io("embedding");
  expect_close(net.embed.forward(at(f, "input")), at(f, "output"), kExact, "output");
}

// --- enum_module ----------------------------------------------------------------

TEST(BurnCases, EnumModuleDepthwise) {
  EnumNet net;
  EXPECT_TRUE(load(net, case_file("enum_depthwise_true.pt")).clean());
  ASSERT_TRUE(std::holds_alternative<DwsConv>(net.conv));
  // A checkpoint holds no configuration: the enum module's convolutions
  // were default-constructed by the load, and get theirs here.
  std::get<DwsConv>(net.conv).dconv.configure({.groups = 2});
  std::get<DwsConv>(net.conv).pconv.configure({});
  expect_loaded(net, "enum_depthwise_true");
  const auto f = io("enum_depthwise_true");
  expect_close(net.forward(at(f, "input")), at(f, "output"), kF32, "output");
}

TEST(BurnCases, EnumModulePlain) {
  EnumNet net;
  EXPECT_TRUE(load(net, case_file("enum_depthwise_false.pt")).clean());
  ASSERT_TRUE(std::holds_alternative<nn::Conv2d>(net.conv));
  std::get<nn::Conv2d>(net.conv).configure({});  // torch's defaults, as the case's model has
  expect_loaded(net, "enum_depthwise_false");
  const auto f = io("enum_depthwise_false");
  expect_close(net.forward(at(f, "input")), at(f, "output"), kF32, "output");
}

// --- norms ----------------------------------------------------------------------

TEST(BurnCases, GroupNorm) {
  GroupNormNet net;
  EXPECT_TRUE(load(net, case_file("group_norm.pt")).clean());
  expect_loaded(net, "group_norm");
  const auto f = io("group_norm");
  expect_close(net.norm1.forward(at(f, "input")), at(f, "output"), kF32, "output");
}

TEST(BurnCases, LayerNorm) {
  LayerNormNet net;
  EXPECT_TRUE(load(net, case_file("layer_norm.pt")).clean());
  expect_loaded(net, "layer_norm");
  const auto f = io("layer_norm");
  expect_close(net.norm1.forward(at(f, "input")), at(f, "output"), kF32, "output");
}

TEST(BurnCases, LayerNormWithoutBias) {
  LayerNormNet net;
  EXPECT_TRUE(load(net, case_file("layer_norm_no_bias.pt")).clean());
  EXPECT_FALSE(net.norm1.beta.has_value());
  expect_loaded(net, "layer_norm_no_bias");
  const auto f = io("layer_norm_no_bias");
  expect_close(net.norm1.forward(at(f, "input")), at(f, "output"), kF32, "output");
}

// --- linear ---------------------------------------------------------------------

TEST(BurnCases, Linear) {
  LinearNet net;
  const LoadReport r = load(net, case_file("linear.pt"));
  EXPECT_TRUE(r.clean()) << r.summary();
  EXPECT_EQ(net.fc1.weight.shape(), (Shape{2, 3}));  // ours: [in, out]
  EXPECT_FALSE(net.fc2.bias.has_value());
  expect_loaded(net, "linear");
  const auto f = io("linear");
  expect_close(net.forward(at(f, "input")), at(f, "output"), kF32, "output");
}

// --- key remapping --------------------------------------------------------------

TEST(BurnCases, KeyRemap) {
  TwoConvs<nn::Conv2d> net{nn::Conv2d(2, 2, 2), nn::Conv2d(2, 2, 2, 1, 0, 1, 1, false)};
  expect_error([&] { load(net, case_file("key_remap.pt")); }, ErrorCode::missing_key,
               "did you mean 'conv.conv1.weight'?");
  const LoadReport r =
      load(net, case_file("key_remap.pt"), LoadArgs{}.remap(R"(^conv\.(.*))", "$1"));
  EXPECT_TRUE(r.clean()) << r.summary();
  expect_loaded(net, "key_remap");
  const auto f = io("key_remap");
  expect_close(net.forward(at(f, "input")), at(f, "output"), kF32, "output");
}

TEST(BurnCases, KeyRemapChained) {
  ChainedNet net;
  auto two = LoadArgs{}.remap(R"(^model\.)", "").remap(R"(^conv\.0\.)", "conv1.");
  expect_error([&] { load(net, case_file("key_remap_chained.pt"), two); }, ErrorCode::missing_key,
               "'conv2.weight'");
  auto three = two;
  three.remap(R"(^conv\.1\.)", "conv2.");
  const LoadReport r = load(net, case_file("key_remap_chained.pt"), three.debug());
  EXPECT_TRUE(r.clean()) << r.summary();
  expect_loaded(net, "key_remap_chained");
  EXPECT_NE(r.key_listing().find("model.conv.1.weight -> conv2.weight  F32[2, 2, 2, 2]"),
            std::string::npos)
      << r.key_listing();
}

TEST(BurnCases, InvalidRemapPatternIsAClearError) {
  expect_error([] { LoadArgs{}.remap("conv.(", "x"); }, ErrorCode::invalid_argument, "conv.(");
}

// --- missing_module_field -------------------------------------------------------

TEST(BurnCases, MissingModuleFieldNamesTheFieldAndItsType) {
  TwoConvs<nn::Conv2d> net{nn::Conv2d(2, 2, 2), nn::Conv2d(2, 2, 2)};
  expect_error([&] { load(net, case_file("missing_module_field.pt")); }, ErrorCode::missing_key,
               "the module's field 'conv2.weight' (Tensor) has no key in the file");
  const LoadReport r = load(net, case_file("missing_module_field.pt"), LoadArgs{}.allow_partial());
  // conv2 was built with a bias: the file lacks it too.
  ASSERT_EQ(r.missing.size(), 2u);
  EXPECT_EQ(r.missing[0].path, "conv2.weight");
  EXPECT_EQ(r.missing[1].path, "conv2.bias");
  EXPECT_TRUE(net.conv2.bias.has_value());
  EXPECT_TRUE(r.missing[0].did_you_mean.empty());  // every key of the file was used
}

TEST(BurnCases, MissingContainerNamesItsType) {
  ModuleMissingNet net;
  expect_error([&] { load(net, case_file("missing_module_field.pt")); }, ErrorCode::missing_key,
               "'heads' (std::vector<Linear>)");
}

// --- non_contiguous_indexes -----------------------------------------------------

TEST(BurnCases, NonContiguousIndexes) {
  SequentialNet net;
  EXPECT_TRUE(load(net, case_file("non_contiguous_indexes.pt")).clean());
  ASSERT_EQ(net.variable_layers.size(), 3u);
  expect_loaded(net, "non_contiguous_indexes");
  Tensor x = at(io("non_contiguous_indexes"), "input");
  for (auto& c : net.variable_layers) c.configure({.padding = 1});
  for (std::size_t i = 0; i < 3; ++i) {
    x = net.variable_layers[i].forward(x);
    if (i < 2) x = nn::relu(x);
  }
  expect_close(x, at(io("non_contiguous_indexes"), "output"), kF32, "output");
}

// --- top_level_key --------------------------------------------------------------

TEST(BurnCases, TopLevelKey) {
  TwoConvs<nn::Conv2d> net{nn::Conv2d(2, 2, 2), nn::Conv2d(2, 2, 2, 1, 0, 1, 1, false)};
  expect_error([&] { load(net, case_file("top_level_key.pt")); }, ErrorCode::missing_key,
               "did you mean 'my_state_dict.conv1.weight'?");
  const LoadReport r =
      load(net, case_file("top_level_key.pt"), LoadArgs{}.top_level_key("my_state_dict"));
  EXPECT_TRUE(r.clean()) << r.summary();
  expect_loaded(net, "top_level_key");
  expect_error(
      [&] { load(net, case_file("top_level_key.pt"), LoadArgs{}.top_level_key("state_dict")); },
      ErrorCode::missing_key, "'my_state_dict'");
}

// --- attention, recurrent, DataParallel -----------------------------------------

TEST(BurnCases, MultiheadAttention) {
  AttentionNet net;
  const LoadReport r = load(net, case_file("multihead_attention.pt"));
  EXPECT_TRUE(r.clean()) << r.summary();
  expect_loaded(net, "multihead_attention");
  const auto f = io("multihead_attention");
  const auto self = net.attn.forward(at(f, "q"), at(f, "q"), at(f, "q"), {}, {}, true);
  expect_close(self.output, at(f, "output"), kF32, "output");
  expect_close(self.weights, at(f, "weights"), kF32, "weights");
  const auto cross =
      net.cross.forward(at(f, "cross_q"), at(f, "cross_k"), at(f, "cross_v"), {}, {}, true);
  expect_close(cross.output, at(f, "cross_output"), kF32, "cross_output");
  expect_close(cross.weights, at(f, "cross_weights"), kF32, "cross_weights");
}

TEST(BurnCases, LstmAndGru) {
  RecurrentNet net;
  const LoadReport r = load(net, case_file("lstm.pt"));
  EXPECT_TRUE(r.clean()) << r.summary();
  expect_loaded(net, "lstm");
  const auto f = io("lstm");
  const auto out = net.lstm.forward(at(f, "input"));
  expect_close(out.output, at(f, "output"), kF32, "output");
  expect_close(out.h_n, at(f, "h_n"), kF32, "h_n");
  expect_close(out.c_n, at(f, "c_n"), kF32, "c_n");
}

TEST(BurnCases, DataParallelPrefix) {
  DataParallelNet net;
  expect_error([&] { load(net, case_file("data_parallel.pt")); }, ErrorCode::missing_key,
               "did you mean 'module.fc1.weight'?");
  EXPECT_TRUE(
      load(net, case_file("data_parallel.pt"), LoadArgs{}.remap(R"(^module\.(.*))", "$1")).clean());
  expect_loaded(net, "data_parallel");
}

// --- report and strictness ------------------------------------------------------

TEST(BurnCases, StrictModeRefusesUnusedKeys) {
  PartialNet net;
  expect_error(
      [&] {
        load(net, case_file("complex_nested.pt"),
             LoadArgs{}.remap(R"(^conv_blocks\.0\.(.*))", "conv1.$1").strict());
      },
      ErrorCode::unused_key, "used by no field");
}

TEST(BurnCases, FiltersDropKeysBeforeLoading) {
  PartialNet net;
  const LoadReport r = load(net, case_file("complex_nested.pt"),
                            LoadArgs{}
                                .include(R"(^conv_blocks\.0\.)")
                                .remap(R"(^conv_blocks\.0\.(.*))", "conv1.$1")
                                .strict());
  EXPECT_TRUE(r.clean()) << r.summary();
}

TEST(BurnCases, ZeroCopyWhenDtypeAndLayoutMatch) {
  TwoConvs<nn::Conv2d> net{nn::Conv2d(2, 2, 2), nn::Conv2d(2, 2, 2, 1, 0, 1, 1, false)};
  const LoadReport mapped = load(net, case_file("conv2d.pt"));
  EXPECT_EQ(mapped.zero_copy_bytes, mapped.bytes);
  EXPECT_TRUE(net.conv1.weight.storage()->borrowed());
  const LoadReport owned =
      load(net, case_file("conv2d.pt"), LoadArgs{}.residence(Residence::owned));
  EXPECT_EQ(owned.zero_copy_bytes, 0u);
  EXPECT_TRUE(net.conv1.weight.storage()->writable());
}

// An owned load copies into a field no other handle shares, as torch's
// load_state_dict copies into a parameter; a field another handle shares (a
// copy kept, a view, a tied weight) is replaced, and the other handle keeps
// its values.
TEST(BurnCases, OwnedLoadCopiesIntoUnsharedFieldsAndReplacesShared) {
  TwoConvs<nn::Conv2d> net{nn::Conv2d(2, 2, 2), nn::Conv2d(2, 2, 2, 1, 0, 1, 1, false)};
  for (Tensor* t : {&net.conv1.weight, &net.conv2.weight})
    for (float& x : t->mutable_span<float>()) x = 7.f;
  const std::byte* conv1_before = net.conv1.weight.bytes().data();
  const Tensor kept = net.conv2.weight;
  const LoadReport r = load(net, case_file("conv2d.pt"), LoadArgs{}.residence(Residence::owned));
  EXPECT_TRUE(r.missing.empty() && r.mismatched.empty()) << r.summary();
  EXPECT_EQ(net.conv1.weight.bytes().data(), conv1_before);         // in place
  EXPECT_NE(net.conv2.weight.bytes().data(), kept.bytes().data());  // replaced
  for (const float x : kept.span<float>()) EXPECT_EQ(x, 7.f);
  const TensorCatalog file = open(case_file("conv2d.pt"));
  for (const auto& [name, field] :
       {std::pair{"conv1.weight", &net.conv1.weight}, std::pair{"conv2.weight", &net.conv2.weight},
        std::pair{"conv1.bias", &*net.conv1.bias}}) {
    const Tensor* want = file.find(name);
    ASSERT_NE(want, nullptr) << name;
    EXPECT_TRUE(field->storage()->writable()) << name;
    EXPECT_FALSE(field->storage()->borrowed()) << name;
    const auto got = field->span<float>();
    const auto expected = want->span<float>();
    EXPECT_TRUE(std::equal(got.begin(), got.end(), expected.begin(), expected.end())) << name;
  }
}

TEST(BurnCases, SummaryListsMissingAndUnused) {
  TwoConvs<nn::Conv2d> net{nn::Conv2d(2, 2, 2), nn::Conv2d(2, 2, 2)};
  const LoadReport r = load(net, case_file("key_remap.pt"), LoadArgs{}.allow_partial());
  const std::string s = r.summary();
  EXPECT_NE(s.find("missing 4:"), std::string::npos) << s;  // both weights, both biases
  EXPECT_NE(s.find("conv1.weight (Tensor)  did you mean 'conv.conv1.weight'"), std::string::npos)
      << s;
  EXPECT_NE(s.find("unused 3:"), std::string::npos) << s;
}

}  // namespace

namespace {

// The reverse adapter: a loaded module saved in PyTorch's layout gives back
// the very state_dict torch wrote (names and bits).
template <class M>
void expect_round_trip(const M& module, const std::string& name, const std::string& prefix = "") {
  const TensorCatalog back = to_pytorch_state_dict(module);
  const TensorCatalog original = open(case_file(name + ".pt"));
  std::vector<std::string> a, b;
  for (const auto& t : back.tensors()) a.push_back(t.name);
  for (const auto& t : original.tensors()) b.push_back(t.name.substr(prefix.size()));
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  ASSERT_EQ(a, b);
  for (const auto& t : original.tensors()) {
    const Tensor* mine = back.find(t.name.substr(prefix.size()));
    EXPECT_TRUE(mine->equal(t.tensor))
        << t.name << ": " << mine->description() << " vs " << t.tensor.description();
  }
}

TEST(ReverseAdapter, GivesBackTorchsStateDict) {
  {
    ComplexNet net = ComplexNet::make();
    load(net, case_file("complex_nested.pt"));
    expect_round_trip(net, "complex_nested");
  }
  {
    AttentionNet net;
    load(net, case_file("multihead_attention.pt"));
    expect_round_trip(net, "multihead_attention");
  }
  {
    RecurrentNet net;
    load(net, case_file("lstm.pt"));
    expect_round_trip(net, "lstm");
  }
  {
    LinearNet net;
    load(net, case_file("linear.pt"));
    expect_round_trip(net, "linear");
  }
  {
    LayerNormNet net;
    load(net, case_file("layer_norm_no_bias.pt"));
    expect_round_trip(net, "layer_norm_no_bias");
  }
  {
    SequentialNet net;
    load(net, case_file("non_contiguous_indexes.pt"));
    const TensorCatalog back = to_pytorch_state_dict(net);
    EXPECT_NE(back.find("variable_layers.2.weight"), nullptr);  // compacted indices stay compacted
  }
}

TEST(ReverseAdapter, PermuteRuleAppliesOnLoadAndInvertsOnSave) {
  TwoConvs<nn::Conv2d> net;
  auto permute = std::make_shared<PermuteAdapter>();
  permute->add(R"(^conv1\.weight$)", {0, 2, 3, 1});
  load(net, case_file("conv2d.pt"), LoadArgs{}.adapter(permute));
  const TensorCatalog want = open(case_file("conv2d.expected.pt"));
  const Tensor expected = want.find("conv1.weight")->permute(std::vector<std::int64_t>{0, 2, 3, 1});
  EXPECT_TRUE(net.conv1.weight.equal(expected.contiguous()));
  ExportSettings s;
  s.adapters.push_back(permute);
  const TensorCatalog back = to_catalog(net, s);
  EXPECT_TRUE(back.find("conv1.weight")->equal(*want.find("conv1.weight")));
}

struct OneTensor {
  Tensor w;
  TORCHPORT_FIELDS(w)
};

// Counts are singular when they are one: "loaded 1 tensor (1 element".
TEST(Records, SummaryCountsInTheSingular) {
  OneTensor one;
  const LoadReport r =
      load(one, TensorCatalog::from_tensors(Format::state_dict, {{"w", Tensor::scalar(2.0f)}}));
  EXPECT_EQ(r.summary().rfind("loaded 1 tensor (1 element, 4B)", 0), 0u) << r.summary();
  LinearNet two;
  EXPECT_EQ(load(two, case_file("linear.pt")).summary().rfind("loaded 3 tensors (21 elements", 0),
            0u);
}

TEST(Records, DescribeAndCompare) {
  LinearNet a, b;
  load(a, case_file("linear.pt"));
  load(b, case_file("linear.pt"));
  EXPECT_TRUE(records_equal(a, b));
  b.fc1.bias = Tensor::zeros(DType::F32, {3});
  EXPECT_FALSE(records_equal(a, b));
  const std::string d = describe(a);
  EXPECT_NE(d.find("(root)  [21 elements, 84 bytes]"), std::string::npos) << d;
  EXPECT_NE(d.find("  fc1  [9 elements, 36 bytes]"), std::string::npos) << d;
  EXPECT_NE(d.find("    weight: F32[2, 3]"), std::string::npos) << d;
}

}  // namespace

namespace {

TEST(Recorder, PyTorchFileRecorderLoadsAtItsPrecision) {
  const PyTorchFileRecorder doubles(Precision::Double);
  const LinearNet net = doubles.load<LinearNet>(case_file("linear.pt"));
  EXPECT_EQ(net.fc1.weight.dtype(), DType::F64);
  EXPECT_EQ(net.fc1.weight.shape(), (Shape{2, 3}));
  expect_loaded(net, "linear");
  ComplexNet half = ComplexNet::make(DType::F16);
  const LoadReport r =
      PyTorchFileRecorder(Precision::Half).load(half, case_file("complex_nested.pt"));
  EXPECT_TRUE(r.clean());
  EXPECT_EQ(half.norm1.running_var->dtype(), DType::F16);
}

TEST(Recorder, IntegersThatDoNotFitAreErrors) {
  BufferNet net;
  // The integer fixture holds [[1, 2, 3], [-4, 5, 6]]: converting it to bool cannot work.
  net.buffer = Tensor::zeros(DType::BOOL, {2, 3});
  expect_error([&] { load(net, case_file("integer.pt")); }, ErrorCode::dtype_mismatch, "'buffer'");
}

}  // namespace

// A catalogue of a module's own record (to_catalog) is in torchport's
// layout: a default load takes it back as it is. A square Linear weight
// would otherwise come back transposed without a shape to tell.
TEST(BurnCases, OurOwnCatalogueLoadsBackWithoutThePyTorchAdapter) {
  nn::Linear a(3, 3, true), wide(2, 5, false);
  a.weight = Tensor::from<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  const TensorCatalog ours = to_catalog(a);
  EXPECT_EQ(ours.format(), Format::value);
  nn::Linear b(3, 3, true);
  EXPECT_TRUE(load(b, ours).clean());
  EXPECT_TRUE(b.weight.equal(a.weight)) << b.weight.description();
  wide.weight = Tensor::from<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {2, 5});
  nn::Linear wide_back(2, 5, false);
  EXPECT_TRUE(load(wide_back, to_catalog(wide)).clean());
  EXPECT_TRUE(wide_back.weight.equal(wide.weight));
  // PyTorch's state_dict of it is in PyTorch's layout, and a default load
  // adapts it back.
  const TensorCatalog torch = to_pytorch_state_dict(a);
  EXPECT_EQ(torch.format(), Format::state_dict);
  nn::Linear c(3, 3, true);
  EXPECT_TRUE(load(c, torch).clean());
  EXPECT_TRUE(c.weight.equal(a.weight));
}
