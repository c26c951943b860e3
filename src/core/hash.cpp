#include "torchport/detail/hash.hpp"

#include <sys/random.h>
#include <cstring>
#include <random>

namespace torchport::detail {
namespace {

struct Key {
  std::uint64_t k0, k1;
};

// Drawn once per process. getrandom(2) does not block once the kernel's pool
// is initialised (always so after early boot); random_device is the fallback.
Key make_key() noexcept {
  std::uint64_t k[2] = {0, 0};
  if (::getrandom(k, sizeof k, 0) != static_cast<ssize_t>(sizeof k)) {
    try {
      std::random_device rd;
      k[0] = (std::uint64_t{rd()} << 32) ^ rd();
      k[1] = (std::uint64_t{rd()} << 32) ^ rd();
    } catch (...) {
      k[0] = reinterpret_cast<std::uintptr_t>(&k) * 0x9e3779b97f4a7c15ull;
      k[1] = ~k[0];
    }
  }
  return {k[0], k[1]};
}

const Key& key() noexcept {
  static const Key k = make_key();
  return k;
}

constexpr std::uint64_t rotl(std::uint64_t x, int b) noexcept {
  return (x << b) | (x >> (64 - b));
}

struct Sip {
  std::uint64_t v0, v1, v2, v3;
  void round() noexcept {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  }
  void absorb(std::uint64_t m) noexcept {
    v3 ^= m;
    round();
    v0 ^= m;
  }
};

}  // namespace

std::uint64_t seeded_hash(std::string_view bytes) noexcept {
  const Key& k = key();
  Sip s{k.k0 ^ 0x736f6d6570736575ull, k.k1 ^ 0x646f72616e646f6dull, k.k0 ^ 0x6c7967656e657261ull,
        k.k1 ^ 0x7465646279746573ull};
  const char* p = bytes.data();
  std::size_t n = bytes.size();
  const std::uint64_t tail_len = static_cast<std::uint64_t>(n) << 56;
  for (; n >= 8; p += 8, n -= 8) {
    std::uint64_t m;
    std::memcpy(&m, p, 8);
    s.absorb(m);
  }
  std::uint64_t last = tail_len;
  for (std::size_t i = 0; i < n; ++i)
    last |= static_cast<std::uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  s.absorb(last);
  s.v2 ^= 0xff;
  s.round();
  s.round();
  s.round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

std::uint64_t seeded_hash(std::uint64_t value) noexcept {
  const Key& k = key();
  std::uint64_t x = value ^ k.k0;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x ^= k.k1;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

}  // namespace torchport::detail
