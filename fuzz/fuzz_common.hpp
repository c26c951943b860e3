#pragma once
// What every fuzz target shares: small limits (so one input cannot make a
// run allocate gigabytes), and a materialisation step so the lazy paths
// (inflating, byte-swapping, copying views) run too.
//
// A target calls only the public API (plus a few internal entry points of
// src/), catches torchport::Error -- the one way bad input may end -- and
// lets everything else escape: any other exception, crash, sanitizer report,
// leak or timeout is a finding.

#include <cstddef>
#include <cstdint>
#include <span>

#include <torchport/torchport.hpp>

namespace torchport::fuzz {

/// Limits small enough that no input can cost more than a few hundred MB.
inline Limits small_limits() {
  Limits l;
  l.max_depth = 64;
  l.max_stack = 1u << 14;
  l.max_memo = 1u << 14;
  l.max_nodes = 1u << 16;
  l.max_string_bytes = 1u << 20;
  l.max_pickle_bytes = 4u << 20;
  l.max_tensors = 1u << 12;
  l.max_name_bytes = 256;
  l.max_inflate_bytes = 16u << 20;
  l.max_header_bytes = 1u << 20;
  l.max_entries = 1u << 12;
  return l;
}

inline OpenOptions small_options() {
  OpenOptions o;
  o.limits = small_limits();
  return o;
}

/// Reads every tensor of `cat` (owned copies, so deferred storages inflate
/// and views are copied), and touches each one's first and last byte. A
/// catalogue whose storages add up to more than 64 MiB is left lazy: real
/// bytes cannot be that large from a small input except through a declared
/// size, which the readers have already checked against its record.
inline void exercise(const TensorCatalog& cat) {
  if (cat.storage_bytes() > (64u << 20)) return;
  const TensorCatalog owned = materialize(cat, Residence::owned);
  volatile std::uint8_t sink = 0;
  for (const auto& t : owned.tensors()) {
    const Tensor c = t.tensor.contiguous();
    const auto b = c.bytes();
    if (!b.empty())
      sink = sink ^ static_cast<std::uint8_t>(b.front()) ^ static_cast<std::uint8_t>(b.back());
  }
  (void)cat.values();
  (void)to_json(cat.root());
}

inline std::span<const std::byte> as_bytes(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}

}  // namespace torchport::fuzz
