// The loader's key trie (src/record/provenance.hpp): dotted keys become
// levels, whatever order they come in. Keys that share leading segments
// with the key before them reuse its path; these cases leave and rejoin
// branches, and change a segment's length at the same offset, so that a
// reused path that is not the key's own shows as a tensor in the wrong
// place or a missing one.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/expect_error.hpp"
#include "torchport/core/error.hpp"
#include "torchport/formats/catalog.hpp"
#include "torchport/record/load.hpp"

using namespace torchport;
using torchport::test::expect_error;

namespace {

struct Leaf {
  Tensor w;
  TORCHPORT_FIELDS(w)
};
struct Layer {
  std::vector<Leaf> experts;
  TORCHPORT_FIELDS(experts)
};
struct Model {
  std::vector<Layer> layers;
  TORCHPORT_FIELDS(layers)
};

Tensor scalar(float v) {
  return Tensor::from(std::span<const float>(&v, 1), {1});
}

float value(const Tensor& t) {
  const Tensor f = t.to(DType::F32);
  return f.span<float>()[0];
}

TensorCatalog named(const std::vector<std::string>& keys) {
  std::vector<NamedTensor> t;
  for (std::size_t i = 0; i < keys.size(); ++i)
    t.push_back({keys[i], scalar(static_cast<float>(i))});
  return TensorCatalog::from_tensors(Format::state_dict, std::move(t));
}

TEST(KeyTrie, KeysInAnyOrderReachTheirOwnPlace) {
  // Tensor i holds i. Index levels are lists in increasing order, gaps
  // closed: layers 0, 1, 10 are layers[0], [1], [2].
  const TensorCatalog cat = named({
      "layers.0.experts.0.w",   // 0
      "layers.0.experts.1.w",   // 1: all but the last segment shared
      "layers.1.experts.0.w",   // 2: leaves the branch at the second segment
      "layers.0.experts.2.w",   // 3: back to the first branch
      "layers.10.experts.0.w",  // 4: "10" where the last key had "0"
      "layers.1.experts.1.w",   // 5: "1" where the last key had "10"
      "layers.10.experts.1.w",  // 6
      "layers.1.experts.10.w",  // 7
  });
  Model m;
  const LoadReport r = load(m, cat, LoadArgs{}.strict(true));
  EXPECT_TRUE(r.clean()) << r.summary();
  ASSERT_EQ(m.layers.size(), 3u);
  const std::vector<std::vector<float>> want = {{0, 1, 3}, {2, 5, 7}, {4, 6}};
  for (std::size_t l = 0; l < want.size(); ++l) {
    ASSERT_EQ(m.layers[l].experts.size(), want[l].size()) << "layer " << l;
    for (std::size_t e = 0; e < want[l].size(); ++e)
      EXPECT_EQ(value(m.layers[l].experts[e].w), want[l][e]) << "layer " << l << " expert " << e;
  }
}

TEST(KeyTrie, AKeyThatIsAnotherKeysPrefixIsRefusedInEitherOrder) {
  Model m;
  expect_error(
      [&] {
        load(m, named({"layers.0.experts", "layers.0.experts.0.w"}));
      },
      ErrorCode::corrupt, "key is both a value and the prefix of 'layers.0.experts.0.w'");
  expect_error(
      [&] {
        load(m, named({"layers.0.experts.0.w", "layers.0.experts"}));
      },
      ErrorCode::corrupt, "key is both a value and the prefix of 'layers.0.experts.0");
  // A longer segment at the same offset is another key, not a prefix.
  Model ok;
  const LoadReport r = load(ok, named({"layers.0.experts.0.w", "layers.0.experts.0.wx"}));
  EXPECT_TRUE(r.missing.empty()) << r.summary();
  ASSERT_EQ(ok.layers.size(), 1u);
  ASSERT_EQ(ok.layers[0].experts.size(), 1u);
  EXPECT_EQ(value(ok.layers[0].experts[0].w), 0.0f);
}

}  // namespace
