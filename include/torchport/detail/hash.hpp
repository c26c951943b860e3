#pragma once
/// \file
/// Seeded hashing for tables keyed by file content (internal).
///
/// A table keyed by bytes a file chose (zip entry names, pickle memo keys,
/// dict keys, storage keys) must not let the file choose the collisions:
/// `std::hash` is unseeded (and the identity for integers), so a crafted
/// file could put every key in one bucket or one probe chain and make
/// building the table quadratic. These functions mix in a per-process
/// random key (SipHash-1-3 for bytes, a keyed finaliser for integers).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace torchport::detail {

/// SipHash-1-3 of `bytes` under this process's random key (drawn once, at
/// the first call, from the kernel). Equal inputs hash equal within one
/// process; no file can predict the value.
std::uint64_t seeded_hash(std::string_view bytes) noexcept;

/// A keyed mix of a 64-bit integer (full avalanche, under the same key).
std::uint64_t seeded_hash(std::uint64_t value) noexcept;

/// Combines a running hash with the next part's hash (order-dependent).
constexpr std::uint64_t hash_combine(std::uint64_t seed, std::uint64_t part) noexcept {
  return (seed ^ part) * 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2);
}

/// A hasher for std::unordered_map / unordered_set keyed by file content:
/// strings (transparently, with string_view) and integers.
struct SeededHash {
  using is_transparent = void;  ///< lookup by string_view without a copy
  /// Hash of a string.
  std::size_t operator()(std::string_view s) const noexcept {
    return static_cast<std::size_t>(seeded_hash(s));
  }
  /// Hash of a string.
  std::size_t operator()(const std::string& s) const noexcept {
    return (*this)(std::string_view(s));
  }
  /// Hash of a string.
  std::size_t operator()(const char* s) const noexcept { return (*this)(std::string_view(s)); }
  /// Hash of an integer.
  std::size_t operator()(std::uint64_t v) const noexcept {
    return static_cast<std::size_t>(seeded_hash(v));
  }
};

/// The tables keyed by text a file chose (names, keys, paths): every such
/// table is one of these (scripts/check-hashes.py refuses std::hash of
/// text and unseeded text tables). std::hash's function and seed are
/// public, and each step of it can be undone, so a file can give every
/// name one hash: 32,000 such names in a 2.8 MB safetensors header took
/// 4.8 s to open, 16 times the time of 8,000
/// (tests/security/test_hash_flood.cpp). Lookups take a string_view
/// without a copy.
template <class V>
using StringMap = std::unordered_map<std::string, V, SeededHash, std::equal_to<>>;
/// A set of strings a file chose (see StringMap).
using StringSet = std::unordered_set<std::string, SeededHash, std::equal_to<>>;
/// A map keyed by views of text a file chose, which outlives the map.
template <class V>
using StringViewMap = std::unordered_map<std::string_view, V, SeededHash, std::equal_to<>>;
/// A set of views of text a file chose, which outlives the set.
using StringViewSet = std::unordered_set<std::string_view, SeededHash, std::equal_to<>>;

}  // namespace torchport::detail
