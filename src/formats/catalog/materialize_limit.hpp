#pragma once
// Limits::max_materialized_bytes: what views of one storage may cost when
// they are copied out one by one (internal to the readers and writers).

#include <cstdint>
#include <string>

#include "torchport/core/error.hpp"
#include "torchport/core/limits.hpp"
#include "torchport/detail/checked.hpp"

namespace torchport::formats {

/// The bytes copies of views may total: `max_materialized_ratio` times the
/// `distinct` storage bytes, plus the floor `max_materialized_bytes`
/// (saturating).
inline std::uint64_t materialized_allowance(std::uint64_t distinct, const Limits& limits) noexcept {
  std::uint64_t by_ratio, allowed;
  if (!detail::mul_ok(distinct, limits.max_materialized_ratio, by_ratio)) return ~std::uint64_t{0};
  if (!detail::add_ok(by_ratio, limits.max_materialized_bytes, allowed)) return ~std::uint64_t{0};
  return allowed;
}

/// Throws Error(limit_exceeded) naming the limit when `total` bytes of
/// copies exceed the allowance for `distinct` storage bytes. `what` says
/// what the copies are ("storage views", "tensors written whole").
inline void check_materialized(std::uint64_t total, std::uint64_t distinct, const Limits& limits,
                               const std::string& what, const std::string& where) {
  const std::uint64_t allowed = materialized_allowance(distinct, limits);
  if (total <= allowed) return;
  throw Error(ErrorCode::limit_exceeded,
              what + " total " + std::to_string(total) + " bytes over " + std::to_string(distinct) +
                  " bytes of distinct storage, more than Limits::max_materialized_ratio = " +
                  std::to_string(limits.max_materialized_ratio) +
                  " times that plus Limits::max_materialized_bytes = " +
                  std::to_string(limits.max_materialized_bytes) +
                  " (many views of one storage copied out one by one); raise "
                  "max_materialized_bytes if this file is trusted (torchport convert "
                  "--max-materialized-bytes)",
              {}, std::nullopt, where);
}

}  // namespace torchport::formats
