// Sharding plans: the rule syntax, what each rank reads of each tensor
// (even splits, heads, key/value heads replicated when ranks outnumber them,
// fused projections), the errors, and typed loading of a rank's slices with
// the report of what it read.

#include <filesystem>

#include <gtest/gtest.h>

#include "support/fixtures.hpp"
#include "torchport/formats/open.hpp"
#include "torchport/formats/save.hpp"
#include "torchport/nn/modules.hpp"
#include "torchport/record/load.hpp"
#include "torchport/record/shard_plan.hpp"

namespace fs = std::filesystem;
using namespace torchport;

namespace {

template <class F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no Error thrown";
  return Error(ErrorCode::io, "none");
}

std::vector<SliceRange> ranges_of(const ShardPlan& plan, const std::string& name,
                                  const Shape& shape, int rank, int world) {
  return plan.resolve(name, shape, rank, world).ranges;
}

using R = std::vector<SliceRange>;

}  // namespace

TEST(ShardPlan, ParsesRulesAndKeepsTheirText) {
  const ShardPlan plan = ShardPlan::parse(R"(
# Llama
q_proj\.weight$ -> column(0, heads=32)
  [kv]_proj\.weight$ -> column(0, kv_heads=8)
o_proj\.weight$->row(1)
gate_up_proj\.weight$ -> column(parts=2)
qkv_proj\.weight$ -> column(0, heads=32, kv_heads=8+8)
norm -> replicate
down -> row
)");
  ASSERT_EQ(plan.rules().size(), 7u);
  EXPECT_EQ(plan.rules()[0].text, R"(q_proj\.weight$ -> column(0, heads=32))");
  EXPECT_EQ(plan.rules()[1].split.kv_heads, (std::vector<std::int64_t>{8}));
  EXPECT_EQ(plan.rules()[2].kind, ShardKind::row);
  EXPECT_EQ(plan.rules()[2].dim, 1);
  EXPECT_EQ(plan.rules()[3].split.parts, 2);
  EXPECT_EQ(plan.rules()[3].dim, 0);
  EXPECT_EQ(plan.rules()[4].text, R"(qkv_proj\.weight$ -> column(0, heads=32, kv_heads=8+8))");
  EXPECT_EQ(plan.rules()[5].kind, ShardKind::replicate);
  EXPECT_EQ(plan.rules()[6].dim, 1);  // row defaults to dimension 1
  // Rule text parses back to the same rule.
  EXPECT_EQ(ShardPlan::parse(plan.rules()[4].text).rules()[0].text, plan.rules()[4].text);
}

TEST(ShardPlan, BadLinesNameTheLineAndWhy) {
  auto check = [](const std::string& text, const std::string& part, int line) {
    const Error e = error_of([&] { ShardPlan::parse(text, "tp.plan"); });
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("line " + std::to_string(line)), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("tp.plan"), std::string::npos) << e.what();
  };
  check("a -> column\nno arrow here", "REGEX -> column(DIM)", 2);
  check("a -> shuffle", "unknown shard action", 1);
  check("\n\na -> column(0, heads=x)", "not an integer", 3);
  check("a -> column(0, groups=2)", "unknown shard option", 1);
  check("a( -> column", "invalid regular expression", 1);
  check("a -> column(0, heads=0)", "positive", 1);
  check("a -> column(0, heads=4, parts=2)", "cannot be combined", 1);
  check(" -> replicate", "without a pattern", 1);
}

TEST(ShardPlan, EvenSplitsOfColumnsAndRows) {
  ShardPlan plan;
  plan.column(R"(up\.weight$)").row(R"(down\.weight$)").column(R"(\.bias$)");
  EXPECT_EQ(ranges_of(plan, "up.weight", {8, 4}, 1, 4), (R{{2, 2}}));
  const ShardSlice down = plan.resolve("down.weight", Shape{4, 8}, 3, 4);
  EXPECT_EQ(down.kind, ShardKind::row);
  EXPECT_EQ(down.dim, 1);
  EXPECT_EQ(down.ranges, (R{{6, 2}}));
  EXPECT_EQ(down.shape(Shape{4, 8}), (Shape{4, 2}));
  EXPECT_EQ(ranges_of(plan, "up.bias", {8}, 0, 2), (R{{0, 4}}));
  EXPECT_EQ(ranges_of(plan, "up.weight", {8, 4}, 0, 1), (R{{0, 8}}));  // one rank: everything
}

