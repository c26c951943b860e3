// PyTorch layouts declared by the modules themselves: a user's modules (no
// nn module anywhere in this file) declare how PyTorch lays them out, and
// the PyTorch adapter loads and saves them by those declarations alone.

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/expect_error.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/catalog.hpp"
#include "torchport/record/export.hpp"
#include "torchport/record/layout.hpp"
#include "torchport/record/load.hpp"

using namespace torchport;
using torchport::test::expect_error;

namespace user {

// A dense layer whose PyTorch counterpart names its kernel "kernel" and stores
// it [out, in]; here it is `w`, [in, out]. No kind: the layout alone makes
// the adapters see it.
struct Dense {
  Tensor w;                 ///< [in, out]
  std::optional<Tensor> b;  ///< [out]
  TORCHPORT_FIELDS(w, b)
  static constexpr LayoutRule kPyTorchLayout[] = {
      LayoutRule::renamed("kernel", "w"),
      LayoutRule::transposed("w"),
      LayoutRule::renamed("bias", "b"),
  };
};

struct ExpertPair {
  Tensor a, b;  ///< [rows, 3] each
  TORCHPORT_FIELDS(a, b)
};

// A gated block: PyTorch fuses gate and up into w_gate_up [2 * h, d], each
// layer's expert pair into experts_l{k}, and calls the head "out".
struct GatedBlock {
  static constexpr std::string_view kKind = "GatedBlock";
  Tensor gate, up;                  ///< [h, d] each
  Dense head;                       ///< PyTorch's "out"
  std::vector<ExpertPair> experts;  ///< PyTorch's experts_l0, experts_l1, ...
  Tensor scale;                     ///< the same in PyTorch
  TORCHPORT_FIELDS(gate, up, head, experts, scale)
  static constexpr LayoutRule kPyTorchLayout[] = {
      LayoutRule::fused("w_gate_up", "{part}", {"gate", "up"}),
      LayoutRule::renamed("out", "head"),
      LayoutRule::fused("experts_l{index}", "experts.{index}.{part}", {"a", "b"}),
  };
};

struct Net {
  GatedBlock block;
  TORCHPORT_FIELDS(block)
};

// Two projections PyTorch fuses into "both" when their shapes agree and
// stores apart as first_only / second_only when they do not.
struct Pair {
  static constexpr std::string_view kKind = "Pair";
  Tensor first, second;
  TORCHPORT_FIELDS(first, second)
  static constexpr LayoutRule kPyTorchLayout[] = {
      LayoutRule::fused("both", "{part}", {"first", "second"}, {"first_only", "second_only"}),
  };
};

// A rule made without the makers (no check): the adapter refuses it.
struct Malformed {
  static constexpr std::string_view kKind = "Malformed";
  Tensor x;
  TORCHPORT_FIELDS(x)
  static constexpr LayoutRule kPyTorchLayout[] = {
      LayoutRule{LayoutOp::fused, "fused_x", "x", {"x"}, {}},  // no {part}
  };
};

}  // namespace user

