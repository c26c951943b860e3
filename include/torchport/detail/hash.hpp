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
#include <string>
#include <string_view>

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

}  // namespace torchport::detail