TEST(ShardPlan, NoRuleMeansReplicatedAndTheFirstRuleWins) {
  ShardPlan plan;
  plan.replicate("special").column("weight");
  const ShardSlice a = plan.resolve("special.weight", Shape{8, 8}, 0, 2);
  EXPECT_EQ(a.kind, ShardKind::replicate);
  EXPECT_EQ(a.rule, "special -> replicate");
  EXPECT_TRUE(a.ranges.empty());
  const ShardSlice b = plan.resolve("norm.scale", Shape{8}, 0, 2);
  EXPECT_EQ(b.kind, ShardKind::replicate);
  EXPECT_TRUE(b.rule.empty());
  EXPECT_EQ(plan.resolve("x.weight", Shape{8, 8}, 1, 2).ranges, (R{{4, 4}}));
}

TEST(ShardPlan, HeadsSplitByWholeHeads) {
  ShardPlan plan;
  plan.column("q", 0, ShardSplit{{4}, {}, 1});
  // 4 heads of 3 over 2 ranks: heads 2 and 3 on rank 1.
  EXPECT_EQ(ranges_of(plan, "q", {12, 5}, 1, 2), (R{{6, 6}}));
  const Error e = error_of([&] { plan.resolve("q", Shape{12, 5}, 0, 8); });
  EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
  EXPECT_NE(std::string(e.what()).find("4 heads do not divide among 8 ranks"), std::string::npos)
      << e.what();
  EXPECT_EQ(e.key(), "q");
  const Error odd = error_of([&] { plan.resolve("q", Shape{10, 5}, 0, 2); });
  EXPECT_NE(std::string(odd.what()).find("not 4 heads of equal size"), std::string::npos)
      << odd.what();
}

TEST(ShardPlan, KeyValueHeadsAreReplicatedWhenRanksOutnumberThem) {
  ShardPlan plan;
  plan.column("k", 0, ShardSplit{{}, {2}, 1});  // 2 kv heads of 4
  EXPECT_EQ(ranges_of(plan, "k", {8, 3}, 1, 2), (R{{4, 4}}));
  // 4 ranks: ranks 0, 1 read head 0; ranks 2, 3 head 1.
  for (int r = 0; r < 4; ++r) {
    const ShardSlice s = plan.resolve("k", Shape{8, 3}, r, 4);
    EXPECT_EQ(s.ranges, (R{{r / 2 * 4, 4}})) << r;
    EXPECT_TRUE(s.duplicated);
  }
  EXPECT_THROW(plan.resolve("k", Shape{8, 3}, 0, 3), Error);  // 3 ranks, 2 heads
}

TEST(ShardPlan, FusedProjectionsSplitEachSegment) {
  ShardPlan plan;
  plan.column("qkv", 0, ShardSplit{{4}, {2, 2}, 1});  // q: 4 heads, k, v: 2 each, head size 2
  // Rank 1 of 2: q heads 2-3 -> [4, 8); k head 1 -> [10, 12); v head 1 -> [14, 16).
  EXPECT_EQ(ranges_of(plan, "qkv", {16, 3}, 1, 2), (R{{4, 4}, {10, 2}, {14, 2}}));
  // 4 ranks: rank 3 has q head 3, kv head 1 of each.
  EXPECT_EQ(ranges_of(plan, "qkv", {16, 3}, 3, 4), (R{{6, 2}, {10, 2}, {14, 2}}));
  ShardPlan mlp;
  mlp.column("gate_up", 0, ShardSplit{{}, {}, 2});  // [gate; up], 8 rows each
  EXPECT_EQ(ranges_of(mlp, "gate_up", {16, 4}, 0, 2), (R{{0, 4}, {8, 4}}));
  EXPECT_EQ(ranges_of(mlp, "gate_up", {16, 4}, 1, 2), (R{{4, 4}, {12, 4}}));
  EXPECT_EQ(ranges_of(mlp, "gate_up", {16, 4}, 0, 1), (R{{0, 16}}));  // merged
}

