// NameTree and module_tree(): dotted names unflattened at their dots, as
// `torchport inspect --tree` shows them and the typed loader builds its tree.

#include <gtest/gtest.h>

#include "support/fixtures.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/module_tree.hpp"
#include "torchport/formats/open.hpp"

using namespace torchport;

namespace {

std::vector<std::string> child_names(const NameTree& t, std::size_t node) {
  std::vector<std::string> out;
  for (const std::size_t c : t.node(node).children) out.push_back(t.node(c).name);
  return out;
}

std::vector<std::string> child_names(const ModuleTree& t, std::size_t node) {
  std::vector<std::string> out;
  for (const std::size_t c : t.nodes[node].children) out.push_back(t.nodes[c].name);
  return out;
}

TEST(NameTree, SplitsAtDotsSharingPrefixesInInsertionOrder) {
  NameTree t;
  EXPECT_EQ(t.size(), 1u);
  const std::size_t w = t.insert("layer1.0.conv1.weight", 0);
  const std::size_t b = t.insert("layer1.0.conv1.bias", 1);
  t.insert("fc.weight", 2);
  t.insert("layer1.1.conv1.weight", 3);
  EXPECT_EQ(child_names(t, 0), (std::vector<std::string>{"layer1", "fc"}));
  EXPECT_EQ(child_names(t, t.find("layer1")), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(t.node(w).leaf, 0u);
  EXPECT_EQ(t.node(b).leaf, 1u);
  EXPECT_EQ(t.node(w).parent, t.node(b).parent);
  EXPECT_EQ(t.path(w), "layer1.0.conv1.weight");
  EXPECT_EQ(t.path(0), "");
  EXPECT_EQ(t.find("layer1.0.conv1.weight"), w);
  EXPECT_EQ(t.node(t.find("layer1.0")).leaf, NameTree::npos);  // a prefix, no value
  EXPECT_EQ(t.find("layer1.2"), NameTree::npos);
  EXPECT_EQ(t.find("layer"), NameTree::npos);
  EXPECT_THROW(t.node(t.size()), Error);
  EXPECT_THROW(t.path(t.size()), Error);
}

TEST(NameTree, KeepsTheFirstLeafAndEveryKindOfSegment) {
  NameTree t;
  const std::size_t x = t.insert("x", 7);
  EXPECT_EQ(t.insert("x", 8), x);
  EXPECT_EQ(t.node(x).leaf, 7u);              // a second insertion says so by its leaf
  const std::size_t xy = t.insert("x.y", 9);  // a value that is also a prefix
  EXPECT_EQ(t.node(xy).parent, x);
  const std::size_t empty = t.insert("", 10);
  EXPECT_EQ(t.node(empty).name, "");
  EXPECT_EQ(t.node(empty).parent, 0u);
  const std::size_t ab = t.insert("a..b", 11);
  EXPECT_EQ(t.path(ab), "a..b");
  EXPECT_EQ(t.node(t.node(ab).parent).name, "");
  EXPECT_EQ(t.find("a..b"), ab);
  EXPECT_EQ(t.find(""), empty);
  // Segments are compared whole: "a.b" is not under "a." nor "a.b." under "a.b".
  EXPECT_NE(t.find("a."), ab);
  EXPECT_EQ(t.find("a..b."), NameTree::npos);
}

TEST(NameTree, IndexedChildrenAreCanonicalIntegersSorted) {
  NameTree t;
  t.insert("seq.0.weight", 0);
  t.insert("seq.10.weight", 1);
  t.insert("seq.2.weight", 2);
  const auto items = t.indexed_children(t.find("seq"));
  ASSERT_TRUE(items);
  ASSERT_EQ(items->size(), 3u);
  EXPECT_EQ((*items)[0].first, 0u);
  EXPECT_EQ((*items)[1].first, 2u);
  EXPECT_EQ((*items)[2].first, 10u);
  EXPECT_EQ(t.path((*items)[2].second), "seq.10");
  EXPECT_FALSE(t.indexed_children(0));                       // "seq"
  EXPECT_FALSE(t.indexed_children(t.find("seq.0.weight")));  // no children
  for (const char* odd : {"01", "-1", "+1", "1a", "99999999999999999999999"}) {
    NameTree u;
    u.insert("l.0", 0);
    u.insert(std::string("l.") + odd, 1);
    EXPECT_FALSE(u.indexed_children(u.find("l"))) << odd;
  }
}

TEST(ModuleTree, CountsEachSubtree) {
  const TensorCatalog cat = TensorCatalog::from_tensors(
      Format::state_dict, {{"blocks.0.w", Tensor::zeros(DType::F32, {2, 3})},
                           {"blocks.0.b", Tensor::zeros(DType::F32, {3})},
                           {"head", Tensor::zeros(DType::F16, {4})},
                           {"blocks.2.w", Tensor::zeros(DType::F64, {2, 3})},
                           {"head.scale", Tensor::zeros(DType::F32, {})}});
  const ModuleTree tree = module_tree(cat);
  const auto& root = tree.root();
  EXPECT_EQ(root.name, "");
  EXPECT_EQ(root.parent, ModuleTree::npos);
  EXPECT_EQ(root.tensor, ModuleTree::npos);
  EXPECT_EQ(root.tensors, 5u);
  EXPECT_EQ(root.params, 6u + 3 + 4 + 6 + 1);
  EXPECT_EQ(root.bytes, cat.total_bytes());
  EXPECT_EQ(child_names(tree, 0), (std::vector<std::string>{"blocks", "head"}));

  const std::size_t blocks = root.children[0];
  EXPECT_EQ(tree.nodes[blocks].tensors, 3u);
  EXPECT_EQ(tree.nodes[blocks].params, 15u);
  EXPECT_EQ(tree.nodes[blocks].bytes, 6u * 4 + 3 * 4 + 6 * 8);
  EXPECT_EQ(child_names(tree, blocks),
            (std::vector<std::string>{"0", "2"}));  // as the file names them
  const std::size_t b0 = tree.nodes[blocks].children[0];
  EXPECT_EQ(child_names(tree, b0), (std::vector<std::string>{"w", "b"}));
  const std::size_t w = tree.nodes[b0].children[0];
  EXPECT_EQ(tree.nodes[w].tensor, 0u);
  EXPECT_EQ(tree.path(w), "blocks.0.w");
  EXPECT_TRUE(tree.nodes[w].children.empty());

  // A tensor whose name is also a prefix: its node counts both.
  const std::size_t head = root.children[1];
  EXPECT_EQ(tree.nodes[head].tensor, 2u);
  EXPECT_EQ(tree.nodes[head].tensors, 2u);
  EXPECT_EQ(tree.nodes[head].params, 5u);
  EXPECT_EQ(tree.nodes[head].bytes, 4u * 2 + 4);
  EXPECT_EQ(tree.path(tree.nodes[head].children[0]), "head.scale");
  EXPECT_THROW(tree.path(tree.nodes.size()), Error);
  // Every parent precedes its children.
  for (std::size_t i = 1; i < tree.nodes.size(); ++i) EXPECT_LT(tree.nodes[i].parent, i);
}

TEST(ModuleTree, EmptyCatalogueIsTheRootAlone) {
  const ModuleTree tree = module_tree(TensorCatalog{});
  ASSERT_EQ(tree.nodes.size(), 1u);
  EXPECT_EQ(tree.root().tensors, 0u);
  EXPECT_EQ(tree.root().params, 0u);
  EXPECT_TRUE(tree.root().children.empty());
}

TEST(ModuleTree, OfACheckpoint) {
  // 183 elements in all: 152 in the model (138 in its two blocks), 31 in the optimiser's state.
  const TensorCatalog cat = open(test::fixture("checkpoint.pt"));
  const ModuleTree tree = module_tree(cat);
  EXPECT_EQ(tree.root().params, 183u);
  EXPECT_EQ(tree.root().tensors, cat.size());
  const auto node = [&](const std::string& path) {
    for (std::size_t i = 0; i < tree.nodes.size(); ++i)
      if (tree.path(i) == path) return i;
    ADD_FAILURE() << "no node " << path;
    return std::size_t{0};
  };
  EXPECT_EQ(tree.nodes[node("model_state_dict")].params, 152u);
  EXPECT_EQ(tree.nodes[node("model_state_dict.blocks")].params, 138u);
  EXPECT_EQ(tree.nodes[node("optimizer_state_dict")].params, 31u);
  // Each tensor's node names it.
  for (std::size_t i = 0; i < tree.nodes.size(); ++i) {
    if (tree.nodes[i].tensor != ModuleTree::npos) {
      EXPECT_EQ(cat.tensors()[tree.nodes[i].tensor].name, tree.path(i));
    }
  }
}

}  // namespace
