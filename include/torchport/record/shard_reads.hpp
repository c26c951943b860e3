#pragma once
/// \file
/// `shard_reads()`: what the ranks of a tensor-parallel job read of a
/// catalogue under a `ShardPlan`, worked out without reading a tensor byte
/// (what `torchport inspect --shard RANK/WORLD --plan FILE` shows).

#include <cstdint>
#include <vector>

#include "torchport/formats/catalog.hpp"
#include "torchport/record/report.hpp"
#include "torchport/record/shard_plan.hpp"

namespace torchport {

/// What one rank reads of each tensor of a catalogue, and what every rank
/// reads in all.
struct ShardReads {
  int rank = 0;   ///< the rank `reads` is for
  int world = 1;  ///< the number of ranks
  /// One entry per tensor of the catalogue, in its order, as a sharded
  /// load's report lists them (`LoadReport::ShardRead`): a tensor no rule
  /// matches is read whole.
  std::vector<LoadReport::ShardRead> reads;
  /// The bytes each rank reads, rank by rank (`world` entries).
  std::vector<std::uint64_t> bytes_per_rank;

  /// The bytes `rank` reads.
  std::uint64_t bytes() const { return bytes_per_rank.at(static_cast<std::size_t>(rank)); }
};

/// What rank `rank` of `world` reads of every tensor of `catalog` under
/// `plan` (the names as the catalogue has them), and the bytes every rank
/// reads. Cost: one `ShardPlan::resolve` per tensor and rank.
/// \throws Error(invalid_argument) unless 0 <= rank < world, and as
/// `ShardPlan::resolve` (naming the tensor) for a split that does not fit.
ShardReads shard_reads(const TensorCatalog& catalog, const ShardPlan& plan, int rank, int world);

}  // namespace torchport