namespace {

// The declarations are checked and usable at compile time.
static_assert(DeclaresPyTorchLayout<user::GatedBlock>);
static_assert(!DeclaresPyTorchLayout<user::ExpertPair>);
static_assert(AdaptedModule<user::Dense>);  // a layout without a kind
static_assert(!AdaptedModule<user::Net>);
static_assert(pytorch_layout_of<user::GatedBlock>().size() == 3);
static_assert(pytorch_layout_of<user::Net>().empty());
static_assert(LayoutRule::fused("x_l{index}", "l.{index}.{part}", {"a", "b", "c"}).part_count() ==
              3);
static_assert(LayoutRule::fused("x_l{index}", "l.{index}.{part}", {"a"}).indexed());
static_assert(!LayoutRule::fused("x", "{part}.w", {"a"}).indexed());
static_assert(module_info<user::GatedBlock>().kind == "GatedBlock");
static_assert(module_info<user::Dense>().kind.empty());

// A [rows, cols] F32 tensor holding start, start + 1, ...
Tensor counting(std::int64_t rows, std::int64_t cols, float start) {
  std::vector<float> v(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return Tensor::from(std::span<const float>(v), {rows, cols});
}

// The state_dict PyTorch's version of user::Net has.
TensorCatalog torch_state_dict(std::int64_t gate_rows = 4) {
  std::vector<NamedTensor> t;
  t.push_back({"block.w_gate_up", counting(gate_rows, 3, 0)});
  t.push_back({"block.out.kernel", counting(2, 4, 100)});
  t.push_back({"block.out.bias", counting(1, 2, 200).reshape({2})});
  t.push_back({"block.experts_l0", counting(2, 3, 300)});
  t.push_back({"block.experts_l1", counting(2, 3, 400)});
  t.push_back({"block.scale", counting(1, 3, 500).reshape({3})});
  return TensorCatalog::from_tensors(Format::pytorch_zip, std::move(t));
}

TEST(Layout, LoadsAUserModuleByItsOwnDeclarations) {
  const TensorCatalog torch = torch_state_dict();
  user::Net net;
  const LoadReport r = load(net, torch, LoadArgs{}.layout(Layout::PyTorch));
  EXPECT_TRUE(r.clean()) << r.summary();  // every split key counts as used
  const Tensor& fused = *torch.find("block.w_gate_up");
  EXPECT_TRUE(net.block.gate.equal(fused.narrow(0, 0, 2).contiguous()));
  EXPECT_TRUE(net.block.up.equal(fused.narrow(0, 2, 2).contiguous()));
  EXPECT_EQ(net.block.head.w.shape(), (Shape{4, 2}));
  EXPECT_TRUE(net.block.head.w.equal(torch.find("block.out.kernel")->transpose(0, 1).contiguous()));
  ASSERT_TRUE(net.block.head.b.has_value());
  EXPECT_TRUE(net.block.head.b->equal(*torch.find("block.out.bias")));
  ASSERT_EQ(net.block.experts.size(), 2u);
  EXPECT_TRUE(
      net.block.experts[1].a.equal(torch.find("block.experts_l1")->narrow(0, 0, 1).contiguous()));
  EXPECT_TRUE(
      net.block.experts[1].b.equal(torch.find("block.experts_l1")->narrow(0, 1, 1).contiguous()));
  EXPECT_TRUE(net.block.scale.equal(*torch.find("block.scale")));
}

TEST(Layout, SavesAUserModuleBackInPyTorchsNamesAndLayout) {
  const TensorCatalog torch = torch_state_dict();
  user::Net net;
  load(net, torch, LoadArgs{}.layout(Layout::PyTorch));
  const TensorCatalog back = to_pytorch_state_dict(net);
  std::vector<std::string> names;
  for (const auto& t : back.tensors()) names.push_back(t.name);
  // Fused entries first (unindexed, then index by index), then the other
  // fields in their order, renamed back.
  const std::vector<std::string> want{"block.w_gate_up",  "block.experts_l0", "block.experts_l1",
                                      "block.out.kernel", "block.out.bias",   "block.scale"};
  EXPECT_EQ(names, want);
  for (const auto& t : torch.tensors()) {
    const Tensor* mine = back.find(t.name);
    ASSERT_NE(mine, nullptr) << t.name;
    EXPECT_TRUE(mine->equal(t.tensor)) << t.name << ": " << mine->description();
    EXPECT_TRUE(mine->is_contiguous()) << t.name;
  }
  // Our own layout is untouched by the declarations.
  const TensorCatalog ours = to_catalog(net);
  EXPECT_NE(ours.find("block.gate"), nullptr);
  EXPECT_NE(ours.find("block.head.w"), nullptr);
  EXPECT_NE(ours.find("block.experts.1.b"), nullptr);
}

TEST(Layout, NativeLayoutAppliesNoDeclaration) {
  user::Net net;
  const LoadReport r =
      load(net, torch_state_dict(), LoadArgs{}.layout(Layout::Native).allow_partial());
  EXPECT_FALSE(r.missing.empty());
  EXPECT_NE(std::find(r.unused.begin(), r.unused.end(), "block.w_gate_up"), r.unused.end())
      << r.summary();
}

TEST(Layout, AFusedTensorThatDoesNotSplitEvenlyIsAShapeMismatch) {
  user::Net net;
  expect_error([&] { load(net, torch_state_dict(5), LoadArgs{}.layout(Layout::PyTorch)); },
               ErrorCode::shape_mismatch,
               "w_gate_up of shape [5, 3] does not split into 2 equal parts");
}

TEST(Layout, SeparateNamesWhenTheFileKeepsThePartsApart) {
  // Parts of different shapes: PyTorch keeps them apart, and so does the save.
  TensorCatalog apart = TensorCatalog::from_tensors(
      Format::pytorch_zip,
      {{"first_only", counting(2, 3, 0)}, {"second_only", counting(1, 3, 10)}});
  user::Pair p;
  EXPECT_TRUE(load(p, apart, LoadArgs{}.layout(Layout::PyTorch)).clean());
  EXPECT_TRUE(p.first.equal(*apart.find("first_only")));
  EXPECT_TRUE(p.second.equal(*apart.find("second_only")));
  TensorCatalog back = to_pytorch_state_dict(p);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_TRUE(back.find("first_only")->equal(p.first));
  EXPECT_TRUE(back.find("second_only")->equal(p.second));
  // Parts of one shape are fused.
  p.second = counting(2, 3, 10);
  back = to_pytorch_state_dict(p);
  ASSERT_EQ(back.size(), 1u);
  ASSERT_NE(back.find("both"), nullptr);
  EXPECT_EQ(back.find("both")->shape(), (Shape{4, 3}));
  EXPECT_TRUE(back.find("both")->narrow(0, 2, 2).contiguous().equal(p.second));
}

TEST(Layout, MalformedRulesAreRefused) {
  // At run time the makers throw (in a constexpr declaration they do not compile).
  const std::string dotted = "a.b", plain = "x";
  expect_error([&] { (void)LayoutRule::renamed(dotted, plain); }, ErrorCode::invalid_argument,
               "renamed: both names must be plain keys");
  expect_error([&] { (void)LayoutRule::transposed(dotted); }, ErrorCode::invalid_argument,
               "transposed: the field must be a plain key");
  expect_error([&] { (void)LayoutRule::fused(plain, plain, {"a"}); }, ErrorCode::invalid_argument,
               "must hold {part} once");
  expect_error([&] { (void)LayoutRule::fused(plain, "{part}", {}); }, ErrorCode::invalid_argument,
               "needs at least one part");
  expect_error(
      [&] {
        (void)LayoutRule::fused(plain, "{part}", {"a", "", "c"});
      },
      ErrorCode::invalid_argument, "without gaps");
  expect_error(
      [&] {
        (void)LayoutRule::fused(plain, "{part}", {"a", "b"}, {"a_only"});
      },
      ErrorCode::invalid_argument, "one separate name per part");
  expect_error([&] { (void)LayoutRule::fused("x_l{index}", "{part}", {"a"}); },
               ErrorCode::invalid_argument, "{index} must appear once in both names");
  expect_error([&] { (void)LayoutRule::fused("x_l{index}", "l{index}.{part}", {"a"}); },
               ErrorCode::invalid_argument, "whole segment");
  // A rule made without the makers is refused when used, naming the module.
  TensorCatalog cat = TensorCatalog::from_tensors(Format::pytorch_zip, {{"x", counting(1, 1, 0)}});
  user::Malformed m;
  expect_error([&] { load(m, cat, LoadArgs{}.layout(Layout::PyTorch)); },
               ErrorCode::invalid_argument, "in the PyTorch layout of Malformed");
  m.x = counting(1, 1, 0);
  expect_error([&] { (void)to_pytorch_state_dict(m); }, ErrorCode::invalid_argument,
               "must hold {part} once");
}

}  // namespace
