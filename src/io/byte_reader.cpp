#include "io/byte_reader.hpp"

#include <bit>

#include "torchport/core/error.hpp"

namespace torchport {

std::string_view ByteReader::line(std::string_view field) {
  const auto* start = bytes_.data() + pos_;
  const void* nl = std::memchr(start, '\n', static_cast<std::size_t>(remaining()));
  if (nl == nullptr) fail_truncated(remaining() + 1, field);
  const auto len = static_cast<std::uint64_t>(static_cast<const std::byte*>(nl) - start);
  auto s = take_str(len, field);
  pos_ += 1;
  return s;
}

double ByteReader::f64_be(std::string_view field) {
  std::uint64_t bits;
  std::memcpy(&bits, take(8, field).data(), 8);
  return std::bit_cast<double>(__builtin_bswap64(bits));
}

void ByteReader::seek(std::uint64_t p) {
  if (p > bytes_.size()) fail_truncated(p - pos_, "seek");
  pos_ = p;
}

void ByteReader::fail_truncated(std::uint64_t need, std::string_view field) const {
  throw Error(ErrorCode::truncated,
              std::string(field) + " needs " + std::to_string(need) + " bytes but only " +
                  std::to_string(remaining()) + " remain",
              {}, base_ + pos_, what_);
}

}  // namespace torchport