TEST(ShardPlan, UnevenSizesAndMissingDimensionsAreErrors) {
  ShardPlan plan;
  plan.column("w").row("r", 1);
  const Error e = error_of([&] { plan.resolve("w", Shape{10, 4}, 0, 4); });
  EXPECT_NE(std::string(e.what()).find("[10, 4]"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("w -> column(0)"), std::string::npos) << e.what();
  const Error d = error_of([&] { plan.resolve("r", Shape{10}, 0, 2); });
  EXPECT_NE(std::string(d.what()).find("no dimension 1"), std::string::npos) << d.what();
  EXPECT_THROW(plan.resolve("w", Shape{8, 4}, 2, 2), Error);
  EXPECT_THROW(LoadArgs{}.shard(0, 0, plan), Error);
}

// --- typed loading ---------------------------------------------------------------

namespace {

struct Tiny {
  nn::Linear up, down;  // torch [out, in] in the file, ours [in, out]
  Tensor scale;
  TORCHPORT_FIELDS(up, down, scale)
};

Tensor iota(Shape shape) {
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return Tensor::from(std::span<const float>(v), std::move(shape));
}

ShardPlan tiny_plan() {
  return ShardPlan::parse("^up\\.weight$ -> column(0)\n^down\\.weight$ -> row(1)\n");
}

}  // namespace

TEST(ShardedLoad, EachRankGetsItsSliceAndTheReportSaysWhatItRead) {
  const fs::path dir = test::temp_dir("sharded-load");
  const TensorCatalog whole =
      TensorCatalog::from_tensors(Format::state_dict, {{"up.weight", iota({8, 4})},
                                                       {"down.weight", iota({4, 8})},
                                                       {"scale", iota({4})},
                                                       {"extra", iota({2})}});
  save(whole, dir / "tiny.safetensors", SaveFormat::safetensors);
  const TensorCatalog cat = open(dir / "tiny.safetensors");
  const int world = 2;
  for (int rank = 0; rank < world; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    Tiny m{nn::Linear(4, 4, false), nn::Linear(4, 4, false), Tensor::zeros(DType::F32, {4})};
    const LoadReport r = load(m, cat, LoadArgs{}.shard(rank, world, tiny_plan()));
    // Ours is [in, out]: the rank's rows of torch's up.weight, transposed.
    EXPECT_TRUE(m.up.weight.equal(
        whole.find("up.weight")->narrow(0, 4 * rank, 4).transpose(0, 1).contiguous()));
    EXPECT_TRUE(m.down.weight.equal(
        whole.find("down.weight")->narrow(1, 4 * rank, 4).transpose(0, 1).contiguous()));
    EXPECT_TRUE(m.scale.equal(*whole.find("scale")));
    ASSERT_TRUE(r.shard.has_value());
    EXPECT_EQ(r.shard->rank, rank);
    EXPECT_EQ(r.shard->world, world);
    ASSERT_EQ(r.shard->reads.size(), 3u);  // "extra" is unused: not read
    auto read = [&](const std::string& key) {
      for (const auto& x : r.shard->reads)
        if (x.key == key) return x;
      ADD_FAILURE() << key << " not in the report";
      return LoadReport::ShardRead{};
    };
    EXPECT_EQ(read("up.weight").kind, "column");
    EXPECT_EQ(read("up.weight").shape, (Shape{4, 4}));
    EXPECT_EQ(read("up.weight").file_shape, (Shape{8, 4}));
    EXPECT_EQ(read("down.weight").kind, "row");
    EXPECT_EQ(read("down.weight").dim, 1);
    EXPECT_EQ(read("down.weight").bytes, 64u);
    EXPECT_EQ(read("scale").kind, "replicate");
    EXPECT_TRUE(read("scale").rule.empty());
    EXPECT_EQ(r.shard->bytes, 16u * 4 + 16 * 4 + 4 * 4);
    EXPECT_EQ(r.shard->file_bytes, 32u * 4 + 32 * 4 + 4 * 4);
    EXPECT_EQ(r.shard->split_bytes, 64u * 4);
    EXPECT_EQ(r.shard->replicated_bytes, 4u * 4);
    EXPECT_NE(r.summary().find("rank " + std::to_string(rank) + " of 2 read"), std::string::npos)
        << r.summary();
    EXPECT_NE(r.shard_listing().find("down.weight  row(1)  [4, 8] -> [4, 4]  64 of 128 bytes"),
              std::string::npos)
        << r.shard_listing();
  }
  fs::remove_all(dir);
}

TEST(ShardedLoad, ShapesOfTheModuleMustBeTheRanks) {
  const TensorCatalog whole = TensorCatalog::from_tensors(
      Format::state_dict,
      {{"up.weight", iota({8, 4})}, {"down.weight", iota({4, 8})}, {"scale", iota({4})}});
  Tiny m{nn::Linear(4, 8, false), nn::Linear(8, 4, false),
         Tensor::zeros(DType::F32, {4})};  // whole shapes
  EXPECT_THROW(load(m, whole, LoadArgs{}.shard(0, 2, tiny_plan())), Error);
}

TEST(ShardedLoad, UnslicableFormatsAreRefusedNamingTheKey) {
  Tiny m{nn::Linear(4, 4, false), nn::Linear(4, 4, false), Tensor::zeros(DType::F32, {4})};
  TensorCatalog gz = TensorCatalog::from_tensors(
      Format::torchport_record,
      {{"up.weight", iota({8, 4})}, {"down.weight", iota({4, 8})}, {"scale", iota({4})}});
  gz.set_format_name("torchport-bin.gz");
  const Error e = error_of([&] { load(m, gz, LoadArgs{}.shard(0, 2, tiny_plan())); });
  EXPECT_EQ(e.code(), ErrorCode::unsupported);
  EXPECT_EQ(e.key(), "up.weight");
}
