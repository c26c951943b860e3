// shard_reads(): a plan applied to a catalogue's names and shapes.

#include "torchport/record/shard_reads.hpp"

#include <string>

#include "torchport/core/error.hpp"
#include "torchport/formats/slice.hpp"

namespace torchport {
namespace {

LoadReport::ShardRead read_of(const NamedTensor& t, const ShardPlan& plan, int rank, int world) {
  const ShardSlice s = plan.resolve(t.name, t.tensor.shape(), rank, world);
  LoadReport::ShardRead r{t.name,
                          std::string(shard_kind_name(s.kind)),
                          s.rule,
                          s.dim,
                          t.tensor.shape(),
                          s.shape(t.tensor.shape()),
                          t.tensor.nbytes(),
                          t.tensor.nbytes()};
  if (s.kind != ShardKind::replicate) {
    try {
      r.bytes = slice_nbytes(t.tensor, s.dim, s.ranges);
    } catch (const Error& e) {
      throw e.at_key(t.name);
    }
  }
  return r;
}

}  // namespace

ShardReads shard_reads(const TensorCatalog& catalog, const ShardPlan& plan, int rank,
                       int world) try {
  if (world < 1 || rank < 0 || rank >= world)
    throw Error(ErrorCode::invalid_argument, "rank " + std::to_string(rank) + " of " +
                                                 std::to_string(world) +
                                                 ": need 0 <= rank < world");
  ShardReads out;
  out.rank = rank;
  out.world = world;
  out.reads.reserve(catalog.size());
  for (const auto& t : catalog.tensors()) out.reads.push_back(read_of(t, plan, rank, world));
  out.bytes_per_rank.assign(static_cast<std::size_t>(world), 0);
  for (int r = 0; r < world; ++r) {
    std::uint64_t n = 0;
    if (r == rank) {
      for (const auto& read : out.reads) n += read.bytes;
    } else {
      for (const auto& t : catalog.tensors()) n += read_of(t, plan, r, world).bytes;
    }
    out.bytes_per_rank[static_cast<std::size_t>(r)] = n;
  }
  return out;
} catch (...) {
  rethrow_as_error("shard_reads");
}

}  // namespace torchport
