// shard_reads(): what each rank of a tensor-parallel job reads of a
// catalogue under a plan, without reading tensor bytes.

#include <gtest/gtest.h>

#include "torchport/core/error.hpp"
#include "torchport/record/shard_reads.hpp"

using namespace torchport;

namespace {

TensorCatalog model() {
  return TensorCatalog::from_tensors(Format::state_dict,
                                     {{"a.weight", Tensor::zeros(DType::F32, {8, 4})},
                                      {"b.weight", Tensor::zeros(DType::BF16, {4, 8})},
                                      {"norm", Tensor::zeros(DType::F32, {4})}});
}

ShardPlan plan() {
  return ShardPlan::parse("^a\\.weight$ -> column(0)\n^b\\.weight$ -> row(1)\n");
}

TEST(ShardReads, EachTensorsPartAndEveryRanksBytes) {
  const ShardReads r = shard_reads(model(), plan(), 1, 2);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.world, 2);
  ASSERT_EQ(r.reads.size(), 3u);  // in the catalogue's order
  const auto& a = r.reads[0];
  EXPECT_EQ(a.key, "a.weight");
  EXPECT_EQ(a.kind, "column");
  EXPECT_EQ(a.rule, "^a\\.weight$ -> column(0)");
  EXPECT_EQ(a.dim, 0);
  EXPECT_EQ(a.file_shape, (Shape{8, 4}));
  EXPECT_EQ(a.shape, (Shape{4, 4}));
  EXPECT_EQ(a.bytes, 64u);
  EXPECT_EQ(a.file_bytes, 128u);
  const auto& b = r.reads[1];
  EXPECT_EQ(b.kind, "row");
  EXPECT_EQ(b.dim, 1);
  EXPECT_EQ(b.shape, (Shape{4, 4}));
  EXPECT_EQ(b.bytes, 32u);
  const auto& norm = r.reads[2];  // no rule: whole
  EXPECT_EQ(norm.kind, "replicate");
  EXPECT_EQ(norm.rule, "");
  EXPECT_EQ(norm.dim, -1);
  EXPECT_EQ(norm.shape, (Shape{4}));
  EXPECT_EQ(norm.bytes, 16u);
  EXPECT_EQ(r.bytes_per_rank, (std::vector<std::uint64_t>{112, 112}));
  EXPECT_EQ(r.bytes(), 112u);

  const ShardReads four = shard_reads(model(), plan(), 3, 4);
  EXPECT_EQ(four.bytes_per_rank, (std::vector<std::uint64_t>{64, 64, 64, 64}));  // 32 + 16 + 16
  const ShardReads one = shard_reads(model(), plan(), 0, 1);
  EXPECT_EQ(one.bytes_per_rank, (std::vector<std::uint64_t>{model().total_bytes()}));
}

TEST(ShardReads, BadRanksAndSplitsAreErrors) {
  for (const auto& [rank, world] : {std::pair{2, 2}, {-1, 2}, {0, 0}}) {
    try {
      shard_reads(TensorCatalog{}, plan(), rank, world);  // checked even with no tensor
      ADD_FAILURE() << rank << "/" << world;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    }
  }
  try {
    shard_reads(model(), plan(), 0, 3);  // 8 rows do not divide by 3
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_EQ(e.key(), "a.weight");
  }
  EXPECT_TRUE(shard_reads(TensorCatalog{}, plan(), 0, 3).reads.empty());
}

}  // namespace
